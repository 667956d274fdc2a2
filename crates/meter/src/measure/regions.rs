//! Energy of a region of code: while `wattio measure` runs a command, it serves a Unix socket
//! (named in the command's environment as `WATTIO_REGION_SOCKET`) on which the program opens
//! and closes named regions of its own code (the clients in `clients/python` and
//! `clients/java`, `with wattio.region("parse"):`). Each region is measured as `measure`
//! measures a command: the machine's energy over the region's window and the program's share of
//! it by its CPU time over that window, labelled the same way.
//!
//! The protocol, one request line and one reply line (UTF-8, `\n`-terminated), any number of
//! connections and regions, nested or overlapping:
//!
//! | request | reply |
//! |---|---|
//! | `BEGIN <name>` | `OK <id>` (the meter read and the caller's CPU time noted) |
//! | `END <id>` | one JSON object: [`RegionFigure`] |
//! | anything else | `ERR <why>` |
//!
//! The caller is the process at the other end of the socket (`SO_PEERCRED`), so a region
//! counts the CPU time of all that process's threads. A name is 1 to 200 characters without
//! control characters; nested regions are named by the client as a path (`parse/tokenize`).
//! Bounds, since the program is not trusted to be well behaved: 32 connections at once, 64
//! open regions a connection, lines of at most 512 bytes, and at most 100,000 regions kept one
//! by one (past that only the per-name totals grow).

use crate::meter::{Meter, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use wattio_energy::attribution::{self, cputime};
use wattio_energy::SysRoot;
use wattio_progress::Cancel;

/// The environment variable that names the socket to the measured command.
pub const REGION_SOCKET_ENV: &str = "WATTIO_REGION_SOCKET";

const MAX_CONNECTIONS: usize = 32;
const MAX_OPEN: usize = 64;
const MAX_LINE: usize = 512;
const MAX_KEPT: usize = 100_000;
const MAX_NAME: usize = 200;

/// One closed region, as the client gets it back after `END`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionFigure {
    pub name: String,
    /// The process that opened it.
    pub pid: u32,
    /// Wall seconds from `BEGIN` to `END`.
    pub window_s: f64,
    /// CPU seconds of the process (all its threads) over the window.
    pub cpu_s: f64,
    /// The machine's energy over the window (as `measure`'s `total_j`).
    pub energy_j: f64,
    pub energy_label: String,
    /// The process's CPU-time share of `energy_j` (as `measure`'s `attributed_j`).
    pub attributed_j: f64,
    pub attributed_label: String,
}

/// Every region of one name: how often, and their summed figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegionTotal {
    pub name: String,
    pub count: u64,
    pub window_s: f64,
    pub cpu_s: f64,
    pub energy_j: f64,
    pub attributed_j: f64,
    pub attributed_label: String,
}

/// What the regions of a run added up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Regions {
    /// By name, in name order.
    pub totals: Vec<RegionTotal>,
    /// Regions opened and never closed before the command ended (not in `totals`).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub unclosed: u64,
    /// Requests refused (`ERR`), for a client that breaks the protocol.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub refused: u64,
    /// Regions of new names closed past the bound of regions kept: answered, not summed.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub not_kept: u64,
    /// Why the run had no region socket, when it could not have one (the command ran anyway).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unavailable: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Default)]
struct Book {
    totals: BTreeMap<String, RegionTotal>,
    kept: usize,
    not_kept: u64,
    unclosed: u64,
    refused: u64,
}

/// The socket a run's regions arrive on, and what arrived.
pub(crate) struct RegionServer<'m> {
    meter: &'m Meter,
    root: SysRoot,
    n_cpus: usize,
    listener: UnixListener,
    /// The private directory the socket is in (removed with it).
    dir: tempfile::TempDir,
    book: Mutex<Book>,
}

struct Open {
    name: String,
    before: Snapshot,
    cpu_ns: u64,
}

impl<'m> RegionServer<'m> {
    /// A socket in a fresh private directory (mode 0700: only this user's programs reach it).
    pub(crate) fn bind(meter: &'m Meter, root: SysRoot, n_cpus: usize) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("wattio-regions-")
            .tempdir()?;
        let listener = UnixListener::bind(dir.path().join("region.sock"))?;
        listener.set_nonblocking(true)?;
        Ok(RegionServer {
            meter,
            root,
            n_cpus,
            listener,
            dir,
            book: Mutex::new(Book::default()),
        })
    }

