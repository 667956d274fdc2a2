//! Traces: the CSV format, the UCB Home IP 1996 binary format, and seeded generators shaped like
//! the paper's e-mail and Web traces.
//!
//! CSV: header `time_s,object,size_bytes,op,cached`; `op` is `read` or `write`; `cached` is 1
//! when the object is in the disk cache at the start (the first line naming an object decides).

use crate::rng::Rng;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// Read or write, from the application's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceOp {
    /// Read an object (from the cache or the server).
    Read,
    /// Write (send) an object to the server; a copy is stored in the cache.
    Write,
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TraceRequest {
    /// Recorded time, seconds; gaps between consecutive events are replayed as think time.
    pub t: f64,
    /// Object name.
    pub object: String,
    /// Size in bytes.
    pub size: u64,
    /// Read or write.
    pub op: TraceOp,
    /// In the disk cache at the start.
    pub cached: bool,
}

/// A trace plus the replay parameters that belong to the workload.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Trace {
    /// Workload name.
    pub name: String,
    /// Events in time order.
    pub requests: Vec<TraceRequest>,
    /// Size of the application's in-memory cache (browser memory cache), bytes; 0 for none.
    pub memory_cache_bytes: u64,
}

/// Trace input errors; display names the file and line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Bad CSV line.
    #[error("{file}:{line}: {msg}")]
    Csv {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// Problem and fix.
        msg: String,
    },
    /// Bad UCB record.
    #[error("{file}: record {record} at byte {offset}: {msg}")]
    Ucb {
        /// File name.
        file: String,
        /// 0-based record number.
        record: usize,
        /// Byte offset of the record.
        offset: usize,
        /// Problem.
        msg: String,
    },
    /// I/O.
    #[error("cannot read trace {file}: {source} (check the path)")]
    Io {
        /// File name.
        file: String,
        /// OS error.
        source: std::io::Error,
    },
}

/// The CSV header.
pub(crate) const CSV_HEADER: &str = "time_s,object,size_bytes,op,cached";

/// Parse CSV trace text.
pub(crate) fn parse_csv(text: &str, file: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let err = |line: usize, msg: String| TraceError::Csv {
        file: file.to_string(),
        line,
        msg,
    };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == CSV_HEADER => {}
        Some((_, h)) => return Err(err(1, format!("header is {h:?}; expected {CSV_HEADER:?}"))),
        None => {
            return Err(err(
                1,
                format!("empty file; expected the header {CSV_HEADER:?}"),
            ))
        }
    }
    let mut out = Vec::new();
    let mut last_t = f64::NEG_INFINITY;
    for (i, l) in lines {
        let ln = i + 1;
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 5 {
            return Err(err(
                ln,
                format!(
                    "expected 5 comma-separated fields ({CSV_HEADER}), found {}",
                    f.len()
                ),
            ));
        }
        let t: f64 = f[0]
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| err(ln, format!("time_s {:?} is not a number ≥ 0", f[0])))?;
        if t < last_t {
            return Err(err(
                ln,
                format!("time_s {t} goes back (previous {last_t}); sort the trace by time"),
            ));
        }
        last_t = t;
        if f[1].is_empty() {
            return Err(err(ln, "object is empty".into()));
        }
        let size: u64 = f[2].parse().map_err(|_| {
            err(
                ln,
                format!("size_bytes {:?} is not a non-negative integer", f[2]),
            )
        })?;
        let op = match f[3] {
            "read" => TraceOp::Read,
            "write" => TraceOp::Write,
            o => return Err(err(ln, format!("op {o:?} must be read or write"))),
        };
        let cached = match f[4] {
            "1" => true,
            "0" => false,
            c => return Err(err(ln, format!("cached {c:?} must be 0 or 1"))),
        };
        out.push(TraceRequest {
            t,
            object: f[1].to_string(),
            size,
            op,
            cached,
        });
    }
    Ok(out)
}

