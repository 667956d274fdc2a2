//! HTTP/1.1 request parsing for the server: request line and headers (httparse), target path
//! decoding and confinement, and `Range` handling. Pure functions, fuzzed by proptest.

/// Largest request head accepted; bigger heads get 431-style rejection (we answer 400).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most headers accepted in one request.
pub const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// Decoded, confined path components (no `.`/`..`), empty for `/`.
    pub path: Vec<String>,
    /// Whether the target ended with `/`.
    pub trailing_slash: bool,
    /// HTTP minor version (0 or 1).
    pub minor: u8,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// The raw `Range` header value, if any.
    pub range: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// Why a request is refused before touching the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    /// Malformed syntax: answer 400 and close.
    BadRequest(&'static str),
    /// The target tries to leave the served tree: answer 403 and close.
    Forbidden,
}

/// Result of feeding the buffered bytes to the parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete head of `len` bytes.
    Complete(Request, usize),
    /// More bytes are needed.
    Partial,
}

/// Parses one request head at the start of `buf`.
pub fn parse_request(buf: &[u8]) -> Result<Parsed, (Reject, Option<u8>)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let n = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD {
                return Err((Reject::BadRequest("request head too large"), None));
            }
            return Ok(Parsed::Partial);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err((Reject::BadRequest("too many headers"), None))
        }
        Err(_) => return Err((Reject::BadRequest("malformed request"), None)),
    };
    if n > MAX_HEAD {
        return Err((Reject::BadRequest("request head too large"), None));
    }
    let minor = req.version.unwrap_or(1);
    let method = match req.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    let mut keep_alive = minor == 1;
    let mut range = None;
    let mut host = false;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("connection") {
            let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
            if v.split(',').any(|t| t.trim() == "close") {
                keep_alive = false;
            } else if v.split(',').any(|t| t.trim() == "keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("range") {
            if range.is_some() {
                return Err((Reject::BadRequest("duplicate Range header"), Some(minor)));
            }
            range = Some(
                std::str::from_utf8(h.value)
                    .map_err(|_| (Reject::BadRequest("non-ASCII Range header"), Some(minor)))?
                    .to_string(),
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Requests with bodies are not part of this protocol; refusing them avoids
            // request smuggling through a body we would not read.
            return Err((
                Reject::BadRequest("request bodies are not accepted"),
                Some(minor),
            ));
        } else if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).unwrap_or("x").trim();
            if v != "0" {
                return Err((
                    Reject::BadRequest("request bodies are not accepted"),
                    Some(minor),
                ));
            }
        } else if name.eq_ignore_ascii_case("host") {
            host = true;
        }
    }
    if minor == 1 && !host {
        return Err((
            Reject::BadRequest("HTTP/1.1 request without Host"),
            Some(minor),
        ));
    }
    let target = req.path.unwrap_or("");
    let (path, trailing_slash) = decode_target(target).map_err(|r| (r, Some(minor)))?;
    Ok(Parsed::Complete(
        Request {
            method,
            path,
            trailing_slash,
            minor,
            keep_alive,
            range,
        },
        n,
    ))
}

/// Decodes an origin-form target into confined path components.
///
/// The query is dropped; `%XX` escapes are decoded once; any component that is `..` after
/// decoding, or that contains `/`, `\` or NUL after decoding, is refused (so `%2e%2e`,
/// `%2f..`, `..%5c` all fail); `.` and empty components are skipped.
pub fn decode_target(target: &str) -> Result<(Vec<String>, bool), Reject> {
    if !target.starts_with('/') {
        return Err(Reject::BadRequest("request target must start with /"));
    }
    let path = target.split(['?', '#']).next().unwrap_or("");
    let trailing = path.ends_with('/');
    let mut out = Vec::new();
    for raw in path.split('/') {
        let comp = percent_decode(raw).ok_or(Reject::BadRequest("bad percent-encoding"))?;
        if comp.is_empty() || comp == "." {
            continue;
        }
        if comp == ".." || comp.contains(['/', '\\', '\0']) {
            return Err(Reject::Forbidden);
        }
        out.push(comp);
    }
    Ok((out, trailing))
}

/// Decodes `%XX` escapes; `None` on a malformed escape or non-UTF-8 result.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hi = hex(*b.get(i + 1)?)?;
            let lo = hex(*b.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes a relative path for a request target (keeps `/` and unreserved bytes).
pub fn percent_encode_path(p: &str) -> String {
    let mut s = String::with_capacity(p.len());
    for &c in p.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~/".contains(&c) {
            s.push(c as char);
        } else {
            s.push_str(&format!("%{c:02X}"));
        }
    }
    s
}

/// What a `Range` header asks of a representation of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// Serve the whole file with 200 (no header, an unparsable one, or several ranges).
    Full,
    /// Serve `[start, end]` inclusive with 206.
    Partial(u64, u64),
    /// 416 Range Not Satisfiable.
    Unsatisfiable,
}

