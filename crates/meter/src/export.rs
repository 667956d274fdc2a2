//! An OpenMetrics endpoint: `wattio_energy_joules_total{socket,domain,mechanism,estimated,model}`
//! (GPUs read through NVML are `domain="gpu"`, `socket` the GPU's index, `mechanism="nvml"`, each
//! series with its own counter's labels),
//! and with attribution on, `wattio_process_energy_joules_total{comm,pid,…}` or
//! `wattio_cgroup_energy_joules_total{cgroup,…}` for at most N entities ([`SeriesGuard`]: the rest
//! in one `other` series), plus `wattio_unattributed_energy_joules_total` (idle/unattributed).
//!
//! Each scrape of `GET /metrics` reads the counters afresh (the [`Meter`]'s background poller
//! keeps them wrap-safe between scrapes), so the values are current to the request. The server is
//! a small blocking HTTP/1.1 responder on std sockets (one short-lived thread per connection,
//! capped), parsing requests with `httparse`.

use crate::attribute::{LiveAttribution, SeriesGuard};
use crate::meter::Meter;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattio_energy::attribution::By;
use wattio_energy::attribution::Key;
use wattio_progress::Cancel;

/// Labels of the energy counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EnergyLabels {
    pub socket: String,
    pub domain: String,
    pub mechanism: String,
    pub estimated: String,
    /// The model and coefficients for estimates; `power, integrated` for GPUs read from
    /// integrated power; empty for other measurements.
    pub model: String,
}

/// Labels of the per-process and per-cgroup series. `comm="other"` / `cgroup="other"` holds the
/// entities past the cardinality limit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EntityLabels {
    pub comm: String,
    pub pid: String,
    pub cgroup: String,
    pub mechanism: String,
    pub estimated: String,
    /// `attributed (cpu-time share)` with the total's provenance.
    pub attribution: String,
}

struct AttributionState {
    live: LiveAttribution,
    guard: SeriesGuard,
    series: std::collections::HashMap<Key, EntityLabels>,
    other: EntityLabels,
}

/// The metrics registry fed by a [`Meter`].
pub struct Exporter {
    meter: Meter,
    registry: Registry,
    energy: Family<EnergyLabels, Counter<f64, AtomicU64>>,
    scrape_errors: Counter,
    last_totals: Mutex<Vec<f64>>,
    labels: Vec<EnergyLabels>,
    entities: Family<EntityLabels, Counter<f64, AtomicU64>>,
    unattributed: Counter<f64, AtomicU64>,
    dropped: Counter<f64, AtomicU64>,
    attribution: Option<Mutex<AttributionState>>,
    /// One scrape at a time: snapshots are applied in the order they were taken.
    scrape: Mutex<()>,
}

