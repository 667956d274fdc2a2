//! The errors of `wattio-http`'s public functions. Each carries its whole message, one line
//! naming the problem and the fix, which is all its `Display` prints.

/// What went wrong, by kind, so a caller can tell a bad certificate file from a refused
/// handshake or a server that cannot listen.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A certificate, key or trust-root file that cannot be read or used together.
    #[error("{message}")]
    TlsConfig { message: String },
    /// A TLS handshake that failed, or a server certificate the client refused.
    #[error("{message}")]
    Handshake { message: String },
    /// A host name that cannot be a TLS server name.
    #[error("{message}")]
    ServerName { message: String },
    /// The server cannot start: the directory, the options, the descriptor limit or the
    /// address.
    #[error("{message}")]
    Listen { message: String },
}

impl HttpError {
    /// The whole message.
    pub fn message(&self) -> &str {
        match self {
            HttpError::TlsConfig { message }
            | HttpError::Handshake { message }
            | HttpError::ServerName { message }
            | HttpError::Listen { message } => message,
        }
    }
}

/// The internal error chain of `e`, on one line (`a: b: c`), as the message of a variant.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}")
}
