//! Publisher checksum files (`--checksum-file`): the GNU coreutils format of `sha256sum`,
//! `sha512sum`, `md5sum`, `sha1sum` and `b2sum` (`HEX  name` in text mode, `HEX *name` in
//! binary mode, a line starting with `\` when the name has escaped `\\`, `\n` or `\r`), the BSD
//! format that `--tag` writes (`SHA256 (name) = HEX`, `BLAKE2b-256 (name) = HEX`), and
//! `xxhsum`'s (`HEX  name` for XXH32/XXH64/XXH128, `XXH3_HEX  name` or `XXH3 (name) = HEX` for
//! XXH3-64, `_LE` tags for little-endian digests).
//!
//! A bare `HEX  name` line does not say its algorithm: its length does (as `sha256sum -c`
//! and `xxhsum -c` read it), unless the checksum file's name announces one. A BLAKE2b line of
//! 128 digits has a SHA-512's length and one of `b2sum -l 256` a SHA-256's, so such a file is
//! read as BLAKE2b only when its name says so (`B2SUMS`, `*.b2`, `*blake2*`), and then, as
//! `b2sum -c` does, the digest length is the number of hex digits over 2
//! (GNU coreutils manual, "b2sum: Print or check BLAKE2 digests",
//! <https://www.gnu.org/software/coreutils/manual/html_node/b2sum-invocation.html>).
//!
//! Lines starting with `#` and the armour of a PGP clear-signed file (Fedora's `CHECKSUM`
//! files) are skipped; the signature itself is not checked.

use std::collections::HashMap;
use wattio_http::checksum::{from_hex, Algorithm, BLAKE2B_MAX_BYTES};

/// One checksum line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SumEntry {
    /// The file name as written (unescaped, a leading `./` removed).
    pub name: String,
    pub algo: Algorithm,
    /// The digest, big-endian (as the tools print it by default).
    pub digest: Vec<u8>,
    /// 1-based line number.
    pub line: usize,
}

/// A parsed checksum file.
#[derive(Debug, Clone, Default)]
pub(crate) struct SumsFile {
    pub entries: Vec<SumEntry>,
    /// 1-based numbers of lines that are neither checksums, comments nor PGP armour.
    pub malformed: Vec<usize>,
    by_name: HashMap<String, usize>,
}

/// The algorithm a checksum file's name announces (`SHA256SUMS`, `files.md5`, `x.xxh128`,
/// `B2SUMS`); for BLAKE2b the length is `b2sum`'s default, and each line's digest gives its
/// own (see [`algorithm_for_length`]). `Err` for a BLAKE2 variant `b2sum` does not write.
pub(crate) fn algorithm_hint(file_name: &str) -> Result<Option<Algorithm>, String> {
    let n = file_name
        .rsplit('/')
        .next()
        .unwrap_or(file_name)
        .to_ascii_lowercase();
    if n.contains("blake2s") || n.contains("b2ssum") {
        return Err(format!(
            "{file_name}: BLAKE2s checksums are not supported (b2sum writes BLAKE2b); use a BLAKE2b, SHA-256, SHA-512, MD5 or xxHash file"
        ));
    }
    if n.contains("b2sum") || n.contains("blake2") || n.starts_with("b2") || n.ends_with(".b2") {
        return Ok(Some(Algorithm::Blake2b(BLAKE2B_MAX_BYTES)));
    }
    // longer names first: "xxh32" contains "xxh3", "sha512" is not "sha5"
    let table = [
        ("xxh128", Algorithm::Xxh128),
        ("xxh32", Algorithm::Xxh32),
        ("xxh64", Algorithm::Xxh64),
        ("xxh3", Algorithm::Xxh3_64),
        ("sha224", Algorithm::Sha224),
        ("sha256", Algorithm::Sha256),
        ("sha384", Algorithm::Sha384),
        ("sha512", Algorithm::Sha512),
        ("sha1", Algorithm::Sha1),
        ("md5", Algorithm::Md5),
    ];
    Ok(table.iter().find(|(k, _)| n.contains(k)).map(|&(_, a)| a))
}

/// The algorithm of a bare hex digest of `hex_len` digits: what the name announces, else the
/// tool that writes digests of that length (16 digits: `xxhsum`'s default XXH64; 32: MD5).
/// BLAKE2b digests have any length `b2sum -l` gives, so its length is the digest's.
fn algorithm_for_length(hex_len: usize, hint: Option<Algorithm>) -> Option<Algorithm> {
    match hint {
        Some(Algorithm::Blake2b(_)) if hex_len % 2 == 0 => return Algorithm::blake2b(hex_len / 2),
        Some(a) => return (a.digest_len() * 2 == hex_len).then_some(a),
        None => {}
    }
    Some(match hex_len {
        8 => Algorithm::Xxh32,
        16 => Algorithm::Xxh64,
        32 => Algorithm::Md5,
        40 => Algorithm::Sha1,
        56 => Algorithm::Sha224,
        64 => Algorithm::Sha256,
        96 => Algorithm::Sha384,
        128 => Algorithm::Sha512,
        _ => return None,
    })
}

