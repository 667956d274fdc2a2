//! [`TransferError`]: what [`run_transfer`](crate::run_transfer) returns.
//!
//! Inside the engine errors are [`EngineError`]s, which gather the context of where they
//! happened; where the kind of a problem is known, the error is a `Failure` of that `Kind`,
//! and [`run_transfer`](crate::run_transfer) turns the chain into the variant of the first
//! `Failure` in it, its message the whole chain on one line.

use std::fmt;
use std::io;

/// Everything that stops a transfer, by what a caller can do about it. Each variant's
/// `message` is the whole error on one line, naming the problem and, where there is one, the
/// fix; it is what `Display` prints. The error has no `source`: the causes are in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// The options cannot be used as given: SOURCE or a URL-list line is not an http(s) URL,
    /// the URL list or the `--checksum-file` cannot be read or does not belong to the source,
    /// no file name can be derived from the URL. Fix the options.
    #[error("{message}")]
    Usage { message: String },
    /// A server cannot be reached: a connection refused or timed out, a server silent, or one
    /// that keeps failing until the retries are spent. A later rerun may get through.
    #[error("{message}")]
    Unreachable { message: String },
    /// TLS could not be set up with a server: the handshake failed (a certificate not trusted:
    /// `--cacert`, `--insecure`), the `--cacert` file is unusable, the host is not a TLS name.
    #[error("{message}")]
    Tls { message: String },
    /// The source answered, but not with something wattio can transfer: no listing or
    /// directory index, an HTTP error for the URL, names, paths or sizes wattio refuses.
    #[error("{message}")]
    InvalidSource { message: String },
    /// A server broke the protocol: a body cut short, an answer for another range, a
    /// redirect that cannot be followed, a response wattio does not read.
    #[error("{message}")]
    Protocol { message: String },
    /// `file` (its path under DEST) does not match its checksum, even after fetching it
    /// again.
    #[error("{message}")]
    ChecksumMismatch { file: String, message: String },
    /// `file` (its path under DEST) changed on the server during the transfer (its size,
    /// validators or status), or the server's validators keep changing.
    #[error("{message}")]
    SourceChanged { file: String, message: String },
    /// DEST has `free_bytes` free but the files still to fetch need `needed_bytes` (for a
    /// file of unknown length still arriving: what the rest of the transfer needs, plus a
    /// margin).
    #[error("{message}")]
    NoSpace {
        needed_bytes: u64,
        free_bytes: u64,
        message: String,
    },
    /// DEST cannot be created, read or written, or a path in it is unsafe (a symbolic link
    /// or a file in the way).
    #[error("{message}")]
    Dest { message: String },
    /// The caller's [`Cancel`](wattio_progress::Cancel) was set; partial data is kept for a
    /// rerun.
    #[error("{message}")]
    Cancelled { message: String },
    /// Another I/O error (a connection that broke, the interval log, the async runtime).
    #[error("{message}")]
    Io { message: String },
    /// Anything else (a task of the engine that failed).
    #[error("{message}")]
    Other { message: String },
}

impl TransferError {
    /// The whole error on one line (what `Display` prints).
    pub fn message(&self) -> &str {
        match self {
            TransferError::Usage { message }
            | TransferError::Unreachable { message }
            | TransferError::Tls { message }
            | TransferError::InvalidSource { message }
            | TransferError::Protocol { message }
            | TransferError::ChecksumMismatch { message, .. }
            | TransferError::SourceChanged { message, .. }
            | TransferError::NoSpace { message, .. }
            | TransferError::Dest { message }
            | TransferError::Cancelled { message }
            | TransferError::Io { message }
            | TransferError::Other { message } => message,
        }
    }

    /// The engine's error `e` as the variant of the first [`Failure`] in its chain (`Io` or
    /// `Other` when there is none), its message the whole chain.
    pub(crate) fn from_engine(e: &EngineError) -> TransferError {
        Failure::classify(e, None).into()
    }
}

/// Which [`TransferError`] variant an engine error becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Usage,
    Unreachable,
    Tls,
    InvalidSource,
    Protocol,
    ChecksumMismatch { file: String },
    SourceChanged { file: String },
    NoSpace { needed_bytes: u64, free_bytes: u64 },
    Dest,
    Cancelled,
    Io,
    Other,
}

impl Kind {
    /// An error of this kind saying `message`.
    pub(crate) fn msg(self, message: impl Into<String>) -> Failure {
        Failure {
            kind: self,
            message: message.into(),
        }
    }
}

/// A [`Failure`] of `Kind::$kind` (a kind without data), its message `format!`'s.
macro_rules! failure {
    ($kind:ident, $($fmt:tt)+) => {
        $crate::error::Kind::$kind.msg(format!($($fmt)+))
    };
}
/// Returns a [`failure!`] from a function returning an [`EngineResult`].
macro_rules! fail {
    ($kind:ident, $($fmt:tt)+) => {
        return Err($crate::error::failure!($kind, $($fmt)+).into())
    };
}
pub(crate) use {fail, failure};

