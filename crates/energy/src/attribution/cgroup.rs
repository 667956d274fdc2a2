//! cgroup v2 CPU usage: `cpu.stat` `usage_usec` of every cgroup (kernel
//! `Documentation/admin-guide/cgroup-v2.rst`, "Core interface files" / "CPU").
//!
//! `usage_usec` is hierarchical (a cgroup's figure includes its children's) and is kept by the
//! cgroup, not by its processes, so the CPU time of a process that started and ended inside a
//! window stays counted. To split energy without counting a child twice, each cgroup is given
//! its *own* usage: its `usage_usec` minus its children's.
//!
//! The v2 hierarchy is at `/sys/fs/cgroup` (unified mode) or `/sys/fs/cgroup/unified` (hybrid
//! mode, as on Debian hosts with cgroup v1 controllers); both are looked for under the root.

use crate::root::SysRoot;
use std::collections::BTreeMap;
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

/// A cgroup's hierarchical usage, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupUsage {
    /// Path inside the hierarchy, `/` for the root, e.g. `/system.slice/nginx.service`.
    pub path: String,
    /// Hierarchical `usage_usec`.
    pub usage_usec: u64,
}

/// Every cgroup's hierarchical usage under the v2 mount (depth-first, sorted by path).
/// A cgroup removed during the walk is skipped.
pub fn read_usage(mount: &Path) -> io::Result<Vec<CgroupUsage>> {
    let mut out = Vec::new();
    walk(mount, "/", &mut out, true)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk(dir: &Path, path: &str, out: &mut Vec<CgroupUsage>, top: bool) -> io::Result<()> {
    match std::fs::read_to_string(dir.join("cpu.stat")) {
        Ok(s) => {
            if let Some(u) = parse_usage_usec(&s) {
                out.push(CgroupUsage {
                    path: path.to_string(),
                    usage_usec: u,
                })
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound && !top => return Ok(()),
        // Old kernels have no cpu.stat at the root: its usage is then taken from /proc/stat.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !top => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            walk(&e.path(), &child, out, false)?;
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

/// Each cgroup's own usage (µs): its hierarchical usage minus its direct children's, so the
/// figures add up to the root's. `root_usec` stands in for the root when it has no `cpu.stat`.
pub fn own_usage(all: &[CgroupUsage], root_usec: Option<u64>) -> BTreeMap<String, u64> {
    let mut own: BTreeMap<String, i128> = all
        .iter()
        .map(|c| (c.path.clone(), c.usage_usec as i128))
        .collect();
    if let Some(r) = root_usec {
        own.entry("/".into()).or_insert(r as i128);
    }
    for c in all {
        if let Some(p) = parent(&c.path) {
            if let Some(v) = own.get_mut(p) {
                *v -= c.usage_usec as i128;
            }
        }
    }
    own.into_iter().map(|(k, v)| (k, v.max(0) as u64)).collect()
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

    #[test]
    fn own_usage_subtracts_children() {
        let u = |p: &str, v: u64| CgroupUsage {
            path: p.into(),
            usage_usec: v,
        };
        let all = vec![
            u("/", 1000),
            u("/a", 600),
            u("/a/b", 400),
            u("/a/c", 100),
            u("/d", 300),
        ];
        let own = own_usage(&all, None);
        assert_eq!(own["/"], 100);
        assert_eq!(own["/a"], 100);
        assert_eq!(own["/a/b"], 400);
        assert_eq!(own["/d"], 300);
        assert_eq!(own.values().sum::<u64>(), 1000);
        // No root cpu.stat: the stand-in is used.
        let own = own_usage(&all[1..], Some(1000));
        assert_eq!(own["/"], 100);
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
