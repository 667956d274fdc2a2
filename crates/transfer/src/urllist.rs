//! URL lists (`wattio transfer -i FILE`), in aria2's input-file format: one download a line;
//! the lines after it that start with a space or a TAB carry its options, one `name=value` a
//! line; lines starting with `#` are comments. Of aria2's options, `out=` (the file's path
//! under the destination), `dir=` (a directory under the destination) and
//! `checksum=TYPE=DIGEST` (`sha-256`, `sha-1`, `md5`, …) are used; other options are reported
//! and ignored. Several URLs on one line separated by TABs are mirrors: sources of the same
//! file, tried in the order written (the file's name comes from the first).
//!
//! Reference: aria2c(1), section "Input File" (<https://aria2.github.io/manual/en/html/aria2c.html#input-file>).

use std::collections::HashMap;
use wattio_http::checksum::{from_hex, Algorithm};
use wattio_http::is_safe_relative;
use wattio_http::percent_decode;

/// One download of a URL list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlEntry {
    /// The URL, as written (the first of its line).
    pub url: String,
    /// The other URLs of its line (TAB-separated), in order: mirrors of the same file.
    pub mirrors: Vec<String>,
    /// Where it goes, relative to the destination, `/`-separated.
    pub rel: String,
    /// A digest from a `checksum=` option.
    pub checksum: Option<(Algorithm, Vec<u8>)>,
    /// 1-based line of the URL.
    pub line: usize,
}

/// A parsed URL list, with what was ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UrlList {
    pub entries: Vec<UrlEntry>,
    /// One line each: options not used.
    pub notes: Vec<String>,
}

/// The file name a URL's path ends in, percent-decoded.
pub(crate) fn url_file_name(url: &str) -> Option<String> {
    let no_frag = url.split('#').next().unwrap_or(url);
    let path = no_frag.split('?').next().unwrap_or(no_frag);
    let after_scheme = path.split_once("://").map_or(path, |(_, r)| r);
    let (_, p) = after_scheme.split_once('/')?;
    let last = p.rsplit('/').next()?;
    let name = percent_decode(last)?;
    (!name.is_empty() && name != "." && name != ".." && !name.contains('/')).then_some(name)
}

struct Pending {
    url: String,
    mirrors: Vec<String>,
    line: usize,
    out: Option<String>,
    dir: Option<String>,
    checksum: Option<(Algorithm, Vec<u8>)>,
}

