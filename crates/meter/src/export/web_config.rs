//! The exporter's TLS and authentication, from a file in the format Prometheus and its own
//! exporters read (`--web.config.file`, <https://prometheus.io/docs/prometheus/latest/configuration/https/>):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # PEM chain, leaf first
//!   key_file: server.key           # PEM key (PKCS#8, PKCS#1 or SEC1)
//!   client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
//!   client_ca_file: clients-ca.crt
//!   min_version: TLS12             # or TLS13
//! http_server_config:
//!   headers: { Strict-Transport-Security: max-age=31536000 }
//! basic_auth_users:
//!   prometheus: $2y$10$...          # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Relative paths are taken from the file's directory, as the exporter-toolkit does. What
//! rustls decides for itself (cipher suites, curves) or cannot do (TLS 1.0 and 1.1, client
//! certificates that are requested but not verified) is refused with the reason, never ignored:
//! a security setting that silently does nothing is worse than an error. The file is read once,
//! at start.

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a web-config file cannot be used: one line that names the file, the setting and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {path}: {message}")]
pub struct WebConfigError {
    /// The option that named the file: `--web-config` or `--bearer-token-file`.
    pub flag: &'static str,
    pub path: String,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    client_allowed_sans: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    /// HTTP/2 is the exporter-toolkit's default; this server speaks HTTP/1.1, which every
    /// scraper speaks too, so the setting is accepted and has no effect.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// A web-config file, read and checked: the TLS configuration, the users, the extra headers.
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: Option<BasicAuth>,
    /// Headers added to every response (`http_server_config.headers`).
    pub headers: Vec<(String, String)>,
}

impl WebConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        let fail = |message: String| WebConfigError {
            flag: "--web-config",
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(format!("cannot read it ({e}); give a readable YAML file")))?;
        let file: File = serde_saphyr::from_str(&text).map_err(|e| {
            fail(format!(
                "not a web-config file ({}); see docs/meter.md for its fields",
                one_line(&e.to_string())
            ))
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            Some(t) => Some(tls_config(t, dir).map_err(fail)?),
            None => None,
        };
        let users = match file.basic_auth_users {
            Some(u) if !u.is_empty() => Some(BasicAuth::new(u).map_err(fail)?),
            _ => None,
        };
        let headers = file
            .http_server_config
            .and_then(|h| h.headers)
            .unwrap_or_default();
        for (name, value) in &headers {
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if name.is_empty() || !name.chars().all(token) {
                return Err(fail(format!(
                    "http_server_config.headers: {name:?} is not a header name"
                )));
            }
            if value.chars().any(|c| c.is_control()) {
                return Err(fail(format!(
                    "http_server_config.headers: the value of {name} holds a control character"
                )));
            }
        }
        Ok(WebConfig {
            tls,
            users,
            headers: headers.into_iter().collect(),
        })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn version(v: &str, field: &str) -> Result<&'static rustls::SupportedProtocolVersion, String> {
    match v {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => Err(format!(
            "tls_server_config.{field}: {v} is not offered (rustls speaks TLS 1.2 and 1.3 only); use TLS12 or TLS13"
        )),
        _ => Err(format!(
            "tls_server_config.{field}: {v:?} is not a TLS version; use TLS12 or TLS13"
        )),
    }
}

