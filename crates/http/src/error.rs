//! The errors of `wattio-http`'s public functions, one variant per problem.
//!
//! An error whose cause a caller could act on (an I/O error, a rustls error) carries it as
//! its `source`, and its own `Display` is the part before the cause: the error and its
//! sources, joined with `": "` (anyhow's `{:#}`, or [`HttpError::message`]), read as one line
//! naming the problem and, where there is one, the fix. Where the fix follows the cause, the
//! cause is in the `Display` and kept as a field, not as the source, so that no chain prints it
//! twice.

use std::io;
use std::path::PathBuf;

/// What went wrong, by kind, so a caller can tell a bad certificate file from a refused
/// handshake or a server that cannot listen.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A certificate or trust-root file (`flag`: `--cacert`, `--tls-cert`) cannot be read.
    #[error("{flag} {}: cannot read it", path.display())]
    ReadFile {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A certificate file that is not PEM (`reason`: what the PEM reader said).
    #[error("{flag} {}: not a PEM certificate file ({reason})", path.display())]
    NotPem {
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// A PEM file with no certificate in it.
    #[error("{flag} {}: no certificate in it; give a PEM file with -----BEGIN CERTIFICATE----- blocks", path.display())]
    NoCertificate { flag: &'static str, path: PathBuf },
    /// A `--cacert` file none of whose certificates can be a trust root.
    #[error("--cacert {}: no usable CA certificate in it; give the PEM file of the CA that signed the server's certificate", path.display())]
    NoUsableCa { path: PathBuf },
    /// The system store has no trusted CA certificate (`why`: the first error reading it, as
    /// ` (…)`, or nothing).
    #[error("no trusted CA certificates in the system store{why}; install ca-certificates, or give the server's CA with --cacert FILE")]
    NoSystemRoots { why: String },
    /// The TLS provider offers no protocol version.
    #[error("the TLS provider offers no protocol version")]
    NoProtocolVersion(#[source] rustls::Error),
    /// The certificate verifier cannot be built from the trust roots.
    #[error("cannot build the certificate verifier")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    /// `--tls-key` holds no private key (`reason`: what the PEM reader said).
    #[error("--tls-key {}: no private key read ({reason}); give the PEM key that belongs to --tls-cert", path.display())]
    NoKey { path: PathBuf, reason: String },
    /// The certificate and the key cannot be used together.
    #[error("--tls-cert {} with --tls-key {}: {error}; give the key that belongs to the certificate", cert.display(), key.display())]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        error: rustls::Error,
    },
    /// A TLS handshake with `host` that failed, or a server certificate the client refused;
    /// `message` names the cause and the fix.
    #[error("{message}")]
    Handshake { host: String, message: String },
    /// A host name that cannot be a TLS server name.
    #[error("{host:?} is not a valid TLS server name; use a DNS name or an IP address")]
    ServerName { host: String },
    /// The directory to serve cannot be resolved.
    #[error("cannot serve {}: {error}; give an existing directory", root.display())]
    NoRoot { root: PathBuf, error: io::Error },
    /// The directory to serve is not a directory.
    #[error("cannot serve {}: not a directory", root.display())]
    NotADirectory { root: PathBuf },
    /// `--max-connections` or `--max-connections-per-client` is 0.
    #[error("--max-connections and --max-connections-per-client must be at least 1")]
    NoConnections,
    /// `max_connections` need `need` file descriptors (`reserved` of them besides the
    /// connections') but the hard limit is `limit`; `most` connections would fit.
    #[error("--max-connections {max_connections} needs {need} file descriptors (2 per connection + {reserved}), but this process may open at most {limit}; lower --max-connections to {most} or raise the limit (ulimit -n)")]
    TooFewDescriptors {
        max_connections: usize,
        need: u64,
        reserved: u64,
        limit: u64,
        most: u64,
    },
    /// The soft descriptor limit cannot be raised to `need`.
    #[error("cannot raise the file-descriptor limit to {need}")]
    RaiseDescriptors {
        need: u64,
        #[source]
        source: rustix::io::Errno,
    },
    /// The directory to serve cannot be opened.
    #[error("cannot open {}", root.display())]
    OpenRoot {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The directory's listing cannot be set up.
    #[error("cannot serve {}", root.display())]
    ListRoot {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {error}; pick a free address, e.g. --listen 127.0.0.1:8080")]
    Bind { addr: String, error: io::Error },
    /// The thread of a [`ServerHandle`](crate::ServerHandle) ended before its server bound.
    #[error("server thread died")]
    ServerThread,
}

impl HttpError {
    /// The whole message on one line: this error and its causes, joined with `": "`.
    pub fn message(&self) -> String {
        chain_line(self)
    }
}

/// `e` and its sources on one line, joined with `": "` (what anyhow's `{:#}` prints).
pub fn chain_line(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        m.push_str(": ");
        m.push_str(&c.to_string());
        cause = c.source();
    }
    m
}
