//! Page-cache state of an input file, set explicitly before each run, without root.
//!
//! Cold: `fdatasync` then `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file (what fio's
//! default `invalidate=1` does for regular files). Warm: read the file once. Residency is checked
//! with `mincore(2)` so every run records how cold or warm it really started.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Page-cache state wanted before each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Evict the file before each run.
    Cold,
    /// Pre-read the file before each run.
    Warm,
}

impl CacheMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMode::Cold => "cold",
            CacheMode::Warm => "warm",
        }
    }
}

impl std::str::FromStr for CacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cold" => Ok(CacheMode::Cold),
            "warm" => Ok(CacheMode::Warm),
            _ => Err(format!("unknown cache state '{s}': use cold or warm")),
        }
    }
}

/// Drops the file's pages from the page cache (dirty pages are written back first).
pub(crate) fn evict(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    f.sync_data()?;
    // SAFETY: a valid open fd; offset 0 and length 0 mean "the whole file".
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Reads the whole file so its pages are cached.
pub(crate) fn warm(path: &Path) -> io::Result<()> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// Applies `mode` to `path`.
pub(crate) fn prepare(path: &Path, mode: CacheMode) -> io::Result<()> {
    match mode {
        CacheMode::Cold => evict(path),
        CacheMode::Warm => warm(path),
    }
}

/// Fraction of the file's pages in the page cache (1.0 for an empty file).
pub(crate) fn resident_fraction(path: &Path) -> io::Result<f64> {
    let f = File::open(path)?;
    let len = f.metadata()?.len() as usize;
    if len == 0 {
        return Ok(1.0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let pages = len.div_ceil(page);
    // SAFETY: a read-only shared mapping of an open regular file of `len` bytes; unmapped below,
    // and the memory itself is never read (mincore only inspects residency).
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: addr/len is the mapping made above; vec has one byte per page.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly what was mapped.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    Ok(resident as f64 / pages as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn warm_then_cold_changes_residency() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        let mut f = File::create(&p).unwrap();
        f.write_all(&vec![7u8; 8 << 20]).unwrap();
        drop(f);
        warm(&p).unwrap();
        let hot = resident_fraction(&p).unwrap();
        assert!(hot > 0.99, "after warm: {hot}");
        evict(&p).unwrap();
        let cold = resident_fraction(&p).unwrap();
        // tmpfs cannot drop pages of a file it only keeps in memory; the data dir is on a disk.
        if !is_tmpfs(dir.path()) {
            assert!(cold < 0.5, "after evict: {cold}");
        }
    }

    fn is_tmpfs(p: &Path) -> bool {
        // SAFETY: statfs fills the struct; the path is a valid C string.
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let mut s: libc::statfs = unsafe { std::mem::zeroed() };
        unsafe { libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type == libc::TMPFS_MAGIC }
    }

    #[test]
    fn missing_file_is_an_error() {
        assert!(evict(Path::new("/nonexistent/wattio")).is_err());
        assert!("lukewarm"
            .parse::<CacheMode>()
            .unwrap_err()
            .contains("cold or warm"));
    }
}
