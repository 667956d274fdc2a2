//! DEST as a jail: every file the transfer creates, opens, truncates, renames or deletes is
//! reached from a descriptor of the destination directory, one component at a time, without
//! following symbolic links ([`wattio_http::jail`]). A link already in DEST (`DEST/sub` pointing
//! elsewhere, a part file that is a link) makes that file fail with a message naming the link;
//! nothing is ever written through one. DEST itself is the user's to name and may be a link.
//!
//! The durability rules live here too: data is synced before the records that say it arrived
//! (see `state`), a file before its rename into place, and its directory after the rename (for
//! a batch of files, their file system before and after: [`Dest::place_all`]), so that a power
//! cut never leaves a name or a record pointing at data that is not on disk.

use crate::error::{failure, Failure, Kind};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wattio_http::jail::{self, Create};

/// Suffix of a file's data while it is fetched.
pub(crate) const PART_SUFFIX: &str = ".wattio-part";
/// Suffix of the log of a part file's finished ranges.
pub(crate) const DONE_SUFFIX: &str = ".wattio-part.done";

/// The destination directory.
pub(crate) struct Dest {
    fd: OwnedFd,
    path: PathBuf,
    /// Sync data before its records and renames (`--fsync on`, the default).
    sync: bool,
    /// Directories under DEST already opened (by their path under DEST): each is walked to
    /// once, not once per file operation (a dataset of many small files does several per
    /// file). A descriptor keeps naming the directory it was opened as, so a link put in its
    /// place later is not followed either.
    dirs: Mutex<HashMap<String, Arc<OwnedFd>>>,
}

/// Most directory descriptors a [`Dest`] keeps open (past it, it starts over).
const MAX_OPEN_DIRS: usize = 256;

/// From this many files on, a batch put into place is made durable with `syncfs` (see
/// [`Dest::place_all`]): on ext4 every `fdatasync` of a new file and every directory `fsync`
/// is a journal commit and a flush of the disk's cache, which for many small files costs more
/// than writing them.
const SYNCFS_MIN: usize = 8;

/// Why [`Dest::place_all`] failed: the pair it failed at (its index), the step (as
/// [`Dest::failed`] words it) and the error.
pub(crate) type Misplaced = (usize, &'static str, io::Error);

/// What is at a name in DEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A regular file of this many bytes.
    File(u64),
    /// Anything else: a directory, a link, a device…
    Other,
}

impl Dest {
    /// Opens DEST, creating it (and its parents) when missing.
    pub(crate) fn open(path: &Path, sync: bool) -> Result<Dest, Failure> {
        std::fs::create_dir_all(path).map_err(|e| {
            failure!(
                Dest,
                "cannot create destination {}; check permissions: {e}",
                path.display()
            )
        })?;
        let fd = File::open(path)
            .map_err(|e| failure!(Dest, "cannot open destination {}: {e}", path.display()))?
            .into();
        Ok(Dest {
            fd,
            path: path.to_path_buf(),
            sync,
            dirs: Mutex::new(HashMap::new()),
        })
    }

    /// `DEST/rel`, for messages.
    pub(crate) fn shown(&self, rel: &str) -> String {
        self.path.join(rel).display().to_string()
    }

    /// One line saying why `what` failed on `rel`, naming the link or the file in the way.
    pub(crate) fn explain(&self, rel: &str, what: &str, e: &io::Error) -> String {
        if jail::is_link_error(e) || e.raw_os_error() == Some(libc::ENOTDIR) {
            if let Some(link) = jail::first_link(self.fd.as_fd(), rel) {
                return format!(
                    "cannot {what} {}: {} is a symbolic link, and wattio writes nothing through links inside the destination; remove it, or give another DEST",
                    self.shown(rel),
                    self.shown(&link)
                );
            }
            if e.raw_os_error() == Some(libc::ENOTDIR) {
                return format!(
                    "cannot {what} {}: a file is in the way of one of its directories; remove it, or give another DEST",
                    self.shown(rel)
                );
            }
        }
        format!("cannot {what} {}: {e}", self.shown(rel))
    }

