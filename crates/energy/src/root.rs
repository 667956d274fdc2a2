//! Resolution of system paths under `WATTIO_ROOT`.

use std::path::{Path, PathBuf};

/// The directory that stands for `/` when reading `/sys`, `/dev` and `/proc`.
///
/// Production code uses [`SysRoot::from_env`]: `WATTIO_ROOT` when set and non-empty, else `/`.
/// Tests build a fixture tree in a temporary directory and pass [`SysRoot::new`] of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    base: PathBuf,
}

impl SysRoot {
    /// A root at `base` (a fixture tree, or `/`).
    pub fn new(base: impl Into<PathBuf>) -> Self {
        SysRoot { base: base.into() }
    }

    /// `WATTIO_ROOT` when it is set and non-empty, else `/`.
    pub fn from_env() -> Self {
        match std::env::var_os("WATTIO_ROOT") {
            Some(v) if !v.is_empty() => SysRoot::new(v),
            _ => SysRoot::new("/"),
        }
    }

    /// Whether this is the real root of the machine.
    pub fn is_real(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The directory standing for `/`.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Maps an absolute system path such as `/sys/class/powercap` under the root.
    pub fn path(&self, absolute: impl AsRef<Path>) -> PathBuf {
        let p = absolute.as_ref();
        let relative = p.strip_prefix("/").unwrap_or(p);
        self.base.join(relative)
    }
}

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot::from_env()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_absolute_paths_under_the_base() {
        let root = SysRoot::new("/tmp/fixture");
        assert_eq!(
            root.path("/sys/class/powercap"),
            PathBuf::from("/tmp/fixture/sys/class/powercap")
        );
        assert_eq!(
            root.path("proc/stat"),
            PathBuf::from("/tmp/fixture/proc/stat")
        );
        assert!(!root.is_real());
        assert!(SysRoot::new("/").is_real());
    }
}
