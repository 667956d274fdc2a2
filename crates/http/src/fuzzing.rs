//! The fuzzing harness, on stable Rust: proptest drives a parser with arbitrary bytes and with
//! mutations (flips, insertions, deletions, truncations, repeats, splices) of inputs the real
//! peers write, and the target checks that nothing panics and that what the parser accepts
//! keeps its promises. This crate fuzzes its own parsers below (request heads, `Range`,
//! `Content-Range`, listings, dates and conditions); wattio-transfer fuzzes the client's
//! (response heads, chunked bodies, directory indexes, URL lists, checksum files, stored
//! state) with the same harness.
//!
//! `make test` runs a short pass (`WATTIO_FUZZ_CASES`, 5000 inputs per target by default);
//! `make fuzz` a long one, printing per target the inputs tried, for docs/results/hardening.md.
//! A failing input is shrunk and printed by proptest (add it to the target's seeds so it is
//! tried on every later run).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::atomic::{AtomicU64, Ordering};

/// Inputs per target: `WATTIO_FUZZ_CASES`, else 5000.
pub fn cases() -> u32 {
    std::env::var("WATTIO_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000)
}

/// One edit of a seed.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    Repeat(usize, usize, usize),
    Splice(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Flip(p, b)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..12)
        )
            .prop_map(|(p, v)| Edit::Insert(p, v)),
        (any::<usize>(), 1usize..40).prop_map(|(p, n)| Edit::Delete(p, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..40, 1usize..6).prop_map(|(p, n, k)| Edit::Repeat(p, n, k)),
        (any::<usize>(), any::<usize>(), 1usize..80).prop_map(|(a, b, n)| Edit::Splice(a, b, n)),
    ]
}

/// `seed` with `edits` applied (positions taken modulo the length at that point).
fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let len = v.len().max(1);
        match e {
            Edit::Flip(p, b) if !v.is_empty() => v[p % len] ^= b | 1,
            Edit::Insert(p, x) => {
                let at = p % (v.len() + 1);
                v.splice(at..at, x.iter().copied());
            }
            Edit::Delete(p, n) if !v.is_empty() => {
                let at = p % len;
                let end = (at + n).min(v.len());
                v.drain(at..end);
            }
            Edit::Truncate(p) => v.truncate(p % (v.len() + 1)),
            Edit::Repeat(p, n, k) if !v.is_empty() => {
                let at = p % len;
                let end = (at + n).min(v.len());
                let piece = v[at..end].to_vec();
                for _ in 0..*k {
                    v.splice(end..end, piece.iter().copied());
                }
            }
            Edit::Splice(a, b, n) if !v.is_empty() => {
                let (from, to) = (a % len, b % (v.len() + 1));
                let piece: Vec<u8> = v[from..(from + n).min(v.len())].to_vec();
                v.splice(to..to, piece);
            }
            _ => {}
        }
    }
    v
}

/// Arbitrary bytes, or one of `seeds` edited.
pub fn input(seeds: &'static [&'static [u8]]) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..512),
        4 => (0..seeds.len(), proptest::collection::vec(edit(), 0..6))
            .prop_map(move |(i, e)| apply(seeds[i], &e)),
    ]
    .boxed()
}

/// Runs `check` on `WATTIO_FUZZ_CASES` inputs from `strategy`, then prints the count (what
/// `make fuzz` collects); a panic or a failed check fails the test with the shrunk input.
pub fn fuzz<T: std::fmt::Debug>(
    name: &str,
    strategy: impl Strategy<Value = T>,
    check: impl Fn(T) -> Result<(), TestCaseError>,
) {
    let tried = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let r = runner.run(&strategy, |v| {
        tried.fetch_add(1, Ordering::Relaxed);
        check(v)
    });
    if let Err(e) = r {
        panic!("fuzz {name}: {e}");
    }
    eprintln!(
        "fuzz {name}: {} inputs, 0 failures",
        tried.load(Ordering::Relaxed)
    );
}

/// Seeds: the three date forms RFC 9110 §5.6.7 has a recipient accept, which the servers'
/// `Last-Modified` and the client's stored validators carry.
pub const HTTP_DATES: &[&[u8]] = &[
    b"Sun, 06 Nov 1994 08:49:37 GMT",
    b"Sunday, 06-Nov-94 08:49:37 GMT",
    b"Sun Nov  6 08:49:37 1994",
];

