//! The testbed's life cycle: `up`, `down`, `exec`, `status`, and the delay-line daemon.
//!
//! Layout for testbed `NAME` (default `wattio`):
//!
//! ```text
//!  netns NAME-client                delay-line daemon                 netns NAME-server
//!  10.77.0.1 ── wt0 (TUN, TBF) ──▶ [FIFO +RTT/2] ──▶ wt0 (TUN) ──▶ 10.77.0.2
//!  10.77.0.1 ◀── wt0 (TUN) ◀── [FIFO +RTT/2] ◀── wt0 (TUN, TBF) ── 10.77.0.2
//! ```
//!
//! Each namespace has one point-to-point TUN device; TBF on its egress sets the rate of the
//! direction leaving that namespace, and the daemon (this same binary, `testbed delay-line`)
//! holds both devices open and delays each packet by half the RTT. Nothing is attached to the
//! host's own namespace, so no traffic can leave the testbed. State (settings, daemon pid) lives
//! in `/run/wattio-testbed/NAME/`.

use crate::delay::{self, Counters, Direction};
use crate::link::{fmt_rate, LinkConfig};
use crate::TestbedError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use wattio_progress::Sink;

/// Client address inside `NAME-client`.
pub(crate) const CLIENT_ADDR: &str = "10.77.0.1";
/// Server address inside `NAME-server`.
pub(crate) const SERVER_ADDR: &str = "10.77.0.2";
/// TUN device name in both namespaces.
pub(crate) const DEV: &str = "wt0";
const RUN_DIR: &str = "/run/wattio-testbed";

/// Which end of the path (`wattio testbed exec SIDE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Side {
    /// The client namespace.
    Client,
    /// The server namespace.
    Server,
}

impl Side {
    fn suffix(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// What `up` leaves behind, as stored in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BedState {
    pub name: String,
    pub link: LinkConfig,
    pub pid: u32,
    pub client_ns: String,
    pub server_ns: String,
    pub client_addr: String,
    pub server_addr: String,
}

impl BedState {
    /// The lines `up` and `status` print.
    pub fn describe(&self) -> String {
        format!(
            "testbed {}: {}\nclient {}  (netns {}; run: wattio testbed exec client -- CMD)\nserver {}  (netns {}; run: wattio testbed exec server -- CMD)",
            self.name,
            self.link.describe(),
            self.client_addr,
            self.client_ns,
            self.server_addr,
            self.server_ns
        )
    }
}

/// Whether `up` built the testbed or found it already running with the same settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpOutcome {
    Created,
    AlreadyUp,
}

/// A testbed by name.
#[derive(Debug, Clone)]
pub struct Bed {
    name: String,
}

