//! Source URLs.

use anyhow::{anyhow, bail};

/// An `http://host:port/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Origin-form path, starting with `/`, as given (percent-encoded).
    pub path: String,
}

impl HttpUrl {
    /// Parses `http://HOST[:PORT]/PATH`.
    pub fn parse(s: &str) -> anyhow::Result<HttpUrl> {
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            anyhow!("unsupported URL {s:?}: only http:// URLs are supported (e.g. http://127.0.0.1:8080/)")
        })?;
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = auth.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| anyhow!("bad IPv6 address in {s:?}"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or("80"))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (auth.to_string(), "80"),
            }
        };
        if host.is_empty() {
            bail!("no host in URL {s:?}");
        }
        let port = port.parse().map_err(|_| anyhow!("bad port in URL {s:?}"))?;
        Ok(HttpUrl {
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `host:port` (IPv6 hosts in brackets), for `Host` headers and messages.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The address to connect to.
    pub(crate) fn connect_addr(&self) -> String {
        self.authority()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = HttpUrl::parse("http://127.0.0.1:8080/a/b").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/a/b")
        );
        let u = HttpUrl::parse("http://host").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u = HttpUrl::parse("http://[::1]:9/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.authority()),
            ("::1", "[::1]:9".to_string())
        );
        assert!(HttpUrl::parse("https://x/")
            .unwrap_err()
            .to_string()
            .contains("only http://"));
        assert!(HttpUrl::parse("http://x:port/").is_err());
    }
}
