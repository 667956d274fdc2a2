//! HTTP/1.1 parsing: for the server, the request line and headers (httparse), target path
//! decoding and confinement, and `Range` handling; for the client, the response head and
//! `Content-Range`. Pure functions, fuzzed by proptest.

/// Largest request head accepted; bigger heads get 431-style rejection (we answer 400).
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Most headers accepted in one request.
pub(crate) const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
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
    /// The conditional headers of RFC 9110 §13.1, raw values.
    pub conditions: Conditions,
}

/// The raw values of a request's conditional headers (RFC 9110 §13.1); a header sent twice
/// keeps its values joined by `,` as the list syntax allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conditions {
    pub if_match: Option<String>,
    pub if_none_match: Option<String>,
    pub if_modified_since: Option<String>,
    pub if_unmodified_since: Option<String>,
    pub if_range: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Head,
    Other,
}

/// Why a request is refused before touching the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reject {
    /// Malformed syntax: answer 400 and close.
    BadRequest(&'static str),
    /// The target tries to leave the served tree: answer 403 and close.
    Forbidden,
    /// A method other than GET and HEAD with a body (a form's POST, a PUT upload): answer 405
    /// with `Allow`, as nginx does for a static file, and close rather than read the body.
    MethodNotAllowed,
}

/// Result of feeding the buffered bytes to the parser.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A complete head of `len` bytes.
    Complete(Request, usize),
    /// More bytes are needed.
    Partial,
}

/// Parses one request head at the start of `buf`.
pub(crate) fn parse_request(buf: &[u8]) -> Result<Parsed, (Reject, Option<u8>)> {
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
    let mut conditions = Conditions::default();
    for h in req.headers.iter() {
        let name = h.name;
        if let Some(slot) = conditions.slot(name) {
            let v = std::str::from_utf8(h.value)
                .map_err(|_| {
                    (
                        Reject::BadRequest("non-ASCII conditional header"),
                        Some(minor),
                    )
                })?
                .trim();
            match slot {
                Some(prev) => {
                    prev.push(',');
                    prev.push_str(v);
                }
                None => *slot = Some(v.to_string()),
            }
        } else if name.eq_ignore_ascii_case("connection") {
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
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length")
                && std::str::from_utf8(h.value).unwrap_or("x").trim() != "0")
        {
            // Requests with bodies are not part of this protocol; refusing them avoids
            // request smuggling through a body we would not read.
            let reject = match method {
                Method::Other => Reject::MethodNotAllowed,
                _ => Reject::BadRequest("request bodies are not accepted"),
            };
            return Err((reject, Some(minor)));
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
            conditions,
        },
        n,
    ))
}

impl Conditions {
    /// Where a header of this name goes, when it is a conditional one.
    fn slot(&mut self, name: &str) -> Option<&mut Option<String>> {
        let n = name.to_ascii_lowercase();
        Some(match n.as_str() {
            "if-match" => &mut self.if_match,
            "if-none-match" => &mut self.if_none_match,
            "if-modified-since" => &mut self.if_modified_since,
            "if-unmodified-since" => &mut self.if_unmodified_since,
            "if-range" => &mut self.if_range,
            _ => return None,
        })
    }
}

/// A representation's validators, as `wattio serve` sends them with every file (RFC 9110
/// §8.8): a strong `ETag` that changes with the file's modification time (to the nanosecond)
/// and size — not its inode, so that identical copies on replicas behind one name, with the
/// same times, give the same tag — and `Last-Modified` in seconds, never later than now
/// (RFC 9110 §8.8.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Validators {
    /// The entity tag, quotes included.
    pub etag: String,
    /// Unix seconds.
    pub last_modified: u64,
}

impl Validators {
    /// The validators of a file from its `stat`, at Unix time `now`.
    pub fn of(mtime_s: i64, mtime_ns: i64, size: u64, now: u64) -> Validators {
        let ns = (mtime_s as i128) * 1_000_000_000 + mtime_ns as i128;
        Validators {
            etag: format!("\"{:x}-{size:x}\"", ns.max(0)),
            last_modified: (mtime_s.max(0) as u64).min(now),
        }
    }
}