/// This crate's own targets.
#[cfg(test)]
mod targets {
    use super::{fuzz, input, HTTP_DATES};
    use crate::checksum::{from_hex, Algorithm};
    use crate::listing::{is_safe_relative, Listing};
    use crate::protocol::{
        evaluate_conditions, http_date, parse_content_range, parse_http_date, parse_request,
        resolve_range, Conditions, Parsed, RangeAnswer, Validators,
    };
    use proptest::prelude::*;

    const REQUESTS: &[&[u8]] = &[
        b"GET /a/b%20c.bin?x=1 HTTP/1.1\r\nHost: h\r\nRange: bytes=0-9\r\n\r\n",
        b"HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: h\r\nIf-Range: \"1-2\"\r\nIf-None-Match: W/\"a\", \"b\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nGET /g HTTP/1.1\r\nHost: h\r\n\r\n",
    ];

    #[test]
    fn fuzz_request_heads() {
        fuzz("request head", input(REQUESTS), |data| {
            if let Ok(Parsed::Complete(r, n)) = parse_request(&data) {
                prop_assert!(n <= data.len());
                prop_assert!(r
                    .path
                    .iter()
                    .all(|c| c != ".." && !c.contains(['/', '\\', '\0'])));
                let v = Validators::of(784_111_777, 5, 10, 1_000_000_000);
                let _ = evaluate_conditions(&r.conditions, &v, 1_000_000_000);
                let _ = resolve_range(r.range.as_deref(), 10);
            }
            Ok(())
        });
    }

    const RANGES: &[&[u8]] = &[
        b"bytes=0-4",
        b"bytes=-30",
        b"bytes=5-",
        b"bytes=0-1,4-5",
        b"items=1-2",
    ];

    #[test]
    fn fuzz_ranges() {
        fuzz("Range", (input(RANGES), any::<u64>()), |(data, size)| {
            let v = String::from_utf8_lossy(&data);
            if let RangeAnswer::Partial(s, e) = resolve_range(Some(&v), size) {
                prop_assert!(s <= e && e < size);
            }
            Ok(())
        });
    }

    const CONTENT_RANGES: &[&[u8]] = &[b"bytes 0-9/100", b"bytes */100", b" bytes 5-5/6 "];

    #[test]
    fn fuzz_content_ranges() {
        fuzz("Content-Range", input(CONTENT_RANGES), |data| {
            if let Some(c) = parse_content_range(&String::from_utf8_lossy(&data)) {
                prop_assert!(c.first <= c.last && c.last < c.size);
            }
            Ok(())
        });
    }

    const LISTINGS: &[&[u8]] = &[
        br#"{"format":"wattio-listing/1","checksum":"xxh3-64","total_bytes":3000,"files":[{"path":"a","size":3000,"blocks":{"size":1000,"xxh3":["0123456789abcdef","0123456789abcdef","0123456789abcdef"]}},{"path":"d/b c","size":0,"xxh3":"2d06800538d394c2"}]}"#,
        br#"{"format":"wattio-listing/1","checksum":"xxh3-64","total_bytes":1,"files":[{"path":"../../etc/passwd","size":18446744073709551615}]}"#,
    ];

    #[test]
    fn fuzz_listings() {
        fuzz("listing JSON", input(LISTINGS), |data| {
            if let Ok(l) = Listing::parse(&data) {
                for f in &l.files {
                    prop_assert!(is_safe_relative(&f.path), "{:?}", f.path);
                    if let Some(b) = &f.blocks {
                        prop_assert!(b.size > 0);
                        prop_assert_eq!(b.xxh3.len() as u64, f.size.div_ceil(b.size));
                    }
                }
            }
            Ok(())
        });
    }

    #[test]
    fn fuzz_http_dates_and_conditions() {
        fuzz(
            "HTTP date, conditions, digests",
            input(HTTP_DATES),
            |data| {
                if let Some(t) = parse_http_date(&String::from_utf8_lossy(&data)) {
                    prop_assert_eq!(parse_http_date(&http_date(t)), Some(t));
                }
                let c = Conditions {
                    if_range: Some(String::from_utf8_lossy(&data).into_owned()),
                    if_none_match: Some(String::from_utf8_lossy(&data).into_owned()),
                    ..Conditions::default()
                };
                let _ = evaluate_conditions(&c, &Validators::of(7, 0, 0, 0), 0);
                let _ = from_hex(&String::from_utf8_lossy(&data));
                let _ = Algorithm::from_tag(&String::from_utf8_lossy(&data));
                Ok(())
            },
        );
    }
}
