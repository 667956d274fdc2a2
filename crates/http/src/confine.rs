//! Opening what a request names beneath the served root, and nothing outside it: links
//! inside the root resolved, the result opened from the root's descriptor following no link.

use crate::config::Shared;
use crate::jail;
use rustix::fs::{Mode, OFlags};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

pub(crate) enum Confine {
    NotFound,
    Denied,
    Outside,
}

/// The real path of decoded components under the root, refusing anything whose real path
/// (after symlinks) is outside it.
pub(crate) fn resolve(sh: &Shared, comps: &[String]) -> Result<PathBuf, Confine> {
    let mut p = sh.root.clone();
    for c in comps {
        p.push(c);
    }
    let real = p.canonicalize().map_err(|_| Confine::NotFound)?;
    if real.starts_with(&sh.root) {
        Ok(real)
    } else {
        Err(Confine::Outside)
    }
}

/// Opens what the decoded components name beneath the root: links inside the root are
/// resolved first ([`resolve`]), then the resolved path is opened from the root's descriptor
/// refusing every link, so a component swapped for a link between the two steps is refused
/// rather than followed. `O_NONBLOCK`: opening a FIFO does not wait for a writer. `None` for
/// the root itself (a directory, never served as a file).
pub(crate) fn confine(sh: &Shared, comps: &[String]) -> Result<Option<File>, Confine> {
    // Most paths hold no link: opened beneath the root refusing every link, such a path opens
    // the very file the two steps below would, for one openat2 instead of a readlink per
    // component. Anything else (a link, an error to classify) takes the two steps.
    if !comps.is_empty() {
        let rel = comps.join("/");
        if let Ok(fd) = jail::open_beneath(sh.root_fd.as_fd(), &rel, OPEN_FLAGS, Mode::empty()) {
            return Ok(Some(File::from(fd)));
        }
    }
    open_resolved(sh, &resolve(sh, comps)?)
}

/// How served files are opened: `O_NONBLOCK`, so opening a FIFO does not wait for a writer.
pub(crate) const OPEN_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// Opens a real path [`resolve`] gave, from the root's descriptor, following no link.
pub(crate) fn open_resolved(sh: &Shared, real: &std::path::Path) -> Result<Option<File>, Confine> {
    let rel = real.strip_prefix(&sh.root).map_err(|_| Confine::Outside)?;
    let Some(rel) = rel.to_str().filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    match jail::open_beneath(sh.root_fd.as_fd(), rel, OPEN_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(Confine::Denied),
        Err(e) if jail::is_link_error(&e) => Err(Confine::Outside),
        Err(_) => Err(Confine::NotFound),
    }
}
