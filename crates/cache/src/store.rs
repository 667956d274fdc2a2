//! The on-disk store: one file per object (and one per object's metadata) under `objects/`.
//!
//! Every file is written atomically: a temporary file in the same directory, `fsync`, `rename`
//! over the final name, `fsync` of the directory. Each file starts with a header (magic, payload
//! length, FNV-1a 64 checksum) so a torn or foreign file is recognised. At open the index is
//! rebuilt from the directory: temporary files (an interrupted write) are removed, files whose
//! length disagrees with their header are removed and reported. A crash therefore loses at most
//! the writes still in the cache manager's queue and never leaves a corrupt entry.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"WIO1";
const HEADER: u64 = 4 + 8 + 8;
/// Longest object name in bytes (file names are hex, so twice this plus a suffix).
pub(crate) const MAX_NAME_BYTES: usize = 100;

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Underlying I/O failure, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What the store was doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Empty or too long name.
    #[error("bad object name {0:?}: must be 1..={MAX_NAME_BYTES} bytes")]
    BadName(String),
    /// No such object.
    #[error("no object {0:?} in the cache")]
    NotFound(String),
    /// The file's checksum does not match; the entry has been removed.
    #[error("object {0:?} was corrupt on disk and has been removed (fetch it again)")]
    Corrupt(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let what = what.into();
    move |source| StoreError::Io { what, source }
}

/// FNV-1a 64-bit: a small checksum to recognise torn or foreign files (not cryptographic).
pub(crate) fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What `open` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Objects with data.
    pub objects: usize,
    /// Objects with metadata.
    pub metadata: usize,
    /// Temporary files of interrupted writes that were removed.
    pub removed_temp: usize,
    /// Files with a bad header or length that were removed.
    pub removed_corrupt: Vec<String>,
}

/// Index entry rebuilt at open: data size and whether metadata exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredEntry {
    /// Payload size of the data file, if the object has data.
    pub size: Option<u64>,
    /// Whether a metadata file exists.
    pub has_meta: bool,
}

/// The file-system store.
#[derive(Debug)]
pub struct FsStore {
    dir: PathBuf,
}

fn encode(name: &str) -> Result<String, StoreError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(StoreError::BadName(name.to_string()));
    }
    Ok(name.bytes().map(|b| format!("{b:02x}")).collect())
}

fn decode(hex: &str) -> Option<String> {
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[derive(Clone, Copy)]
enum Kind {
    Data,
    Meta,
}

impl Kind {
    fn ext(self) -> &'static str {
        match self {
            Kind::Data => "d",
            Kind::Meta => "m",
        }
    }
}

impl FsStore {
    /// Open (creating if needed) the store under `root` and rebuild the index from disk.
    pub fn open(
        root: &Path,
    ) -> Result<(FsStore, HashMap<String, StoredEntry>, RebuildReport), StoreError> {
        let dir = root.join("objects");
        fs::create_dir_all(&dir).map_err(io(format!(
            "cannot create cache directory {}",
            dir.display()
        )))?;
        let store = FsStore { dir };
        let mut index: HashMap<String, StoredEntry> = HashMap::new();
        let mut rep = RebuildReport::default();
        let rd =
            fs::read_dir(&store.dir).map_err(io(format!("cannot list {}", store.dir.display())))?;
        for ent in rd {
            let ent = ent.map_err(io(format!("cannot list {}", store.dir.display())))?;
            let fname = ent.file_name().to_string_lossy().into_owned();
            let path = ent.path();
            if wattio_files::is_temporary(&fname) {
                fs::remove_file(&path).map_err(io(format!(
                    "cannot remove stale temporary file {}",
                    path.display()
                )))?;
                rep.removed_temp += 1;
                continue;
            }
            let (stem, kind) = match fname.rsplit_once('.') {
                Some((s, "d")) => (s, Kind::Data),
                Some((s, "m")) => (s, Kind::Meta),
                _ => continue, // not ours: leave it alone
            };
            let Some(name) = decode(stem) else { continue };
            match Self::check_header(&path) {
                Ok(Some(len)) => {
                    let e = index.entry(name).or_insert(StoredEntry {
                        size: None,
                        has_meta: false,
                    });
                    match kind {
                        Kind::Data => e.size = Some(len),
                        Kind::Meta => e.has_meta = true,
                    }
                }
                Ok(None) => {
                    fs::remove_file(&path)
                        .map_err(io(format!("cannot remove corrupt file {}", path.display())))?;
                    rep.removed_corrupt.push(fname);
                }
                Err(e) => return Err(e),
            }
        }
        if rep.removed_temp > 0 || !rep.removed_corrupt.is_empty() {
            store.sync_dir()?;
        }
        index.retain(|_, e| e.size.is_some() || e.has_meta);
        rep.objects = index.values().filter(|e| e.size.is_some()).count();
        rep.metadata = index.values().filter(|e| e.has_meta).count();
        Ok((store, index, rep))
    }

