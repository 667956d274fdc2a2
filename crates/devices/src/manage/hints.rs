//! Ghost hints from other programs, on a Unix datagram socket.
//!
//! One hint a line (a datagram may hold several lines):
//!
//! ```text
//! DEVICE DELTA_T_S DELTA_E_J [fg|bg] [BYTES]
//! ```
//!
//! `DEVICE` is the block device's kernel name (`nvme0n1`, `sda`); `DELTA_T_S` the seconds the
//! access would have saved had the device been in its performance mode, `DELTA_E_J` the joules
//! (whole machine) it would have saved (both ≥ 0, at most an hour and a megajoule); `fg` (the
//! default) when a user waited for the access, `bg` when not; `BYTES` its size (default 0).
//! Example: `printf 'sda 0.8 1.5 fg 32768\n' | socat - UNIX-SENDTO:/run/wattio-hints`.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use super::ManageError;

/// The most hints taken from the socket at one wake-up: a flood cannot starve the manager.
pub const MAX_HINTS_PER_WAKE: usize = 1000;

/// The longest datagram read; the rest of a longer one is dropped by the kernel.
const MAX_DATAGRAM: usize = 4096;

/// One hint as received: the device it names and what the access would have saved.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedHint {
    /// The block device's kernel name.
    pub device: String,
    /// Seconds saved.
    pub delta_t_s: f64,
    /// Joules saved.
    pub delta_e_j: f64,
    /// Whether a user waited.
    pub foreground: bool,
    /// Bytes of the access.
    pub bytes: u64,
}

/// Parses one hint line.
pub fn parse_hint(line: &str) -> Result<ReceivedHint, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if !(3..=5).contains(&words.len()) {
        return Err(format!(
            "`{line}`: a hint is `DEVICE DELTA_T_S DELTA_E_J [fg|bg] [BYTES]`"
        ));
    }
    let bounded = |w: &str, what: &str, max: f64| match w.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=max).contains(&v) => Ok(v),
        _ => Err(format!("`{line}`: {what} must be a number in [0, {max}]")),
    };
    let foreground = match words.get(3) {
        None | Some(&"fg") => true,
        Some(&"bg") => false,
        Some(w) => return Err(format!("`{line}`: `{w}` is neither fg nor bg")),
    };
    let bytes = match words.get(4) {
        None => 0,
        Some(w) => w
            .parse()
            .map_err(|_| format!("`{line}`: BYTES must be a whole number"))?,
    };
    Ok(ReceivedHint {
        device: words[0].to_string(),
        delta_t_s: bounded(words[1], "DELTA_T_S", 3600.0)?,
        delta_e_j: bounded(words[2], "DELTA_E_J", 1e6)?,
        foreground,
        bytes,
    })
}

/// The bound hint socket; the file is removed when it is dropped.
#[derive(Debug)]
pub struct HintSocket {
    socket: UnixDatagram,
    path: PathBuf,
}

impl HintSocket {
    /// Binds `path` (a stale socket file left there is replaced; any other file is refused).
    pub fn bind(path: &Path) -> Result<HintSocket, ManageError> {
        use std::os::unix::fs::FileTypeExt;
        let fail = |source| ManageError::HintSocket {
            path: path.to_path_buf(),
            source,
        };
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(fail(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a file that is not a socket is there (choose another --hints path)",
                )));
            }
            std::fs::remove_file(path).map_err(fail)?;
        }
        let socket = UnixDatagram::bind(path).map_err(fail)?;
        socket.set_nonblocking(true).map_err(fail)?;
        Ok(HintSocket {
            socket,
            path: path.to_path_buf(),
        })
    }

    /// The socket, to wait on.
    pub fn socket(&self) -> &UnixDatagram {
        &self.socket
    }

    /// The lines waiting (at most [`MAX_HINTS_PER_WAKE`]), parsed.
    pub fn drain(&self) -> Vec<Result<ReceivedHint, String>> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_DATAGRAM];
        while out.len() < MAX_HINTS_PER_WAKE {
            let Ok(n) = self.socket.recv(&mut buf) else {
                break;
            };
            let text = String::from_utf8_lossy(&buf[..n]);
            out.extend(
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .take(MAX_HINTS_PER_WAKE)
                    .map(parse_hint),
            );
        }
        out.truncate(MAX_HINTS_PER_WAKE);
        out
    }
}

impl Drop for HintSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_lines_parse_with_their_defaults_and_bounds() {
        let h = parse_hint("sda 0.8 1.5").unwrap();
        assert_eq!(
            h,
            ReceivedHint {
                device: "sda".into(),
                delta_t_s: 0.8,
                delta_e_j: 1.5,
                foreground: true,
                bytes: 0
            }
        );
        let h = parse_hint("nvme0n1 0 2 bg 32768").unwrap();
        assert!(!h.foreground);
        assert_eq!(h.bytes, 32768);
        assert!(parse_hint("sda -1 1").is_err());
        assert!(parse_hint("sda 1 NaN").is_err());
        assert!(parse_hint("sda 7200 1").is_err());
        assert!(parse_hint("sda 1 1 maybe").is_err());
        assert!(parse_hint("sda").is_err());
    }

    #[test]
    fn hints_sent_to_the_socket_are_received() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("hints");
        let sock = HintSocket::bind(&path).unwrap();
        let tx = UnixDatagram::unbound().unwrap();
        tx.send_to(b"sda 1 2\nsdb 0.5 0.1 bg 10\n", &path).unwrap();
        tx.send_to(b"bad\n", &path).unwrap();
        let got = sock.drain();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].as_ref().unwrap().device, "sdb");
        assert!(got[2].is_err());
        drop(sock);
        assert!(!path.exists());
    }
}
