//! cgroup v2 CPU usage: `cpu.stat` `usage_usec` of every cgroup (kernel
//! `Documentation/admin-guide/cgroup-v2.rst`, "Core interface files" / "CPU").
//!
//! `usage_usec` is hierarchical (a cgroup's figure includes its children's, and keeps them after
//! a child is removed) and is kept by the cgroup, not by its processes, so the CPU time of a
//! process that started and ended inside a window stays counted. To split an interval's energy
//! without counting a child twice, each cgroup is given its *own* share of the interval
//! ([`own_deltas`]): the growth of its `usage_usec` less the growth of its children present at
//! both ends of the interval. A child removed during the interval thus leaves its last partial
//! interval on its parent, never its whole life.
//!
//! The v2 hierarchy is at `/sys/fs/cgroup` (unified mode) or `/sys/fs/cgroup/unified` (hybrid
//! mode, as on Debian hosts with cgroup v1 controllers); both are looked for under the root.

use crate::root::SysRoot;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

/// Where the cgroup v2 hierarchy is mounted under `root`, if anywhere.
pub fn v2_mount(root: &SysRoot) -> Option<PathBuf> {
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(|p| root.path(p))
        .find(|p| p.join("cgroup.controllers").exists())
}

/// `usage_usec` of a `cpu.stat` file.
pub fn parse_usage_usec(cpu_stat: &str) -> Option<u64> {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// The v2 cgroup of a process from the `0::/path` line of `/proc/PID/cgroup`.
pub fn parse_proc_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

/// The v2 cgroup path of `pid` (`/` for the root cgroup), if it can be read.
pub fn cgroup_of(root: &SysRoot, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(root.path(format!("/proc/{pid}/cgroup"))).ok()?;
    parse_proc_cgroup(&text)
}

/// A cgroup's hierarchical counter, as read: `cpu.stat` `usage_usec` ([`read_usage`]) or the
/// block I/O bytes of `io.stat` ([`read_io_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupUsage {
    /// Path inside the hierarchy, `/` for the root, e.g. `/system.slice/nginx.service`.
    pub path: String,
    /// The hierarchical counter: a cgroup's figure includes its descendants'.
    pub value: u64,
    /// The directory's inode: the cgroup's id, new when a cgroup of the same path is recreated.
    pub ino: u64,
}

/// Every cgroup's hierarchical usage under the v2 mount (depth-first, sorted by path).
/// A cgroup removed during the walk is skipped.
pub fn read_usage(mount: &Path) -> io::Result<Vec<CgroupUsage>> {
    let mut out = Vec::new();
    walk(
        mount,
        "/",
        &mut out,
        true,
        Some(("cpu.stat", parse_usage_usec)),
    )?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A cgroup removed while it is read: its files answer ENODEV once it is gone.
fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV)
}

/// Every cgroup's block I/O bytes, read and written on every device (`io.stat` `rbytes` +
/// `wbytes`, hierarchical), under the v2 mount, sorted by path. A cgroup without `io.stat` (the
/// `io` controller not enabled for it) is skipped with its descendants: its bytes are in its
/// parent's. Discards (`dbytes`) are left out: they move no data.
pub fn read_io_bytes(mount: &Path) -> io::Result<Vec<CgroupUsage>> {
    let mut out = Vec::new();
    walk(
        mount,
        "/",
        &mut out,
        true,
        Some(("io.stat", parse_io_stat_bytes)),
    )?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The bytes read and written of an `io.stat` file, all its devices together: lines of
/// `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N` (Documentation/admin-guide/
/// cgroup-v2.rst, "IO Interface Files"). An empty file (no I/O yet) is 0.
pub fn parse_io_stat_bytes(io_stat: &str) -> Option<u64> {
    let mut total = 0u64;
    for field in io_stat.split_ascii_whitespace() {
        let (name, v) = match field.split_once('=') {
            Some(kv) => kv,
            None => continue,
        };
        if name == "rbytes" || name == "wbytes" {
            total = total.saturating_add(v.parse().ok()?);
        }
    }
    Some(total)
}

/// Every cgroup's directory inode (its cgroup v2 id, what a BPF program's
/// `bpf_get_current_cgroup_id` names) under the v2 mount, with its path (`/`, `/system.slice`).
pub fn ids(mount: &Path) -> io::Result<HashMap<u64, String>> {
    let mut out = Vec::new();
    walk(mount, "/", &mut out, true, None)?;
    Ok(out.into_iter().map(|c| (c.ino, c.path)).collect())
}

/// The file a [`walk`] reads in each cgroup, and how its counter is parsed; `None`: every
/// cgroup is listed, with a value of 0.
type CounterFile = Option<(&'static str, fn(&str) -> Option<u64>)>;

fn walk(
    dir: &Path,
    path: &str,
    out: &mut Vec<CgroupUsage>,
    top: bool,
    file: CounterFile,
) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let ino = match std::fs::metadata(dir) {
        Ok(m) => m.ino(),
        Err(e) if vanished(&e) && !top => return Ok(()),
        Err(e) => return Err(e),
    };
    let value = match file {
        None => Some(0),
        Some((name, parse)) => match std::fs::read_to_string(dir.join(name)) {
            Ok(s) => parse(&s),
            Err(e) if vanished(&e) && !top => return Ok(()),
            // Old kernels have no cpu.stat at the root (its usage is then taken from
            // /proc/stat), nor, before 5.8, io.stat.
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", dir.join(name).display()),
                ))
            }
        },
    };
    if let Some(value) = value {
        out.push(CgroupUsage {
            path: path.to_string(),
            value,
            ino,
        });
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if vanished(&e) && !top => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            walk(&e.path(), &child, out, false, file)?;
        }
    }
    Ok(())
}

