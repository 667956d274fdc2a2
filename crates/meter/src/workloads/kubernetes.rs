//! Pod names from the Kubernetes API server: a list, then a watch, of the pods on this node
//! only (`fieldSelector=spec.nodeName=NODE`), as the API's "efficient detection of changes"
//! describes (Kubernetes API concepts: list, watch from the list's `resourceVersion`, bookmarks,
//! 410 Gone to list again). It needs `get`, `list` and `watch` on pods and nothing else: not the
//! kubelet's `nodes/proxy`.
//!
//! In a pod, the API server is where the in-cluster configuration says: `KUBERNETES_SERVICE_HOST`
//! and `_PORT`, the service account's token and CA under
//! `/var/run/secrets/kubernetes.io/serviceaccount` (or `WATTIO_KUBE_SERVICEACCOUNT`), and the
//! node's name in `NODE_NAME` (the downward API's `spec.nodeName`; the host name otherwise).
//!
//! The watch runs on its own thread: a slow or absent API server never delays a sample. A pod
//! deleted keeps its names for ten minutes, so the energy of its last interval is still named.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use wattio_energy::attribution::WorkloadNames;

use super::http1;

/// `WATTIO_KUBE_SERVICEACCOUNT`: the directory of the service account's `token` and `ca.crt`.
pub const SERVICEACCOUNT_ENV: &str = "WATTIO_KUBE_SERVICEACCOUNT";
const SERVICEACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The most pods one node may hold here (the kubelet's default is 110).
const MAX_PODS: usize = 10_000;
/// The most one watch event or one list page may be.
const MAX_EVENT: usize = 8 << 20;
const MAX_PAGE: usize = 64 << 20;
const CONNECT: Duration = Duration::from_secs(5);
const LIST_DEADLINE: Duration = Duration::from_secs(30);
/// The server ends a watch after `WATCH_S`; with no event or bookmark for `QUIET` the watch is
/// begun again from the last version seen.
const WATCH_S: u64 = 290;
const QUIET: Duration = Duration::from_secs(120);
const KEEP_ENDED: Duration = Duration::from_secs(600);

/// Where the API server is and who this node is.
#[derive(Clone, Debug)]
pub struct KubeConfig {
    pub host: String,
    pub port: u16,
    pub token_file: PathBuf,
    pub ca_file: PathBuf,
    pub node: String,
}

impl KubeConfig {
    /// The in-cluster configuration; `Ok(None)` outside a cluster (no `KUBERNETES_SERVICE_HOST`).
    pub fn in_cluster() -> Result<Option<KubeConfig>, String> {
        let Ok(host) = std::env::var("KUBERNETES_SERVICE_HOST") else {
            return Ok(None);
        };
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let port: u16 = port
            .parse()
            .map_err(|_| format!("KUBERNETES_SERVICE_PORT={port} is not a port number"))?;
        let dir = std::env::var_os(SERVICEACCOUNT_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(SERVICEACCOUNT_DIR));
        let node = match std::env::var("NODE_NAME") {
            Ok(n) if !n.is_empty() => n,
            _ => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .map_err(|e| format!("no NODE_NAME and no host name ({e}); set NODE_NAME from the downward API (fieldRef spec.nodeName)"))?,
        };
        Ok(Some(KubeConfig {
            host,
            port,
            token_file: dir.join("token"),
            ca_file: dir.join("ca.crt"),
            node,
        }))
    }
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
    #[serde(default)]
    annotations: HashMap<String, String>,
}

/// The annotation a static pod's mirror carries: the uid the kubelet gave the pod, which its
/// cgroup is named after (the mirror on the API server has a uid of its own).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The most containers a pod may name, and the longest name or image kept.
const MAX_CONTAINERS_PER_POD: usize = 1000;
const MAX_NAME: usize = 4096;

#[derive(Deserialize)]
struct ContainerStatus {
    name: String,
    #[serde(default, rename = "containerID")]
    container_id: Option<String>,
    #[serde(default)]
    image: String,
}

#[derive(Deserialize, Default)]
struct PodStatus {
    #[serde(default, rename = "containerStatuses")]
    containers: Vec<ContainerStatus>,
    #[serde(default, rename = "initContainerStatuses")]
    init: Vec<ContainerStatus>,
    #[serde(default, rename = "ephemeralContainerStatuses")]
    ephemeral: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
struct PodObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Deserialize)]
struct PodList {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    items: Vec<PodObject>,
}

#[derive(Deserialize)]
struct WatchEvent {
    #[serde(rename = "type")]
    kind: String,
    /// A pod, or on `ERROR` a Status (whose `status` is a string, not a pod's).
    object: serde_json::Value,
}

/// A pod's names and its containers' (id, name, image).
struct Pod {
    name: String,
    namespace: String,
    containers: Vec<(String, String, String)>,
    ended: Option<Instant>,
}