impl Exporter {
    /// Builds the registry for `meter`'s counters.
    pub fn new(meter: Meter) -> Self {
        let mut registry = Registry::default();
        let energy = Family::<EnergyLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "wattio_energy_joules",
            "Energy consumed since the exporter started, per socket and domain; estimated=\"true\" marks model estimates (see the model label)",
            energy.clone(),
        );
        let scrape_errors = Counter::default();
        registry.register(
            "wattio_read_errors",
            "Counter reads that failed during a scrape",
            scrape_errors.clone(),
        );
        let labels: Vec<EnergyLabels> = meter
            .counters()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let p = meter.counter_provenance(i);
                EnergyLabels {
                    socket: c.socket.to_string(),
                    domain: c.domain.to_string(),
                    mechanism: p.mechanism.to_string(),
                    estimated: p.estimated.to_string(),
                    model: p.model.clone().unwrap_or_default(),
                }
            })
            .collect();
        for l in &labels {
            let _ = energy.get_or_create(l); // present from the first scrape, at 0
        }
        let n = labels.len();
        Exporter {
            meter,
            registry,
            energy,
            scrape_errors,
            last_totals: Mutex::new(vec![0.0; n]),
            labels,
            entities: Family::default(),
            unattributed: Counter::default(),
            dropped: Counter::default(),
            attribution: None,
            scrape: Mutex::new(()),
        }
    }

    /// Adds per-process or per-cgroup series (`wattio export --by`), at most `max_series` of
    /// them plus `other`. `live` must follow this exporter's meter.
    pub fn with_attribution(mut self, live: LiveAttribution, by: By, max_series: usize) -> Self {
        let (name, help) = match by {
            By::Process => ("wattio_process_energy_joules", "Energy attributed to a process by its CPU-time share since its series started (comm=\"other\": processes past the series limit); see the attribution and estimated labels"),
            By::Cgroup => ("wattio_cgroup_energy_joules", "Energy attributed to a cgroup (its own CPU time, children apart) since its series started (cgroup=\"other\": cgroups past the series limit); see the attribution and estimated labels"),
        };
        self.registry.register(name, help, self.entities.clone());
        self.registry.register(
            "wattio_dropped_series_energy_joules",
            "Energy of per-process or per-cgroup series dropped since start (their entity ended, or gave its place to another): series + other + dropped + unattributed add up to the package and DRAM energy",
            self.dropped.clone(),
        );
        self.registry.register(
            "wattio_unattributed_energy_joules",
            "Energy no process's or cgroup's CPU time explains (idle CPUs, unseen tasks)",
            self.unattributed.clone(),
        );
        let p = self.meter.provenance().clone();
        let other = EntityLabels {
            comm: if by == By::Process {
                "other".into()
            } else {
                String::new()
            },
            pid: String::new(),
            cgroup: if by == By::Cgroup {
                "other".into()
            } else {
                String::new()
            },
            mechanism: p.mechanism.to_string(),
            estimated: p.estimated.to_string(),
            attribution: wattio_energy::attribution::attributed_label(&p.label()),
        };
        let _ = self.entities.get_or_create(&other);
        // Count the energy counters from the same instant as the attribution.
        *self.last_totals.lock().unwrap_or_else(|p| p.into_inner()) = live.last_totals_j().to_vec();
        self.attribution = Some(Mutex::new(AttributionState {
            live,
            guard: SeriesGuard::new(max_series),
            series: std::collections::HashMap::new(),
            other,
        }));
        self
    }

    fn attribute(&self, snap: crate::meter::Snapshot) {
        let Some(state) = &self.attribution else {
            return;
        };
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        let st = &mut *st;
        // A failed read of CPU times advances nothing: the next scrape attributes both.
        let interval = match st.live.step_to(&self.meter, snap) {
            Ok(a) => a.interval,
            Err(_) => {
                self.scrape_errors.inc();
                return;
            }
        };
        self.unattributed.inc_by(interval.idle_j);
        // An entity with no CPU time this interval may still be alive: keep its series unless
        // it is gone from /proc (process) or from the hierarchy (cgroup); the tracker knows.
        let live = &st.live;
        let up = st.guard.update(&interval.entries, |k| live.is_alive(k));
        // Drop first: a new process may take the labels of one that just ended (same pid and
        // command after pid reuse); its series must start afresh, not inherit the old one.
        for k in &up.dropped {
            if let Some(labels) = st.series.remove(k) {
                self.entities.remove(&labels);
            }
        }
        self.dropped.inc_by(up.dropped_j);
        let base = st.other.clone();
        for s in &up.series {
            let labels = st
                .series
                .entry(s.key.clone())
                .or_insert_with(|| EntityLabels {
                    comm: s.comm.clone().unwrap_or_default(),
                    pid: s.pid.map(|p| p.to_string()).unwrap_or_default(),
                    cgroup: s.cgroup.clone().unwrap_or_default(),
                    ..base.clone()
                });
            self.entities.get_or_create(labels).inc_by(s.delta_j);
        }
        self.entities.get_or_create(&st.other).inc_by(up.other_j);
    }

    /// Reads the counters and renders the OpenMetrics text.
    pub fn render(&self) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        match self.meter.snapshot() {
            Ok(snap) => {
                {
                    let mut last = self.last_totals.lock().unwrap_or_else(|p| p.into_inner());
                    for (i, l) in self.labels.iter().enumerate() {
                        let d = (snap.totals_j[i] - last[i]).max(0.0);
                        self.energy.get_or_create(l).inc_by(d);
                        last[i] = snap.totals_j[i];
                    }
                }
                self.attribute(snap);
            }
            Err(_) => {
                self.scrape_errors.inc();
            }
        }
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// The content type of OpenMetrics text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const MAX_CONNECTIONS: usize = 64;
const MAX_REQUEST: usize = 8192;

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &str) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn handle(mut stream: TcpStream, exporter: &Exporter) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let path = req.path.unwrap_or("/");
                let path = path.split('?').next().unwrap_or(path);
                return match (req.method, path) {
                    (Some("GET"), "/metrics") => {
                        respond(&mut stream, "200 OK", CONTENT_TYPE, &exporter.render())
                    }
                    (Some("GET"), "/") => respond(
                        &mut stream,
                        "200 OK",
                        "text/plain; charset=utf-8",
                        "wattio exporter: metrics at /metrics\n",
                    ),
                    (Some("GET"), _) => {
                        respond(&mut stream, "404 Not Found", "text/plain", "not found\n")
                    }
                    _ => respond(
                        &mut stream,
                        "405 Method Not Allowed",
                        "text/plain",
                        "only GET\n",
                    ),
                };
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => continue,
            _ => {
                return respond(
                    &mut stream,
                    "400 Bad Request",
                    "text/plain",
                    "bad request\n",
                )
            }
        }
    }
}

/// Serves `exporter` on `listener` until `cancel` is set. Between connections it sleeps in one
/// `poll(2)` on the listener and the cancel flag.
pub fn serve_openmetrics(
    listener: TcpListener,
    exporter: Arc<Exporter>,
    cancel: &Cancel,
) -> io::Result<()> {
    // Non-blocking, so a connection gone between the wake-up and `accept` cannot block it.
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    while !cancel.is_set() {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    let mut s = stream;
                    let _ = respond(&mut s, "503 Service Unavailable", "text/plain", "busy\n");
                    continue;
                }
                active.fetch_add(1, Ordering::Relaxed);
                let ex = Arc::clone(&exporter);
                let act = Arc::clone(&active);
                std::thread::spawn(move || {
                    let _ = handle(stream, &ex);
                    act.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                cancel.wait_readable(&listener, None)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