fn tls_config(t: TlsFile, dir: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let refused = [
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
        ),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
    ];
    if let Some((field, _)) = refused.iter().find(|(_, set)| *set) {
        return Err(format!(
            "tls_server_config.{field} is not supported (rustls chooses its suites and curves, and client names are not filtered); remove it"
        ));
    }
    let min = version(t.min_version.as_deref().unwrap_or("TLS12"), "min_version")?;
    let max = version(t.max_version.as_deref().unwrap_or("TLS13"), "max_version")?;
    let (Some(cert), Some(key)) = (t.cert_file, t.key_file) else {
        return Err("tls_server_config needs both cert_file and key_file".into());
    };
    let (cert, key) = (dir.join(cert), dir.join(key));
    let chain = read_certs(&cert, "cert_file")?;
    let key_der = PrivateKeyDer::from_pem_file(&key).map_err(|e| {
        format!(
            "tls_server_config.key_file {}: no private key read ({e}); give the PEM key of cert_file",
            key.display()
        )
    })?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [&rustls::version::TLS12, &rustls::version::TLS13]
            .into_iter()
            .filter(|v| {
                let rank = |x: &rustls::SupportedProtocolVersion| u16::from(x.version);
                rank(v) >= rank(min) && rank(v) <= rank(max)
            })
            .collect();
    if versions.is_empty() {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let auth = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let builder = match auth {
        "NoClientCert" => builder.with_no_client_auth(),
        "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert" => {
            let Some(ca) = t.client_ca_file else {
                return Err(format!("tls_server_config: client_auth_type {auth} needs client_ca_file"));
            };
            let ca = dir.join(ca);
            let mut roots = rustls::RootCertStore::empty();
            for c in read_certs(&ca, "client_ca_file")? {
                roots
                    .add(c)
                    .map_err(|e| format!("tls_server_config.client_ca_file {}: {e}", ca.display()))?;
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            let v = if auth == "VerifyClientCertIfGiven" {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?)
        }
        "RequestClientCert" | "RequireAnyClientCert" => {
            return Err(format!(
                "tls_server_config.client_auth_type {auth} (a client certificate taken unverified) is not supported; use RequireAndVerifyClientCert with client_ca_file"
            ))
        }
        other => {
            return Err(format!(
                "tls_server_config.client_auth_type {other:?} is unknown; use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ))
        }
    };
    let mut cfg = builder.with_single_cert(chain, key_der).map_err(|e| {
        format!(
            "tls_server_config: cert_file {} with key_file {}: {e}; give the key that belongs to the certificate",
            cert.display(),
            key.display()
        )
    })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Every certificate of a PEM file, at least one.
fn read_certs(p: &Path, field: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(p).map_err(|e| {
        format!(
            "tls_server_config.{field} {}: cannot read it ({e})",
            p.display()
        )
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            format!(
                "tls_server_config.{field} {}: not a PEM certificate file ({e})",
                p.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "tls_server_config.{field} {}: no certificate in it; give a PEM file with -----BEGIN CERTIFICATE----- blocks",
            p.display()
        ));
    }
    Ok(certs)
}

/// The most (user, password) verdicts kept, so that a scraper's every request does not pay a
/// bcrypt verification (tens of milliseconds at cost 10) while a guesser cannot grow the cache.
const MAX_CACHED: usize = 64;

/// The users of `basic_auth_users` and their bcrypt hashes.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// Verdicts already reached, keyed by the `Authorization` value itself.
    cache: Mutex<HashMap<String, bool>>,
    /// A hash at the users' cost, verified for an unknown user so that a wrong user name takes
    /// as long to refuse as a wrong password (no user enumeration by timing).
    decoy: String,
    /// Held during a bcrypt verification: one at a time, so that clients sending guesses on
    /// every connection slot cost at most one CPU, not every one (the sampler keeps its own).
    verifying: Mutex<()>,
}

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<BasicAuth, String> {
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(format!("basic_auth_users: the user name {user:?} holds a colon, which Basic authentication cannot carry"));
            }
            if !(hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$"))
                || hash.len() != 60
            {
                return Err(format!(
                    "basic_auth_users.{user}: not a bcrypt hash; make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                ));
            }
        }
        let cost = users
            .values()
            .filter_map(|h| h.get(4..6)?.parse().ok())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let decoy = bcrypt::hash("wattio decoy", cost)
            .map_err(|e| format!("basic_auth_users: bcrypt cost {cost}: {e}"))?;
        Ok(BasicAuth {
            users,
            cache: Mutex::new(HashMap::new()),
            decoy,
            verifying: Mutex::new(()),
        })
    }

    /// Whether an `Authorization` header value (`Basic base64(user:password)`) names a user
    /// with that password.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        if let Some(&v) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(value)
        {
            return v;
        }
        let verdict = self.verify(value);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(value.to_string(), verdict);
        verdict
    }

    fn verify(&self, value: &str) -> bool {
        let Some(encoded) = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, rest)| rest.trim())
        else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            return false;
        };
        let Ok(decoded) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = decoded.split_once(':') else {
            return false;
        };
        let _one_at_a_time = self.verifying.lock().unwrap_or_else(|p| p.into_inner());
        match self.users.get(user) {
            Some(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(password, &self.decoy);
                false
            }
        }
    }
}

/// A bearer token (`--bearer-token-file`), for scrapers configured with `authorization:
/// {type: Bearer, credentials_file: …}` (Prometheus) or a ServiceMonitor's `bearerTokenSecret`:
/// the web-config format has no place for one, so it comes from its own file.
pub struct BearerToken(String);