    /// Payload length if the header is sane and the file length matches it.
    fn check_header(path: &Path) -> Result<Option<u64>, StoreError> {
        let mut f = File::open(path).map_err(io(format!("cannot open {}", path.display())))?;
        let flen = f
            .metadata()
            .map_err(io(format!("cannot stat {}", path.display())))?
            .len();
        let mut h = [0u8; HEADER as usize];
        if flen < HEADER || f.read_exact(&mut h).is_err() || &h[0..4] != MAGIC {
            return Ok(None);
        }
        let len = u64::from_le_bytes(h[4..12].try_into().expect("8 bytes"));
        Ok((flen == HEADER + len).then_some(len))
    }

    fn path(&self, name: &str, kind: Kind) -> Result<PathBuf, StoreError> {
        Ok(self.dir.join(format!("{}.{}", encode(name)?, kind.ext())))
    }

    fn sync_dir(&self) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(format!("cannot fsync directory {}", self.dir.display())))
    }

    fn write_atomic(&self, name: &str, kind: Kind, payload: &[u8]) -> Result<(), StoreError> {
        let dst = self.path(name, kind)?;
        wattio_files::write_atomically(&dst, |w| {
            w.write_all(MAGIC)?;
            w.write_all(&(payload.len() as u64).to_le_bytes())?;
            w.write_all(&fnv1a64(payload).to_le_bytes())?;
            w.write_all(payload)
        })
        .map_err(|e| StoreError::Io {
            what: format!("cannot {} {}", e.step, e.path.display()),
            source: e.source,
        })
    }

    fn read_checked(&self, name: &str, kind: Kind) -> Result<Vec<u8>, StoreError> {
        let p = self.path(name, kind)?;
        let buf = match fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(name.to_string()))
            }
            Err(e) => {
                return Err(StoreError::Io {
                    what: format!("cannot read {}", p.display()),
                    source: e,
                })
            }
        };
        let ok = buf.len() as u64 >= HEADER && &buf[0..4] == MAGIC && {
            let len = u64::from_le_bytes(buf[4..12].try_into().expect("8 bytes"));
            let sum = u64::from_le_bytes(buf[12..20].try_into().expect("8 bytes"));
            buf.len() as u64 == HEADER + len && fnv1a64(&buf[HEADER as usize..]) == sum
        };
        if !ok {
            let _ = fs::remove_file(&p);
            return Err(StoreError::Corrupt(name.to_string()));
        }
        Ok(buf[HEADER as usize..].to_vec())
    }

    /// Write an object's data atomically.
    pub fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError> {
        self.write_atomic(name, Kind::Data, data)
    }

    /// Write an object's metadata atomically.
    pub fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError> {
        self.write_atomic(name, Kind::Meta, meta)
    }

    /// Read and verify an object's data.
    pub fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.read_checked(name, Kind::Data)
    }

    /// Read and verify an object's metadata.
    pub fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.read_checked(name, Kind::Meta)
    }

    /// Rename an object (data, then metadata); an existing `new` is replaced.
    pub fn rename(&self, old: &str, new: &str) -> Result<(), StoreError> {
        for kind in [Kind::Data, Kind::Meta] {
            let (a, b) = (self.path(old, kind)?, self.path(new, kind)?);
            match fs::rename(&a, &b) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Nothing of this kind under the old name: make sure the new name has none.
                    let _ = fs::remove_file(&b);
                }
                Err(e) => {
                    return Err(StoreError::Io {
                        what: format!("cannot rename {} to {}", a.display(), b.display()),
                        source: e,
                    })
                }
            }
        }
        self.sync_dir()
    }

    /// Delete an object's data and metadata (absent files are fine).
    pub fn delete(&self, name: &str) -> Result<(), StoreError> {
        for kind in [Kind::Data, Kind::Meta] {
            let p = self.path(name, kind)?;
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StoreError::Io {
                        what: format!("cannot remove {}", p.display()),
                        source: e,
                    })
                }
            }
        }
        self.sync_dir()
    }

    /// The directory holding the object files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Where the cache manager keeps objects: one data blob and one metadata blob per name.