/// Write requests as CSV.
pub fn trace_csv(reqs: &[TraceRequest]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in reqs {
        s.push_str(&format!(
            "{:.6},{},{},{},{}\n",
            r.t,
            r.object,
            r.size,
            match r.op {
                TraceOp::Read => "read",
                TraceOp::Write => "write",
            },
            u8::from(r.cached)
        ));
    }
    s
}

/// One decoded UCB Home IP record (fields we use).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UcbRecord {
    /// Client request time, seconds.
    pub t: f64,
    /// Client IPv4 address.
    pub client: u32,
    /// Response header + data length, bytes (missing values count as 0).
    pub size: u64,
    /// Method, e.g. `GET`.
    pub method: String,
    /// URL token (hashed in the trace).
    pub url: String,
}

/// Decode UCB Home IP 1996 records (big-endian, per Gribble's `logparse.h`: six u32 times,
/// client ip u32 + port u16, server ip u32 + port u16, two pragma bytes, three u32 dates, u32
/// header length, u32 data length, u16 URL length, URL bytes). Gzipped input is accepted.
pub(crate) fn parse_ucb(bytes: &[u8], file: &str) -> Result<Vec<UcbRecord>, TraceError> {
    let data;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut v)
            .map_err(|e| TraceError::Io {
                file: file.to_string(),
                source: e,
            })?;
        data = v;
        &data[..]
    } else {
        bytes
    };
    const FIXED: usize = 6 * 4 + 4 + 2 + 4 + 2 + 1 + 1 + 5 * 4 + 2;
    let mut out = Vec::new();
    let mut off = 0;
    let be32 = |b: &[u8], o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    while off < bytes.len() {
        let rec = out.len();
        if bytes.len() - off < FIXED {
            return Err(TraceError::Ucb {
                file: file.into(),
                record: rec,
                offset: off,
                msg: format!(
                    "truncated record: {} bytes left, a record needs at least {FIXED}",
                    bytes.len() - off
                ),
            });
        }
        let b = &bytes[off..];
        let crs = be32(b, 0);
        let cru = be32(b, 4);
        let cip = be32(b, 24);
        let rhl = be32(b, 50);
        let rdl = be32(b, 54);
        let urllen = u16::from_be_bytes([b[58], b[59]]) as usize;
        if bytes.len() - off < FIXED + urllen {
            return Err(TraceError::Ucb {
                file: file.into(),
                record: rec,
                offset: off,
                msg: format!("URL of {urllen} bytes runs past the end of the file"),
            });
        }
        let url = String::from_utf8_lossy(&b[FIXED..FIXED + urllen]).into_owned();
        if crs == u32::MAX {
            return Err(TraceError::Ucb {
                file: file.into(),
                record: rec,
                offset: off,
                msg: "request time missing".into(),
            });
        }
        let usec = if cru == u32::MAX || cru >= 1_000_000 {
            0
        } else {
            cru
        };
        let len = |x: u32| if x == u32::MAX { 0 } else { x as u64 };
        let mut words = url.split_whitespace();
        let method = words.next().unwrap_or("").to_string();
        let path = words.next().unwrap_or("").to_string();
        out.push(UcbRecord {
            t: crs as f64 + usec as f64 / 1e6,
            client: cip,
            size: len(rhl) + len(rdl),
            method,
            url: path,
        });
        off += FIXED + urllen;
    }
    Ok(out)
}

/// Encode one record in the UCB format (used to build test fixtures).
pub fn encode_ucb(t: f64, client: u32, rhl: u32, rdl: u32, request_line: &str) -> Vec<u8> {
    let mut v = Vec::new();
    let secs = t.floor() as u32;
    let usec = ((t - t.floor()) * 1e6).round() as u32;
    for x in [secs, usec, secs, usec, secs, usec, client] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v.extend_from_slice(&1234u16.to_be_bytes());
    v.extend_from_slice(&0x0A00_0001u32.to_be_bytes());
    v.extend_from_slice(&80u16.to_be_bytes());
    v.push(2);
    v.push(8);
    for x in [u32::MAX, u32::MAX, 835_418_853, rhl, rdl] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v.extend_from_slice(&(request_line.len() as u16).to_be_bytes());
    v.extend_from_slice(request_line.as_bytes());
    v
}

