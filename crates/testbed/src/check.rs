//! Validation of a running testbed with plain kernel TCP between the two namespaces:
//!
//! 1. **RTT**: the time `connect()` takes is one SYN → SYN-ACK round trip; the minimum over a
//!    few handshakes must be within 1 ms of the setting.
//! 2. **Window-limited stream**: one stream whose receiver clamps its advertised window to `W`
//!    (`TCP_WINDOW_CLAMP`, exact, unlike `SO_RCVBUF`, which the kernel doubles and then scales)
//!    must run at ≈ `W / RTT` when that is below the link rate.
//! 3. **Parallel streams**: enough streams with default buffers must reach the link rate.
//!
//! Goodput is counted at the receiver between the end of a warm-up and the end of the run, so
//! slow start does not dilute it. The link's rate counts IP bytes; with a 9000-byte MTU TCP/IP
//! headers (52 bytes with timestamps) leave 99.4 % of it for payload.

use crate::bed::{enter_netns, Bed, BedState, Side, SERVER_ADDR};
use crate::TestbedError;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Settings of a check.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// TCP handshakes timed for the RTT.
    pub handshakes: usize,
    /// Advertised-window clamp of the single stream, bytes.
    pub window_bytes: u64,
    /// Streams of the parallel run.
    pub streams: usize,
    /// Warm-up before counting, per run.
    pub warmup: Duration,
    /// Counting time, per run.
    pub measure: Duration,
    /// Skip the throughput runs (RTT only: the CI test).
    pub rtt_only: bool,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            handshakes: 10,
            window_bytes: 4 << 20,
            streams: 8,
            warmup: Duration::from_secs(2),
            measure: Duration::from_secs(4),
            rtt_only: false,
        }
    }
}

/// One throughput run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputRun {
    pub streams: usize,
    /// Advertised-window clamp per stream, if any.
    pub window_clamp_bytes: Option<u64>,
    /// What theory predicts: min(link goodput, streams × W / RTT), or the link goodput for the
    /// parallel run; none for the single stream on kernel defaults.
    pub expected_bps: Option<f64>,
    /// Payload bits per second counted at the receiver.
    pub measured_bps: f64,
}

/// The result of a check.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckReport {
    pub rate_bps: u64,
    pub rtt_set_ms: f64,
    pub rtt_min_ms: f64,
    pub rtt_median_ms: f64,
    pub rtt_ok: bool,
    pub runs: Vec<ThroughputRun>,
}

/// Spawns `f` on a thread inside `side`'s network namespace; an I/O error of `f` is reported as
/// `what: error`.
fn spawn_in<T: Send + 'static>(
    bed: &Bed,
    side: Side,
    what: String,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> JoinHandle<Result<T, TestbedError>> {
    let p = bed.netns_path(side);
    std::thread::spawn(move || {
        enter_netns(&p)?;
        f().map_err(TestbedError::io(what))
    })
}

fn join<T>(h: JoinHandle<Result<T, TestbedError>>) -> Result<T, TestbedError> {
    h.join()
        .map_err(|_| TestbedError::ThreadPanicked("check"))?
}

fn set_int(fd: i32, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: setsockopt with a pointer to a live c_int.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setsockopt({level}, {opt}, {v}): {e}"),
        ));
    }
    Ok(())
}

/// A listener in the server namespace that drains every connection into one byte counter.
struct Sink {
    addr: SocketAddr,
    bytes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<(), TestbedError>>,
}