/// Undoes coreutils' escaping of a name on a line that starts with `\`.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    Some(out)
}

fn clean_name(name: &str) -> String {
    let mut n = name;
    while let Some(rest) = n.strip_prefix("./") {
        n = rest;
    }
    n.to_string()
}

/// Why a line is not a checksum line; `Unsupported` is an error of the whole file.
enum LineError {
    NotAChecksum,
    Unsupported(String),
}

/// Parses one line (without its end of line).
fn parse_line(
    raw: &str,
    hint: Option<Algorithm>,
) -> Result<(String, Algorithm, Vec<u8>), LineError> {
    let (escaped, line) = match raw.strip_prefix('\\') {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let name = |n: &str| -> Result<String, LineError> {
        let n = if escaped {
            unescape(n).ok_or(LineError::NotAChecksum)?
        } else {
            n.to_string()
        };
        if n.is_empty() {
            return Err(LineError::NotAChecksum);
        }
        Ok(clean_name(&n))
    };
    // BSD style: TAG (name) = HEX
    if let Some((tag, rest)) = line.split_once(" (") {
        if !tag.is_empty()
            && tag
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        {
            if let Some((n, hex)) = rest.rsplit_once(") = ") {
                let Some((algo, le)) = Algorithm::from_tag(tag) else {
                    return Err(LineError::Unsupported(format!(
                        "the {tag} algorithm is not supported (supported: {})",
                        supported()
                    )));
                };
                let mut digest = from_hex(hex.trim_end()).ok_or(LineError::NotAChecksum)?;
                if digest.len() != algo.digest_len() {
                    return Err(LineError::NotAChecksum);
                }
                if le {
                    digest.reverse();
                }
                return Ok((name(n)?, algo, digest));
            }
        }
    }
    // GNU style: HEX, one space, then ' ' (text) or '*' (binary) and the name; a single space
    // (what `md5 -r` writes) is read as text mode
    let (hex, rest) = line.split_once(' ').ok_or(LineError::NotAChecksum)?;
    let n = rest
        .strip_prefix(' ')
        .or_else(|| rest.strip_prefix('*'))
        .unwrap_or(rest);
    let (hex, algo) = match hex.strip_prefix("XXH3_") {
        Some(h) => (h, Some(Algorithm::Xxh3_64)),
        None => (hex, None),
    };
    if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(LineError::NotAChecksum);
    }
    let algo = match algo {
        Some(a) if a.digest_len() * 2 == hex.len() => a,
        Some(_) => return Err(LineError::NotAChecksum),
        None => algorithm_for_length(hex.len(), hint).ok_or_else(|| {
            LineError::Unsupported(match hint {
                Some(Algorithm::Blake2b(_)) => format!(
                    "a {}-digit digest where the file name announces BLAKE2b (an even number of digits, at most 128)",
                    hex.len()
                ),
                Some(h) => format!(
                    "a {}-digit digest where the file name announces {h} ({} digits)",
                    hex.len(),
                    h.digest_len() * 2
                ),
                None => format!("no supported algorithm has {}-digit digests", hex.len()),
            })
        })?,
    };
    let digest = from_hex(hex).ok_or(LineError::NotAChecksum)?;
    Ok((name(n)?, algo, digest))
}