impl UrlList {
    /// Parses the bytes of a URL list (a file or standard input, named by `source` in errors).
    pub fn parse_bytes(bytes: &[u8], source: &str) -> Result<UrlList, String> {
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(format!(
                "{source} is gzip-compressed; decompress it first (gunzip -k)"
            ));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| format!("{source} is not UTF-8 text ({e}); a URL list is text"))?;
        UrlList::parse(text, source)
    }

    /// Parses a URL list; `source` names it in errors (a path, or `standard input`).
    pub fn parse(text: &str, source: &str) -> Result<UrlList, String> {
        let mut list = UrlList::default();
        let mut cur: Option<Pending> = None;
        let mut pending = Vec::new();
        for (i, raw) in text.split('\n').enumerate() {
            let lineno = i + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            if line.starts_with(' ') || line.starts_with('\t') {
                let opt = line.trim();
                let Some(p) = cur.as_mut() else {
                    return Err(format!(
                        "{source}:{lineno}: option line `{opt}` before any URL (option lines are indented and follow their URL)"
                    ));
                };
                let (name, value) = opt.split_once('=').ok_or_else(|| {
                    format!("{source}:{lineno}: `{opt}` is not an option (expected name=value, e.g. out=file.bin)")
                })?;
                match name.trim() {
                    "out" => p.out = Some(value.to_string()),
                    "dir" => p.dir = Some(value.trim_end_matches('/').to_string()),
                    "checksum" => {
                        let (t, hex) = value.split_once('=').ok_or_else(|| {
                            format!("{source}:{lineno}: checksum={value}: expected checksum=TYPE=DIGEST, e.g. checksum=sha-256=…")
                        })?;
                        let algo = Algorithm::from_aria2(t).ok_or_else(|| {
                            format!("{source}:{lineno}: checksum type {t} is not supported (md5, sha-1, sha-224, sha-256, sha-384, sha-512)")
                        })?;
                        let digest = from_hex(hex.trim())
                            .filter(|d| d.len() == algo.digest_len())
                            .ok_or_else(|| {
                                format!(
                                    "{source}:{lineno}: checksum={value}: a {t} digest is {} hex digits",
                                    algo.digest_len() * 2
                                )
                            })?;
                        p.checksum = Some((algo, digest));
                    }
                    other => list
                        .notes
                        .push(format!("{source}:{lineno}: aria2 option {other} ignored")),
                }
                continue;
            }
            if let Some(p) = cur.take() {
                pending.push(p);
            }
            let mut urls = line
                .split('\t')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string);
            let url = urls.next().unwrap_or_default();
            let mirrors: Vec<String> = urls.collect();
            if let Some(bad) = std::iter::once(&url)
                .chain(&mirrors)
                .find(|u| !(u.starts_with("http://") || u.starts_with("https://")))
            {
                return Err(format!(
                    "{source}:{lineno}: `{bad}` is not an http:// or https:// URL (mirrors of one file are separated by TABs)"
                ));
            }
            cur = Some(Pending {
                url,
                mirrors,
                line: lineno,
                out: None,
                dir: None,
                checksum: None,
            });
        }
        pending.extend(cur);
        let mut seen: HashMap<String, usize> = HashMap::new();
        for p in pending {
            let name = match &p.out {
                Some(o) => o.clone(),
                None => url_file_name(&p.url).ok_or_else(|| {
                    format!(
                        "{source}:{}: no file name in {} (it names a directory?); add an indented out=NAME line after it",
                        p.line, p.url
                    )
                })?,
            };
            let rel = match &p.dir {
                Some(d) if !d.is_empty() => format!("{d}/{name}"),
                _ => name,
            };
            if !is_safe_relative(&rel) {
                return Err(format!(
                    "{source}:{}: output path {rel} leaves the destination (absolute, empty or with ..); give a relative out=",
                    p.line
                ));
            }
            if let Some(prev) = seen.insert(rel.clone(), p.line) {
                return Err(format!(
                    "{source}: lines {prev} and {} both write {rel}; give one of them an out= option",
                    p.line
                ));
            }
            list.entries.push(UrlEntry {
                url: p.url,
                mirrors: p.mirrors,
                rel,
                checksum: p.checksum,
                line: p.line,
            });
        }
        if list.entries.is_empty() {
            return Err(format!("{source}: no URLs in it"));
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_http::checksum::to_hex;

    #[test]
    fn urls_options_comments_and_mirrors() {
        let text = "# a list\n\
                    http://h:8/a/b%20c.bin\n\
                    \n\
                    https://h/x.iso\thttps://mirror/x.iso\t\thttp://m2:81/pub/x.iso \n  out=isos/x.iso\n\tchecksum=sha-256=BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\n   split=5\n\
                    http://h/q?name=1#frag\r\n  dir=sub/\n";
        let l = UrlList::parse(text, "urls.txt").unwrap();
        let got: Vec<(&str, &str, usize)> = l
            .entries
            .iter()
            .map(|e| (e.url.as_str(), e.rel.as_str(), e.line))
            .collect();
        assert_eq!(
            got,
            [
                ("http://h:8/a/b%20c.bin", "b c.bin", 2),
                ("https://h/x.iso", "isos/x.iso", 4),
                ("http://h/q?name=1#frag", "sub/q", 8),
            ]
        );
        let (a, d) = l.entries[1].checksum.as_ref().unwrap();
        assert_eq!(*a, Algorithm::Sha256);
        assert_eq!(
            to_hex(d),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(l.notes, ["urls.txt:7: aria2 option split ignored"]);
        assert!(l.entries[0].mirrors.is_empty());
        assert_eq!(
            l.entries[1].mirrors,
            ["https://mirror/x.iso", "http://m2:81/pub/x.iso"]
        );
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let e = |t: &str| UrlList::parse(t, "l").unwrap_err();
        assert!(e("  out=x\nhttp://h/a\n").contains("before any URL"));
        assert!(e("ftp://h/a\n").contains("l:1: `ftp://h/a` is not an http"));
        assert!(e("http://h/a\tftp://m/a\n").contains("l:1: `ftp://m/a` is not an http"));
        assert!(e("http://h/dir/\n").contains("add an indented out=NAME"));
        assert!(e("http://h/a\n out=../../etc/passwd\n").contains("leaves the destination"));
        assert!(e("http://h/a\n out=/abs\n").contains("leaves the destination"));
        let dup = e("http://h/a/f\nhttp://g/b/f\n");
        assert!(dup.contains("lines 1 and 2 both write f"), "{dup}");
        assert!(e("http://h/a\n checksum=sha-256=00\n").contains("64 hex digits"));
        assert!(e("http://h/a\n checksum=crc32=00\n").contains("not supported"));
        assert!(e("# only comments\n\n").contains("no URLs"));
        let gz = UrlList::parse_bytes(&[0x1f, 0x8b, 8, 0], "l.gz").unwrap_err();
        assert!(gz.contains("l.gz is gzip-compressed"), "{gz}");
        let bin = UrlList::parse_bytes(&[b'h', 0xff], "l").unwrap_err();
        assert!(bin.contains("not UTF-8"), "{bin}");
        // a directory URL is fine with an out= name
        let ok = UrlList::parse("http://h/dir/\n out=index.html\n", "l").unwrap();
        assert_eq!(ok.entries[0].rel, "index.html");
    }

    #[test]
    fn file_names_from_urls() {
        assert_eq!(
            url_file_name("http://h/a/%23x%3F.bin").as_deref(),
            Some("#x?.bin")
        );
        assert_eq!(url_file_name("http://h/a/f?x=/y").as_deref(), Some("f"));
        assert_eq!(url_file_name("http://h/"), None);
        assert_eq!(url_file_name("http://h"), None);
        assert_eq!(url_file_name("http://h/a%2Fb"), None);
        assert_eq!(url_file_name("http://h/.."), None);
    }
}