/// What a request's conditions ask of a response (RFC 9110 §13.2.2, evaluated in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Condition {
    /// Answer normally; `honour_range` false when `If-Range` did not match (the whole file
    /// then goes out with `200`).
    Proceed { honour_range: bool },
    /// `304 Not Modified` (`If-None-Match`, `If-Modified-Since`).
    NotModified,
    /// `412 Precondition Failed` (`If-Match`, `If-Unmodified-Since`).
    PreconditionFailed,
}

/// Evaluates `c` against a GET or HEAD of a representation with validators `v`, at Unix time
/// `now` (RFC 9110 §13.2.2).
pub(crate) fn evaluate_conditions(c: &Conditions, v: &Validators, now: u64) -> Condition {
    // 1–2: If-Match, else If-Unmodified-Since
    if let Some(m) = &c.if_match {
        if !etag_list_matches(m, &v.etag, true) {
            return Condition::PreconditionFailed;
        }
    } else if let Some(t) = c.if_unmodified_since.as_deref().and_then(parse_http_date) {
        if v.last_modified > t {
            return Condition::PreconditionFailed;
        }
    }
    // 3–4: If-None-Match, else If-Modified-Since
    if let Some(m) = &c.if_none_match {
        if etag_list_matches(m, &v.etag, false) {
            return Condition::NotModified;
        }
    } else if let Some(t) = c.if_modified_since.as_deref().and_then(parse_http_date) {
        if v.last_modified <= t {
            return Condition::NotModified;
        }
    }
    // 5: If-Range (meaningful only beside a Range, which the caller knows)
    let honour_range = match c.if_range.as_deref().map(str::trim) {
        None => true,
        Some(r) if r.starts_with('"') || r.starts_with("W/") => {
            parse_etags(r).is_some_and(|t| t.len() == 1 && strong_match(&t[0], &v.etag))
        }
        // a date validates only as a strong one: the file unchanged for a second before now
        // (RFC 9110 §8.8.2.2), and exactly its Last-Modified
        Some(r) => parse_http_date(r) == Some(v.last_modified) && v.last_modified < now,
    };
    Condition::Proceed { honour_range }
}

/// One entity tag: weak or not, and the opaque tag with its quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EntityTag {
    weak: bool,
    tag: String,
}

/// The entity tags of a list (`"a", W/"b"`); `None` when the value is not one.
fn parse_etags(v: &str) -> Option<Vec<EntityTag>> {
    let mut out = Vec::new();
    let mut rest = v.trim();
    while !rest.is_empty() {
        let weak = rest.starts_with("W/");
        if weak {
            rest = &rest[2..];
        }
        let body = rest.strip_prefix('"')?;
        let end = body.find('"')?;
        out.push(EntityTag {
            weak,
            tag: format!("\"{}\"", &body[..end]),
        });
        rest = body[end + 1..].trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => return None,
        }
    }
    Some(out)
}

fn strong_match(t: &EntityTag, current: &str) -> bool {
    !t.weak && t.tag == current
}