/// Turn UCB records into a replayable trace: GETs with a non-zero size, of one client (the
/// busiest if `client` is `None`), starting at its first request, for `span`; half of the
/// unique objects (chosen with `seed`) are cached at the start, as in the paper (§5.1).
pub(crate) fn ucb_to_requests(
    recs: &[UcbRecord],
    client: Option<u32>,
    span: Duration,
    seed: u64,
) -> Vec<TraceRequest> {
    let client = client.or_else(|| {
        let mut counts: HashMap<u32, usize> = HashMap::new();
        for r in recs {
            *counts.entry(r.client).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))
            .map(|(c, _)| c)
    });
    let mut sel: Vec<&UcbRecord> = recs
        .iter()
        .filter(|r| Some(r.client) == client && r.method == "GET" && r.size > 0)
        .collect();
    sel.sort_by(|a, b| a.t.total_cmp(&b.t));
    let Some(t0) = sel.first().map(|r| r.t) else {
        return Vec::new();
    };
    let sel: Vec<&UcbRecord> = sel
        .into_iter()
        .filter(|r| r.t - t0 <= span.as_secs_f64())
        .collect();
    let reqs: Vec<TraceRequest> = sel
        .iter()
        .map(|r| TraceRequest {
            t: r.t - t0,
            object: r.url.clone(),
            size: r.size,
            op: TraceOp::Read,
            cached: false,
        })
        .collect();
    mark_half_cached(reqs, seed)
}

fn mark_half_cached(mut reqs: Vec<TraceRequest>, seed: u64) -> Vec<TraceRequest> {
    let mut uniq: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for r in &reqs {
        if r.op == TraceOp::Read && seen.insert(r.object.clone()) {
            uniq.push(r.object.clone());
        }
    }
    let mut rng = Rng::new(seed ^ 0xCAC4E);
    // Fisher–Yates, then the first half is cached.
    for i in (1..uniq.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        uniq.swap(i, j);
    }
    let cached: HashSet<String> = uniq[..uniq.len() / 2].iter().cloned().collect();
    for r in &mut reqs {
        r.cached = cached.contains(&r.object);
    }
    reqs
}

/// Which part of a UCB Home IP trace to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UcbSelect {
    /// Client IPv4 address; `None` = the client with the most requests.
    pub client: Option<u32>,
    /// How much of the client's requests, from its first.
    pub span: Duration,
}

impl Default for UcbSelect {
    /// The busiest client's first 20 minutes, the length of the paper's Web workload (§5.1).
    fn default() -> Self {
        Self {
            client: None,
            span: Duration::from_secs(20 * 60),
        }
    }
}

/// Load a trace file: CSV (by header) or UCB binary (anything else, gzipped or not; `ucb` picks
/// the client and the window, `seed` the sizes it lacks).
pub fn load_trace_file(path: &Path, seed: u64, ucb: UcbSelect) -> Result<Trace, TraceError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TraceError::Io {
        file: file.clone(),
        source: e,
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(file.clone());
    if bytes.starts_with(b"time_s") || bytes.starts_with(b"#") {
        let text = String::from_utf8(bytes).map_err(|_| TraceError::Csv {
            file: file.clone(),
            line: 1,
            msg: "not UTF-8 text".into(),
        })?;
        return Ok(Trace {
            name,
            requests: parse_csv(&text, &file)?,
            memory_cache_bytes: 0,
        });
    }
    let recs = parse_ucb(&bytes, &file)?;
    Ok(Trace {
        name,
        requests: ucb_to_requests(&recs, ucb.client, ucb.span, seed),
        memory_cache_bytes: WEB_MEMORY_CACHE_BYTES,
    })
}