/// An engine error whose kind is decided; `message` is the whole of it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) kind: Kind,
    pub(crate) message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// `e` on one line, of the kind of the first `Failure` in its chain; without one, of kind
    /// `default`, else `Io` when an I/O error is in the chain, else `Other`.
    pub(crate) fn classify(e: &EngineError, default: Option<Kind>) -> Failure {
        let kind = Failure::kind_in(e).or(default).unwrap_or_else(|| {
            if e.has_io() {
                Kind::Io
            } else {
                Kind::Other
            }
        });
        kind.msg(e.one_line())
    }

    /// The kind of the first `Failure` in `e`'s chain.
    pub(crate) fn kind_in(e: &EngineError) -> Option<Kind> {
        match e {
            EngineError::Failed(f) => Some(f.kind.clone()),
            EngineError::Context { source, .. } => Failure::kind_in(source),
            _ => None,
        }
    }
}

/// The engine's error: what went wrong, with the context of where it happened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// A problem whose kind is decided.
    #[error("{0}")]
    Failed(Failure),
    /// An I/O error, its kind not decided (`Io`, unless a `Failure` around it says more).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A stream a rerun cannot fix (its end cannot be trusted, no space for it): refused, not
    /// retried.
    #[error("{0}")]
    Refused(Failure),
    /// A body write whose file started over meanwhile.
    #[error("the file started over")]
    Superseded,
    /// A task of the engine that failed (it panicked or was cancelled).
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// A response head that cannot be read, its kind not decided.
    #[error(transparent)]
    Response(#[from] wattio_http::ResponseError),
    /// `source`, met while doing what `context` says.
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<EngineError>,
    },
}

/// What the engine's functions return.
pub(crate) type EngineResult<T> = Result<T, EngineError>;

impl From<Failure> for EngineError {
    fn from(f: Failure) -> EngineError {
        EngineError::Failed(f)
    }
}

impl EngineError {
    /// This error, met while doing what `context` says.
    pub(crate) fn context(self, context: impl Into<String>) -> EngineError {
        EngineError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// The error and its causes on one line, joined with `": "`.
    pub(crate) fn one_line(&self) -> String {
        wattio_http::chain_line(self)
    }

    /// [`EngineError::one_line`] with any line break in a cause made a space (for a message
    /// inside another, such as a mirror's fallback).
    pub(crate) fn flat_line(&self) -> String {
        self.one_line().replace('\n', " ")
    }

    /// Whether an I/O error is in the chain.
    fn has_io(&self) -> bool {
        match self {
            EngineError::Io(_) => true,
            EngineError::Context { source, .. } => source.has_io(),
            _ => false,
        }
    }
}

impl From<Failure> for TransferError {
    fn from(f: Failure) -> TransferError {
        let message = f.message;
        match f.kind {
            Kind::Usage => TransferError::Usage { message },
            Kind::Unreachable => TransferError::Unreachable { message },
            Kind::Tls => TransferError::Tls { message },
            Kind::InvalidSource => TransferError::InvalidSource { message },
            Kind::Protocol => TransferError::Protocol { message },
            Kind::ChecksumMismatch { file } => TransferError::ChecksumMismatch { file, message },
            Kind::SourceChanged { file } => TransferError::SourceChanged { file, message },
            Kind::NoSpace {
                needed_bytes,
                free_bytes,
            } => TransferError::NoSpace {
                needed_bytes,
                free_bytes,
                message,
            },
            Kind::Dest => TransferError::Dest { message },
            Kind::Cancelled => TransferError::Cancelled { message },
            Kind::Io => TransferError::Io { message },
            Kind::Other => TransferError::Other { message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_decides_and_the_message_is_the_chain() {
        let e = EngineError::from(Kind::Protocol.msg("server closed the connection"))
            .context("giving up on h:1 after 3 attempts");
        let t = TransferError::from_engine(&e);
        assert!(matches!(t, TransferError::Protocol { .. }), "{t:?}");
        assert_eq!(
            t.to_string(),
            "giving up on h:1 after 3 attempts: server closed the connection"
        );
        let io = EngineError::from(std::io::Error::other("broken"))
            .context("cannot write interval log x");
        let t = TransferError::from_engine(&io);
        assert!(matches!(t, TransferError::Io { .. }), "{t:?}");
        assert_eq!(t.message(), "cannot write interval log x: broken");
        let t = TransferError::from_engine(&wattio_http::ResponseError::TooLarge.into());
        assert!(matches!(t, TransferError::Other { .. }), "{t:?}");
    }
}
