//! An OpenMetrics endpoint: `wattio_energy_joules_total{socket,domain,mechanism,estimated,model}`.
//!
//! Each scrape of `GET /metrics` reads the counters afresh (the [`Meter`]'s background poller
//! keeps them wrap-safe between scrapes), so the values are current to the request. The server is
//! a small blocking HTTP/1.1 responder on std sockets (one short-lived thread per connection,
//! capped), parsing requests with `httparse`.

use crate::meter::Meter;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Labels of the energy counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EnergyLabels {
    pub socket: String,
    pub domain: String,
    pub mechanism: String,
    pub estimated: String,
    /// The model and coefficients for estimates; empty for measurements.
    pub model: String,
}

/// The metrics registry fed by a [`Meter`].
pub struct Exporter {
    meter: Meter,
    registry: Registry,
    energy: Family<EnergyLabels, Counter<f64, AtomicU64>>,
    scrape_errors: Counter,
    last_totals: Mutex<Vec<f64>>,
    labels: Vec<EnergyLabels>,
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
        let p = meter.provenance().clone();
        let labels: Vec<EnergyLabels> = meter
            .counters()
            .iter()
            .map(|c| EnergyLabels {
                socket: c.socket.to_string(),
                domain: c.domain.to_string(),
                mechanism: p.mechanism.to_string(),
                estimated: p.estimated.to_string(),
                model: p.model.clone().unwrap_or_default(),
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
        }
    }

    /// Reads the counters and renders the OpenMetrics text.
    pub fn render(&self) -> String {
        match self.meter.snapshot() {
            Ok(snap) => {
                let mut last = self.last_totals.lock().unwrap_or_else(|p| p.into_inner());
                for (i, l) in self.labels.iter().enumerate() {
                    let d = (snap.totals_j[i] - last[i]).max(0.0);
                    self.energy.get_or_create(l).inc_by(d);
                    last[i] = snap.totals_j[i];
                }
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
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
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

/// Serves `exporter` on `listener` until `stop` is raised.
pub fn serve(
    listener: TcpListener,
    exporter: Arc<Exporter>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
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
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