/// Browser memory cache of the Web workload (ours: a small 1996-era browser cache).
pub(crate) const WEB_MEMORY_CACHE_BYTES: u64 = 512 * 1024;

/// Scale gaps so that they sum to `total`.
fn scale(gaps: &mut [f64], total: f64) {
    let s: f64 = gaps.iter().sum();
    if s > 0.0 {
        for g in gaps.iter_mut() {
            *g *= total / s;
        }
    }
}

/// E-mail workload shaped like the paper's (§5.1): 15 minutes of heavy activity, 41 messages
/// read (all cached locally), heavy-tailed think times, a few messages sent. Sizes: lognormal
/// bodies (median 4 KB) with 10 % attachments (Pareto from 40 KB). Parameters are ours.
pub fn email_trace(seed: u64) -> Trace {
    let mut rng = Rng::new(seed);
    let reads = 41;
    let sends = 4;
    let n = reads + sends;
    let mut gaps: Vec<f64> = (0..n).map(|_| rng.lognormal(8.0, 1.1)).collect();
    scale(&mut gaps, 880.0);
    let mut send_at: HashSet<usize> = HashSet::new();
    while send_at.len() < sends {
        send_at.insert(5 + rng.below(n as u64 - 5) as usize);
    }
    let mut t = 0.0;
    let mut out = Vec::new();
    let mut msg = 0;
    for (i, gap) in gaps.iter().enumerate() {
        if send_at.contains(&i) {
            let size = rng.lognormal(3000.0, 0.6).clamp(300.0, 64_000.0) as u64;
            out.push(TraceRequest {
                t,
                object: format!("sent-{i}"),
                size,
                op: TraceOp::Write,
                cached: false,
            });
        } else {
            let size = if rng.f64() < 0.1 {
                rng.pareto(40_000.0, 1.3).min(2_000_000.0)
            } else {
                rng.lognormal(4000.0, 0.9).clamp(400.0, 200_000.0)
            };
            out.push(TraceRequest {
                t,
                object: format!("msg-{msg}"),
                size: size as u64,
                op: TraceOp::Read,
                cached: true,
            });
            msg += 1;
        }
        t += gap;
    }
    Trace {
        name: "email".into(),
        requests: out,
        memory_cache_bytes: 0,
    }
}

