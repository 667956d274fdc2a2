//! The JSON dataset listing served at [`LISTING_PATH`] (paths, sizes, XXH3-64 checksums).

use crate::{checksum, jail};
use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
pub fn is_safe_relative(p: &str) -> bool {
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
            let md = match std::fs::metadata(&real) {
                Ok(m) => m,
                Err(_) => continue, // gone meanwhile
            };
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

/// Most files whose checksums a [`ListingCache`] keeps (a bound on its memory whatever the
/// tree holds: past it, the cache starts over).
const MAX_CACHED_FILES: usize = 4 << 20;
/// Listings hashed at once: each reads files on a blocking thread of its own.
const BUILDERS: usize = 2;

/// A file's checksums and the `(size, mtime, inode)` they were taken at.
type CachedSums = (u64, SystemTime, u64, checksum::FileDigests);

/// A listing being built, shared by every request that asks for its subtree meanwhile.
type Building = Arc<tokio::sync::OnceCell<Result<Arc<Vec<u8>>, String>>>;

/// Builds the listings of one served tree. Checksums are cached by (path, size, mtime,
/// inode), so a repeated request hashes only files that changed, and forgotten for files no
/// longer in the tree; concurrent requests for one subtree share one build (hashing reads
/// the dataset once, not once per request), and at most [`BUILDERS`] builds run at once.
pub(crate) struct ListingCache {
    /// The served root, canonical, and a descriptor of it: files are opened beneath it
    /// without following links.
    root: PathBuf,
    root_fd: OwnedFd,
    sums: Mutex<HashMap<PathBuf, CachedSums>>,
    building: Mutex<HashMap<PathBuf, Building>>,
    builders: tokio::sync::Semaphore,
}

impl ListingCache {
    /// A cache for the tree under `root`.
    pub fn new(root: &Path) -> std::io::Result<ListingCache> {
        let root = root.canonicalize()?;
        let root_fd = std::fs::File::open(&root)?.into();
        Ok(ListingCache {
            root,
            root_fd,
            sums: Mutex::new(HashMap::new()),
            building: Mutex::new(HashMap::new()),
            builders: tokio::sync::Semaphore::new(BUILDERS),
        })
    }

    /// The listing of the subtree `dir` (a canonical directory under the root), serialised,
    /// built once for all the requests that ask for it while it is built.
    pub async fn body(self: &Arc<Self>, dir: PathBuf) -> Result<Arc<Vec<u8>>, String> {
        let cell = self
            .building
            .lock()
            .unwrap()
            .entry(dir.clone())
            .or_default()
            .clone();
        let r = cell
            .get_or_init(|| async {
                let built = match self.builders.acquire().await {
                    Ok(_permit) => {
                        let me = self.clone();
                        let d = dir.clone();
                        tokio::task::spawn_blocking(move || me.build(&d))
                            .await
                            .map_err(|e| format!("listing task failed: {e}"))
                            .and_then(|r| r.map_err(|e| e.to_string()))
                            .map(|l| Arc::new(serde_json::to_vec(&l).expect("listing serializes")))
                    }
                    Err(_) => Err("the server is stopping".to_string()),
                };
                // later requests build anew, so the listing stays current
                let mut b = self.building.lock().unwrap();
                if b.get(&dir).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                    b.remove(&dir);
                }
                built
            })
            .await;
        r.clone()
    }

    /// The listing of the tree under `dir` (the root or a directory under it), with
    /// checksums.
    pub fn build(&self, dir: &Path) -> std::io::Result<Listing> {
        let files = scan(dir)?;
        let canon_dir = dir.canonicalize()?;
        let mut entries = Vec::with_capacity(files.len());
        let mut total: u64 = 0;
        let mut seen = std::collections::HashSet::with_capacity(files.len());
        for (rel, real, size, mtime) in files {
            let Some((size, sum)) = self.sums_of(&real, size, mtime)? else {
                continue; // gone, or no longer a regular file
            };
            seen.insert(real);
            total = total.saturating_add(size);
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
        // forget the files of this subtree that are gone
        let mut m = self.sums.lock().unwrap();
        m.retain(|p, _| !p.starts_with(&canon_dir) || seen.contains(p));
        Ok(Listing {
            format: LISTING_FORMAT.into(),
            checksum: checksum::ALGORITHM.into(),
            total_bytes: total,
            files: entries,
        })
    }

    /// The size and checksums of the file at `real` (canonical, under the root), from the
    /// cache when its size, mtime and inode are the cached ones; `None` when it is gone or no
    /// longer a regular file. A file that changes while it is hashed is listed with the bytes
    /// hashed and not cached.
    fn sums_of(
        &self,
        real: &Path,
        size: u64,
        mtime: SystemTime,
    ) -> std::io::Result<Option<(u64, checksum::FileDigests)>> {
        let Ok(rel) = real.strip_prefix(&self.root) else {
            return Ok(None);
        };
        let Some(rel) = rel.to_str() else {
            return Ok(None);
        };
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        let fd = match jail::open_beneath(self.root_fd.as_fd(), rel, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || jail::is_link_error(&e) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let file = std::fs::File::from(fd);
        let md = file.metadata()?;
        if !md.is_file() {
            return Ok(None);
        }
        let ino = std::os::unix::fs::MetadataExt::ino(&md);
        let key = (md.len(), md.modified()?, ino);
        let cached = {
            let m = self.sums.lock().unwrap();
            m.get(real)
                .filter(|(s, t, i, _)| (*s, *t, *i) == key)
                .map(|(_, _, _, h)| h.clone())
        };
        if let Some(h) = cached {
            return Ok(Some((key.0, h)));
        }
        let (h, hashed) = checksum::file_digests(&file, checksum::BLOCK_SIZE)?;
        let after = file.metadata()?;
        let unchanged = hashed == key.0 && (after.len(), after.modified()?) == (key.0, key.1);
        if unchanged && (key.0, key.1) == (size, mtime) {
            let mut m = self.sums.lock().unwrap();
            if m.len() >= MAX_CACHED_FILES {
                m.clear();
            }
            m.insert(real.to_path_buf(), (key.0, key.1, key.2, h.clone()));
        }
        Ok(Some((hashed, h)))
    }
}

/// Writes `root/.wattio/listing.json` (for serving a dataset with another server, e.g. nginx).
pub fn write_listing(root: &Path) -> std::io::Result<PathBuf> {
    let l = ListingCache::new(root)?.build(root)?;
    let dir = root.join(".wattio");
    std::fs::create_dir_all(&dir)?;
    let p = dir.join("listing.json");
    let body = serde_json::to_vec_pretty(&l).expect("listing serializes");
    wattio_files::write_atomically(&p, |w| w.write_all(&body))?;
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
        let l = ListingCache::new(d.path())
            .unwrap()
            .build(d.path())
            .unwrap();
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

    /// The checksum cache holds the files of the tree and no others: a file deleted is
    /// forgotten at the next listing of its subtree.
    #[test]
    fn the_checksum_cache_forgets_files_that_are_gone() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/a"), b"a").unwrap();
        std::fs::write(d.path().join("sub/b"), b"b").unwrap();
        let c = ListingCache::new(d.path()).unwrap();
        assert_eq!(c.build(d.path()).unwrap().files.len(), 2);
        assert_eq!(c.sums.lock().unwrap().len(), 2);
        std::fs::remove_file(d.path().join("sub/a")).unwrap();
        assert_eq!(c.build(&d.path().join("sub")).unwrap().files.len(), 1);
        assert_eq!(c.sums.lock().unwrap().len(), 1);
    }

    /// A file cut short after the tree was scanned is listed with the bytes hashed (its size
    /// and digest agree), not cached, and does not take the server down (a mapping of it
    /// would fault with SIGBUS).
    #[test]
    fn a_file_truncated_while_listed_is_listed_as_hashed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 3 << 20]).unwrap();
        let c = ListingCache::new(d.path()).unwrap();
        let real = p.canonicalize().unwrap();
        let md = std::fs::metadata(&p).unwrap();
        // scanned at 3 MiB, then cut to 1000 bytes before hashing
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(1000)
            .unwrap();
        let (size, sums) = c
            .sums_of(&real, md.len(), md.modified().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(size, 1000);
        assert_eq!(sums.whole, checksum::bytes_xxh3(&[7u8; 1000]));
        assert!(c.sums.lock().unwrap().is_empty());
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
