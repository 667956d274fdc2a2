//! URL lists' mirrors during the transfer and in the summary (how discovery sizes them at the
//! start is `discovery::url_list`). In aria2's input-file format several URLs on one line,
//! separated by TABs, are sources of the same file:
//!
//! - **During the transfer**: when the mirror serving a file fails — the connection is refused
//!   or cut, or it answers 5xx, 404/403/410, 416, or a whole file to a range request — the
//!   file's remaining bytes come from the next mirror of its line (the bytes already on disk
//!   stay). Past the last mirror, the usual retries apply. A mirror met only then must have
//!   the size the file was planned with; another size refuses the transfer, naming it.
//! - **Summary**: for every file with mirrors, which URL served it and each fallback.
//!
//! Files of unknown size (streamed whole, see `stream`) and files whose server ignores `Range`
//! stay on the URL they started on: nothing but a fresh start could move them.

use super::files::FileJob;
use super::state::Shared;
use crate::error::{failure, EngineError, Failure};
use crate::summary::{MirrorFallback, MirrorReport};
use std::sync::atomic::Ordering;
use wattio_http::ResponseHead;

impl FileJob {
    /// Moves the file off `origin` to its next mirror because of `why`. True when the file is
    /// now elsewhere (moved by this call, or already by another channel), so the caller
    /// reconnects rather than counts a failure; false when it has nowhere else to go.
    fn move_off(&self, origin: usize, why: &str) -> bool {
        let Some(s) = self.mirrors() else {
            return false;
        };
        if s.places.len() < 2 || self.whole() {
            return false;
        }
        let cur = s.current.load(Ordering::SeqCst);
        if s.places[cur].origin != origin {
            return true;
        }
        if cur + 1 >= s.places.len() {
            return false;
        }
        if s.current
            .compare_exchange(cur, cur + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // the next mirror's validators are its own: its first answer gives them
            if let Some(a) = self.active_if() {
                *a.validator.lock().unwrap() = None;
            }
            s.fallbacks.lock().unwrap().push(MirrorFallback {
                from: s.places[cur].url.clone(),
                to: s.places[cur + 1].url.clone(),
                reason: why.to_string(),
                during: "transfer".into(),
            });
        }
        true
    }
}

/// What a channel does with an answer, given the file's mirrors.
pub(crate) enum MirrorVerdict {
    /// Use it (or handle it as without mirrors: the file has no other mirror to go to).
    Serve,
    /// The file moved to its next mirror: requeue and reconnect.
    Moved,
    /// A mirror that is not the same file: end the transfer with this message.
    Refused(Failure),
}

/// Why an answer to a request for `len` bytes at `offset` of a `size`-byte file shows that the
/// server cannot serve the file; `None` when it can (or when that is for the caller to judge).
fn unusable(head: &ResponseHead, offset: u64, len: u64, size: u64) -> Option<String> {
    match head.status {
        200 if offset == 0 && len == size => None,
        200 => Some("ignores Range requests (HTTP 200 to a range request)".to_string()),
        404 | 403 | 410 | 416 => Some(format!("HTTP {}", head.status)),
        st if st >= 500 => Some(format!("HTTP {st}")),
        _ => None,
    }
}

impl Shared {
    /// Judges the answer `head` to a request for `len` bytes at `offset` of file `file` on
    /// `origin` (see [`MirrorVerdict`]).
    pub(crate) fn mirror_verdict(
        &self,
        file: usize,
        origin: usize,
        head: &ResponseHead,
        offset: u64,
        len: u64,
    ) -> MirrorVerdict {
        let j = &self.files[file];
        let Some(s) = j.mirrors().filter(|s| s.places.len() >= 2) else {
            return MirrorVerdict::Serve;
        };
        if head.status == 206 {
            let cur = s.current.load(Ordering::SeqCst);
            match head.content_range {
                Some(cr) if cr.size != j.size && cur != s.sized_at => {
                    return MirrorVerdict::Refused(failure!(
                        InvalidSource,
                        "{}: mirror {} has {} bytes but {} has {}: not the same file; remove that mirror from the line",
                        s.line, s.places[cur].url, cr.size, s.places[s.sized_at].url, j.size
                    ))
                }
                _ => return MirrorVerdict::Serve,
            }
        }
        match unusable(head, offset, len, j.size) {
            Some(why) if j.move_off(origin, &why) => MirrorVerdict::Moved,
            _ => MirrorVerdict::Serve,
        }
    }

    /// A request for file `file` on `origin` failed (`why`: the connection was cut, stalled,
    /// …): moves the file to its next mirror. True when the caller should reconnect rather
    /// than count a failure.
    pub(crate) fn mirror_after_error(&self, file: usize, origin: usize, why: &EngineError) -> bool {
        self.files[file].move_off(origin, &why.flat_line())
    }

    /// `origin` cannot be reached: every file it serves that has another mirror moves to it.
    /// True when at least one did (the caller reconnects rather than counts a failure).
    pub(crate) fn mirror_after_connect_error(&self, origin: usize, why: &EngineError) -> bool {
        let why = format!("cannot be reached: {}", why.flat_line());
        let mut moved = false;
        for j in &self.files {
            if j.origin() == origin {
                moved |= j.move_off(origin, &why);
            }
        }
        moved
    }

    /// The summary's report: every file whose line named mirrors.
    pub(crate) fn mirror_reports(&self) -> Vec<MirrorReport> {
        self.files
            .iter()
            .filter_map(|j| Some((j, j.mirrors().filter(|s| s.places.len() > 1)?)))
            .map(|(j, s)| MirrorReport {
                file: j.rel().into(),
                served_by: s.place().url.clone(),
                mirrors: s.places.len(),
                fallbacks: s.fallbacks.lock().unwrap().clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16) -> ResponseHead {
        let raw = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
        wattio_http::parse_response_head(raw.as_bytes())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn answers_that_send_a_file_to_its_next_mirror() {
        assert_eq!(unusable(&head(200), 0, 10, 10), None);
        assert_eq!(
            unusable(&head(200), 5, 5, 10).as_deref(),
            Some("ignores Range requests (HTTP 200 to a range request)")
        );
        for st in [404, 403, 410, 416, 500, 502, 503] {
            assert_eq!(unusable(&head(st), 0, 10, 10), Some(format!("HTTP {st}")));
        }
        assert_eq!(unusable(&head(206), 0, 10, 10), None);
        assert_eq!(unusable(&head(401), 0, 10, 10), None);
    }
}