#[derive(Default)]
struct PodIndex {
    pods: HashMap<String, Pod>,
    /// Container id → pod uid.
    containers: HashMap<String, String>,
    /// A static pod's uid (its cgroup's) → its mirror's uid.
    mirrors: HashMap<String, String>,
    error: Option<String>,
    listed: bool,
}

impl PodIndex {
    fn put(&mut self, p: PodObject) -> Result<(), String> {
        let uid = p.metadata.uid.clone();
        if !self.pods.contains_key(&uid) && self.pods.len() >= MAX_PODS {
            self.forget_ended();
            if self.pods.len() >= MAX_PODS {
                return Err(format!(
                    "over {MAX_PODS} pods on this node; the rest stay named by their cgroups"
                ));
            }
        }
        let short = |t: String| t.chars().take(MAX_NAME).collect::<String>();
        let containers: Vec<(String, String, String)> =
            [p.status.containers, p.status.init, p.status.ephemeral]
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let id = c.container_id?;
                    // `containerd://ID`, `cri-o://ID`, `docker://ID`
                    let id = id.rsplit("://").next().unwrap_or(&id).to_string();
                    Some((short(id), short(c.name), short(c.image)))
                })
                .take(MAX_CONTAINERS_PER_POD)
                .collect();
        // A restarted container has a new id: the old ones go with the old status.
        if let Some(old) = self.pods.get(&uid) {
            for (id, _, _) in &old.containers {
                self.containers.remove(id);
            }
        }
        for (id, _, _) in &containers {
            self.containers.insert(id.clone(), uid.clone());
        }
        if let Some(static_uid) = p.metadata.annotations.get(MIRROR_ANNOTATION) {
            self.mirrors.insert(short(static_uid.clone()), uid.clone());
        }
        self.pods.insert(
            uid,
            Pod {
                name: short(p.metadata.name),
                namespace: short(p.metadata.namespace),
                containers,
                ended: None,
            },
        );
        Ok(())
    }

    /// The pod whose cgroup is named after `uid`: its own, or a static pod's mirror.
    fn pod(&self, uid: &str) -> Option<&Pod> {
        self.pods
            .get(uid)
            .or_else(|| self.pods.get(self.mirrors.get(uid)?))
    }

    fn end(&mut self, uid: &str) {
        if let Some(p) = self.pods.get_mut(uid) {
            p.ended.get_or_insert_with(Instant::now);
        }
    }

    /// Forgets the pods that ended over ten minutes ago.
    fn forget_ended(&mut self) {
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.ended.is_some_and(|t| t.elapsed() > KEEP_ENDED))
            .map(|(u, _)| u.clone())
            .collect();
        for uid in gone {
            if let Some(p) = self.pods.remove(&uid) {
                for (id, _, _) in p.containers {
                    self.containers.remove(&id);
                }
            }
        }
        let pods = &self.pods;
        self.mirrors.retain(|_, uid| pods.contains_key(uid));
    }
}

