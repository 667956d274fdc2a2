//! Containers and Kubernetes pods as groups of cgroups, for `--by container` and `--by pod`.
//!
//! A container runtime names each container's cgroup after the container's id, and the
//! kubelet names each pod's cgroup after the pod's uid, with either cgroup driver:
//!
//! | runtime | systemd driver | cgroupfs driver |
//! |---|---|---|
//! | docker | `/system.slice/docker-ID.scope` | `/docker/ID` |
//! | podman | `/machine.slice/libpod-ID.scope[/container]` | `/libpod_parent/libpod-ID` |
//! | podman `--cgroups=split` | `…/libpod-payload-ID` | |
//! | containerd (CRI) | `…/kubepods-QOS-podUID.slice/cri-containerd-ID.scope` | `/kubepods/QOS/podUID/ID` |
//! | CRI-O | `…/kubepods-QOS-podUID.slice/crio-ID.scope` | `/kubepods/QOS/podUID/ID` |
//!
//! (Kubernetes, "About cgroup v2" and the kubelet's `cgroup-driver`; the systemd driver writes
//! a uid's dashes as underscores.) An id is 64 hexadecimal digits; a uid is the 36-character
//! form. A cgroup below a container's (podman's `container` leaf) belongs to that container.
//!
//! Energy of a pod or container that ends mid-interval: when a cgroup is removed, the kernel
//! adds its usage to its parent's, so the last part of an ended workload's time shows up as
//! the parent's own time. A pod's cgroup and the kubelet's QoS slices run no process of their
//! own, so their own time in an interval where a child workload ended is that workload's, and
//! [`group`] gives it back to it.

use std::collections::{BTreeMap, HashSet};

use super::entry::{By, Entry, Key, HOST_ENTRY};

/// The runtime and id of the container whose cgroup `path` is, or is below.
pub fn container_of(path: &str) -> Option<(&'static str, String)> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate().rev() {
        let name = part.strip_suffix(".scope").unwrap_or(part);
        if name.contains("conmon") {
            continue;
        }
        let prefixed = [
            ("docker-", "docker"),
            // podman's `--cgroups=split`: the payload's own cgroup.
            ("libpod-payload-", "podman"),
            ("libpod-", "podman"),
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
            ("containerd-", "containerd"),
        ]
        .iter()
        .find_map(|(prefix, runtime)| name.strip_prefix(prefix).map(|id| (*runtime, id)));
        let (runtime, id) = match prefixed {
            Some(found) => found,
            None => {
                let runtime = match parts[..i].last().copied() {
                    Some("docker") => "docker",
                    _ if path.contains("kubepods") => "kubernetes",
                    _ => "container",
                };
                (runtime, name)
            }
        };
        if is_container_id(id) {
            return Some((runtime, id.to_string()));
        }
    }
    None
}