impl BearerToken {
    /// The token in `path` (surrounding whitespace trimmed): at least 16 characters, none of
    /// them whitespace or control characters.
    pub fn load(path: &Path) -> Result<BearerToken, WebConfigError> {
        let fail = |message: String| WebConfigError {
            flag: "--bearer-token-file",
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            fail(format!(
                "cannot read it ({e}); give a file holding the token"
            ))
        })?;
        let token = text.trim();
        if token.chars().count() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(fail(
                "the token must be at least 16 characters, without spaces or control characters (e.g. `openssl rand -hex 32`)"
                    .into(),
            ));
        }
        Ok(BearerToken(token.to_string()))
    }

    /// Whether an `Authorization` value is `Bearer <this token>`; compared in time that does
    /// not depend on where the first difference is.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some(given) = authorization.and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        }) else {
            return false;
        };
        let (a, b) = (given.as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn basic(user: &str, password: &str) -> String {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {b}")
    }

    #[test]
    fn users_are_checked_against_their_bcrypt_hashes() {
        let d = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let p = write(
            d.path(),
            "web.yml",
            &format!("basic_auth_users:\n  prom: '{hash}'\n"),
        );
        let w = WebConfig::load(&p).unwrap();
        assert!(w.tls.is_none());
        let users = w.users.unwrap();
        assert!(users.allows(Some(&basic("prom", "s3cret"))));
        // Twice: the second answer comes from the cache and must be the same.
        assert!(users.allows(Some(&basic("prom", "s3cret"))));
        assert!(!users.allows(Some(&basic("prom", "wrong"))));
        assert!(!users.allows(Some(&basic("nobody", "s3cret"))));
        assert!(!users.allows(Some("Bearer abc")));
        assert!(!users.allows(Some("Basic !!!")));
        assert!(!users.allows(None));
    }

    #[test]
    fn a_certificate_and_its_key_make_a_tls_server_with_client_verification() {
        let d = tempfile::tempdir().unwrap();
        let ca = rcgen::CertificateParams::new(vec![]).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = ca;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .signed_by(&leaf_key, &ca_cert, &ca_key)
            .unwrap();
        write(d.path(), "ca.crt", &ca_cert.pem());
        write(d.path(), "server.crt", &leaf.pem());
        write(d.path(), "server.key", &leaf_key.serialize_pem());
        let p = write(
            d.path(),
            "web.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  min_version: TLS13\nhttp_server_config:\n  headers:\n    Strict-Transport-Security: max-age=60\n",
        );
        let w = WebConfig::load(&p).unwrap();
        assert!(w.tls.is_some());
        assert!(w.users.is_none());
        assert_eq!(
            w.headers,
            vec![(
                "Strict-Transport-Security".to_string(),
                "max-age=60".to_string()
            )]
        );
        // The wrong key for the certificate.
        write(d.path(), "server.key", &ca_key.serialize_pem());
        let e = WebConfig::load(&p).err().unwrap().to_string();
        assert!(e.contains("give the key that belongs"), "{e}");
    }

    #[test]
    fn a_bearer_token_is_read_from_its_file_and_compared_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "token", "0123456789abcdef0123\n");
        let t = BearerToken::load(&p).unwrap();
        assert!(t.allows(Some("Bearer 0123456789abcdef0123")));
        assert!(t.allows(Some("bearer 0123456789abcdef0123")));
        assert!(!t.allows(Some("Bearer 0123456789abcdef012")));
        assert!(!t.allows(Some("Bearer 0123456789abcdef01234")));
        assert!(!t.allows(Some("Basic 0123456789abcdef0123")));
        assert!(!t.allows(None));
        let short = write(d.path(), "short", "abc");
        let e = BearerToken::load(&short).err().unwrap().to_string();
        assert!(
            e.contains("at least 16 characters") && e.starts_with("--bearer-token-file"),
            "{e}"
        );
    }

    #[test]
    fn bad_files_get_one_line_that_names_the_setting() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            ("tls_server_config:\n  cert_file: a.crt\n", "needs both cert_file and key_file"),
            ("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n", "cert_file"),
            ("basic_auth_users:\n  prom: plain\n", "not a bcrypt hash"),
            ("basic_authusers: {}\n", "not a web-config file"),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "cipher_suites is not supported",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n",
                "TLS10 is not offered",
            ),
            ("http_server_config:\n  headers: {\"Bad Name\": x}\n", "not a header name"),
        ];
        for (text, expected) in cases {
            let p = write(d.path(), "web.yml", text);
            let e = WebConfig::load(&p)
                .err()
                .unwrap_or_else(|| panic!("{text} was accepted"))
                .to_string();
            assert!(e.contains(expected), "{text}: {e}");
            assert!(e.starts_with("--web-config "), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let missing = WebConfig::load(&d.path().join("none.yml"))
            .err()
            .unwrap()
            .to_string();
        assert!(missing.contains("cannot read it"), "{missing}");
    }
}
