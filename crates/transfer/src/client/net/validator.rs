//! A server's validators of a file (RFC 9110 §8.8: `ETag`, `Last-Modified`): recorded with a
//! part file and a finished file, sent as `If-Range` on resumed ranges, compared with what the
//! server says later, so that a resumed copy never mixes the bytes of two versions. Validators
//! are a server's own (two mirrors of one file give different ones), so each is kept with the
//! origin that gave it and compared only with that origin's.

use wattio_http::ResponseHead;

/// The validators a server gave for one version of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Validator {
    /// The server that gave them (`https://host:port`).
    pub(crate) origin: String,
    /// A strong entity tag, quotes included (weak ones, `W/"…"`, cannot validate ranges).
    pub(crate) etag: Option<String>,
    /// The `Last-Modified` date as the server wrote it.
    pub(crate) last_modified: Option<String>,
}

/// What a server's validators now say of a recorded version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compared {
    /// The same version.
    Same,
    /// Another version (or the server no longer gives the validator it gave, an entity tag
    /// where it gave one).
    Changed,
    /// Recorded from another server (a mirror): nothing to compare.
    OtherServer,
    /// The server gave no validator this time (some leave them off `HEAD` answers): nothing
    /// to compare.
    Unknown,
}

/// Longest validator value kept (a header a hostile server makes huge is dropped).
const MAX_VALUE: usize = 256;

impl Validator {
    /// What a response from `origin` (`HttpUrl::origin`) says; `None` when it gives neither
    /// validator.
    pub(crate) fn from_head(h: &ResponseHead, origin: &str) -> Option<Validator> {
        let clean = |v: &str| {
            let v = v.trim();
            (!v.is_empty() && v.len() <= MAX_VALUE && !v.contains(['\r', '\n']))
                .then(|| v.to_string())
        };
        let v = Validator {
            origin: origin.to_string(),
            etag: h
                .header("etag")
                .and_then(clean)
                .filter(|t| t.starts_with('"') && t.ends_with('"') && t.len() >= 2),
            last_modified: h.header("last-modified").and_then(clean),
        };
        v.is_some().then_some(v)
    }

    fn is_some(&self) -> bool {
        self.etag.is_some() || self.last_modified.is_some()
    }

    /// The `If-Range` value: the entity tag, else the date (RFC 9110 §13.1.5).
    pub(crate) fn if_range(&self) -> Option<&str> {
        self.etag.as_deref().or(self.last_modified.as_deref())
    }

    /// What `now`, the validators `now_origin` gives now (`None`: it gave none), says of the
    /// version `self` was recorded for.
    pub(crate) fn compare(&self, now: Option<&Validator>, now_origin: &str) -> Compared {
        if self.origin != now_origin {
            return Compared::OtherServer;
        }
        match now {
            None => Compared::Unknown,
            Some(now) if self.changed_to(now) => Compared::Changed,
            Some(_) => Compared::Same,
        }
    }

    /// Whether `now` (from the same server) names another version than `self`: entity tags
    /// differ when both have one, else dates differ when both have one; a server that stopped
    /// giving the validator the earlier answer had counts as another version.
    fn changed_to(&self, now: &Validator) -> bool {
        match (&self.etag, &now.etag) {
            (Some(a), Some(b)) => a != b,
            (Some(_), None) => true,
            (None, _) => match (&self.last_modified, &now.last_modified) {
                (Some(a), Some(b)) => a != b,
                (Some(_), None) => true,
                (None, _) => false,
            },
        }
    }

    /// The stored form: `O`, `E` and `L` lines.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut s = format!("O{}\n", self.origin);
        if let Some(e) = &self.etag {
            s.push_str(&format!("E{e}\n"));
        }
        if let Some(l) = &self.last_modified {
            s.push_str(&format!("L{l}\n"));
        }
        s.into_bytes()
    }

    /// Reads [`Validator::encode`]'s form; `None` when it holds neither.
    pub(crate) fn decode(b: &[u8]) -> Option<Validator> {
        let text = std::str::from_utf8(b).ok()?;
        let mut v = Validator::default();
        for line in text.lines() {
            match line.split_at_checked(1) {
                Some(("O", o)) => v.origin = o.to_string(),
                Some(("E", e)) => v.etag = Some(e.to_string()),
                Some(("L", l)) => v.last_modified = Some(l.to_string()),
                _ => {}
            }
        }
        v.is_some().then_some(v)
    }

    /// For messages: the entity tag, else the date.
    pub(crate) fn describe(&self) -> String {
        match (&self.etag, &self.last_modified) {
            (Some(e), _) => format!("ETag {e}"),
            (None, Some(l)) => format!("Last-Modified {l}"),
            (None, None) => "no validator".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(extra: &str) -> ResponseHead {
        let raw = format!("HTTP/1.1 200 OK\r\n{extra}\r\n");
        wattio_http::parse_response_head(raw.as_bytes())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn validators_from_heads_compare_and_round_trip() {
        let o = "http://h:80";
        assert_eq!(Validator::from_head(&head(""), o), None);
        let weak = Validator::from_head(&head("ETag: W/\"x\"\r\n"), o);
        assert_eq!(weak, None, "a weak tag cannot validate ranges");
        let a = Validator::from_head(
            &head("ETag: \"1-2\"\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"),
            o,
        )
        .unwrap();
        assert_eq!(a.if_range(), Some("\"1-2\""));
        assert_eq!(Validator::decode(&a.encode()), Some(a.clone()));
        let b = Validator {
            etag: Some("\"1-3\"".into()),
            ..a.clone()
        };
        assert_eq!(a.compare(Some(&b), o), Compared::Changed);
        assert_eq!(a.compare(Some(&a), o), Compared::Same);
        assert_eq!(a.compare(None, o), Compared::Unknown);
        assert_eq!(
            a.compare(Some(&b), "http://mirror:80"),
            Compared::OtherServer
        );
        let dated = Validator {
            etag: None,
            ..a.clone()
        };
        assert_eq!(dated.if_range(), a.last_modified.as_deref());
        assert_eq!(dated.compare(Some(&a), o), Compared::Same);
        let later = Validator {
            last_modified: Some("Mon, 07 Nov 1994 08:49:37 GMT".into()),
            ..dated.clone()
        };
        assert_eq!(dated.compare(Some(&later), o), Compared::Changed);
        assert_eq!(Validator::decode(b"junk"), None);
    }
}
