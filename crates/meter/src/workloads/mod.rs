//! Names for `--by container` and `--by pod`: the attribution groups cgroups by the container
//! id or pod uid in their names (`wattio_energy::attribution::workload`); this names them as
//! their owners do. In a Kubernetes pod, from the API server ([`kubernetes`]); elsewhere,
//! from docker's or podman's API socket ([`runtime`]). Where neither answers, the cgroup path
//! (and the id in it) stands for the name.

mod http1;
pub mod kubernetes;
pub mod runtime;

use wattio_energy::attribution::{By, Entry, WorkloadNames, HOST_ENTRY};

pub use kubernetes::{KubeConfig, PodWatch, SERVICEACCOUNT_ENV};
pub use runtime::{Runtime, CONTAINER_SOCKET_ENV, DEFAULT_SOCKETS};

/// Names containers and pods for one `--by container` or `--by pod` run.
pub struct Namer {
    by: By,
    pods: Option<PodWatch>,
    runtime: Option<Runtime>,
    /// Why names come from neither, said once.
    pub note: Option<String>,
}

impl Namer {
    /// The namer `by` needs: the pod watch where the in-cluster configuration is set, the
    /// runtime's socket by container outside a cluster. Never fails: what does not answer is
    /// said in [`Namer::note`], and the cgroup paths name the entries.
    pub fn open(by: By) -> Namer {
        let mut n = Namer {
            by,
            pods: None,
            runtime: None,
            note: None,
        };
        if !matches!(by, By::Container | By::Pod) {
            return n;
        }
        let mut why = Vec::new();
        match KubeConfig::in_cluster().and_then(|c| c.map(PodWatch::start).transpose()) {
            Ok(Some(w)) => {
                // The first list, for a few seconds at most: `top --once` and the first
                // interval are named where the API server answers at once.
                let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
                while !w.listed() && w.error().is_none() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                n.pods = Some(w);
            }
            Ok(None) if by == By::Pod => why.push(
                "not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST): pods are named by their uid"
                    .to_string(),
            ),
            Ok(None) => {}
            Err(e) => why.push(format!("no pod names: {e}")),
        }
        if by == By::Container && n.pods.is_none() {
            match Runtime::open() {
                Ok(r) => n.runtime = Some(r),
                Err(e) => why.push(format!("no container names: {e}")),
            }
        }
        if !why.is_empty() {
            n.note = Some(format!(
                "{}; the cgroup path stands for the name",
                why.join("; ")
            ));
        }
        n
    }

    /// Names the entries of an interval, where their owners know them.
    pub fn name(&mut self, entries: &mut [Entry]) {
        for e in entries {
            e.names = match self.by {
                By::Pod => e
                    .pod_uid
                    .as_deref()
                    .and_then(|uid| self.pods.as_ref()?.pod(uid)),
                By::Container => e.container_id.as_deref().and_then(|id| {
                    self.pods
                        .as_ref()
                        .and_then(|p| p.container(id))
                        .or_else(|| self.runtime.as_ref()?.names(id))
                }),
                _ => None,
            };
        }
    }

    /// Why the names are missing now (the pod watch failing, the runtime not answering).
    pub fn trouble(&self) -> Option<String> {
        if let Some(e) = self.pods.as_ref().and_then(|p| p.error()) {
            return Some(format!("the Kubernetes pod watch: {e}"));
        }
        self.runtime.as_ref().and_then(|r| r.last_error())
    }
}

/// The name an entry goes by on a screen: `namespace/pod` by pod, the container's name (or its
/// id's first 12 digits) by container, [`HOST_ENTRY`] for the host.
pub fn display_name(e: &Entry) -> String {
    let n = e.names.as_ref();
    let pod = n.and_then(|n| {
        Some(format!(
            "{}/{}",
            n.container_namespace.as_deref()?,
            n.pod_name.as_deref()?
        ))
    });
    match (&e.container_id, &e.pod_uid) {
        (Some(id), _) => n
            .and_then(|n| n.container_name.clone())
            .unwrap_or_else(|| id.chars().take(12).collect()),
        (None, Some(uid)) => pod.unwrap_or_else(|| format!("pod {uid}")),
        (None, None) => e.comm.clone().unwrap_or_else(|| HOST_ENTRY.to_string()),
    }
}

/// A container's or pod's cells of a `record --by` row: its ids and its names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadCells {
    pub container_id: Option<String>,
    pub pod_uid: Option<String>,
    pub names: Option<WorkloadNames>,
}

impl WorkloadCells {
    /// The cells of entry `e`, where it is a container or a pod.
    pub fn of(e: &Entry) -> Option<WorkloadCells> {
        (e.container_id.is_some() || e.pod_uid.is_some()).then(|| WorkloadCells {
            container_id: e.container_id.clone(),
            pod_uid: e.pod_uid.clone(),
            names: e.names.clone(),
        })
    }
}
