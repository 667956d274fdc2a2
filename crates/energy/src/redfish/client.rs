//! The BMC's HTTP side: TLS with the certificate checked, credentials from a file or the
//! environment, a Redfish session (or HTTP basic), and every answer bounded in time and size.
//!
//! Sessions follow DSP0266 (the Redfish specification) §13.3: `POST` the user name and password
//! to the session collection (`/redfish/v1/SessionService/Sessions`, or the service root's
//! `Links.Sessions`), send the `X-Auth-Token` it answers with on every request, log in again
//! once when a request is answered 401 (the session expired), and `DELETE` the session at the
//! end. A service that answers the `POST` without a token, or has no session service, is asked
//! with HTTP basic authentication instead.

use super::PlatformUrl;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use ureq::http::{Response, StatusCode};
use ureq::Body;

/// The file of `user:password` (or the user on one line, the password on the next).
pub const CREDENTIALS_ENV: &str = "WATTIO_REDFISH_CREDENTIALS";
/// The user name, with [`PASSWORD_ENV`], where no credentials file is named.
pub const USER_ENV: &str = "WATTIO_REDFISH_USER";
/// The password, with [`USER_ENV`].
pub const PASSWORD_ENV: &str = "WATTIO_REDFISH_PASSWORD";
/// A PEM file of the CA certificates to trust for the BMC, instead of the system's.
pub const CACERT_ENV: &str = "WATTIO_REDFISH_CACERT";
/// `session` (the default) or `basic`.
pub const AUTH_ENV: &str = "WATTIO_REDFISH_AUTH";

/// How long the TCP connection and TLS handshake may take.
pub(crate) const CONNECT_DEADLINE: Duration = Duration::from_secs(5);
/// How long a whole answer may take, from the request to its body's last byte.
pub(crate) const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
/// The most of an answer's body that is read: a chassis resource is a few kilobytes.
const MAX_BODY: u64 = 1024 * 1024;

/// A user name and password. Never printed.
struct Credentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ user: {:?}, password: <hidden> }}",
            self.user
        )
    }
}

/// Reads the credentials from [`CREDENTIALS_ENV`]'s file, else [`USER_ENV`] and
/// [`PASSWORD_ENV`]; `None` where neither is set (a BMC that asks for none).
fn credentials() -> Result<Option<Credentials>, String> {
    if let Some(path) = std::env::var_os(CREDENTIALS_ENV) {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read {CREDENTIALS_ENV}={}: {e}",
                std::path::Path::new(&path).display()
            )
        })?;
        let mut lines = text.lines().map(|l| l.trim_end_matches('\r'));
        let first = lines.next().unwrap_or("");
        let (user, password) = match lines.next().filter(|l| !l.is_empty()) {
            Some(second) => (first.to_string(), second.to_string()),
            None => match first.split_once(':') {
                Some((u, p)) => (u.to_string(), p.to_string()),
                None => {
                    return Err(format!(
                        "{CREDENTIALS_ENV}'s file holds neither user:password nor the user and the password on two lines"
                    ))
                }
            },
        };
        if user.is_empty() {
            return Err(format!("{CREDENTIALS_ENV}'s file gives an empty user name"));
        }
        return Ok(Some(Credentials { user, password }));
    }
    match (std::env::var(USER_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), Ok(password)) if !user.is_empty() => Ok(Some(Credentials { user, password })),
        (Ok(_), Err(_)) | (Err(_), Ok(_)) => Err(format!(
            "set both {USER_ENV} and {PASSWORD_ENV}, or name a credentials file in {CREDENTIALS_ENV}"
        )),
        _ => Ok(None),
    }
}

/// The roots to check the BMC's certificate against: [`CACERT_ENV`]'s file, else the system's.
fn roots() -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    use ureq::tls::{parse_pem, PemItem};
    if let Some(path) = std::env::var_os(CACERT_ENV) {
        let shown = std::path::Path::new(&path).display().to_string();
        let pem =
            std::fs::read(&path).map_err(|e| format!("cannot read {CACERT_ENV}={shown}: {e}"))?;
        let certs: Vec<_> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(format!("{CACERT_ENV}={shown} holds no PEM certificate"));
        }
        return Ok(certs);
    }
    let found = rustls_native_certs::load_native_certs();
    let certs: Vec<_> = found
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    if certs.is_empty() {
        return Err(format!(
            "no system CA certificates found (install ca-certificates), or name the BMC's CA in {CACERT_ENV}"
        ));
    }
    Ok(certs)
}

