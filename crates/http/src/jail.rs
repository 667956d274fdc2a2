//! Opening files beneath a directory without following symbolic links: what keeps `wattio
//! serve` inside its root and `wattio transfer` inside DEST whatever the tree holds or a peer
//! names, even when a path component is swapped for a link between a check and the open.
//!
//! `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (Linux 5.6) resolves a relative
//! path from a directory descriptor in one call and refuses every symbolic link and every
//! `..` on the way; where the kernel lacks it (`ENOSYS`: older kernels; `EPERM`: seccomp
//! filters that refuse system calls they do not know, as older container runtimes') the
//! same rule is applied by walking the components one `openat(O_NOFOLLOW)` at a time
//! (openat2(2), "RESOLVE_BENEATH", <https://man7.org/linux/man-pages/man2/openat2.2.html>).

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `openat2` answered `ENOSYS` or `EPERM`: the walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// The components of a relative path: `/`-separated, none empty, `.` or `..`.
fn components(rel: &str) -> io::Result<Vec<&str>> {
    let comps: Vec<&str> = rel.split('/').collect();
    if rel.is_empty()
        || comps
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not a plain relative path", rel.escape_debug()),
        ));
    }
    Ok(comps)
}

/// Opens `rel` beneath `dir` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` added): no component
/// may be a symbolic link, none may leave `dir`. A link gives `ELOOP`.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let comps = components(rel)?;
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rfs::openat2(dir, rel, flags, mode, resolve) {
            // ENOSYS: an older kernel; EPERM: a seccomp filter that refuses system calls it
            // does not know (openat2 itself never says EPERM for a file: that is EACCES)
            Err(Errno::NOSYS | Errno::PERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
            // a link anywhere on the path (RESOLVE_NO_SYMLINKS), or `..` out (cannot happen:
            // the components were checked), reads as ELOOP like the walk's
            Err(Errno::XDEV) => return Err(Errno::LOOP.into()),
            r => return r.map_err(io::Error::from),
        }
    }
    let (last, parents) = comps.split_last().expect("components are never empty");
    let parent = walk(dir, parents, Create::No)?;
    let at = parent.as_ref().map_or(dir, |p| p.as_fd());
    rfs::openat(at, *last, flags, mode).map_err(io::Error::from)
}

/// How [`walk`] treats missing directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// A missing directory is an error (`ENOENT`).
    No,
    /// Missing directories are made.
    Yes,
    /// Missing directories are made and each parent synced after, so the new entry survives
    /// a power cut.
    Durably,
}

/// The directory `rel` beneath `dir` (`None` for `dir` itself when `parents` is empty), opened
/// one component at a time with `O_NOFOLLOW`; missing ones are made as `create` says.
fn walk(dir: BorrowedFd<'_>, parents: &[&str], create: Create) -> io::Result<Option<OwnedFd>> {
    let mut cur: Option<OwnedFd> = None;
    for c in parents {
        let at = cur.as_ref().map_or(dir, |d| d.as_fd());
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let next = match rfs::openat(at, *c, flags, Mode::empty()) {
            Err(Errno::NOENT) if create != Create::No => {
                match rfs::mkdirat(at, *c, Mode::from_raw_mode(0o777)) {
                    Ok(()) if create == Create::Durably => rfs::fsync(at)?,
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rfs::openat(at, *c, flags, Mode::empty())?
            }
            // O_DIRECTORY | O_NOFOLLOW on a link says "not a directory": say "a link" instead
            Err(Errno::NOTDIR) if is_link(at, c) => return Err(Errno::LOOP.into()),
            r => r?,
        };
        cur = Some(next);
    }
    Ok(cur)
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link(dir: BorrowedFd<'_>, name: &str) -> bool {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Symlink)
}

/// The directory that holds `rel` beneath `dir` (made with its parents as `create` says),
/// opened without following links, and `rel`'s last component.
pub fn parent_beneath<'r>(
    dir: BorrowedFd<'_>,
    rel: &'r str,
    create: Create,
) -> io::Result<(Option<OwnedFd>, &'r str)> {
    let comps = components(rel)?;
    let (last, parents) = comps.split_last().expect("components are never empty");
    Ok((walk(dir, parents, create)?, last))
}

/// The first component of `rel` beneath `dir` that is a symbolic link (for messages after
/// an `ELOOP`).
pub fn first_link(dir: BorrowedFd<'_>, rel: &str) -> Option<String> {
    let comps = components(rel).ok()?;
    for i in 1..=comps.len() {
        let prefix = comps[..i].join("/");
        if is_link(dir, &prefix) {
            return Some(prefix);
        }
    }
    None
}

/// Whether an error is the one a symbolic link on the path gives.
pub fn is_link_error(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        std::fs::File::open(p).unwrap().into()
    }

    #[test]
    fn links_and_dots_are_refused_on_both_paths() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/f"), b"x").unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        symlink(outside.path(), d.path().join("out")).unwrap();
        symlink("sub/f", d.path().join("alias")).unwrap();
        let fd = dir_fd(d.path());
        for use_walk in [false, true] {
            NO_OPENAT2.store(use_walk, Ordering::Relaxed);
            let open = |rel: &str| open_beneath(fd.as_fd(), rel, OFlags::RDONLY, Mode::empty());
            assert!(open("sub/f").is_ok(), "walk={use_walk}");
            for rel in ["out/secret", "alias"] {
                let e = open(rel).unwrap_err();
                assert!(is_link_error(&e), "{rel} walk={use_walk}: {e}");
            }
            for rel in [
                "../x",
                "sub/../sub/f",
                "",
                "/etc/passwd",
                "sub//f",
                "./sub/f",
            ] {
                assert!(open(rel).is_err(), "{rel} walk={use_walk}");
            }
        }
        NO_OPENAT2.store(false, Ordering::Relaxed);
        assert_eq!(first_link(fd.as_fd(), "out/secret").as_deref(), Some("out"));
        assert_eq!(first_link(fd.as_fd(), "sub/f"), None);
    }

    #[test]
    fn parents_are_created_but_never_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), d.path().join("ln")).unwrap();
        let fd = dir_fd(d.path());
        let (p, last) = parent_beneath(fd.as_fd(), "a/b/c.bin", Create::Durably).unwrap();
        assert_eq!(last, "c.bin");
        assert!(p.is_some() && d.path().join("a/b").is_dir());
        let e = parent_beneath(fd.as_fd(), "ln/x/y", Create::Yes).unwrap_err();
        assert!(
            is_link_error(&e) || e.raw_os_error() == Some(libc::ENOTDIR),
            "{e}"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        let (p, last) = parent_beneath(fd.as_fd(), "top", Create::No).unwrap();
        assert!(p.is_none());
        assert_eq!(last, "top");
    }
}