/// Web workload shaped like the paper's (§5.1): 20 minutes, 116 unique objects in page views
/// (an HTML page and its embedded images fetched in a burst), think time between pages, some
/// pages revisited (hits in the browser's memory cache or the disk cache), half of the unique
/// objects cached at the start (`all_cached` caches all of them, as in Figure 12). Sizes follow a
/// 1996-like shape: lognormal bodies (HTML median 3 KB, images 2 KB) with a Pareto tail from
/// 10 KB. Parameters are ours.
pub fn web_trace(seed: u64, all_cached: bool) -> Trace {
    let mut rng = Rng::new(seed ^ 0x00E8);
    let target = 116;
    let mut pages: Vec<Vec<(String, u64)>> = Vec::new();
    let mut views: Vec<usize> = Vec::new();
    let mut unique = 0;
    let mut obj = 0;
    let size = |rng: &mut Rng, median: f64| -> u64 {
        let s = if rng.f64() < 0.12 {
            rng.pareto(10_000.0, 1.1)
        } else {
            rng.lognormal(median, 1.0)
        };
        s.clamp(100.0, 1_000_000.0) as u64
    };
    while unique < target {
        if !pages.is_empty() && rng.f64() < 0.25 {
            // Revisit a recent page.
            let back = 1 + rng.below(pages.len().min(4) as u64) as usize;
            views.push(pages.len() - back);
            continue;
        }
        let images = (rng.lognormal(3.0, 0.8) as usize)
            .min(15)
            .min(target - unique - 1);
        let mut page = vec![(format!("page-{obj}.html"), size(&mut rng, 3000.0))];
        obj += 1;
        for _ in 0..images {
            page.push((format!("img-{obj}.gif"), size(&mut rng, 2000.0)));
            obj += 1;
        }
        unique += page.len();
        pages.push(page);
        views.push(pages.len() - 1);
    }
    let mut gaps: Vec<f64> = (0..views.len()).map(|_| rng.lognormal(25.0, 1.0)).collect();
    scale(&mut gaps, 1150.0);
    let mut out = Vec::new();
    let mut t = 0.0;
    for (v, gap) in views.iter().zip(gaps) {
        let mut tt = t;
        for (name, sz) in &pages[*v] {
            out.push(TraceRequest {
                t: tt,
                object: name.clone(),
                size: *sz,
                op: TraceOp::Read,
                cached: false,
            });
            tt += 0.02 + rng.f64() * 0.1;
        }
        t = tt + gap;
    }
    let mut out = mark_half_cached(out, seed);
    if all_cached {
        for r in &mut out {
            r.cached = true;
        }
    }
    Trace {
        name: if all_cached {
            "web-full".into()
        } else {
            "web".into()
        },
        requests: out,
        memory_cache_bytes: WEB_MEMORY_CACHE_BYTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_roundtrip() {
        let t = email_trace(3);
        let back = parse_csv(&trace_csv(&t.requests), "x").unwrap();
        assert_eq!(back.len(), t.requests.len());
        for (a, b) in back.iter().zip(&t.requests) {
            assert_eq!(a.object, b.object);
            assert_eq!(a.size, b.size);
            assert!((a.t - b.t).abs() < 1e-5);
        }
    }

    #[test]
    fn csv_errors_name_the_line() {
        let h = CSV_HEADER;
        let cases = [
            (
                format!("{h}\n1,a,10,read,1\n2,b,x,read,0\n"),
                3,
                "size_bytes",
            ),
            (format!("{h}\n1,a,10,read,1\n2,b,10,peek,0\n"), 3, "op"),
            (
                format!("{h}\n1,a,10,read,1\n\n2,b,10,read,2\n"),
                4,
                "cached",
            ),
            (
                format!("{h}\n5,a,10,read,1\n2,b,10,read,0\n"),
                3,
                "goes back",
            ),
            (format!("{h}\n1,a,10,read\n"), 2, "5 comma-separated"),
            ("t,o\n1,a\n".to_string(), 1, "header"),
            (format!("{h}\n-1,a,10,read,1\n"), 2, "time_s"),
        ];
        for (text, line, word) in cases {
            match parse_csv(&text, "f.csv") {
                Err(TraceError::Csv { line: l, msg, .. }) => {
                    assert_eq!(l, line, "{msg}");
                    assert!(msg.contains(word), "{msg}");
                }
                other => panic!("expected an error for {text:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn ucb_fixture_decodes_like_the_showtrace_example() {
        // UCB Home IP trace `showtrace` example (Internet Traffic Archive, ita.ee.lbl.gov/html/contrib/UCB.home-IP-HTTP.html): "848278028:829593 ... 23.240.8.98:1462 ... 170 844 37 GET 9168504434183313441..gif HTTP/1.0"
        let client = u32::from_be_bytes([23, 240, 8, 98]);
        let mut bytes = encode_ucb(
            848278028.829593,
            client,
            170,
            844,
            "GET 9168504434183313441..gif HTTP/1.0",
        );
        bytes.extend(encode_ucb(
            848278030.5,
            client,
            100,
            u32::MAX,
            "GET x.html HTTP/1.0",
        ));
        bytes.extend(encode_ucb(848278031.0, 7, 100, 10, "POST y HTTP/1.0"));
        let recs = parse_ucb(&bytes, "fx").unwrap();
        assert_eq!(recs.len(), 3);
        assert!((recs[0].t - 848278028.829593).abs() < 1e-6);
        assert_eq!(recs[0].client, client);
        assert_eq!(recs[0].size, 170 + 844);
        assert_eq!(recs[0].method, "GET");
        assert_eq!(recs[0].url, "9168504434183313441..gif");
        assert_eq!(recs[1].size, 100, "missing data length counts as 0");
        let reqs = ucb_to_requests(&recs, None, Duration::from_secs(20 * 60), 1);
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].t, 0.0);
        assert_eq!(reqs.iter().filter(|r| r.cached).count(), 1);
        // gzip is accepted too
        let mut gz = Vec::new();
        {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
            e.write_all(&bytes).unwrap();
        }
        assert_eq!(parse_ucb(&gz, "fx.gz").unwrap(), recs);
    }

    #[test]
    fn ucb_file_with_client_and_window() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ucb.tr");
        let mut bytes = Vec::new();
        for i in 0..10 {
            bytes.extend(encode_ucb(
                1000.0 + i as f64 * 60.0,
                1,
                100,
                900,
                &format!("GET o{i}.gif HTTP/1.0"),
            ));
            bytes.extend(encode_ucb(
                1000.5 + i as f64 * 60.0,
                2,
                100,
                900,
                &format!("GET p{i}.gif HTTP/1.0"),
            ));
        }
        bytes.extend(encode_ucb(2000.0, 2, 100, 900, "GET extra.gif HTTP/1.0"));
        std::fs::write(&p, &bytes).unwrap();
        // Busiest client is 2 (11 requests); a 5-minute window keeps its first 6 (0..=300 s).
        let t = load_trace_file(
            &p,
            1,
            UcbSelect {
                client: None,
                span: Duration::from_secs(5 * 60),
            },
        )
        .unwrap();
        assert_eq!(t.requests.len(), 6);
        assert!(t.requests.iter().all(|r| r.object.starts_with('p')));
        let t = load_trace_file(
            &p,
            1,
            UcbSelect {
                client: Some(1),
                span: Duration::from_secs(60 * 60),
            },
        )
        .unwrap();
        assert_eq!(t.requests.len(), 10);
        assert!(t.requests[0].object == "o0.gif" && t.requests[0].size == 1000);
    }

    #[test]
    fn ucb_truncated_record_is_an_error() {
        let bytes = encode_ucb(1.0, 1, 1, 1, "GET a HTTP/1.0");
        let e = parse_ucb(&bytes[..bytes.len() - 3], "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("record 0"), "{e}");
        let e = parse_ucb(&bytes[..20], "f").unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn email_shape() {
        let t = email_trace(1);
        let reads: Vec<_> = t
            .requests
            .iter()
            .filter(|r| r.op == TraceOp::Read)
            .collect();
        assert_eq!(reads.len(), 41);
        assert!(reads.iter().all(|r| r.cached));
        assert_eq!(
            t.requests.iter().filter(|r| r.op == TraceOp::Write).count(),
            4
        );
        let span = t.requests.last().unwrap().t;
        assert!(span > 700.0 && span <= 900.0, "{span}");
    }

    #[test]
    fn web_shape() {
        let t = web_trace(1, false);
        let uniq: HashSet<&str> = t.requests.iter().map(|r| r.object.as_str()).collect();
        assert_eq!(uniq.len(), 116);
        let cached: HashSet<&str> = t
            .requests
            .iter()
            .filter(|r| r.cached)
            .map(|r| r.object.as_str())
            .collect();
        assert_eq!(cached.len(), 58);
        assert!(t.requests.len() > 116, "revisits exist");
        let span = t.requests.last().unwrap().t;
        assert!(span > 1000.0 && span <= 1200.0, "{span}");
        assert!(web_trace(1, true).requests.iter().all(|r| r.cached));
    }

    #[test]
    fn generators_are_deterministic() {
        assert_eq!(email_trace(5), email_trace(5));
        assert_eq!(web_trace(5, false), web_trace(5, false));
        assert_ne!(email_trace(5), email_trace(6));
    }
}