/// Runs a command, turning failure into a one-line error with its stderr.
fn sh(args: &[&str]) -> Result<(), TestbedError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| TestbedError::NoTool {
            program: args[0].to_string(),
            err,
        })?;
    if !out.status.success() {
        return Err(TestbedError::CommandFailed {
            command: args.join(" "),
            stderr: one_line(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(())
}

/// `text` trimmed, its lines joined with `; ` (for one-line errors).
fn one_line(text: &str) -> String {
    text.trim().replace('\n', "; ")
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the calling thread (only it) into the network namespace at `ns_path`.
pub(crate) fn enter_netns(ns_path: &Path) -> Result<(), TestbedError> {
    use std::os::fd::AsRawFd;
    let ns = fs::File::open(ns_path).map_err(TestbedError::io(format!(
        "cannot open network namespace {}: is the testbed up?",
        ns_path.display()
    )))?;
    // SAFETY: setns with a namespace fd affects only this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(TestbedError::EnterNamespace {
            path: ns_path.to_path_buf(),
            err: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Runs `f` on a short-lived thread that has entered network namespace `ns_path`, so the
/// caller's namespace never changes.
pub(crate) fn in_netns<T: Send + 'static>(
    ns_path: &Path,
    f: impl FnOnce() -> Result<T, TestbedError> + Send + 'static,
) -> Result<T, TestbedError> {
    let p = ns_path.to_owned();
    std::thread::spawn(move || {
        enter_netns(&p)?;
        f()
    })
    .join()
    .map_err(|_| TestbedError::ThreadPanicked("namespace"))?
}

/// A namespace other than the host's may only select a congestion control on the host's
/// `tcp_allowed_congestion_control` list (the kernel answers EPERM otherwise). This appends `cc`
/// to that list when the kernel has it: the list only grants permission, so no existing socket
/// or setting of the host changes.
fn allow_congestion_control(cc: &str) -> Result<(), TestbedError> {
    const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
    let available = fs::read_to_string(AVAILABLE).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == cc) {
        return Err(TestbedError::CongestionControlMissing {
            cc: cc.to_string(),
            available: available.trim().to_string(),
        });
    }
    let allowed =
        fs::read_to_string(ALLOWED).map_err(TestbedError::io(format!("cannot read {ALLOWED}")))?;
    if !allowed.split_whitespace().any(|c| c == cc) {
        fs::write(ALLOWED, format!("{} {cc}", allowed.trim()))
            .map_err(TestbedError::io(format!("cannot allow {cc} in {ALLOWED}")))?;
    }
    Ok(())
}

/// Reads `/proc/PID/cmdline` as arguments.
fn cmdline(pid: u32) -> Option<Vec<String>> {
    let mut s = Vec::new();
    fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .read_to_end(&mut s)
        .ok()?;
    Some(
        s.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

fn kill_and_wait(pid: u32) {
    let alive = || Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
    // SAFETY: kill(2) on a pid we verified to be our own daemon.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t = Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive() {
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

impl Bed {
    /// A testbed handle; `name` is 1–15 characters of `a-z`, `0-9`, `-`, starting with a letter.
    pub fn new(name: &str) -> Result<Self, TestbedError> {
        let ok = !name.is_empty()
            && name.len() <= 15
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            return Err(TestbedError::BadName(name.to_string()));
        }
        Ok(Bed { name: name.into() })
    }

    /// The namespace of one side.
    pub fn netns(&self, side: Side) -> String {
        format!("{}-{}", self.name, side.suffix())
    }

    pub(crate) fn netns_path(&self, side: Side) -> PathBuf {
        Path::new("/run/netns").join(self.netns(side))
    }

    fn state_dir(&self) -> PathBuf {
        Path::new(RUN_DIR).join(&self.name)
    }

    /// The saved state, if `up` completed and it was not taken down.
    pub fn state(&self) -> Option<BedState> {
        let s = fs::read_to_string(self.state_dir().join("state.json")).ok()?;
        serde_json::from_str(&s).ok()
    }

    /// Warnings the delay-line daemon logged (e.g. no real-time priority), one per line.
    pub fn daemon_warnings(&self) -> Vec<String> {
        fs::read_to_string(self.state_dir().join("delay-line.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Whether `pid` is this testbed's delay-line daemon.
    fn is_our_daemon(&self, pid: u32) -> bool {
        cmdline(pid).is_some_and(|a| {
            a.iter().any(|x| x == "delay-line")
                && a.windows(2).any(|w| w[0] == "--name" && w[1] == self.name)
        }) && !is_zombie(pid)
    }

    /// Daemons of this testbed still running (normally zero or one).
    fn daemons(&self) -> Vec<u32> {
        let Ok(rd) = fs::read_dir("/proc") else {
            return vec![];
        };
        let me = std::process::id();
        rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| p != me && self.is_our_daemon(p))
            .collect()
    }

    /// Whether the testbed is up and healthy (namespaces present, daemon alive).
    pub fn is_up(&self) -> Option<BedState> {
        let st = self.state()?;
        let ok = self.netns_path(Side::Client).exists()
            && self.netns_path(Side::Server).exists()
            && self.is_our_daemon(st.pid);
        ok.then_some(st)
    }

    /// Builds the testbed, or leaves it as it is when it already runs with `link`. With other
    /// settings it is rebuilt. Anything half-made by a failed attempt is removed before the error
    /// is returned. `exe` is the wattio binary that runs the delay-line daemon.
    pub fn up(&self, link: &LinkConfig, exe: &Path) -> Result<(BedState, UpOutcome), TestbedError> {
        link.validate()?;
        if !is_root() {
            return Err(TestbedError::NeedsRoot);
        }
        if let Some(st) = self.is_up() {
            if &st.link == link {
                return Ok((st, UpOutcome::AlreadyUp));
            }
        }
        self.down()?;
        match self.build(link, exe) {
            Ok(st) => Ok((st, UpOutcome::Created)),
            Err(e) => {
                let _ = self.down();
                Err(TestbedError::NotBuilt {
                    name: self.name.clone(),
                    source: Box::new(e),
                })
            }
        }
    }

    fn build(&self, link: &LinkConfig, exe: &Path) -> Result<BedState, TestbedError> {
        let state_dir = self.state_dir();
        let cannot =
            |what: &str, p: &Path| TestbedError::io(format!("cannot {what} {}", p.display()));
        fs::create_dir_all(&state_dir).map_err(cannot("create", &state_dir))?;
        let (mtu, rate, burst, limit) = (
            link.mtu.to_string(),
            fmt_rate(link.rate_bps),
            link.burst_bytes().to_string(),
            link.queue_bytes.to_string(),
        );
        allow_congestion_control(&link.cc)?;
        for (side, local, peer) in [
            (Side::Client, CLIENT_ADDR, SERVER_ADDR),
            (Side::Server, SERVER_ADDR, CLIENT_ADDR),
        ] {
            let ns = self.netns(side);
            sh(&["ip", "netns", "add", &ns])?;
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            let cc = link.cc.clone();
            in_netns(&self.netns_path(side), move || {
                fs::write("/proc/sys/net/ipv4/tcp_congestion_control", &cc).map_err(
                    TestbedError::io(format!(
                        "congestion control {cc:?} is not available in this kernel"
                    )),
                )?;
                // No IPv6 inside: router solicitations would only add noise to the path.
                let _ = fs::write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
                let _ = fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
                Ok(())
            })?;
            sh(&["ip", "-n", &ns, "tuntap", "add", "dev", DEV, "mode", "tun"])?;
            sh(&[
                "ip",
                "-n",
                &ns,
                "link",
                "set",
                DEV,
                "mtu",
                &mtu,
                "txqueuelen",
                "1000",
                "up",
            ])?;
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                local,
                "peer",
                &format!("{peer}/32"),
                "dev",
                DEV,
            ])?;
            sh(&[
                "tc", "-n", &ns, "qdisc", "replace", "dev", DEV, "root", "tbf", "rate", &rate,
                "burst", &burst, "limit", &limit,
            ])?;
        }
        let ready = self.state_dir().join("ready");
        let _ = fs::remove_file(&ready);
        let log_path = state_dir.join("delay-line.log");
        let log = fs::File::create(&log_path).map_err(cannot("create", &log_path))?;
        let log_too = log.try_clone().map_err(cannot("create", &log_path))?;
        let mut cmd = Command::new(exe);
        cmd.args(["testbed", "--name", &self.name, "delay-line"])
            .args(["--one-way-us", &(link.rtt_us / 2).to_string()])
            .args(["--mtu", &link.mtu.to_string()])
            .args(["--ready", &ready.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(log_too)
            .stderr(log);
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe; it detaches the daemon from our session so it
        // outlives `up` and a terminal hang-up.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let started = format!("cannot start the delay line ({})", exe.display());
        let mut child = cmd.spawn().map_err(TestbedError::io(&started))?;
        let t = Instant::now();
        while !ready.exists() {
            if let Some(st) = child.try_wait().map_err(TestbedError::io(&started))? {
                let log = fs::read_to_string(&log_path).unwrap_or_default();
                return Err(TestbedError::DelayLineExited {
                    status: st.to_string(),
                    log: one_line(&log),
                });
            }
            if t.elapsed() > Duration::from_secs(10) {
                return Err(TestbedError::DelayLineSlow);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let st = BedState {
            name: self.name.clone(),
            link: link.clone(),
            pid: child.id(),
            client_ns: self.netns(Side::Client),
            server_ns: self.netns(Side::Server),
            client_addr: CLIENT_ADDR.into(),
            server_addr: SERVER_ADDR.into(),
        };
        let state_file = state_dir.join("state.json");
        serde_json::to_string_pretty(&st)
            .map_err(std::io::Error::from)
            .and_then(|json| fs::write(&state_file, json))
            .map_err(cannot("write", &state_file))?;
        Ok(st)
    }

    /// Removes everything the testbed made: processes still inside its namespaces, the
    /// delay-line daemon, the namespaces (with their TUN devices and qdiscs) and the state.
    /// Succeeds when there is nothing to remove. Returns what it removed.
    pub fn down(&self) -> Result<Vec<String>, TestbedError> {
        if !is_root() {
            return Err(TestbedError::NeedsRoot);
        }
        let mut removed = Vec::new();
        for side in [Side::Client, Side::Server] {
            let ns = self.netns(side);
            if !self.netns_path(side).exists() {
                continue;
            }
            // A namespace lives on while any process is inside it: end those first.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                {
                    kill_and_wait(pid);
                    removed.push(format!("process {pid} in {ns}"));
                }
            }
        }
        for pid in self.daemons() {
            kill_and_wait(pid);
            removed.push(format!("delay line {pid}"));
        }
        for side in [Side::Client, Side::Server] {
            if self.netns_path(side).exists() {
                sh(&["ip", "netns", "del", &self.netns(side)])?;
                removed.push(format!("netns {}", self.netns(side)));
            }
        }
        if self.state_dir().exists() {
            fs::remove_dir_all(self.state_dir()).map_err(TestbedError::io(format!(
                "cannot remove {}",
                self.state_dir().display()
            )))?;
        }
        Ok(removed)
    }

    /// A command that runs `argv` inside one side's namespace, with `WATTIO_CLIENT_ADDR` and
    /// `WATTIO_SERVER_ADDR` in its environment.
    pub fn exec_command(&self, side: Side, argv: &[String]) -> Result<Command, TestbedError> {
        if argv.is_empty() {
            return Err(TestbedError::NothingToRun);
        }
        if !self.netns_path(side).exists() {
            return Err(TestbedError::NotUp(self.name.clone()));
        }
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns(side)])
            .args(argv)
            .env("WATTIO_CLIENT_ADDR", CLIENT_ADDR)
            .env("WATTIO_SERVER_ADDR", SERVER_ADDR);
        Ok(c)
    }
}

/// Moves the calling thread to `SCHED_FIFO` (priority 10), best effort. On a host busy with
/// other work a normal-priority delay line is preempted and releases packets late, which shows
/// up as extra RTT under load (measured: 39–44 ms instead of 36 with a load average of ~7 on 2
/// vCPUs). The threads sleep in `ppoll` between packets, and the kernel's RT throttling bounds
/// them anyway, so they cannot starve the host.
fn realtime_priority() -> std::io::Result<()> {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a valid param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the delay line between the two namespaces' TUN devices until killed. Writes `ready`
/// once both devices are attached. A refused real-time priority is not fatal: it is told to
/// `warnings` (the daemon's log) and the line runs at normal priority.
pub fn run_delay_line(
    bed: &Bed,
    one_way: Duration,
    mtu: usize,
    ready: &Path,
    warnings: &Sink<str>,
) -> Result<(), TestbedError> {
    let c = in_netns(&bed.netns_path(Side::Client), || crate::tun::open(DEV))?;
    let s = in_netns(&bed.netns_path(Side::Server), || crate::tun::open(DEV))?;
    // Far above the BDP of any link this host can run (1 Gbps × 1 s = 125 MB would need it).
    let dir = Direction {
        delay: one_way,
        max_queue_bytes: 256 << 20,
        max_packet: mtu,
    };
    let stop = AtomicBool::new(false);
    let (up, down) = (Counters::default(), Counters::default());
    // Before `ready`, so `up` sees a refusal in the log; the threads inherit the policy.
    if let Err(e) = realtime_priority() {
        warnings.tell(&format!(
            "delay line: running without real-time priority ({e}): RTT may grow under host load"
        ));
    }
    fs::write(ready, std::process::id().to_string()).map_err(TestbedError::io(format!(
        "cannot write {}",
        ready.display()
    )))?;
    std::thread::scope(|sc| {
        // If one direction fails the other is stopped too, so the daemon exits and `status`
        // reports the testbed as down instead of half-working.
        let stop = &stop;
        let fwd = move |from, to, ctr| {
            let r = delay::run(from, to, dir, stop, ctr);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        };
        let (c, s, up, down) = (&c, &s, &up, &down);
        let a = sc.spawn(move || fwd(c.as_fd(), s.as_fd(), up));
        let b = sc.spawn(move || fwd(s.as_fd(), c.as_fd(), down));
        let ra = a
            .join()
            .map_err(|_| TestbedError::ThreadPanicked("client→server"))?;
        let rb = b
            .join()
            .map_err(|_| TestbedError::ThreadPanicked("server→client"))?;
        ra.map_err(TestbedError::io("client→server direction"))?;
        rb.map_err(TestbedError::io("server→client direction"))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_anything_is_made() {
        for ok in ["wattio", "t5a", "wb-1"] {
            Bed::new(ok).unwrap();
        }
        for bad in ["", "Wattio", "1abc", "a b", "a/b", "abcdefghijklmnop"] {
            let e = Bed::new(bad).unwrap_err().to_string();
            assert!(e.contains("invalid"), "{bad:?}: {e}");
        }
        let b = Bed::new("wb").unwrap();
        assert_eq!(b.netns(Side::Client), "wb-client");
        assert_eq!(b.netns(Side::Server), "wb-server");
    }

    #[test]
    fn exec_on_a_testbed_that_is_not_up_says_so() {
        let b = Bed::new("wtnotthere").unwrap();
        let e = b
            .exec_command(Side::Client, &["true".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not up"), "{e}");
        let e = b.exec_command(Side::Client, &[]).unwrap_err().to_string();
        assert!(e.contains("nothing to run"), "{e}");
        assert!(b.state().is_none() && b.is_up().is_none());
    }

    #[test]
    fn describe_prints_both_addresses() {
        let st = BedState {
            name: "wb".into(),
            link: crate::link::link_profile("didclab").unwrap(),
            pid: 1,
            client_ns: "wb-client".into(),
            server_ns: "wb-server".into(),
            client_addr: CLIENT_ADDR.into(),
            server_addr: SERVER_ADDR.into(),
        };
        let d = st.describe();
        assert!(
            d.contains("client 10.77.0.1")
                && d.contains("server 10.77.0.2")
                && d.contains("RTT 44.0 ms"),
            "{d}"
        );
    }
}