    /// The path to hand the command in [`REGION_SOCKET_ENV`].
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("region.sock")
    }

    /// Serves until `stop` is set; each connection on a thread of `scope`.
    pub(crate) fn serve<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>, stop: &'s Cancel) {
        let mut live = Vec::new();
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    live.retain(|h: &std::thread::ScopedJoinHandle<'_, ()>| !h.is_finished());
                    if live.len() >= MAX_CONNECTIONS {
                        self.book().refused += 1;
                        continue;
                    }
                    live.push(scope.spawn(move || self.connection(stream, stop)));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    match stop.wait_readable(&self.listener, None) {
                        Ok(true) => {}
                        _ => return,
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One client: lines in, replies out, until it hangs up or the run ends.
    fn connection(&self, mut stream: UnixStream, stop: &Cancel) {
        let Some(pid) = peer_pid(&stream) else {
            return;
        };
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        let mut open: BTreeMap<u64, Open> = BTreeMap::new();
        let mut next_id = 1u64;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        'read: while let Ok(true) = stop.wait_readable(&stream, None) {
            let n = match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let reply = match std::str::from_utf8(&line[..end]) {
                    _ if end > MAX_LINE => Err(format!("a line of more than {MAX_LINE} bytes")),
                    Ok(l) => self.request(l.trim_end_matches('\r'), pid, &mut open, &mut next_id),
                    Err(_) => Err("not UTF-8".to_string()),
                };
                let reply = reply.unwrap_or_else(|why| {
                    self.book().refused += 1;
                    format!("ERR {why}")
                });
                if writeln!(stream, "{reply}").is_err() {
                    break 'read;
                }
            }
            if buf.len() > MAX_LINE {
                self.book().refused += 1;
                let _ = writeln!(stream, "ERR a line of more than {MAX_LINE} bytes");
                break;
            }
        }
        self.book().unclosed += open.len() as u64;
    }

    fn request(
        &self,
        line: &str,
        pid: u32,
        open: &mut BTreeMap<u64, Open>,
        next_id: &mut u64,
    ) -> Result<String, String> {
        let (verb, arg) = line.split_once(' ').unwrap_or((line, ""));
        match verb {
            "BEGIN" => {
                let name = arg.trim();
                if name.is_empty() || name.chars().count() > MAX_NAME {
                    return Err(format!("a region name is 1 to {MAX_NAME} characters"));
                }
                if name.chars().any(char::is_control) {
                    return Err("a region name holds no control character".into());
                }
                if open.len() >= MAX_OPEN {
                    return Err(format!(
                        "{MAX_OPEN} regions are open on this connection already"
                    ));
                }
                let cpu_ns = cputime::process_cpu_ns(&self.root, pid)
                    .map_err(|e| format!("cannot read the CPU time of process {pid}: {e}"))?;
                let before = self.meter.snapshot_inside().map_err(|e| e.to_string())?;
                let id = *next_id;
                *next_id += 1;
                let name = name.to_string();
                open.insert(
                    id,
                    Open {
                        name,
                        before,
                        cpu_ns,
                    },
                );
                Ok(format!("OK {id}"))
            }
            "END" => {
                let id: u64 = arg
                    .trim()
                    .parse()
                    .map_err(|_| "END takes a region id".to_string())?;
                let o = open
                    .remove(&id)
                    .ok_or_else(|| format!("no open region {id}"))?;
                let after = self.meter.snapshot_inside().map_err(|e| e.to_string())?;
                let cpu_ns = cputime::process_cpu_ns(&self.root, pid)
                    .map_err(|e| format!("cannot read the CPU time of process {pid}: {e}"))?;
                let figure = self.figure(o, &after, cpu_ns, pid);
                self.keep(&figure);
                serde_json::to_string(&figure).map_err(|e| e.to_string())
            }
            _ => Err("expected BEGIN <name> or END <id>".into()),
        }
    }

    fn figure(&self, o: Open, after: &Snapshot, cpu_ns: u64, pid: u32) -> RegionFigure {
        let energy = self.meter.between(&o.before, after);
        let cpu_s = cpu_ns.saturating_sub(o.cpu_ns) as f64 / 1e9;
        let label = energy.provenance_label();
        RegionFigure {
            name: o.name,
            pid,
            window_s: energy.duration_s,
            cpu_s,
            energy_j: energy.total_j,
            attributed_j: attribution::share_j(
                energy.total_j,
                self.n_cpus,
                energy.duration_s,
                cpu_s,
            ),
            attributed_label: attribution::attributed_label(&label),
            energy_label: label,
        }
    }

    fn keep(&self, f: &RegionFigure) {
        let mut book = self.book();
        if book.kept >= MAX_KEPT && !book.totals.contains_key(&f.name) {
            // Past the bound only names already seen are summed; the client has its figure.
            book.not_kept += 1;
            return;
        }
        book.kept += 1;
        let t = book
            .totals
            .entry(f.name.clone())
            .or_insert_with(|| RegionTotal {
                name: f.name.clone(),
                attributed_label: f.attributed_label.clone(),
                ..RegionTotal::default()
            });
        t.count += 1;
        t.window_s += f.window_s;
        t.cpu_s += f.cpu_s;
        t.energy_j += f.energy_j;
        t.attributed_j += f.attributed_j;
    }

    /// What the run's regions added up to (`None` when the command opened none).
    pub(crate) fn finish(self) -> Option<Regions> {
        let book = self.book.into_inner().unwrap_or_else(|p| p.into_inner());
        if book.totals.is_empty() && book.unclosed == 0 && book.refused == 0 {
            return None;
        }
        Some(Regions {
            totals: book.totals.into_values().collect(),
            unclosed: book.unclosed,
            refused: book.refused,
            not_kept: book.not_kept,
            unavailable: None,
        })
    }
}

/// The process at the other end of a Unix socket (`SO_PEERCRED`, unix(7)).
fn peer_pid(stream: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of a `ucred`, the size passed in `len`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}