/// The pods of this node, kept up to date by a watch on its own thread.
pub struct PodWatch {
    index: Arc<Mutex<PodIndex>>,
    stop: Arc<AtomicBool>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl PodWatch {
    /// Starts listing and watching; the names come as the API server answers.
    pub fn start(cfg: KubeConfig) -> Result<PodWatch, String> {
        let tls = tls_config(&cfg)?;
        let index = Arc::new(Mutex::new(PodIndex::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (i, s) = (index.clone(), stop.clone());
        std::thread::Builder::new()
            .name("wattio-pod-watch".into())
            .spawn(move || run(&cfg, &tls, &i, &s))
            .map_err(|e| format!("cannot start the pod watch ({e})"))?;
        Ok(PodWatch { index, stop })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PodIndex> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The names of the pod of uid `uid`.
    pub fn pod(&self, uid: &str) -> Option<WorkloadNames> {
        let ix = self.lock();
        let p = ix.pod(uid)?;
        Some(WorkloadNames {
            pod_name: Some(p.name.clone()),
            container_namespace: Some(p.namespace.clone()),
            named_by: "kubernetes".into(),
            ..Default::default()
        })
    }

    /// The names of the container of id `id`, and of its pod.
    pub fn container(&self, id: &str) -> Option<WorkloadNames> {
        let ix = self.lock();
        let p = ix.pods.get(ix.containers.get(id)?)?;
        let (_, name, image) = p.containers.iter().find(|c| c.0 == id)?;
        Some(WorkloadNames {
            container_name: Some(name.clone()),
            image: Some(image.clone()).filter(|i| !i.is_empty()),
            pod_name: Some(p.name.clone()),
            container_namespace: Some(p.namespace.clone()),
            named_by: "kubernetes".into(),
        })
    }

    /// Why the last list or watch failed, while it has not recovered.
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    /// Whether the first list has been read.
    pub fn listed(&self) -> bool {
        self.lock().listed
    }
}

fn tls_config(cfg: &KubeConfig) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let bytes = std::fs::read(&cfg.ca_file).map_err(|e| {
        format!("the API server's CA {}: cannot read it ({e}); mount the service account (automountServiceAccountToken: true)", cfg.ca_file.display())
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&bytes) {
        let c = c.map_err(|e| {
            format!(
                "the API server's CA {}: not PEM ({e})",
                cfg.ca_file.display()
            )
        })?;
        roots
            .add(c)
            .map_err(|e| format!("the API server's CA {}: {e}", cfg.ca_file.display()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, http1::Deadline<TcpStream>>;

/// A GET to the API server with the service account's token (read again each time: projected
/// tokens are rotated).
fn get(
    cfg: &KubeConfig,
    tls: &Arc<rustls::ClientConfig>,
    target: &str,
    deadline: Duration,
    quiet: Duration,
) -> Result<http1::Response<Tls>, String> {
    let token = std::fs::read_to_string(&cfg.token_file).map_err(|e| {
        format!(
            "the service account token {}: cannot read it ({e})",
            cfg.token_file.display()
        )
    })?;
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", cfg.host, cfg.port))?
        .next()
        .ok_or_else(|| format!("{}:{}: no address", cfg.host, cfg.port))?;
    let tcp = TcpStream::connect_timeout(&addr, CONNECT).map_err(|e| format!("{addr}: {e}"))?;
    tcp.set_read_timeout(Some(quiet))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(CONNECT))
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from(cfg.host.clone())
        .map_err(|e| format!("{}: not a server name ({e})", cfg.host))?;
    let conn = rustls::ClientConnection::new(tls.clone(), name).map_err(|e| e.to_string())?;
    let stream = rustls::StreamOwned::new(
        conn,
        http1::Deadline {
            inner: tcp,
            until: Instant::now() + deadline,
        },
    );
    let auth = format!("Bearer {}", token.trim());
    let r = http1::get(stream, &cfg.host, target, &[("Authorization", &auth)])
        .map_err(|e| format!("GET {target}: {e}"))?;
    match r.status {
        200 => Ok(r),
        401 | 403 => Err(format!(
            "GET {target}: {} — the service account needs get, list and watch on pods (deploy/kubernetes/rbac.yaml)",
            r.status
        )),
        410 => Err(GONE.into()),
        s => Err(format!("GET {target}: answered {s}")),
    }
}

const GONE: &str = "410 Gone";

/// `text` as a query parameter's value: all but the unreserved characters percent-encoded.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn selector(cfg: &KubeConfig) -> String {
    format!("fieldSelector=spec.nodeName%3D{}", query_escape(&cfg.node))
}

/// Lists the node's pods, page by page; returns them and the list's version.
fn list(
    cfg: &KubeConfig,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(Vec<PodObject>, String), String> {
    let mut pods = Vec::new();
    let mut next: Option<String> = None;
    // A server that keeps answering empty pages with a continue token ends here.
    for _ in 0..MAX_PODS / 500 + 10 {
        let mut target = format!("/api/v1/pods?{}&limit=500", selector(cfg));
        if let Some(c) = &next {
            target.push_str("&continue=");
            target.push_str(&query_escape(c));
        }
        let body = get(cfg, tls, &target, LIST_DEADLINE, LIST_DEADLINE)?
            .body_to_end(MAX_PAGE)
            .map_err(|e| format!("GET {target}: {e}"))?;
        let page: PodList = serde_json::from_slice(&body)
            .map_err(|e| format!("GET {target}: not a pod list ({e})"))?;
        pods.extend(page.items);
        if pods.len() > MAX_PODS {
            return Err(format!("over {MAX_PODS} pods on node {}", cfg.node));
        }
        match page.metadata.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => next = Some(c),
            None => return Ok((pods, page.metadata.resource_version)),
        }
    }
    Err(format!(
        "the pod list of node {} did not end after {} pages",
        cfg.node,
        MAX_PODS / 500 + 10
    ))
}

/// Follows a watch from `version` until the server ends it; returns the last version seen, or
/// `None` when the version is too old (410 Gone) and the pods must be listed again.
fn watch(
    cfg: &KubeConfig,
    tls: &Arc<rustls::ClientConfig>,
    version: &str,
    index: &Mutex<PodIndex>,
    stop: &AtomicBool,
) -> Result<Option<String>, String> {
    let target = format!(
        "/api/v1/pods?{}&watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_S}&resourceVersion={}",
        selector(cfg),
        query_escape(version)
    );
    let deadline = Duration::from_secs(WATCH_S) + QUIET;
    let mut body = match get(cfg, tls, &target, deadline, QUIET) {
        Ok(r) => r.body_reader(),
        Err(e) if e == GONE => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut version = version.to_string();
    let mut line = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        line.clear();
        let n = body
            .by_ref()
            .take(MAX_EVENT as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("the pod watch: {e}"))?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_EVENT {
            return Err(format!("a pod watch event over {} MiB", MAX_EVENT >> 20));
        }
        let ev: WatchEvent = serde_json::from_slice(&line)
            .map_err(|e| format!("the pod watch: an event that is not JSON ({e})"))?;
        if ev.kind == "ERROR" {
            // A Status: 410 Gone (the version is too old) says to list again.
            let code = ev.object.get("code").and_then(|c| c.as_u64());
            return match code {
                Some(410) => Ok(None),
                _ => Err(format!("the pod watch: an error event (code {code:?})")),
            };
        }
        let pod: PodObject = serde_json::from_value(ev.object)
            .map_err(|e| format!("the pod watch: a {} event without a pod ({e})", ev.kind))?;
        let mut ix = index.lock().unwrap_or_else(|p| p.into_inner());
        if !pod.metadata.resource_version.is_empty() {
            version = pod.metadata.resource_version.clone();
        }
        match ev.kind.as_str() {
            "DELETED" => ix.end(&pod.metadata.uid),
            "ADDED" | "MODIFIED" => {
                ix.put(pod)?;
                continue;
            }
            _ => {}
        }
        ix.forget_ended();
    }
    Ok(Some(version))
}

/// List, then watch, again and again; errors back off from 1 s to 30 s.
fn run(
    cfg: &KubeConfig,
    tls: &Arc<rustls::ClientConfig>,
    index: &Mutex<PodIndex>,
    stop: &AtomicBool,
) {
    let mut version: Option<String> = None;
    let mut backoff = Duration::from_secs(1);
    let set_error = |e: Option<String>| index.lock().unwrap_or_else(|p| p.into_inner()).error = e;
    while !stop.load(Ordering::Relaxed) {
        let result = match &version {
            None => list(cfg, tls).and_then(|(pods, v)| {
                let mut ix = index.lock().unwrap_or_else(|p| p.into_inner());
                let listed: std::collections::HashSet<String> =
                    pods.iter().map(|p| p.metadata.uid.clone()).collect();
                let gone: Vec<String> = ix
                    .pods
                    .keys()
                    .filter(|u| !listed.contains(*u))
                    .cloned()
                    .collect();
                for uid in gone {
                    ix.end(&uid);
                }
                ix.forget_ended();
                for p in pods {
                    ix.put(p)?;
                }
                ix.listed = true;
                version = Some(v);
                Ok(())
            }),
            Some(v) => {
                let began = Instant::now();
                let r = watch(cfg, tls, v, index, stop).map(|next| version = next);
                // A server that ends every watch at once (410 after 410) is not asked in a
                // tight loop.
                if began.elapsed() < Duration::from_secs(1) {
                    std::thread::sleep(Duration::from_secs(1));
                }
                r
            }
        };
        match result {
            Ok(()) => {
                set_error(None);
                backoff = Duration::from_secs(1);
            }
            Err(e) => {
                set_error(Some(e));
                version = None;
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, ids: &[&str], mirror: Option<&str>) -> PodObject {
        let mut v = serde_json::json!({
            "metadata": {"name": "etcd-a", "namespace": "kube-system", "uid": uid},
            "status": {"containerStatuses": ids.iter().map(|id| serde_json::json!(
                {"name": "etcd", "image": "etcd:3", "containerID": format!("containerd://{id}")}
            )).collect::<Vec<_>>()}
        });
        if let Some(m) = mirror {
            v["metadata"]["annotations"] = serde_json::json!({MIRROR_ANNOTATION: m});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_static_pod_is_found_by_its_cgroup_uid_and_a_restart_forgets_the_old_id() {
        let mut ix = PodIndex::default();
        ix.put(pod("mirror-uid", &["old"], Some("static-uid")))
            .unwrap();
        ix.put(pod("mirror-uid", &["new"], Some("static-uid")))
            .unwrap();
        assert_eq!(
            ix.pod("static-uid").map(|p| p.name.as_str()),
            Some("etcd-a")
        );
        assert!(!ix.containers.contains_key("old"));
        assert_eq!(
            ix.containers.get("new").map(String::as_str),
            Some("mirror-uid")
        );
    }

    #[test]
    fn names_are_escaped_in_queries() {
        assert_eq!(query_escape("p300&x=y+z%"), "p300%26x%3Dy%2Bz%25");
        assert_eq!(query_escape("node-a.b_c~"), "node-a.b_c~");
    }
}