fn start_sink(bed: &Bed, window_clamp: Option<u64>) -> Result<Sink, TestbedError> {
    let bytes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let (b, s) = (bytes.clone(), stop.clone());
    let listening = "cannot listen in the server namespace".to_string();
    let handle = spawn_in(bed, Side::Server, listening, move || {
        let l = TcpListener::bind((SERVER_ADDR, 0))?;
        if let Some(w) = window_clamp {
            // Receive-buffer autotuning raises the clamp as it grows the buffer; a buffer set
            // explicitly (and big enough to hold W after the kernel's overhead share) turns
            // autotuning off, so the clamp stays exact. FORCE passes net.core.rmem_max (root).
            set_int(
                l.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (4 * w).min(i32::MAX as u64 / 2) as i32,
            )?;
            // Read by the kernel when it answers a SYN, so it applies to every accepted socket.
            set_int(
                l.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_WINDOW_CLAMP,
                w as i32,
            )?;
        }
        l.set_nonblocking(true)?;
        tx.send(l.local_addr()?).ok();
        let mut readers = Vec::new();
        while !s.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false)?;
                    if let Some(w) = window_clamp {
                        // The listener's clamp is not carried over on this kernel (the socket
                        // advertised 8 MiB); set it again on the connection itself.
                        set_int(
                            c.as_raw_fd(),
                            libc::IPPROTO_TCP,
                            libc::TCP_WINDOW_CLAMP,
                            w as i32,
                        )?;
                    }
                    c.set_read_timeout(Some(Duration::from_millis(200)))?;
                    let (b, s) = (b.clone(), s.clone());
                    readers.push(std::thread::spawn(move || {
                        let mut buf = vec![0u8; 1 << 20];
                        while !s.load(Ordering::Relaxed) {
                            match c.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    b.fetch_add(n as u64, Ordering::Relaxed);
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                    }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => return Err(e),
            }
        }
        for r in readers {
            let _ = r.join();
        }
        Ok(())
    });
    let addr = match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(addr) => addr,
        // The thread ended without an address: its error says why.
        Err(RecvTimeoutError::Disconnected) => {
            join(handle)?;
            return Err(TestbedError::CheckNotStarted);
        }
        Err(RecvTimeoutError::Timeout) => {
            stop.store(true, Ordering::Relaxed);
            return Err(TestbedError::CheckNotStarted);
        }
    };
    Ok(Sink {
        addr,
        bytes,
        stop,
        handle,
    })
}

impl Sink {
    fn finish(self) -> Result<(), TestbedError> {
        self.stop.store(true, Ordering::Relaxed);
        join(self.handle)
    }
}

/// Times `n` TCP handshakes from the client namespace; returns the durations in ms.
fn handshakes(bed: &Bed, addr: SocketAddr, n: usize) -> Result<Vec<f64>, TestbedError> {
    let connecting =
        format!("cannot connect to {addr} through the testbed: is the delay line running?");
    join(spawn_in(bed, Side::Client, connecting, move || {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            out.push(t.elapsed().as_secs_f64() * 1e3);
            drop(c);
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(out)
    }))
}