fn supported() -> String {
    Algorithm::ALL
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl SumsFile {
    /// Parses a checksum file; `source` names it in errors and its file name may announce the
    /// algorithm (see [`algorithm_hint`]).
    pub fn parse(text: &str, source: &str) -> Result<SumsFile, String> {
        let hint = algorithm_hint(source)?;
        let mut out = SumsFile::default();
        let mut in_signature = false;
        let mut in_armour_header = false;
        for (i, raw) in text.split('\n').enumerate() {
            let lineno = i + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if in_signature {
                in_signature = line != "-----END PGP SIGNATURE-----";
                continue;
            }
            if in_armour_header {
                // "Hash: SHA256" lines up to the blank line that ends the armour header
                in_armour_header = !line.trim().is_empty();
                continue;
            }
            match line {
                "-----BEGIN PGP SIGNED MESSAGE-----" => {
                    in_armour_header = true;
                    continue;
                }
                "-----BEGIN PGP SIGNATURE-----" => {
                    in_signature = true;
                    continue;
                }
                _ => {}
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(line, hint) {
                Ok((name, algo, digest)) => {
                    if let Some(&prev) = out.by_name.get(&name) {
                        let p = &out.entries[prev];
                        if p.algo == algo && p.digest != digest {
                            return Err(format!(
                                "{source}: lines {} and {lineno} give different {algo} checksums for {name}",
                                p.line
                            ));
                        }
                        // a second algorithm for the same file: keep the first
                        continue;
                    }
                    out.by_name.insert(name.clone(), out.entries.len());
                    out.entries.push(SumEntry {
                        name,
                        algo,
                        digest,
                        line: lineno,
                    });
                }
                Err(LineError::Unsupported(why)) => {
                    return Err(format!("{source}: line {lineno}: {why}"));
                }
                Err(LineError::NotAChecksum) => out.malformed.push(lineno),
            }
        }
        if out.entries.is_empty() {
            return Err(format!(
                "{source}: no checksum lines (expected `HEX  NAME` as sha256sum/md5sum/xxhsum write them, or `SHA256 (NAME) = HEX`)"
            ));
        }
        Ok(out)
    }

    /// The index in `entries` of the first of `names` that the file lists.
    pub fn lookup<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Option<usize> {
        names
            .into_iter()
            .find_map(|n| self.by_name.get(&clean_name(n)))
            .copied()
    }

    /// The algorithms the file uses, sorted.
    pub fn algorithms(&self) -> Vec<Algorithm> {
        let mut v: Vec<Algorithm> = self.entries.iter().map(|e| e.algo).collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_http::checksum::to_hex;

    fn names_and_algorithms(s: &SumsFile) -> Vec<(&str, Algorithm)> {
        s.entries
            .iter()
            .map(|e| (e.name.as_str(), e.algo))
            .collect()
    }

    const ABC256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn gnu_text_binary_and_escaped_lines() {
        // as `sha256sum`, `sha256sum -b` and `sha256sum` of a name with a newline write them
        let text = format!(
            "{ABC256}  a b.bin\n{ABC256} *dir/c.bin\n\\{ABC256}  n\\nl\\\\x\n{ABC256}  ./d.bin\r\n\n# note\n"
        );
        let s = SumsFile::parse(&text, "https://h/SHA256SUMS").unwrap();
        let names: Vec<&str> = s.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a b.bin", "dir/c.bin", "n\nl\\x", "d.bin"]);
        assert!(s.entries.iter().all(|e| e.algo == Algorithm::Sha256));
        assert_eq!(to_hex(&s.entries[0].digest), ABC256);
        assert_eq!(
            s.entries[s.lookup(["nope", "./dir/c.bin"]).unwrap()].line,
            2
        );
        assert!(s.malformed.is_empty());
    }

    #[test]
    fn bsd_tags_and_xxhsum_formats() {
        // `sha512sum --tag`, `md5sum --tag`, `xxhsum -H3` (0.8.1), `xxhsum -H1 --little-endian
        // --tag`, xxhsum 0.8.2's `XXH3_` GNU lines, and a name containing ") = "
        let text = "SHA512 (x) = ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f\n\
                    MD5 (odd) = name) = 900150983cd24fb0d6963f7d28e17f72\n\
                    XXH3 (a b) = 78af5f94892f3950\n\
                    XXH64_LE (le) = 990977adf52cbc44\n\
                    XXH3_78af5f94892f3950  gnu3\n\
                    \\SHA256 (n\\nl) = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n";
        let s = SumsFile::parse(text, "CHECKSUM").unwrap();
        assert_eq!(
            names_and_algorithms(&s),
            [
                ("x", Algorithm::Sha512),
                ("odd) = name", Algorithm::Md5),
                ("a b", Algorithm::Xxh3_64),
                ("le", Algorithm::Xxh64),
                ("gnu3", Algorithm::Xxh3_64),
                ("n\nl", Algorithm::Sha256),
            ]
        );
        // little-endian digests are stored big-endian
        assert_eq!(to_hex(&s.entries[3].digest), "44bc2cf5ad770999");
        assert_eq!(
            s.algorithms(),
            [
                Algorithm::Md5,
                Algorithm::Sha256,
                Algorithm::Sha512,
                Algorithm::Xxh64,
                Algorithm::Xxh3_64
            ]
        );
    }

    #[test]
    fn algorithm_from_length_or_file_name() {
        let md5ish = "06b05ab6733a618578af5f94892f3950  f\n";
        assert_eq!(
            SumsFile::parse(md5ish, "MD5SUMS").unwrap().entries[0].algo,
            Algorithm::Md5
        );
        assert_eq!(
            SumsFile::parse(md5ish, "data.xxh128").unwrap().entries[0].algo,
            Algorithm::Xxh128
        );
        assert_eq!(
            SumsFile::parse("32d153ff  f\n", "sums.xxh32")
                .unwrap()
                .entries[0]
                .algo,
            Algorithm::Xxh32
        );
        assert_eq!(
            SumsFile::parse("44bc2cf5ad770999  f\n", "list")
                .unwrap()
                .entries[0]
                .algo,
            Algorithm::Xxh64
        );
        let e = SumsFile::parse(md5ish, "SHA256SUMS").unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("announces sha256"),
            "{e}"
        );
        let e = SumsFile::parse("BLAKE2s (f) = 00\n", "sums").unwrap_err();
        assert!(e.contains("BLAKE2s algorithm is not supported"), "{e}");
        let e = SumsFile::parse(md5ish, "files.blake2s").unwrap_err();
        assert!(e.contains("BLAKE2s checksums are not supported"), "{e}");
        let e = SumsFile::parse("abcde  f\n", "sums").unwrap_err();
        assert!(e.contains("5-digit"), "{e}");
    }

    // what `b2sum abc`, `b2sum -l 256 abc`, `b2sum -l 8 abc` and their `--tag` forms print
    // (GNU coreutils 9.1); the first is RFC 7693 appendix A's BLAKE2b-512 of "abc"
    const B2_512: &str = "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923";
    const B2_256: &str = "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319";

    #[test]
    fn b2sum_lengths_from_the_digest_or_the_tag() {
        let gnu = format!("{B2_512}  a\n{B2_256}  b\n6b *c\n");
        for name in [
            "B2SUMS",
            "https://h/x/data.b2",
            "files.blake2b",
            "b2sums.txt",
        ] {
            let s = SumsFile::parse(&gnu, name).unwrap();
            assert_eq!(
                names_and_algorithms(&s),
                [
                    ("a", Algorithm::Blake2b(64)),
                    ("b", Algorithm::Blake2b(32)),
                    ("c", Algorithm::Blake2b(1))
                ],
                "{name}"
            );
        }
        // without a name that says BLAKE2b, 128 and 64 digits are SHA-512 and SHA-256, as
        // sha512sum -c and sha256sum -c read them
        let e = SumsFile::parse(&gnu, "sums").unwrap_err();
        assert!(
            e.contains("line 3: no supported algorithm has 2-digit"),
            "{e}"
        );
        let s = SumsFile::parse(&format!("{B2_512}  a\n{B2_256}  b\n"), "sums").unwrap();
        assert_eq!(s.entries[0].algo, Algorithm::Sha512);
        assert_eq!(s.entries[1].algo, Algorithm::Sha256);
        // the tag names the algorithm whatever the file is called
        let tag = format!("BLAKE2b (a) = {B2_512}\nBLAKE2b-256 (b) = {B2_256}\n");
        let s = SumsFile::parse(&tag, "CHECKSUMS").unwrap();
        assert_eq!(
            s.algorithms(),
            [Algorithm::Blake2b(32), Algorithm::Blake2b(64)]
        );
        assert_eq!(to_hex(&s.entries[1].digest), B2_256);
        // a tag whose length and digest disagree is not a checksum line
        let s = SumsFile::parse(&format!("BLAKE2b-256 (a) = {B2_512}\n{tag}"), "x").unwrap();
        assert_eq!(s.malformed, [1]);
        let e = SumsFile::parse(&format!("{B2_512}0  a\n"), "B2SUMS").unwrap_err();
        assert!(e.contains("129-digit") && e.contains("BLAKE2b"), "{e}");
    }

    #[test]
    fn pgp_armour_comments_and_garbage() {
        let text = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n# Fedora: 3 bytes\nSHA256 (f.iso) = {ABC256}\nnot a checksum line\n-----BEGIN PGP SIGNATURE-----\n\nwsFzBAEBCAAdFiEE\n-----END PGP SIGNATURE-----\n"
        );
        let s = SumsFile::parse(&text, "Fedora-CHECKSUM").unwrap();
        assert_eq!(s.entries.len(), 1);
        assert_eq!(s.entries[0].name, "f.iso");
        assert_eq!(s.malformed, [6]);
        let e = SumsFile::parse("<html>hello</html>\n", "https://h/SHA256SUMS").unwrap_err();
        assert!(e.contains("no checksum lines"), "{e}");
        let conflict = format!("{ABC256}  f\n{}  f\n", "0".repeat(64));
        let e = SumsFile::parse(&conflict, "SHA256SUMS").unwrap_err();
        assert!(e.contains("lines 1 and 2"), "{e}");
    }
}
