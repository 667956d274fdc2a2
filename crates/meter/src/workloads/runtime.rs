//! Container names from docker's or podman's API socket: `GET /containers/json?all=1` of the
//! Docker Engine API, which podman serves too (`podman system service`). Each container's id,
//! name, image, and the pod its Kubernetes labels name, where it has them. The listing runs on
//! a thread of its own; the sampling thread only reads what it found.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
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
/// How long `open` waits for the first listing.
const FIRST_ANSWER: Duration = Duration::from_secs(3);
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

/// What the listing thread has learnt, read by the sampling thread.
#[derive(Default)]
struct Known {
    names: HashMap<String, (WorkloadNames, Instant)>,
    last_error: Option<String>,
}

/// A runtime's containers by id, listed on a thread of its own (a runtime that hangs never
/// holds a sample up) and listed again when an unknown id shows up, at most every 10 s.
pub struct Runtime {
    known: Arc<Mutex<Known>>,
    /// Asks the listing thread for a new listing; dropped with the runtime, which ends it.
    wake: mpsc::SyncSender<()>,
}

impl Runtime {
    /// The runtime at `WATTIO_CONTAINER_SOCKET`, or at the first default socket that answers
    /// its first listing within 3 s; `Err` says why none does.
    pub fn open() -> Result<Runtime, String> {
        let sockets: Vec<PathBuf> = match std::env::var_os(CONTAINER_SOCKET_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => DEFAULT_SOCKETS.iter().map(PathBuf::from).collect(),
        };
        let mut why = Vec::new();
        for s in sockets {
            if !s.exists() {
                why.push(format!("{}: no such socket", s.display()));
                continue;
            }
            let known = Arc::new(Mutex::new(Known::default()));
            let (wake, woken) = mpsc::sync_channel(1);
            let (first, first_rx) = mpsc::channel();
            let k = known.clone();
            let socket = s.clone();
            std::thread::Builder::new()
                .name("wattio-containers".into())
                .spawn(move || list_when_asked(&socket, &k, &woken, first))
                .map_err(|e| format!("cannot start the container listing ({e})"))?;
            match first_rx.recv_timeout(FIRST_ANSWER) {
                Ok(Ok(())) => return Ok(Runtime { known, wake }),
                Ok(Err(e)) => why.push(format!("{}: {e}", s.display())),
                Err(_) => why.push(format!(
                    "{}: no answer within {} s",
                    s.display(),
                    FIRST_ANSWER.as_secs()
                )),
            }
        }
        Err(format!(
            "no container runtime answered ({}); start docker, or podman's API (podman system service), or set {CONTAINER_SOCKET_ENV} to its socket",
            why.join("; ")
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The names of container `id`, as last listed; an unknown id asks for a new listing,
    /// whose answer names it from a later interval on.
    pub fn names(&self, id: &str) -> Option<WorkloadNames> {
        let found = self.lock().names.get(id).map(|(n, _)| n.clone());
        if found.is_none() {
            // A listing already asked for is enough.
            let _ = self.wake.try_send(());
        }
        found
    }

    /// Why the last listing failed, while none has succeeded since.
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }
}

/// The listing thread: one listing at once (its answer to `first`), then one each time it is
/// asked, at most every 10 s, until the runtime is dropped.
fn list_when_asked(
    socket: &Path,
    known: &Mutex<Known>,
    woken: &mpsc::Receiver<()>,
    first: mpsc::Sender<Result<(), String>>,
) {
    let mut kind = "docker";
    let answer = |kind: &mut &'static str| {
        let r = list(socket, kind);
        let mut k = known.lock().unwrap_or_else(|p| p.into_inner());
        match r {
            Ok(listed) => {
                let now = Instant::now();
                for (id, names) in listed {
                    k.names.insert(id, (names, now));
                }
                // Those no longer listed keep their names a while: their last interval is named.
                k.names
                    .retain(|_, (_, seen)| now.duration_since(*seen) < KEEP_ENDED);
                k.last_error = None;
                Ok(())
            }
            Err(e) => {
                k.last_error = Some(e.clone());
                Err(e)
            }
        }
    };
    let _ = first.send(answer(&mut kind));
    let mut last = Instant::now();
    while woken.recv().is_ok() {
        std::thread::sleep(RELIST_AFTER.saturating_sub(last.elapsed()));
        let _ = answer(&mut kind);
        last = Instant::now();
    }
}

/// One listing: each container's id and names. `kind` becomes `podman` where podman answers.
fn list(socket: &Path, kind: &mut &'static str) -> Result<Vec<(String, WorkloadNames)>, String> {
    let (server, body) = fetch(socket, "/containers/json?all=1")?;
    if server.is_some_and(|s| s.starts_with("Libpod")) {
        *kind = "podman";
    }
    let listed: Vec<Listed> = serde_json::from_slice(&body)
        .map_err(|e| format!("its container list is not the Engine API's JSON ({e})"))?;
    if listed.len() > MAX_CONTAINERS {
        return Err(format!(
            "it lists {} containers, over {MAX_CONTAINERS}",
            listed.len()
        ));
    }
    Ok(listed
        .into_iter()
        .map(|c| {
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
                named_by: kind.to_string(),
            };
            (c.id, names)
        })
        .collect())
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