///
/// [`FsStore`] is the durable one; [`MemStore`] keeps everything in memory; the simulator puts a
/// store on a simulated disk, timing every operation from the device profile.
pub trait Store: Send {
    /// Write an object's data.
    fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError>;
    /// Write an object's metadata.
    fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError>;
    /// Read an object's data.
    fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError>;
    /// Read an object's metadata.
    fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError>;
    /// Rename an object (data and metadata); an existing `new` is replaced.
    fn rename(&self, old: &str, new: &str) -> Result<(), StoreError>;
    /// Delete an object's data and metadata (absent ones are fine).
    fn delete(&self, name: &str) -> Result<(), StoreError>;
}

impl Store for FsStore {
    fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError> {
        FsStore::put_data(self, name, data)
    }
    fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError> {
        FsStore::put_meta(self, name, meta)
    }
    fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        FsStore::get_data(self, name)
    }
    fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        FsStore::get_meta(self, name)
    }
    fn rename(&self, old: &str, new: &str) -> Result<(), StoreError> {
        FsStore::rename(self, old, new)
    }
    fn delete(&self, name: &str) -> Result<(), StoreError> {
        FsStore::delete(self, name)
    }
}

/// A store in memory (lost at exit): for caches that need no durability and for simulation.
#[derive(Debug, Default)]
pub struct MemStore {
    objects: std::sync::Mutex<HashMap<String, MemObject>>,
}

