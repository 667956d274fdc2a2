//! Fuzzing of the client's parsers of a peer's bytes (response heads and the validators read
//! from them, chunked bodies, directory indexes, URL lists, checksum files, the state a
//! rerun reads back), with wattio-http's harness ([`wattio_http::fuzzing`], which says how;
//! the server's parsers are fuzzed there). `make fuzz` runs both crates' targets.

use crate::client::fuzz_targets as client;
use crate::dirindex::parse_index;
use crate::sums::SumsFile;
use crate::urllist::UrlList;
use proptest::prelude::*;
use wattio_http::fuzzing::{fuzz, input, HTTP_DATES};
use wattio_http::{is_safe_relative, parse_response_head};

const RESPONSES: &[&[u8]] = &[
    b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 0-9/100\r\nETag: \"a\"\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nBODY",
    b"HTTP/1.0 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 302 Found\r\nLocation: ../x/\r\nContent-Length: 0\r\n\r\n",
];

#[test]
fn fuzz_response_heads() {
    fuzz("response head", input(RESPONSES), |data| {
        if let Ok(Some((h, n))) = parse_response_head(&data) {
            prop_assert!(n <= data.len());
            if let Some(c) = h.content_range {
                prop_assert!(c.first <= c.last && c.last < c.size);
            }
            client::validators(&h);
        }
        Ok(())
    });
}

const CHUNKED: &[&[u8]] = &[
    b"5\r\nhello\r\n1;ext=1\r\n \r\n0\r\nX-Trailer: 1\r\n\r\n",
    b"A\r\n0123456789\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
];

#[test]
fn fuzz_chunked_bodies() {
    fuzz(
        "chunked body",
        (input(CHUNKED), proptest::collection::vec(1usize..64, 1..8)),
        |(data, cuts)| {
            client::chunked(&data, &cuts)?;
            Ok(())
        },
    );
}

const INDEXES: &[&[u8]] = &[
    b"<html><head><title>Index of /data/</title></head><body><h1>Index of /data/</h1><hr><pre><a href=\"../\">../</a>\n<a href=\"sub/\">sub/</a>  01-Jan-2024 00:00  -\n<a href=\"a%20b.bin\">a b.bin</a>  01-Jan-2024 00:00  12345\n</pre><hr></body></html>",
    br#"[{"name":"a.bin","type":"file","mtime":"Mon, 01 Jan 2024 00:00:00 GMT","size":100},{"name":"d","type":"directory","mtime":"Mon, 01 Jan 2024 00:00:00 GMT"}]"#,
    b"<!DOCTYPE HTML><html><body><h1>Directory listing for /data/</h1><ul><li><a href=\"x.txt\">x.txt</a></li><li><a href=\"../../etc/\">up</a></li><li><a href=\"http://elsewhere/y\">y</a></li></ul></body></html>",
    // Caddy's browse page, recognised by its links: breadcrumbs, sort links, sizes in data-order
    b"<title>/data/</title><h1><a href=\"/\">/</a><a href=\"\">data</a></h1><a href=\"?sort=size&order=asc\">Size</a><tr><td><a href=\"./d%20e/\"><svg></svg><span class=\"name\">d e/</span></a></td><td data-order=\"-1\">-</td></tr><tr><td><a href=\"./x.bin\"><span class=\"name\">x.bin</span></a></td><td data-order=\"18446744073709551615\">16 EiB</td></tr><a rel=\"noopener\" href=\"https://caddyserver.com\">Caddy</a>",
];

#[test]
fn fuzz_directory_indexes() {
    fuzz("directory index", input(INDEXES), |data| {
        for ct in [Some("text/html"), Some("application/json"), None] {
            if let Ok(page) = parse_index(&data, ct, "http://127.0.0.1:8080/data/", "/data/") {
                for e in &page.entries {
                    prop_assert!(e.path.starts_with("/data/"), "{:?}", e.path);
                    if let Some(rel) = crate::dirindex::relative_name("/data/", &e.path) {
                        prop_assert!(is_safe_relative(&rel));
                    }
                }
            }
        }
        Ok(())
    });
}

const URL_LISTS: &[&[u8]] = &[
    b"# comment\nhttp://h/a.bin\n  out=x/y.bin\n  checksum=sha-256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\nhttps://h:8443/b%20c\thttp://m/b%20c\n  dir=d\n  max-connection-per-server=4\n",
    b"http://h/a\n out=../../etc/passwd\n",
];

#[test]
fn fuzz_url_lists() {
    fuzz("URL list", input(URL_LISTS), |data| {
        if let Ok(l) = UrlList::parse_bytes(&data, "urls.txt") {
            let mut seen = std::collections::HashSet::new();
            for e in &l.entries {
                prop_assert!(is_safe_relative(&e.rel), "{:?}", e.rel);
                prop_assert!(seen.insert(e.rel.clone()), "duplicate {:?}", e.rel);
            }
        }
        Ok(())
    });
}

const SUMS: &[&[u8]] = &[
    b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a b.bin\n\\d41d8cd98f00b204e9800998ecf8427e  c\\nd\nSHA256 (x/y) = e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\nXXH3_2d06800538d394c2  e\n",
    b"-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 *f\n-----BEGIN PGP SIGNATURE-----\nxx\n-----END PGP SIGNATURE-----\n",
];

#[test]
fn fuzz_checksum_files() {
    fuzz("checksum file", input(SUMS), |data| {
        let text = String::from_utf8_lossy(&data);
        for name in ["SHA256SUMS", "B2SUMS", "sums.txt"] {
            if let Ok(s) = SumsFile::parse(&text, name) {
                for e in &s.entries {
                    prop_assert!(!e.name.is_empty());
                    prop_assert_eq!(e.digest.len(), e.algo.digest_len());
                }
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_stored_state() {
    fuzz(".done log, validators", input(HTTP_DATES), |data| {
        client::stored_state(&data);
        Ok(())
    });
}