/// Runs `streams` senders for warm-up + measure and returns the receiver's goodput in bit/s.
fn throughput(
    bed: &Bed,
    cfg: &CheckConfig,
    streams: usize,
    clamp: Option<u64>,
) -> Result<f64, TestbedError> {
    let sink = start_sink(bed, clamp)?;
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..streams)
        .map(|_| {
            let (addr, stop) = (sink.addr, stop.clone());
            spawn_in(bed, Side::Client, "a sender failed".into(), move || {
                let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
                if clamp.is_some() {
                    // The host caps autotuned send buffers at tcp_wmem[2] (4 MiB here), which
                    // would bind before a 4 MiB receive window does; ask for the maximum
                    // (the kernel doubles it) so only the receiver's clamp limits the stream.
                    set_int(
                        c.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_SNDBUF,
                        i32::MAX / 2,
                    )?;
                }
                c.set_write_timeout(Some(Duration::from_millis(200)))?;
                let buf = vec![0x5au8; 1 << 20];
                while !stop.load(Ordering::Relaxed) {
                    match c.write(&buf) {
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(cfg.warmup);
    let (b0, t0) = (sink.bytes.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(cfg.measure);
    let (b1, t1) = (sink.bytes.load(Ordering::Relaxed), Instant::now());
    stop.store(true, Ordering::Relaxed);
    let mut first_err = None;
    for s in senders {
        if let Err(e) = join(s) {
            first_err.get_or_insert(e);
        }
    }
    sink.finish()?;
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok((b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64())
}

/// Checks a running testbed. Fails only when the testbed cannot be used; whether the numbers
/// meet the expectations is in the report (`rtt_ok`, expected vs measured).
pub fn check_bed(bed: &Bed, st: &BedState, cfg: &CheckConfig) -> Result<CheckReport, TestbedError> {
    let link = &st.link;
    let rtt_set_ms = link.rtt_us as f64 / 1000.0;
    let sink = start_sink(bed, None)?;
    let hs = handshakes(bed, sink.addr, cfg.handshakes.max(1));
    sink.finish()?;
    let mut hs = hs?;
    hs.sort_by(f64::total_cmp);
    let (rtt_min_ms, rtt_median_ms) = (hs[0], hs[hs.len() / 2]);
    let mut report = CheckReport {
        rate_bps: link.rate_bps,
        rtt_set_ms,
        rtt_min_ms,
        rtt_median_ms,
        rtt_ok: (rtt_min_ms - rtt_set_ms).abs() <= 1.0,
        runs: vec![],
    };
    if cfg.rtt_only {
        return Ok(report);
    }
    // Payload share of each IP packet: MTU − 20 (IP) − 32 (TCP with timestamps).
    let goodput = link.rate_bps as f64 * (link.mtu as f64 - 52.0) / link.mtu as f64;
    let rtt_s = rtt_set_ms / 1e3;
    let w = cfg.window_bytes;
    report.runs.push(ThroughputRun {
        streams: 1,
        window_clamp_bytes: Some(w),
        expected_bps: Some(goodput.min(w as f64 * 8.0 / rtt_s)),
        measured_bps: throughput(bed, cfg, 1, Some(w))?,
    });
    report.runs.push(ThroughputRun {
        streams: 1,
        window_clamp_bytes: None,
        expected_bps: None,
        measured_bps: throughput(bed, cfg, 1, None)?,
    });
    report.runs.push(ThroughputRun {
        streams: cfg.streams,
        window_clamp_bytes: None,
        expected_bps: Some(goodput),
        measured_bps: throughput(bed, cfg, cfg.streams, None)?,
    });
    Ok(report)
}

impl CheckReport {
    /// Whether the testbed behaves as a WAN should: RTT within 1 ms, the clamped stream within
    /// −15 %…+10 % of W/RTT, the parallel streams at ≥ 90 % of the link's goodput.
    pub fn passed(&self) -> bool {
        self.rtt_ok
            && self
                .runs
                .iter()
                .all(|r| match (r.expected_bps, r.window_clamp_bytes) {
                    (Some(e), Some(_)) => (0.85..=1.10).contains(&(r.measured_bps / e)),
                    (Some(e), None) => r.measured_bps / e >= 0.90,
                    (None, _) => true,
                })
    }

    /// A human-readable table.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "RTT: set {:.2} ms, measured min {:.2} ms, median {:.2} ms (TCP handshakes) — {}\n",
            self.rtt_set_ms,
            self.rtt_min_ms,
            self.rtt_median_ms,
            if self.rtt_ok {
                "within 1 ms"
            } else {
                "OFF by more than 1 ms"
            }
        );
        s += &format!(
            "{:<8} {:>14} {:>14} {:>14} {:>8}\n",
            "streams", "window clamp", "expected Mb/s", "measured Mb/s", "ratio"
        );
        for r in &self.runs {
            let clamp = r.window_clamp_bytes.map_or("default".to_string(), |w| {
                format!("{:.2} MiB", w as f64 / 1048576.0)
            });
            let (exp, ratio) = match r.expected_bps {
                Some(e) => (
                    format!("{:.0}", e / 1e6),
                    format!("{:.2}", r.measured_bps / e),
                ),
                None => ("-".into(), "-".into()),
            };
            s += &format!(
                "{:<8} {:>14} {:>14} {:>14.0} {:>8}\n",
                r.streams,
                clamp,
                exp,
                r.measured_bps / 1e6,
                ratio
            );
        }
        s
    }
}
