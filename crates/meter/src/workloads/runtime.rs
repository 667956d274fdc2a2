//! Container names from docker's or podman's API socket: `GET /containers/json?all=1` of the
//! Docker Engine API, which podman serves too (`podman system service`). Each container's id,
//! name, image, and the pod its Kubernetes labels name, where it has them.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use wattio_energy::attribution::WorkloadNames;

use super::http1;

/// `WATTIO_CONTAINER_SOCKET`: the runtime's API socket, where it is not at a default path
/// ([`DEFAULT_SOCKETS`]).
pub const CONTAINER_SOCKET_ENV: &str = "WATTIO_CONTAINER_SOCKET";

/// Where docker and rootful podman listen, tried in this order.
pub const DEFAULT_SOCKETS: [&str; 3] = [
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman/podman.sock",
];

/// How long one listing may take, and the least time between two listings.
const DEADLINE: Duration = Duration::from_secs(2);
const RELIST_AFTER: Duration = Duration::from_secs(10);
/// The most a listing may be, and the most containers it may name.
const MAX_LISTING: usize = 32 << 20;
const MAX_CONTAINERS: usize = 100_000;
/// How long an ended container keeps its names: its last interval's energy is still named.
const KEEP_ENDED: Duration = Duration::from_secs(600);

#[derive(Deserialize)]
struct Listed {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "Names", default)]
    names: Vec<String>,
    #[serde(rename = "Image", default)]
    image: String,
    #[serde(rename = "Labels", default)]
    labels: Option<HashMap<String, String>>,
}

/// A runtime's containers by id, listed again when an unknown id shows up.
pub struct Runtime {
    socket: PathBuf,
    /// `docker` or `podman`, from the answer's `Server` header.
    kind: &'static str,
    known: HashMap<String, (WorkloadNames, Instant)>,
    listed_at: Option<Instant>,
    /// Why the last listing failed.
    pub last_error: Option<String>,
}

impl Runtime {
    /// The runtime at `WATTIO_CONTAINER_SOCKET`, or at the first default socket that answers;
    /// `Err` says why none does.
    pub fn open() -> Result<Runtime, String> {
        let sockets: Vec<PathBuf> = match std::env::var_os(CONTAINER_SOCKET_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => DEFAULT_SOCKETS.iter().map(PathBuf::from).collect(),
        };
        let mut why = Vec::new();
        for s in sockets {
            let mut r = Runtime {
                socket: s.clone(),
                kind: "docker",
                known: HashMap::new(),
                listed_at: None,
                last_error: None,
            };
            match r.list() {
                Ok(()) => return Ok(r),
                Err(e) => why.push(format!("{}: {e}", s.display())),
            }
        }
        Err(format!(
            "no container runtime answered ({}); start docker, or podman's API (podman system service), or set {CONTAINER_SOCKET_ENV} to its socket",
            why.join("; ")
        ))
    }

    /// The names of container `id`, listing the runtime's containers again where it is
    /// unknown and the last listing is older than 10 s.
    pub fn names(&mut self, id: &str) -> Option<WorkloadNames> {
        let stale = self.listed_at.is_none_or(|t| t.elapsed() >= RELIST_AFTER);
        if !self.known.contains_key(id) && stale {
            self.last_error = self.list().err();
        }
        self.known.get(id).map(|(n, _)| n.clone())
    }

    fn list(&mut self) -> Result<(), String> {
        self.listed_at = Some(Instant::now());
        let (server, body) = fetch(&self.socket, "/containers/json?all=1")?;
        if server.is_some_and(|s| s.starts_with("Libpod")) {
            self.kind = "podman";
        }
        let listed: Vec<Listed> = serde_json::from_slice(&body)
            .map_err(|e| format!("its container list is not the Engine API's JSON ({e})"))?;
        if listed.len() > MAX_CONTAINERS {
            return Err(format!(
                "it lists {} containers, over {MAX_CONTAINERS}",
                listed.len()
            ));
        }
        let now = Instant::now();
        for c in listed {
            let labels = c.labels.unwrap_or_default();
            let label = |k: &str| labels.get(k).cloned();
            let names = WorkloadNames {
                container_name: label("io.kubernetes.container.name").or_else(|| {
                    c.names
                        .first()
                        .map(|n| n.trim_start_matches('/').to_string())
                }),
                image: Some(c.image).filter(|i| !i.is_empty()),
                pod_name: label("io.kubernetes.pod.name"),
                container_namespace: label("io.kubernetes.pod.namespace"),
                named_by: self.kind.to_string(),
            };
            self.known.insert(c.id, (names, now));
        }
        // Those no longer listed keep their names a while: their last interval is named.
        self.known
            .retain(|_, (_, seen)| now.duration_since(*seen) < KEEP_ENDED);
        Ok(())
    }
}

/// One GET on the runtime's socket: the answer's `Server` header and body.
fn fetch(socket: &Path, target: &str) -> Result<(Option<String>, Vec<u8>), String> {
    let s = UnixStream::connect(socket).map_err(|e| format!("cannot connect ({e})"))?;
    s.set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    let s = http1::Deadline {
        inner: s,
        until: Instant::now() + DEADLINE,
    };
    let r = http1::get(s, "localhost", target, &[]).map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!("GET {target} answered {}", r.status));
    }
    let server = r.server.clone();
    let body = r.body_to_end(MAX_LISTING).map_err(|e| e.to_string())?;
    Ok((server, body))
}