/// The uid of the Kubernetes pod whose cgroup `path` is, or is below.
pub fn pod_of(path: &str) -> Option<String> {
    if !path.contains("kubepods") {
        return None;
    }
    path.split('/').find_map(|part| {
        let name = part.strip_suffix(".slice").unwrap_or(part);
        let at = name.rfind("pod")?;
        let uid = name[at + 3..].replace('_', "-");
        is_pod_uid(&uid).then_some(uid)
    })
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_pod_uid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// The workload a cgroup belongs to, grouped `by` container or pod: its key, and the cgroup
/// that stands for it (the container's or the pod's own).
fn workload_of(by: By, path: &str) -> Option<(Key, String)> {
    match by {
        By::Container => {
            let (_, id) = container_of(path)?;
            let end = path.find(&id)? + id.len();
            let end = end + path[end..].find('/').unwrap_or(path.len() - end);
            Some((Key::Container(id), path[..end].to_string()))
        }
        By::Pod => {
            let uid = pod_of(path)?;
            let mut own = String::new();
            for part in path.split('/').filter(|p| !p.is_empty()) {
                own.push('/');
                own.push_str(part);
                if pod_of(&own).is_some() {
                    break;
                }
            }
            Some((Key::Pod(uid), own))
        }
        _ => None,
    }
}

/// Whether `path` runs no process of its own, so its own time in an interval is that of a child
/// workload that ended: the kubelet's pod and QoS cgroups.
fn holds_only_workloads(by: By, path: &str) -> bool {
    path.contains("kubepods")
        && match by {
            By::Pod => pod_of(path).is_none(),
            _ => container_of(path).is_none(),
        }
}

/// Whether cgroup `c` ended below `holder` with every cgroup between them: its usage, and
/// theirs, came up to `holder` (a container of a pod that ended whole, by container).
fn ended_below(c: &str, holder: &str, ended: &[String]) -> bool {
    let mut p = parent(c);
    loop {
        if p == holder {
            return true;
        }
        if p == "/" || !ended.iter().any(|e| e == p) {
            return false;
        }
        p = parent(p);
    }
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

/// Groups cgroup entries `by` container or pod: one entry per workload (its cgroups' time
/// summed), and one [`HOST_ENTRY`] for the cgroups in none. `ended`: the cgroups present at
/// the previous scan and gone now; a kubelet cgroup's own time goes to the ended workloads
/// below it, shared evenly. Returns the entries and the keys of the workloads `now` holds.
pub fn group(
    by: By,
    entries: Vec<Entry>,
    ended: &[String],
    now: impl Iterator<Item = String>,
) -> (Vec<Entry>, HashSet<Key>) {
    let mut groups: BTreeMap<Key, Entry> = BTreeMap::new();
    let mut add = |key: Key, cgroup: Option<String>, e: &Entry, share: f64| {
        let g = groups.entry(key.clone()).or_insert_with(|| {
            let mut g = Entry {
                cgroup: cgroup.clone(),
                ..Entry::new(key.clone())
            };
            if let Some(c) = &cgroup {
                g.container_id = container_of(c).map(|(_, id)| id);
                g.pod_uid = pod_of(c);
            }
            if let Key::Container(id) | Key::Pod(id) = &key {
                if id == HOST_ENTRY {
                    g.comm = Some(HOST_ENTRY.to_string());
                }
            }
            g
        });
        g.cpu_s += e.cpu_s * share;
        g.children_cpu_s += e.children_cpu_s * share;
        g.kernel_io_cpu_s += e.kernel_io_cpu_s * share;
    };
    let host = |by: By| match by {
        By::Pod => Key::Pod(HOST_ENTRY.to_string()),
        _ => Key::Container(HOST_ENTRY.to_string()),
    };
    for e in &entries {
        let path = e.cgroup.as_deref().unwrap_or("/");
        if let Some((key, own)) = workload_of(by, path) {
            add(key, Some(own), e, 1.0);
            continue;
        }
        let gone: Vec<(Key, String)> = if holds_only_workloads(by, path) {
            let found: BTreeMap<Key, String> = ended
                .iter()
                .filter(|c| ended_below(c, path, ended))
                .filter_map(|c| workload_of(by, c))
                .collect();
            found.into_iter().collect()
        } else {
            Vec::new()
        };
        if gone.is_empty() {
            add(host(by), None, e, 1.0);
        }
        for (key, own) in &gone {
            add(key.clone(), Some(own.clone()), e, 1.0 / gone.len() as f64);
        }
    }
    let mut alive: HashSet<Key> = now
        .filter_map(|c| workload_of(by, &c))
        .map(|w| w.0)
        .collect();
    alive.insert(host(by));
    (groups.into_values().collect(), alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const UID: &str = "6b2c4f1e-3a5d-4e7f-9a1b-2c3d4e5f6a7b";

    #[test]
    fn container_ids_with_either_cgroup_driver() {
        let id = |p: &str| container_of(p);
        assert_eq!(
            id(&format!("/system.slice/docker-{ID}.scope")),
            Some(("docker", ID.into()))
        );
        assert_eq!(id(&format!("/docker/{ID}")), Some(("docker", ID.into())));
        assert_eq!(
            id(&format!("/machine.slice/libpod-{ID}.scope/container")),
            Some(("podman", ID.into()))
        );
        assert_eq!(
            id(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
            None
        );
        let u = UID.replace('-', "_");
        assert_eq!(
            id(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
            )),
            Some(("containerd", ID.into()))
        );
        assert_eq!(
            id(&format!("/kubepods/besteffort/pod{UID}/{ID}")),
            Some(("kubernetes", ID.into()))
        );
        assert_eq!(
            id(&format!(
                "/user.slice/user-0.slice/session-1.scope/libpod-payload-{ID}"
            )),
            Some(("podman", ID.into()))
        );
        assert_eq!(id("/system.slice/ssh.service"), None);
        assert_eq!(id("/system.slice/docker-0123.scope"), None, "not 64 digits");
    }

    #[test]
    fn pod_uids_with_either_cgroup_driver() {
        let u = UID.replace('-', "_");
        assert_eq!(
            pod_of(&format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{ID}.scope"
            )),
            Some(UID.into())
        );
        assert_eq!(
            pod_of(&format!("/kubepods.slice/kubepods-pod{u}.slice")),
            Some(UID.into())
        );
        assert_eq!(
            pod_of(&format!("/kubepods/burstable/pod{UID}/{ID}")),
            Some(UID.into())
        );
        assert_eq!(pod_of("/kubepods.slice/kubepods-burstable.slice"), None);
        assert_eq!(
            pod_of(&format!("/system.slice/pod{UID}")),
            None,
            "not the kubelet's"
        );
    }

    fn cg(path: &str, cpu_s: f64) -> Entry {
        Entry {
            cgroup: Some(path.to_string()),
            cpu_s,
            ..Entry::new(Key::Cgroup(path.to_string()))
        }
    }

    #[test]
    fn groups_sum_their_cgroups_and_ended_workloads_keep_their_last_time() {
        let qos = "/kubepods.slice/kubepods-burstable.slice";
        let pod_a = format!(
            "{qos}/kubepods-burstable-pod{}.slice",
            UID.replace('-', "_")
        );
        let uid_b = "11111111-2222-3333-4444-555555555555";
        let pod_b = format!(
            "{qos}/kubepods-burstable-pod{}.slice",
            uid_b.replace('-', "_")
        );
        let ctr = format!("{pod_a}/cri-containerd-{ID}.scope");
        let sandbox = format!("{pod_a}/cri-containerd-{}.scope", "f".repeat(64));
        let entries = vec![
            cg(&ctr, 1.0),
            cg(&sandbox, 0.25),
            cg(qos, 0.5), // pod B ended since the previous scan: its last 0.5 s
            cg("/system.slice/ssh.service", 0.125),
            cg("/", 0.0625),
        ];
        let ended = vec![pod_b.clone()];
        let (pods, alive) = group(By::Pod, entries.clone(), &ended, [ctr.clone()].into_iter());
        let get = |k: &str| pods.iter().find(|e| e.key == Key::Pod(k.into())).unwrap();
        assert_eq!(get(UID).cpu_s, 1.25);
        assert_eq!(get(UID).cgroup.as_deref(), Some(pod_a.as_str()));
        assert_eq!(get(uid_b).cpu_s, 0.5);
        assert_eq!(get(HOST_ENTRY).cpu_s, 0.1875);
        assert!(alive.contains(&Key::Pod(UID.into())));
        assert!(!alive.contains(&Key::Pod(uid_b.into())));

        // By container, pod B's container ended with it: the slice's time is that container's.
        let ctr_b = format!("{pod_b}/cri-containerd-{}.scope", "b".repeat(64));
        let ended_both = vec![pod_b.clone(), ctr_b];
        let (ctrs, _) = group(
            By::Container,
            entries.clone(),
            &ended_both,
            std::iter::empty(),
        );
        let b = ctrs
            .iter()
            .find(|e| e.key == Key::Container("b".repeat(64)))
            .unwrap();
        assert_eq!(b.cpu_s, 0.5);
        // By pod, the pod and its container are one workload: all of the slice's time.
        let (pods, _) = group(By::Pod, entries.clone(), &ended_both, std::iter::empty());
        assert_eq!(
            pods.iter()
                .find(|e| e.key == Key::Pod(uid_b.into()))
                .unwrap()
                .cpu_s,
            0.5
        );

        let (ctrs, _) = group(By::Container, entries, &[], std::iter::empty());
        let get = |k: &str| {
            ctrs.iter()
                .find(|e| e.key == Key::Container(k.into()))
                .unwrap()
        };
        assert_eq!(get(ID).cpu_s, 1.0);
        assert_eq!(get(ID).pod_uid.as_deref(), Some(UID));
        assert_eq!(get(ID).container_id.as_deref(), Some(ID));
        // No container ended: the QoS slice's time stays the host's.
        assert_eq!(get(HOST_ENTRY).cpu_s, 0.6875);
    }
}