    /// [`Dest::explain`] as an error.
    pub(crate) fn failed(&self, rel: &str, what: &str, e: &io::Error) -> Failure {
        Kind::Dest.msg(self.explain(rel, what, e))
    }

    /// The directory holding `rel` (`None`: DEST itself) and `rel`'s last component.
    fn parent(&self, rel: &str, create: bool) -> io::Result<(Option<Arc<OwnedFd>>, String)> {
        let (dir_rel, last) = match rel.rsplit_once('/') {
            Some((d, l)) => (d, l),
            None => ("", rel),
        };
        if dir_rel.is_empty() {
            // checked as the walk would check it
            jail::parent_beneath(self.fd.as_fd(), rel, jail::Create::No)?;
            return Ok((None, last.to_string()));
        }
        if let Some(d) = self.dirs.lock().unwrap().get(dir_rel) {
            if last.is_empty() || last == "." || last == ".." {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("`{}` is not a plain relative path", rel.escape_debug()),
                ));
            }
            return Ok((Some(d.clone()), last.to_string()));
        }
        let create = match (create, self.sync) {
            (false, _) => Create::No,
            (true, false) => Create::Yes,
            // a directory made for a file is synced into its parent, or a power cut could
            // take the file's name with it after the file was reported done
            (true, true) => Create::Durably,
        };
        let (dir, _) = jail::parent_beneath(self.fd.as_fd(), rel, create)?;
        let dir = dir.map(Arc::new);
        if let Some(d) = &dir {
            let mut m = self.dirs.lock().unwrap();
            if m.len() >= MAX_OPEN_DIRS {
                m.clear();
            }
            m.insert(dir_rel.to_string(), d.clone());
        }
        Ok((dir, last.to_string()))
    }

    fn at<'a>(&'a self, dir: &'a Option<Arc<OwnedFd>>) -> BorrowedFd<'a> {
        dir.as_ref().map_or(self.fd.as_fd(), |d| d.as_fd())
    }

    /// What `rel` is, without following a link at it; `None` when nothing is there.
    pub(crate) fn entry(&self, rel: &str) -> io::Result<Option<Entry>> {
        let (dir, last) = match self.parent(rel, false) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match rfs::statat(self.at(&dir), last.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile => {
                Ok(Some(Entry::File(st.st_size as u64)))
            }
            Ok(_) => Ok(Some(Entry::Other)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the regular file `rel` with `flags`, creating its directories when `create`.
    fn open_file(&self, rel: &str, flags: OFlags, create: bool) -> io::Result<File> {
        let (dir, last) = self.parent(rel, create)?;
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rfs::openat(
            self.at(&dir),
            last.as_str(),
            flags,
            Mode::from_raw_mode(0o666),
        )?;
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        Ok(f)
    }

    /// The file `rel` for reading and writing, created (with its directories) when missing.
    pub(crate) fn open_rw(&self, rel: &str) -> io::Result<File> {
        self.open_file(rel, OFlags::RDWR | OFlags::CREATE, true)
    }

    /// The file `rel`, created empty (or emptied), for writing.
    pub(crate) fn create(&self, rel: &str) -> io::Result<File> {
        self.open_file(rel, OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC, true)
    }

    /// The existing file `rel`, for reading.
    pub(crate) fn open_read(&self, rel: &str) -> io::Result<File> {
        self.open_file(rel, OFlags::RDONLY, false)
    }

    /// The file `rel` for appending, created when missing.
    pub(crate) fn append(&self, rel: &str) -> io::Result<File> {
        self.open_file(rel, OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE, true)
    }

    /// Deletes the file `rel` (nothing when it is not there).
    pub(crate) fn remove(&self, rel: &str) -> io::Result<()> {
        let (dir, last) = match self.parent(rel, false) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match rfs::unlinkat(self.at(&dir), last.as_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Syncs a file's data to disk (when syncing is on).
    pub(crate) fn sync_data(&self, f: &File) -> io::Result<()> {
        if self.sync {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Renames `from` to `to` (both in one directory: a file's part file and its final name),
    /// replacing whatever non-directory is at `to` (a link there is replaced, not followed),
    /// then syncs the directory so the rename survives a power cut. The caller has synced the
    /// data first ([`Dest::sync_data`]).
    pub(crate) fn rename_into_place(&self, from: &str, to: &str) -> io::Result<()> {
        let (dir, to_last) = self.parent(to, false)?;
        let (_, from_last) = self.parent(from, false)?;
        let at = self.at(&dir);
        rfs::renameat(at, from_last.as_str(), at, to_last.as_str())?;
        if self.sync {
            rfs::fsync(at)?;
        }
        Ok(())
    }

    /// Puts a batch of finished part files into place (`pairs`: part file and final name, as
    /// [`Dest::rename_into_place`]) as one group commit: with syncing on, every file's data is
    /// made durable, then all are renamed, then the renames are made durable. A batch of
    /// [`SYNCFS_MIN`] files or more is synced with one `syncfs` per file system before the
    /// renames and one after (which also writes back whatever else is dirty there); a smaller
    /// one file by file and directory by directory. On an error, which pair (its index) and
    /// why; pairs before it may be in place.
    pub(crate) fn place_all(&self, pairs: &[(&str, &str)]) -> Result<(), Misplaced> {
        let mut places = Vec::with_capacity(pairs.len());
        for (k, &(from, to)) in pairs.iter().enumerate() {
            let found = (|| {
                let (dir, to_last) = self.parent(to, false)?;
                let (_, from_last) = self.parent(from, false)?;
                io::Result::Ok((dir, from_last, to_last))
            })();
            places.push(found.map_err(|e| (k, "rename into", e))?);
        }
        let dirs: Vec<Option<Arc<OwnedFd>>> = places.iter().map(|p| p.0.clone()).collect();
        let whole = self.sync && pairs.len() >= SYNCFS_MIN;
        if whole {
            if let Err(e) = self.sync_file_systems(&dirs) {
                // syncfs names no file: synced one by one, the failing one names itself
                self.sync_each(pairs)?;
                return Err((0, "sync", e));
            }
        } else if self.sync {
            self.sync_each(pairs)?;
        }
        for (k, (dir, from_last, to_last)) in places.iter().enumerate() {
            let at = self.at(dir);
            rfs::renameat(at, from_last.as_str(), at, to_last.as_str())
                .map_err(|e| (k, "rename into", e.into()))?;
        }
        if whole {
            self.sync_file_systems(&dirs)
                .map_err(|e| (0, "sync the directory of", e))?;
        } else if self.sync {
            // each directory once, named by the first pair renamed into it
            let mut synced = Vec::new();
            for (k, dir) in dirs.iter().enumerate() {
                let at = self.at(dir);
                if !synced.contains(&at.as_raw_fd()) {
                    synced.push(at.as_raw_fd());
                    rfs::fsync(at).map_err(|e| (k, "sync the directory of", e.into()))?;
                }
            }
        }
        Ok(())
    }

    /// `fdatasync` of each part file of `pairs`.
    fn sync_each(&self, pairs: &[(&str, &str)]) -> Result<(), Misplaced> {
        for (k, (from, _)) in pairs.iter().enumerate() {
            let synced = self.open_read(from).and_then(|f| f.sync_data());
            synced.map_err(|e| (k, "sync", e))?;
        }
        Ok(())
    }

    /// `syncfs` of each file system that holds one of `dirs` (DEST's subdirectories may be
    /// mount points), once each.
    fn sync_file_systems(&self, dirs: &[Option<Arc<OwnedFd>>]) -> io::Result<()> {
        let mut seen_fds = Vec::new();
        let mut seen_devs = Vec::new();
        for dir in dirs {
            let at = self.at(dir);
            if seen_fds.contains(&at.as_raw_fd()) {
                continue;
            }
            seen_fds.push(at.as_raw_fd());
            let dev = rfs::fstat(at)?.st_dev;
            if !seen_devs.contains(&dev) {
                seen_devs.push(dev);
                rfs::syncfs(at)?;
            }
        }
        Ok(())
    }

    /// Bytes free for this user on DEST's file system.
    pub(crate) fn free_bytes(&self) -> io::Result<u64> {
        let st = rfs::fstatvfs(self.fd.as_fd())?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// Sets an extended attribute on an open file; false where the file system has none.
    pub(crate) fn set_attr(f: &File, name: &str, value: &[u8]) -> bool {
        rfs::fsetxattr(f, name, value, rfs::XattrFlags::empty()).is_ok()
    }

    /// An extended attribute of an open file (at most 4 KiB), when it has one.
    pub(crate) fn attr(f: &File, name: &str) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        let n = rfs::fgetxattr(f, name, &mut buf).ok()?;
        buf.truncate(n);
        Some(buf)
    }
}

/// `rel` with `suffix` appended (a part file or its log).
pub(crate) fn with_suffix(rel: &str, suffix: &str) -> String {
    format!("{rel}{suffix}")
}

/// Whether a path has a component named like wattio's temporary files (such paths are
/// refused as output paths: a file or directory of the source must not stand in for another
/// file's part file or log).
pub(crate) fn is_reserved(rel: &str) -> bool {
    rel.split('/')
        .any(|c| c.ends_with(PART_SUFFIX) || c.ends_with(DONE_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn nothing_goes_through_a_link_in_dest() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), d.path().join("sub")).unwrap();
        std::fs::write(outside.path().join("victim"), b"keep").unwrap();
        symlink(
            outside.path().join("victim"),
            d.path().join("f.wattio-part"),
        )
        .unwrap();
        let dest = Dest::open(d.path(), true).unwrap();
        let e = dest.open_rw("sub/x").unwrap_err();
        let msg = dest.explain("sub/x", "write", &e);
        assert!(msg.contains("sub is a symbolic link"), "{msg}");
        assert!(dest.open_rw("f.wattio-part").is_err());
        assert!(dest.create("f.wattio-part").is_err());
        assert_eq!(dest.entry("f.wattio-part").unwrap(), Some(Entry::Other));
        assert_eq!(
            std::fs::read(outside.path().join("victim")).unwrap(),
            b"keep"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().count() == 1);
        // a rename replaces a link at the final name instead of writing through it
        std::fs::write(d.path().join("g.wattio-part"), b"new").unwrap();
        symlink(outside.path().join("victim"), d.path().join("g")).unwrap();
        dest.rename_into_place("g.wattio-part", "g").unwrap();
        assert_eq!(std::fs::read(d.path().join("g")).unwrap(), b"new");
        assert_eq!(
            std::fs::read(outside.path().join("victim")).unwrap(),
            b"keep"
        );
    }

    #[test]
    fn files_and_directories_are_made_beneath_dest() {
        let d = tempfile::tempdir().unwrap();
        let dest = Dest::open(&d.path().join("new/dest"), false).unwrap();
        let f = dest.open_rw("a/b/c.bin").unwrap();
        drop(f);
        assert_eq!(dest.entry("a/b/c.bin").unwrap(), Some(Entry::File(0)));
        assert_eq!(dest.entry("a/b").unwrap(), Some(Entry::Other));
        assert_eq!(dest.entry("nope/x").unwrap(), None);
        dest.remove("a/b/c.bin").unwrap();
        dest.remove("a/b/c.bin").unwrap();
        assert!(dest.free_bytes().unwrap() > 0);
        assert!(is_reserved("x.wattio-part") && is_reserved("d/x.wattio-part.done"));
        assert!(
            is_reserved("x.wattio-part/y"),
            "a directory standing in for a part file"
        );
        assert!(!is_reserved("x.wattio-partial"));
    }
}
