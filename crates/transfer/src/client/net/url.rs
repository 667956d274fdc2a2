//! Source URLs.

use crate::error::{fail, failure, Failure};

/// An `http://host:port/path` or `https://host:port/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    /// `https`: the connection runs TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Origin-form path, starting with `/`, as given (percent-encoded).
    pub path: String,
}

impl HttpUrl {
    /// Parses `http://HOST[:PORT]/PATH` and `https://HOST[:PORT]/PATH` (scheme in any case).
    pub fn parse(s: &str) -> Result<HttpUrl, Failure> {
        let (tls, rest) = match s.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
            _ => fail!(
                Usage,
                "unsupported URL {s}: only http:// and https:// URLs are supported (e.g. https://example.org/data/)"
            ),
        };
        let default_port = if tls { "443" } else { "80" };
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = auth.strip_prefix('[') {
            let (h, p) = h.split_once(']').ok_or_else(|| {
                failure!(Usage, "bad IPv6 address in {s}: expected [ADDRESS]:PORT")
            })?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(default_port))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (auth.to_string(), default_port),
            }
        };
        if host.is_empty() {
            fail!(Usage, "no host in URL {s}");
        }
        let port = port.parse().map_err(|_| {
            failure!(
                Usage,
                "bad port in URL {s}: expected a number from 1 to 65535"
            )
        })?;
        Ok(HttpUrl {
            tls,
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `http://host:port` or `https://host:port`, for messages.
    pub fn origin(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.authority()
        )
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

/// The absolute URL of `path` (origin form) on `u`'s server.
pub(crate) fn url_string(u: &HttpUrl, path: &str) -> String {
    format!("{}{path}", u.origin())
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
        let u = HttpUrl::parse("https://example.org/d/").unwrap();
        assert!(u.tls);
        assert_eq!(
            (u.port, u.origin()),
            (443, "https://example.org:443".into())
        );
        let u = HttpUrl::parse("HTTPS://[::1]:8443").unwrap();
        assert_eq!((u.tls, u.port, u.path.as_str()), (true, 8443, "/"));
        assert!(!HttpUrl::parse("http://h/").unwrap().tls);
        assert!(HttpUrl::parse("ftp://x/")
            .unwrap_err()
            .to_string()
            .contains("only http:// and https://"));
        assert!(HttpUrl::parse("http://x:port/").is_err());
    }
}