/// How requests are authenticated.
enum Auth {
    None,
    Basic(String),
    Session {
        token: String,
        location: Option<String>,
    },
}

/// One BMC's HTTP client.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: PlatformUrl,
    credentials: Option<Credentials>,
    sessions_path: String,
    basic_only: bool,
    auth: Auth,
}

/// An answer's JSON, and the BMC's clock when it answered (its `Date`), in Unix seconds.
pub(crate) struct Answer {
    pub json: Value,
    pub bmc_now_s: Option<f64>,
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Client {
    pub(crate) fn new(url: &PlatformUrl) -> Result<Client, String> {
        let mut config = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_DEADLINE))
            .timeout_global(Some(ANSWER_DEADLINE))
            // A redirect is answered as it is and refused below: never followed blindly.
            .max_redirects(0)
            .http_status_as_error(false)
            // A BMC sits on a management network: no proxy from the environment.
            .proxy(None)
            .user_agent(concat!("wattio/", env!("CARGO_PKG_VERSION")))
            .accept("application/json");
        if !url.plain_http {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            config = config.tls_config(
                ureq::tls::TlsConfig::builder()
                    .provider(ureq::tls::TlsProvider::Rustls)
                    .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots()?)))
                    .unversioned_rustls_crypto_provider(provider)
                    .build(),
            );
        } else {
            config = config.https_only(false);
        }
        let basic_only = match std::env::var(AUTH_ENV).as_deref() {
            Ok("basic") => true,
            Ok("session") | Err(_) => false,
            Ok(other) => return Err(format!("{AUTH_ENV}={other:?}: use session or basic")),
        };
        Ok(Client {
            agent: config.build().into(),
            url: url.clone(),
            credentials: credentials()?,
            sessions_path: "/redfish/v1/SessionService/Sessions".into(),
            basic_only,
            auth: Auth::None,
        })
    }

    /// The service root (`/redfish/v1`, readable without credentials per DSP0266), then a
    /// login with the credentials, if any.
    pub(crate) fn start(&mut self) -> Result<Answer, String> {
        let root = self.fetch("/redfish/v1/", false)?;
        if let Some(p) = root
            .json
            .pointer("/Links/Sessions/@odata.id")
            .and_then(Value::as_str)
        {
            if p.starts_with('/') {
                self.sessions_path = p.to_string();
            }
        }
        self.login()?;
        Ok(root)
    }

    /// Logs in: a session where the BMC gives one, else HTTP basic; nothing without credentials.
    fn login(&mut self) -> Result<(), String> {
        let Some(c) = &self.credentials else {
            self.auth = Auth::None;
            return Ok(());
        };
        let basic = || {
            use base64_lite::encode;
            Auth::Basic(format!(
                "Basic {}",
                encode(format!("{}:{}", c.user, c.password).as_bytes())
            ))
        };
        if self.basic_only {
            self.auth = basic();
            return Ok(());
        }
        let body = serde_json::json!({"UserName": c.user, "Password": c.password}).to_string();
        let path = self.sessions_path.clone();
        let resp = self
            .agent
            .post(format!("{}{path}", self.url.origin()))
            .content_type("application/json")
            .send(body.as_str())
            .map_err(|e| self.transport(&format!("POST {path}"), e))?;
        let status = resp.status();
        let token = resp
            .headers()
            .get("x-auth-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.auth = match (status.as_u16(), token) {
            (401 | 403, _) => return Err(self.refused(&format!("POST {path}"), status)),
            (200..=299, Some(token)) => Auth::Session {
                token,
                location: resp
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            },
            // No session service, or one that answers without a token: basic authentication.
            _ => basic(),
        };
        Ok(())
    }

    /// `GET path` as JSON, logging in again once if the session expired.
    pub(crate) fn get(&mut self, path: &str) -> Result<Answer, String> {
        self.fetch(path, true)
    }

    fn fetch(&mut self, path: &str, authenticate: bool) -> Result<Answer, String> {
        if !path.starts_with('/') || path.contains("://") || path.contains("..") {
            return Err(format!(
                "the BMC linked to {path:?}, not a path on itself; wattio follows no such link"
            ));
        }
        let mut retried = false;
        loop {
            let mut req = self.agent.get(format!("{}{path}", self.url.origin()));
            if authenticate {
                match &self.auth {
                    Auth::None => {}
                    Auth::Basic(h) => req = req.header("Authorization", h.as_str()),
                    Auth::Session { token, .. } => req = req.header("X-Auth-Token", token.as_str()),
                }
            }
            let resp = req
                .call()
                .map_err(|e| self.transport(&format!("GET {path}"), e))?;
            let status = resp.status();
            if status == StatusCode::UNAUTHORIZED
                && authenticate
                && !retried
                && matches!(self.auth, Auth::Session { .. })
            {
                // The session expired (or the BMC restarted): one new login, then the request again.
                retried = true;
                self.auth = Auth::None;
                self.login()?;
                continue;
            }
            return self.answer(path, resp);
        }
    }

    fn answer(&self, path: &str, mut resp: Response<Body>) -> Result<Answer, String> {
        let status = resp.status();
        if status.is_redirection() {
            let to = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("nowhere");
            return Err(format!(
                "{}: GET {path} was redirected ({}) to {to}; wattio follows no redirect: give the address the BMC serves Redfish at in --platform",
                self.url,
                status.as_u16()
            ));
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(self.refused(&format!("GET {path}"), status));
        }
        if !status.is_success() {
            return Err(format!(
                "{}: GET {path} answered HTTP {}",
                self.url,
                status.as_u16()
            ));
        }
        let bmc_now_s = resp
            .headers()
            .get("date")
            .and_then(|v| v.to_str().ok())
            .and_then(super::decode::parse_http_date);
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| self.transport(&format!("GET {path}"), e))?;
        let json: Value = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{}: GET {path} answered malformed JSON ({e}); no figure from this answer",
                self.url
            )
        })?;
        Ok(Answer { json, bmc_now_s })
    }

    /// The one-line error of refused credentials, naming the fix.
    fn refused(&self, what: &str, status: StatusCode) -> String {
        let how = if self.credentials.is_some() {
            "the BMC refused the user name and password"
        } else {
            "the BMC asks for credentials and none were given"
        };
        format!(
            "{}: {how} (HTTP {} on {what}); put the BMC account in a file named by {CREDENTIALS_ENV} (user:password) or in {USER_ENV} and {PASSWORD_ENV}",
            self.url,
            status.as_u16()
        )
    }

    /// A transport failure (connection, TLS, deadline, size) as one line.
    fn transport(&self, what: &str, e: ureq::Error) -> String {
        let why = match &e {
            ureq::Error::Timeout(t) => format!(
                "no answer in time ({t:?}; connection {} s, whole answer {} s)",
                CONNECT_DEADLINE.as_secs(),
                ANSWER_DEADLINE.as_secs()
            ),
            ureq::Error::BodyExceedsLimit(n) => format!("an answer over {n} bytes"),
            ureq::Error::HostNotFound => "host not found".into(),
            ureq::Error::Tls(_) | ureq::Error::Rustls(_) => format!(
                "TLS failed ({e}); if the BMC's certificate is signed by your own CA, name its PEM file in {CACERT_ENV}"
            ),
            other => {
                let text = other.to_string();
                if text.contains("certificate") || text.contains("handshake") {
                    format!("TLS failed ({text}); if the BMC's certificate is signed by your own CA, name its PEM file in {CACERT_ENV}")
                } else {
                    text
                }
            }
        };
        format!("{}: {what}: {why}", self.url)
    }

    /// Seconds since the Unix epoch by this machine's clock, for answers without a `Date`.
    pub(crate) fn local_now_s() -> f64 {
        unix_now_s()
    }
}

impl Drop for Client {
    /// Ends the session, so a BMC's few session slots are not held until they time out.
    fn drop(&mut self) {
        if let Auth::Session {
            token,
            location: Some(location),
        } = &self.auth
        {
            let path = location
                .strip_prefix(&self.url.origin())
                .unwrap_or(location);
            if path.starts_with('/') {
                let _ = self
                    .agent
                    .delete(format!("{}{path}", self.url.origin()))
                    .header("X-Auth-Token", token.as_str())
                    .call();
            }
        }
    }
}

/// Base64 (RFC 4648, with padding) for the basic `Authorization` header.
mod base64_lite {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub(super) fn encode(data: &[u8]) -> String {
        let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
        for chunk in data.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[cfg(test)]
    #[test]
    fn encodes_as_rfc_4648_does() {
        assert_eq!(encode(b"root:calvin"), "cm9vdDpjYWx2aW4=");
        assert_eq!(encode(b"ab"), "YWI=");
        assert_eq!(encode(b"abc"), "YWJj");
    }
}