/// Whether an `If-Match` (`strong`) or `If-None-Match` list matches the current strong tag;
/// `*` matches any existing representation.
fn etag_list_matches(list: &str, current: &str, strong: bool) -> bool {
    if list.trim() == "*" {
        return true;
    }
    parse_etags(list).is_some_and(|tags| {
        tags.iter()
            .any(|t| t.tag == current && (!strong || strong_match(t, current)))
    })
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The IMF-fixdate of a Unix time (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn http_date(secs: u64) -> String {
    let mut out = String::with_capacity(29);
    push_http_date(&mut out, secs);
    out
}

/// Appends [`http_date`] of `secs` to `out`, digit by digit: it is in every response head.
pub(crate) fn push_http_date(out: &mut String, secs: u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = crate::civil::civil_from_days(days);
    let two = |out: &mut String, v: u64| {
        out.push(char::from(b'0' + (v / 10 % 10) as u8));
        out.push(char::from(b'0' + (v % 10) as u8));
    };
    out.push_str(WEEKDAYS[days.rem_euclid(7) as usize]);
    out.push_str(", ");
    two(out, d as u64);
    out.push(' ');
    out.push_str(MONTHS[(m - 1) as usize]);
    out.push(' ');
    let y = y.clamp(0, 9999) as u64;
    two(out, y / 100);
    two(out, y % 100);
    out.push(' ');
    two(out, rem / 3600);
    out.push(':');
    two(out, rem / 60 % 60);
    out.push(':');
    two(out, rem % 60);
    out.push_str(" GMT");
}

/// Unix seconds of an HTTP date in any of the three forms RFC 9110 §5.6.7 has recipients
/// accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94
/// 08:49:37 GMT`, a two-digit year read as the nearest such year not over 50 years ahead) and
/// asctime (`Sun Nov  6 08:49:37 1994`); `None` for anything else.
pub(crate) fn parse_http_date(s: &str) -> Option<u64> {
    let w: Vec<&str> = s.split_ascii_whitespace().collect();
    let month = |m: &str| MONTHS.iter().position(|x| *x == m).map(|i| i as i64 + 1);
    let num = |t: &str, digits: std::ops::RangeInclusive<usize>| -> Option<i64> {
        (digits.contains(&t.len()) && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let (y, m, d, time) = match w.as_slice() {
        [wd, d, m, y, t, "GMT"] if wd.ends_with(',') => {
            (num(y, 4..=4)?, month(m)?, num(d, 2..=2)?, *t)
        }
        [wd, dmy, t, "GMT"] if wd.ends_with(',') => {
            let mut p = dmy.split('-');
            let (d, m, yy) = (p.next()?, p.next()?, p.next()?);
            let yy = num(yy, 2..=2)?;
            let this_year = crate::civil::civil_from_days(
                (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()?
                    .as_secs()
                    / 86_400) as i64,
            )
            .0;
            let mut y = this_year - this_year.rem_euclid(100) + yy;
            if y > this_year + 50 {
                y -= 100;
            }
            (y, month(m)?, num(d, 2..=2)?, *t)
        }
        [_, m, d, t, y] => (num(y, 4..=4)?, month(m)?, num(d, 1..=2)?, *t),
        _ => return None,
    };
    let mut hms = time.split(':');
    let (hh, mm, ss) = (
        num(hms.next()?, 2..=2)?,
        num(hms.next()?, 2..=2)?,
        num(hms.next()?, 2..=2)?,
    );
    if hms.next().is_some() || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = crate::civil::days_from_civil(y, m, d);
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// Decodes an origin-form target into confined path components.
///
/// The query is dropped; `%XX` escapes are decoded once; any component that is `..` after
/// decoding, or that contains `/`, `\` or NUL after decoding, is refused (so `%2e%2e`,
/// `%2f..`, `..%5c` all fail); `.` and empty components are skipped.
pub(crate) fn decode_target(target: &str) -> Result<(Vec<String>, bool), Reject> {
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
pub(crate) enum RangeAnswer {
    /// Serve the whole file with 200 (no header, an unparsable one, or several ranges).
    Full,
    /// Serve `[start, end]` inclusive with 206.
    Partial(u64, u64),
    /// 416 Range Not Satisfiable.
    Unsatisfiable,
}

/// Resolves a `Range` header value against a file size (RFC 9110 §14; one range only).
pub(crate) fn resolve_range(value: Option<&str>, size: u64) -> RangeAnswer {
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

/// Largest response head the client accepts.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Most headers accepted in one response.
pub(crate) const MAX_RESPONSE_HEADERS: usize = 64;

/// A `Content-Range: bytes FIRST-LAST/SIZE` value (RFC 9110 §14.4), bounds inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    pub first: u64,
    pub last: u64,
    /// The complete representation's length.
    pub size: u64,
}

impl std::fmt::Display for ContentRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bytes {}-{}/{}", self.first, self.last, self.size)
    }
}

/// Parses a satisfied `Content-Range` value, `bytes FIRST-LAST/SIZE`; `None` for the
/// unsatisfied form (`bytes */SIZE`), an unknown size (`/*`), other units, non-digits, or a
/// range that is not inside the representation (`FIRST <= LAST < SIZE`).
pub(crate) fn parse_content_range(v: &str) -> Option<ContentRange> {
    let r = v.trim().strip_prefix("bytes ")?;
    let (ab, size) = r.split_once('/')?;
    let (a, b) = ab.split_once('-')?;
    let c = ContentRange {
        first: parse_digits(a.trim())?,
        last: parse_digits(b.trim())?,
        size: parse_digits(size.trim())?,
    };
    (c.first <= c.last && c.last < c.size).then_some(c)
}

/// A decimal number of ASCII digits only (no sign, no spaces), as HTTP's grammar writes them.
fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The fields of a response head the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// `Content-Length`, when present and a valid number.
    pub content_length: Option<u64>,
    /// `Content-Range`, when present and a satisfied byte range.
    pub content_range: Option<ContentRange>,
    /// `Transfer-Encoding`, when present (the body is then not delimited by `Content-Length`).
    pub transfer_encoding: Option<String>,
    /// Whether the server closes the connection after this response (HTTP/1.0 without
    /// `keep-alive`, or `Connection: close`).
    pub close: bool,
    /// Every header, names in lower case, values as text (invalid UTF-8 replaced).
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first value of a header (`name` in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why bytes are not a response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// Not HTTP/1.x response syntax (httparse's reason).
    Malformed(String),
    /// No end of head within [`MAX_RESPONSE_HEAD`] bytes.
    TooLarge,
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseError::Malformed(e) => write!(f, "malformed response from server: {e}"),
            ResponseError::TooLarge => write!(
                f,
                "response head larger than {} KiB",
                MAX_RESPONSE_HEAD / 1024
            ),
        }
    }
}

impl std::error::Error for ResponseError {}

/// Parses one response head at the start of `buf`: `Ok(Some((head, len)))` when complete,
/// `Ok(None)` when more bytes are needed.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, ResponseError> {
    let mut hs = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut r = httparse::Response::new(&mut hs);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_RESPONSE_HEAD => {
            return Err(ResponseError::TooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(ResponseError::Malformed(e.to_string())),
    };
    let mut h = ResponseHead {
        status: r.code.unwrap_or(0),
        content_length: None,
        content_range: None,
        transfer_encoding: None,
        close: r.version == Some(0),
        headers: Vec::with_capacity(r.headers.len()),
    };
    for x in r.headers.iter() {
        let k = x.name.to_ascii_lowercase();
        let v = String::from_utf8_lossy(x.value).into_owned();
        match k.as_str() {
            "content-length" => h.content_length = parse_digits(v.trim()),
            "content-range" => h.content_range = parse_content_range(&v),
            "transfer-encoding" => h.transfer_encoding = Some(v.trim().to_string()),
            "connection" => {
                let l = v.to_ascii_lowercase();
                if l.split(',').any(|t| t.trim() == "close") {
                    h.close = true;
                } else if l.split(',').any(|t| t.trim() == "keep-alive") {
                    h.close = false;
                }
            }
            _ => {}
        }
        h.headers.push((k, v));
    }
    Ok(Some((h, n)))
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
        // A form's POST or an upload is a method not allowed here, whatever its body.
        for body in ["Content-Length: 3", "Transfer-Encoding: chunked"] {
            let r = req(&format!("POST /f HTTP/1.1\r\nHost: h\r\n{body}\r\n\r\n"));
            assert!(
                matches!(r, Err((Reject::MethodNotAllowed, _))),
                "{body}: {r:?}"
            );
        }
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

    #[test]
    fn response_heads() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 0-9/100\r\nX-A: b\r\n\r\nBODY";
        let (h, n) = parse_response_head(raw).unwrap().unwrap();
        assert_eq!(n, raw.len() - 4);
        assert_eq!(
            (h.status, h.content_length, h.close),
            (206, Some(10), false)
        );
        assert_eq!(
            h.content_range,
            Some(ContentRange {
                first: 0,
                last: 9,
                size: 100
            })
        );
        assert_eq!(h.header("x-a"), Some("b"));
        let (h, _) = parse_response_head(b"HTTP/1.0 200 OK\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.close, "HTTP/1.0 closes by default");
        let (h, _) = parse_response_head(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.close);
        let (h, _) = parse_response_head(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert!(h.close);
        assert_eq!(h.transfer_encoding.as_deref(), Some("chunked"));
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nA: b\r\n"),
            Ok(None)
        );
        assert!(matches!(
            parse_response_head(b"NOT HTTP\r\n\r\n"),
            Err(ResponseError::Malformed(_))
        ));
        let big = format!(
            "HTTP/1.1 200 OK\r\nX: {}\r\n",
            "a".repeat(MAX_RESPONSE_HEAD)
        );
        assert_eq!(
            parse_response_head(big.as_bytes()),
            Err(ResponseError::TooLarge)
        );
        let (h, _) = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.content_length, None, "a signed length is not a length");
    }

    #[test]
    fn content_range() {
        let cr = |first, last, size| Some(ContentRange { first, last, size });
        assert_eq!(parse_content_range("bytes 0-9/100"), cr(0, 9, 100));
        assert_eq!(parse_content_range(" bytes 5-5/6 "), cr(5, 5, 6));
        assert_eq!(cr(0, 9, 100).unwrap().to_string(), "bytes 0-9/100");
        for bad in [
            "bytes */100",
            "bytes 0-9/*",
            "bytes 9-0/100",
            "bytes 0-100/100",
            "items 0-9/100",
            "bytes +0-9/100",
            "bytes 0-9",
            "",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
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

        /// Arbitrary bytes never panic the response parser; a complete head never claims more
        /// bytes than were given, and its parsed fields are consistent.
        #[test]
        fn arbitrary_responses_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(Some((h, n))) = parse_response_head(&data) {
                prop_assert!(n <= data.len());
                if let Some(c) = h.content_range {
                    prop_assert!(c.first <= c.last && c.last < c.size);
                }
            }
        }

        /// A response head the way servers write it reads back field for field, whatever
        /// follows it in the buffer (a pipelined body or the next response).
        #[test]
        fn written_heads_read_back(status in 100u16..600, len in any::<u64>(),
                                   first in 0u64..1 << 62, span in 0u64..1 << 62, extra in 0u64..1 << 62,
                                   reversed in any::<bool>(), close in any::<bool>(),
                                   tail in proptest::collection::vec(any::<u8>(), 0..64)) {
            let (last, size) = (first + span, first + span + 1 + extra);
            // a reversed range (LAST before FIRST) is not a range
            let (a, b) = if reversed && span > 0 { (last, first) } else { (first, last) };
            let valid = a <= b;
            let mut raw = format!(
                "HTTP/1.1 {status} X\r\ncontent-LENGTH: {len}\r\nContent-Range: bytes {a}-{b}/{size}\r\n{}\r\n",
                if close { "Connection: close\r\n" } else { "" }
            ).into_bytes();
            let head_len = raw.len();
            raw.extend_from_slice(&tail);
            let (h, n) = parse_response_head(&raw).unwrap().unwrap();
            prop_assert_eq!(n, head_len);
            prop_assert_eq!(h.status, status);
            prop_assert_eq!(h.content_length, Some(len));
            prop_assert_eq!(h.close, close);
            prop_assert_eq!(h.content_range, valid.then_some(ContentRange { first: a, last: b, size }));
        }

        /// Mutations of a valid response (byte flips, truncations) never panic, and a
        /// truncated head is either incomplete or an error, never a shorter complete head.
        #[test]
        fn mutated_responses(pos in 0usize..90, byte in any::<u8>(), cut in 0usize..100) {
            let full = b"HTTP/1.1 206 P\r\nContent-Length: 5\r\nContent-Range: bytes 1-5/9\r\n\r\n".to_vec();
            let mut v = full.clone();
            if pos < v.len() { v[pos] = byte; }
            let _ = parse_response_head(&v);
            let cut = cut.min(full.len());
            if let Ok(Some((_, n))) = parse_response_head(&full[..cut]) {
                prop_assert_eq!(n, full.len());
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