/// The parent path of a cgroup path (`None` for the root).
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// What a cgroup's hierarchical usage was at the previous scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Previous {
    pub ino: u64,
    pub value: u64,
}

/// Each cgroup's own share of the interval since `prev` (µs): the growth of its hierarchical
/// usage less the growth of its direct children present in both scans, so the figures add up
/// to the root's growth and nothing is counted twice.
///
/// A cgroup new since `prev` (or recreated: another inode) grew by all its usage; a child
/// removed since `prev` is simply absent, so its last partial interval stays in its parent's
/// growth. Read skew (a parent read before its children moved on) can make a difference
/// negative: it counts as zero. `root_usec` stands in for the root when it has no `cpu.stat`.
pub fn own_deltas(
    now: &[CgroupUsage],
    prev: &HashMap<String, Previous>,
    root_usec: Option<u64>,
) -> BTreeMap<String, u64> {
    let grown = |c: &CgroupUsage| -> u64 {
        match prev.get(&c.path) {
            Some(p) if p.ino == c.ino => c.value.saturating_sub(p.value),
            _ => c.value,
        }
    };
    let mut own: BTreeMap<String, i128> = now
        .iter()
        .map(|c| (c.path.clone(), grown(c) as i128))
        .collect();
    if let (Some(r), false) = (root_usec, own.contains_key("/")) {
        let p = prev.get("/").map(|p| p.value).unwrap_or(r);
        own.insert("/".into(), r.saturating_sub(p) as i128);
    }
    for c in now {
        if let Some(parent) = parent(&c.path) {
            // A child new since the previous scan is in its parent's growth only from its
            // creation on, which is all of its usage: subtract it whole.
            if let Some(v) = own.get_mut(parent) {
                *v -= grown(c) as i128;
            }
        }
    }
    own.into_iter().map(|(k, v)| (k, v.max(0) as u64)).collect()
}

/// The state [`own_deltas`] needs from this scan at the next one.
pub fn previous(now: &[CgroupUsage], root_usec: Option<u64>) -> HashMap<String, Previous> {
    let mut m: HashMap<String, Previous> = now
        .iter()
        .map(|c| {
            (
                c.path.clone(),
                Previous {
                    ino: c.ino,
                    value: c.value,
                },
            )
        })
        .collect();
    if let Some(r) = root_usec {
        m.entry("/".into()).or_insert(Previous { ino: 0, value: r });
    }
    m
}