#[derive(Debug, Default)]
struct MemObject {
    data: Option<Vec<u8>>,
    meta: Option<Vec<u8>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index a cache manager opening this store starts from.
    pub fn entries(&self) -> HashMap<String, StoredEntry> {
        self.lock()
            .iter()
            .map(|(n, o)| {
                let e = StoredEntry {
                    size: o.data.as_ref().map(|d| d.len() as u64),
                    has_meta: o.meta.is_some(),
                };
                (n.clone(), e)
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, MemObject>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(
        &self,
        name: &str,
        pick: fn(&MemObject) -> &Option<Vec<u8>>,
    ) -> Result<Vec<u8>, StoreError> {
        self.lock()
            .get(name)
            .and_then(|o| pick(o).clone())
            .ok_or_else(|| StoreError::NotFound(name.to_string()))
    }
}

impl Store for MemStore {
    fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError> {
        check_name(name)?;
        self.lock().entry(name.to_string()).or_default().data = Some(data.to_vec());
        Ok(())
    }
    fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError> {
        check_name(name)?;
        self.lock().entry(name.to_string()).or_default().meta = Some(meta.to_vec());
        Ok(())
    }
    fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.get(name, |o| &o.data)
    }
    fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.get(name, |o| &o.meta)
    }
    fn rename(&self, old: &str, new: &str) -> Result<(), StoreError> {
        check_name(new)?;
        let mut g = self.lock();
        let o = g.remove(old).unwrap_or_default();
        g.insert(new.to_string(), o);
        Ok(())
    }
    fn delete(&self, name: &str) -> Result<(), StoreError> {
        self.lock().remove(name);
        Ok(())
    }
}

/// Check that `name` is a valid object name (1..=[`MAX_NAME_BYTES`] bytes).
pub(crate) fn check_name(name: &str) -> Result<(), StoreError> {
    encode(name).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_rebuild() {
        let d = tempfile::tempdir().unwrap();
        let (s, idx, rep) = FsStore::open(d.path()).unwrap();
        assert!(idx.is_empty());
        assert_eq!(rep, RebuildReport::default());
        s.put_data("a/b c", b"hello").unwrap();
        s.put_meta("a/b c", b"Content-Type: text/plain").unwrap();
        s.put_data("x", b"").unwrap();
        s.rename("x", "y").unwrap();
        assert_eq!(s.get_data("a/b c").unwrap(), b"hello");
        drop(s);
        let (s, idx, rep) = FsStore::open(d.path()).unwrap();
        assert_eq!(rep.objects, 2);
        assert_eq!(rep.metadata, 1);
        assert_eq!(
            idx["a/b c"],
            StoredEntry {
                size: Some(5),
                has_meta: true
            }
        );
        assert_eq!(
            idx["y"],
            StoredEntry {
                size: Some(0),
                has_meta: false
            }
        );
        assert!(!idx.contains_key("x"));
        s.delete("a/b c").unwrap();
        assert!(matches!(s.get_data("a/b c"), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn stale_temp_and_torn_files_are_removed_at_open() {
        let d = tempfile::tempdir().unwrap();
        let (s, _, _) = FsStore::open(d.path()).unwrap();
        s.put_data("good", b"0123456789").unwrap();
        let dir = s.dir().to_path_buf();
        drop(s);
        fs::write(dir.join(".tmp.6162.d.1.0"), b"half a wri").unwrap();
        // A torn file: header says 10 bytes, only 3 present.
        let mut torn = Vec::new();
        torn.extend_from_slice(MAGIC);
        torn.extend_from_slice(&10u64.to_le_bytes());
        torn.extend_from_slice(&0u64.to_le_bytes());
        torn.extend_from_slice(b"abc");
        fs::write(dir.join(format!("{}.d", encode("torn").unwrap())), torn).unwrap();
        fs::write(dir.join("README"), b"not ours").unwrap();
        let (_s, idx, rep) = FsStore::open(d.path()).unwrap();
        assert_eq!(rep.removed_temp, 1);
        assert_eq!(rep.removed_corrupt.len(), 1);
        assert_eq!(idx.len(), 1);
        assert!(dir.join("README").exists());
    }

    #[test]
    fn bit_flip_is_detected_on_read_and_entry_removed() {
        let d = tempfile::tempdir().unwrap();
        let (s, _, _) = FsStore::open(d.path()).unwrap();
        s.put_data("o", b"payload!").unwrap();
        let p = s.dir().join(format!("{}.d", encode("o").unwrap()));
        let mut b = fs::read(&p).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0x40;
        fs::write(&p, b).unwrap();
        assert!(matches!(s.get_data("o"), Err(StoreError::Corrupt(_))));
        assert!(!p.exists());
    }

    #[test]
    fn bad_names_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let (s, _, _) = FsStore::open(d.path()).unwrap();
        assert!(matches!(s.put_data("", b"x"), Err(StoreError::BadName(_))));
        assert!(matches!(
            s.put_data(&"n".repeat(101), b"x"),
            Err(StoreError::BadName(_))
        ));
    }

    #[test]
    fn fnv_known_values() {
        // Published FNV-1a 64 test vectors: "" and "a".
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
