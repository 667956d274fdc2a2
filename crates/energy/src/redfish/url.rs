//! `--platform URL`: which BMC to read, and how to reach it.

use std::fmt;
use std::str::FromStr;

/// A platform meter named on the command line (`--platform redfish://bmc.example:443`).
///
/// Only Redfish is read so far: `redfish://HOST[:PORT][/CHASSIS]` over HTTPS with the
/// certificate checked (port 443 by default), `redfish+http://HOST[:PORT][/CHASSIS]` over plain
/// HTTP (port 80), for a BMC on a closed management network that has no certificate. `CHASSIS`
/// is a chassis id of `/redfish/v1/Chassis` (default: the first one with a power or energy
/// reading). Credentials never come from the URL: `user@` in it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformUrl {
    /// Plain HTTP (`redfish+http://`), else HTTPS.
    pub plain_http: bool,
    pub host: String,
    pub port: u16,
    /// The chassis id to read, when the URL names one.
    pub chassis: Option<String>,
}

impl PlatformUrl {
    /// `https://host:port` or `http://host:port`, the base every Redfish path is put after.
    pub fn origin(&self) -> String {
        let scheme = if self.plain_http { "http" } else { "https" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}", self.port)
    }
}

impl fmt::Display for PlatformUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.plain_http {
            "redfish+http"
        } else {
            "redfish"
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{scheme}://{host}:{}", self.port)?;
        if let Some(c) = &self.chassis {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

impl FromStr for PlatformUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!("--platform {s:?} is not a URL: give redfish://BMC[:PORT] (HTTPS) or redfish+http://BMC[:PORT]")
        })?;
        let plain_http = match scheme.to_ascii_lowercase().as_str() {
            "redfish" | "redfish+https" => false,
            "redfish+http" => true,
            "ipmi" | "ipmi+lan" | "rmcp" | "rmcp+" | "ipmi+lanplus" => {
                return Err(format!(
                    "--platform {scheme}:// is not supported yet: wattio reads a BMC over the network through Redfish (redfish://BMC); the local BMC's DCMI reading is read without --platform (mechanism ipmi)"
                ))
            }
            "https" | "http" => {
                return Err(format!(
                    "--platform {scheme}://…: say which protocol: redfish://HOST for Redfish over HTTPS, redfish+http://HOST for plain HTTP"
                ))
            }
            other => {
                return Err(format!(
                    "--platform {other}:// is not supported yet: only redfish:// (and redfish+http://) is"
                ))
            }
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err("--platform must not carry credentials (user@host): put them in a file named by WATTIO_REDFISH_CREDENTIALS, or in WATTIO_REDFISH_USER and WATTIO_REDFISH_PASSWORD".into());
        }
        let default_port = if plain_http { 80 } else { 443 };
        let (host, port) = split_host_port(authority, default_port)?;
        if path.contains(['?', '#']) {
            return Err(format!(
                "--platform {s}: no query or fragment: the path may only name a chassis (redfish://HOST/CHASSIS)"
            ));
        }
        let path = path.trim_matches('/');
        let chassis = path
            .strip_prefix("redfish/v1/Chassis")
            .unwrap_or(path)
            .trim_matches('/');
        if chassis.contains('/') || chassis.contains("..") {
            return Err(format!(
                "--platform {s}: the path names one chassis id (redfish://HOST/CHASSIS), not {chassis:?}"
            ));
        }
        Ok(PlatformUrl {
            plain_http,
            host,
            port,
            chassis: (!chassis.is_empty()).then(|| chassis.to_string()),
        })
    }
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad_port = |p: &str| format!("--platform: port {p:?} is not a number from 1 to 65535");
    let port_of = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad_port(p)),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or("--platform: an IPv6 address needs its closing ]")?;
        match after.strip_prefix(':') {
            Some(p) => (host.to_string(), port_of(p)?),
            None if after.is_empty() => (host.to_string(), default_port),
            None => return Err(format!("--platform: {after:?} after the IPv6 address")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), port_of(p)?),
            None => (authority.to_string(), default_port),
        }
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if host.is_empty() || !host.chars().all(ok) {
        return Err(format!(
            "--platform: {host:?} is not a host name or address"
        ));
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redfish_urls_parse_and_other_schemes_say_what_is_supported() {
        let u: PlatformUrl = "redfish://bmc.example:8443".parse().unwrap();
        assert_eq!(u.origin(), "https://bmc.example:8443");
        assert_eq!(u.chassis, None);
        let u: PlatformUrl = "redfish+http://10.0.0.2/1U".parse().unwrap();
        assert_eq!(u.origin(), "http://10.0.0.2:80");
        assert_eq!(u.chassis.as_deref(), Some("1U"));
        assert_eq!(u.to_string(), "redfish+http://10.0.0.2:80/1U");
        let u: PlatformUrl = "redfish://[fe80::1]/redfish/v1/Chassis/Self"
            .parse()
            .unwrap();
        assert_eq!(u.origin(), "https://[fe80::1]:443");
        assert_eq!(u.chassis.as_deref(), Some("Self"));
        let e = "ipmi://bmc".parse::<PlatformUrl>().unwrap_err();
        assert!(e.contains("not supported yet"), "{e}");
        let e = "https://bmc".parse::<PlatformUrl>().unwrap_err();
        assert!(e.contains("redfish://"), "{e}");
        let e = "redfish://root:calvin@bmc"
            .parse::<PlatformUrl>()
            .unwrap_err();
        assert!(e.contains("WATTIO_REDFISH_CREDENTIALS"), "{e}");
        assert!(!e.contains("calvin"));
        assert!("redfish://bmc:0".parse::<PlatformUrl>().is_err());
        assert!("redfish://bmc/a/b".parse::<PlatformUrl>().is_err());
        assert!("bmc".parse::<PlatformUrl>().is_err());
    }
}