/// What kind of workload a cgroup path names, for display: a Kubernetes pod container, a
/// container of docker, podman, containerd or CRI-O, a systemd service, a user session, or
/// another cgroup.
pub fn kind(path: &str) -> &'static str {
    let last = path.rsplit('/').next().unwrap_or("");
    if path.contains("kubepods") {
        if last.starts_with("cri-containerd-")
            || last.starts_with("crio-")
            || last.starts_with("docker-")
        {
            "k8s container"
        } else if last.contains("pod") {
            "k8s pod"
        } else {
            "k8s"
        }
    } else if last.starts_with("docker-") || path.starts_with("/docker/") {
        "docker container"
    } else if last.starts_with("libpod-") {
        "podman container"
    } else if last.starts_with("cri-containerd-") || last.starts_with("containerd-") {
        "containerd container"
    } else if last.starts_with("crio-") {
        "cri-o container"
    } else if last.ends_with(".service") {
        "service"
    } else if last.ends_with(".scope") && path.contains("/user.slice/") {
        "session"
    } else if path == "/" {
        "root"
    } else {
        "cgroup"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_files() {
        assert_eq!(
            parse_usage_usec("usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n"),
            Some(1234)
        );
        assert_eq!(parse_usage_usec("user_usec 1\n"), None);
        assert_eq!(
            parse_proc_cgroup("12:cpu:/x\n0::/system.slice/nginx.service\n"),
            Some("/system.slice/nginx.service".into())
        );
        assert_eq!(parse_proc_cgroup("1:cpu:/\n"), None);
    }

    fn u(p: &str, v: u64, ino: u64) -> CgroupUsage {
        CgroupUsage {
            path: p.into(),
            value: v,
            ino,
        }
    }

    #[test]
    fn own_deltas_subtract_children_and_add_up() {
        let t0 = vec![
            u("/", 1000, 1),
            u("/a", 600, 2),
            u("/a/b", 400, 3),
            u("/d", 300, 4),
        ];
        let prev = previous(&t0, None);
        // +100 in /a itself, +50 in /a/b, +20 in /d, +30 at the root; /a/c new with 10.
        let t1 = vec![
            u("/", 1210, 1),
            u("/a", 760, 2),
            u("/a/b", 450, 3),
            u("/a/c", 10, 5),
            u("/d", 320, 4),
        ];
        let own = own_deltas(&t1, &prev, None);
        assert_eq!(own["/"], 30);
        assert_eq!(own["/a"], 100);
        assert_eq!(own["/a/b"], 50);
        assert_eq!(own["/a/c"], 10);
        assert_eq!(own["/d"], 20);
        assert_eq!(own.values().sum::<u64>(), 210);
    }

    #[test]
    fn a_removed_cgroup_leaves_one_interval_on_its_parent_not_its_life() {
        let t0 = vec![
            u("/", 5_000_000, 1),
            u("/a", 4_000_000, 2),
            u("/a/b", 3_600_000, 3),
        ];
        let prev = previous(&t0, None);
        // /a/b ran 5 ms more and was removed; /a itself ran 2 ms. /a keeps /a/b's usage.
        let t1 = vec![u("/", 5_007_000, 1), u("/a", 4_007_000, 2)];
        let own = own_deltas(&t1, &prev, None);
        assert_eq!(own["/a"], 7_000);
        assert_eq!(own["/"], 0);
        // Recreated under the same path (new inode): counted from its creation, not as a drop.
        let prev = previous(&t1, None);
        let t2 = vec![
            u("/", 5_008_000, 1),
            u("/a", 4_008_000, 2),
            u("/a/b", 900, 9),
        ];
        let own = own_deltas(&t2, &prev, None);
        assert_eq!(own["/a/b"], 900);
        assert_eq!(own["/a"], 100);
    }

    #[test]
    fn a_missing_root_cpu_stat_is_stood_in_for() {
        let t0 = vec![u("/a", 100, 2)];
        let prev = previous(&t0, Some(1000));
        let t1 = vec![u("/a", 150, 2)];
        let own = own_deltas(&t1, &prev, Some(1080));
        assert_eq!(own["/"], 30);
        assert_eq!(own["/a"], 50);
    }

    #[test]
    fn kinds() {
        assert_eq!(kind("/system.slice/nginx.service"), "service");
        assert_eq!(
            kind("/system.slice/docker-0123abcd.scope"),
            "docker container"
        );
        assert_eq!(
            kind("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice/cri-containerd-ab12.scope"),
            "k8s container"
        );
        assert_eq!(
            kind("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice"),
            "k8s pod"
        );
        assert_eq!(kind("/machine.slice/libpod-99.scope"), "podman container");
        assert_eq!(
            kind("/user.slice/user-1000.slice/session-3.scope"),
            "session"
        );
        assert_eq!(kind("/"), "root");
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
    }
}
