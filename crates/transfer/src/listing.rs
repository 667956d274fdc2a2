//! The JSON dataset listing served at [`LISTING_PATH`] (paths, sizes, XXH3-64 checksums).

use crate::checksum;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// URL path (relative to the served root) of the listing of the whole tree.
pub const LISTING_PATH: &str = ".wattio/listing.json";
/// Value of the `format` field.
pub(crate) const LISTING_FORMAT: &str = "wattio-listing/1";

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedFile {
    /// Relative path, `/`-separated, not percent-encoded.
    pub path: String,
    pub size: u64,
    /// XXH3-64 as 16 hex digits, when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xxh3: Option<String>,
    /// XXH3-64 of each block, for files larger than one block.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub blocks: Option<ListedBlocks>,
}

/// Per-block checksums of a file: `xxh3[i]` covers bytes `[i*size, (i+1)*size)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedBlocks {
    pub size: u64,
    pub xxh3: Vec<String>,
}

/// A dataset listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub format: String,
    pub checksum: String,
    pub total_bytes: u64,
    pub files: Vec<ListedFile>,
}

impl Listing {
    /// Parses and checks a listing document.
    pub fn parse(body: &[u8]) -> Result<Listing, String> {
        let l: Listing = serde_json::from_slice(body)
            .map_err(|e| format!("not a wattio listing ({e}); expected format {LISTING_FORMAT}"))?;
        if l.format != LISTING_FORMAT {
            return Err(format!(
                "unsupported listing format `{}`; expected {LISTING_FORMAT}",
                l.format.escape_debug()
            ));
        }
        for e in &l.files {
            if !is_safe_relative(&e.path) {
                return Err(format!(
                    "listing entry `{}` is not a safe relative path; refusing it",
                    e.path.escape_debug()
                ));
            }
            if let Some(b) = &e.blocks {
                let count_ok = b.size > 0 && b.xxh3.len() as u64 == e.size.div_ceil(b.size);
                if !count_ok || b.xxh3.iter().any(|h| checksum::parse_digest(h).is_none()) {
                    return Err(format!(
                        "listing entry `{}`: its block checksums do not cover its {} bytes in {}-byte blocks of 16 hex digits",
                        e.path.escape_debug(), e.size, b.size
                    ));
                }
            }
        }
        Ok(l)
    }
}

/// Whether a listing path is relative and stays inside its base (no `..`, no absolute, no NUL).
pub(crate) fn is_safe_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && !p.contains('\\')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Walks `root` and returns the regular files inside it (symlinks are followed only when they
/// resolve inside the root), sorted by path, skipping the `.wattio` directory.
pub(crate) fn scan(root: &Path) -> std::io::Result<Vec<(String, PathBuf, u64, SystemTime)>> {
    let canon = root.canonicalize()?;
    let mut out = Vec::new();
    let mut stack = vec![(canon.clone(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        for ent in std::fs::read_dir(&dir)? {
            let ent = ent?;
            let name = match ent.file_name().into_string() {
                Ok(n) => n,
                Err(_) => continue, // non-UTF-8 names cannot be put in a JSON listing
            };
            if rel.is_empty() && name == ".wattio" {
                continue;
            }
            let path = ent.path();
            let real = match path.canonicalize() {
                Ok(r) => r,
                Err(_) => continue, // dangling symlink
            };
            if !real.starts_with(&canon) {
                continue; // symlink leading out of the served tree
            }
            let md = std::fs::metadata(&real)?;
            let relp = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if md.is_dir() {
                if ent.file_type()?.is_symlink() {
                    continue; // avoid loops through directory symlinks
                }
                stack.push((path, relp));
            } else if md.is_file() {
                out.push((relp, real, md.len(), md.modified()?));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Builds listings and caches checksums by (path, size, mtime), so a repeated listing request
/// hashes only files that changed.
#[derive(Default)]
pub(crate) struct ListingCache {
    sums: Mutex<HashMap<PathBuf, (u64, SystemTime, checksum::FileDigests)>>,
}

impl ListingCache {
    /// The listing of the tree under `root`, with checksums.
    pub fn build(&self, root: &Path) -> std::io::Result<Listing> {
        let files = scan(root)?;
        let mut entries = Vec::with_capacity(files.len());
        let mut total = 0;
        for (rel, real, size, mtime) in files {
            let cached = {
                let m = self.sums.lock().unwrap();
                m.get(&real)
                    .filter(|(s, t, _)| *s == size && *t == mtime)
                    .map(|(_, _, h)| h.clone())
            };
            let sum = match cached {
                Some(h) => h,
                None => {
                    let h = checksum::file_digests(&real, checksum::BLOCK_SIZE)?;
                    self.sums
                        .lock()
                        .unwrap()
                        .insert(real.clone(), (size, mtime, h.clone()));
                    h
                }
            };
            total += size;
            entries.push(ListedFile {
                path: rel,
                size,
                xxh3: Some(sum.whole),
                blocks: sum.blocks.map(|xxh3| ListedBlocks {
                    size: checksum::BLOCK_SIZE,
                    xxh3,
                }),
            });
        }
        Ok(Listing {
            format: LISTING_FORMAT.into(),
            checksum: checksum::ALGORITHM.into(),
            total_bytes: total,
            files: entries,
        })
    }
}

/// Writes `root/.wattio/listing.json` (for serving a dataset with another server, e.g. nginx).
pub fn write_listing(root: &Path) -> std::io::Result<PathBuf> {
    let l = ListingCache::default().build(root)?;
    let dir = root.join(".wattio");
    std::fs::create_dir_all(&dir)?;
    let p = dir.join("listing.json");
    let tmp = dir.join("listing.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&l).expect("listing serializes"),
    )?;
    std::fs::rename(&tmp, &p)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_paths() {
        assert!(is_safe_relative("a/b.bin"));
        assert!(!is_safe_relative("../x"));
        assert!(!is_safe_relative("a/../../x"));
        assert!(!is_safe_relative("/etc/passwd"));
        assert!(!is_safe_relative("a//b"));
        assert!(!is_safe_relative(""));
    }

    #[test]
    fn scan_lists_files_skips_escaping_symlinks_and_hashes() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b"), b"bb").unwrap();
        std::fs::write(d.path().join("a"), b"a").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.path().join("leak")).unwrap();
        std::os::unix::fs::symlink(d.path().join("a"), d.path().join("alias")).unwrap();
        let l = ListingCache::default().build(d.path()).unwrap();
        let paths: Vec<_> = l.files.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, vec!["a", "alias", "sub/b"]);
        assert_eq!(l.total_bytes, 4);
        assert_eq!(
            l.files[2].xxh3.as_deref(),
            Some(checksum::bytes_xxh3(b"bb").as_str())
        );
        let back = Listing::parse(&serde_json::to_vec(&l).unwrap()).unwrap();
        assert_eq!(back, l);
    }

    #[test]
    fn parse_rejects_escaping_entries() {
        let body = br#"{"format":"wattio-listing/1","checksum":"xxh3-64","total_bytes":1,
            "files":[{"path":"../../etc/passwd","size":1}]}"#;
        assert!(Listing::parse(body).unwrap_err().contains("safe relative"));
        assert!(Listing::parse(b"<html>").is_err());
        let short = br#"{"format":"wattio-listing/1","checksum":"xxh3-64","total_bytes":3000,
            "files":[{"path":"a","size":3000,"blocks":{"size":1000,"xxh3":["0123456789abcdef"]}}]}"#;
        assert!(Listing::parse(short)
            .unwrap_err()
            .contains("block checksums"));
    }
}