/// Resolves a `Range` header value against a file size (RFC 9110 §14; one range only).
pub fn resolve_range(value: Option<&str>, size: u64) -> RangeAnswer {
    let Some(v) = value else {
        return RangeAnswer::Full;
    };
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return RangeAnswer::Full; // unknown unit: ignore, as the RFC allows
    };
    if spec.contains(',') {
        return RangeAnswer::Full; // multipart/byteranges not supported: send it all
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAnswer::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    if a.is_empty() {
        // suffix range: the last n bytes
        let Some(n) = num(b) else {
            return RangeAnswer::Full;
        };
        if n == 0 || size == 0 {
            return RangeAnswer::Unsatisfiable;
        }
        let n = n.min(size);
        return RangeAnswer::Partial(size - n, size - 1);
    }
    let Some(start) = num(a) else {
        return RangeAnswer::Full;
    };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match num(b) {
            Some(e) if e >= start => e,
            _ => return RangeAnswer::Full,
        }
    };
    if start >= size {
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Partial(start, end.min(size - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(s: &str) -> Result<Parsed, (Reject, Option<u8>)> {
        parse_request(s.as_bytes())
    }

    #[test]
    fn parses_get_with_range_and_keepalive() {
        let r = req("GET /a/b%20c.bin?x=1 HTTP/1.1\r\nHost: h\r\nRange: bytes=0-9\r\n\r\nGET");
        let Ok(Parsed::Complete(r, n)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(n, 60);
        assert_eq!(r.path, vec!["a", "b c.bin"]);
        assert!(r.keep_alive);
        assert_eq!(r.range.as_deref(), Some("bytes=0-9"));
        assert_eq!(r.method, Method::Get);
    }

    #[test]
    fn http10_closes_unless_keepalive() {
        let Ok(Parsed::Complete(r, _)) = req("GET / HTTP/1.0\r\n\r\n") else {
            panic!()
        };
        assert!(!r.keep_alive);
        let Ok(Parsed::Complete(r, _)) = req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        else {
            panic!()
        };
        assert!(r.keep_alive);
    }

    #[test]
    fn traversal_refused() {
        for t in [
            "/../etc/passwd",
            "/a/../../x",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/a/..%2fb",
            "/a%2f..%2f..%2fx",
            "/..%5cx",
            "/a%00b",
        ] {
            assert_eq!(decode_target(t), Err(Reject::Forbidden), "{t}");
        }
        assert_eq!(
            decode_target("/./a//b/"),
            Ok((vec!["a".into(), "b".into()], true))
        );
        assert!(matches!(decode_target("/%zz"), Err(Reject::BadRequest(_))));
        assert!(matches!(
            decode_target("http://x/"),
            Err(Reject::BadRequest(_))
        ));
    }

    #[test]
    fn malformed_rejected() {
        assert!(req("GARBAGE\r\n\r\n").is_err());
        assert!(req("GET / HTTP/1.1\r\n\r\n").is_err(), "no Host");
        assert!(req("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(req("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n").is_err());
        assert_eq!(req("GET / HTTP/1.1\r\nHost: h\r\n"), Ok(Parsed::Partial));
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
        assert!(req(&big).is_err());
    }

    #[test]
    fn ranges() {
        use RangeAnswer::*;
        assert_eq!(resolve_range(None, 10), Full);
        assert_eq!(resolve_range(Some("bytes=0-4"), 10), Partial(0, 4));
        assert_eq!(resolve_range(Some("bytes=5-"), 10), Partial(5, 9));
        assert_eq!(resolve_range(Some("bytes=5-100"), 10), Partial(5, 9));
        assert_eq!(resolve_range(Some("bytes=-3"), 10), Partial(7, 9));
        assert_eq!(resolve_range(Some("bytes=-30"), 10), Partial(0, 9));
        assert_eq!(resolve_range(Some("bytes=10-"), 10), Unsatisfiable);
        assert_eq!(resolve_range(Some("bytes=0-0"), 0), Unsatisfiable);
        assert_eq!(resolve_range(Some("bytes=-0"), 10), Unsatisfiable);
        assert_eq!(resolve_range(Some("bytes=4-2"), 10), Full);
        assert_eq!(resolve_range(Some("bytes=0-1,4-5"), 10), Full);
        assert_eq!(resolve_range(Some("items=0-1"), 10), Full);
        assert_eq!(resolve_range(Some("bytes=+1-2"), 10), Full);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes never panic the parser, and a complete head never claims more
        /// bytes than were given.
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(Parsed::Complete(r, n)) = parse_request(&data) {
                prop_assert!(n <= data.len());
                prop_assert!(r.path.iter().all(|c| c != ".." && !c.contains('/')));
            }
        }

        /// Mutations of a valid request (byte flips, truncations) never panic and never yield
        /// a path that leaves the root.
        #[test]
        fn mutated_requests(pos in 0usize..80, byte in any::<u8>(), cut in 0usize..90,
                            seg in "[a-z.%2eEfF]{0,8}") {
            let mut v = format!("GET /{seg}/x HTTP/1.1\r\nHost: h\r\nRange: bytes=1-2\r\n\r\n").into_bytes();
            if pos < v.len() { v[pos] = byte; }
            v.truncate(cut.min(v.len()));
            if let Ok(Parsed::Complete(r, _)) = parse_request(&v) {
                prop_assert!(r.path.iter().all(|c| c != ".." && !c.contains(['/', '\\', '\0'])));
            }
        }

        /// Any single range resolves inside the file.
        #[test]
        fn ranges_stay_inside(a in 0u64..200, b in 0u64..200, size in 0u64..150, suffix in any::<bool>()) {
            let h = if suffix { format!("bytes=-{b}") } else { format!("bytes={a}-{b}") };
            if let RangeAnswer::Partial(s, e) = resolve_range(Some(&h), size) {
                prop_assert!(s <= e && e < size);
            }
        }
    }
}
