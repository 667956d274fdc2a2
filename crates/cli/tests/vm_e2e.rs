//! A real guest reads the energy its host attributed to it, end to end.
//!
//! The host: a `wattio fixture` tree ticking at a known power stands in for RAPL at the real
//! powercap path (`scripts/fake-rapl-ns.sh`, a private mount namespace), and `wattio vm publish`
//! runs there. The guest: `qemu-system-x86_64` (TCG) booting Debian's kernel with an initramfs
//! holding busybox and wattio (`scripts/vm-guest-initramfs.sh`), the publisher's directory for it
//! shared over 9p. Two guests run side by side: g1 measures a busy loop with `--source host`, g2
//! a sleep. The host test reads the published counter and QEMU's CPU time at each guest's
//! `WATTIO-START` and `WATTIO-END` console lines, and checks that the guest's figure says where it
//! comes from and matches what the host attributed (the fixture's power × QEMU's share of the
//! host's CPU time), and that the sleeping guest gets a small fraction of the busy one's. The
//! fixture's counters wrap every second (a 10 J range at 10 W), and the publisher starts g1's
//! counter 20 J before its own wrap once both guests are up, so the guest reads through both.
//!
//! A second guest lives through what happens to VMs while it measures: its host's publisher
//! restarted (SIGTERM, then a new one going on from the saved total), the VM paused and resumed
//! (QMP `stop`, `cont`), and then its publisher killed for good while it measures again, which
//! must fail with the reason, after which the guest's probe falls back to the model.
//!
//! Needs root, `qemu-system-x86`, `linux-image-amd64`, `busybox-static` and `cpio` (`make deps`
//! installs them); without them it says what is missing and passes, unless `WATTIO_REQUIRE_VM`
//! is set (as `make test` does), where it fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::vm::{can_run, guest_kernel, script};
use common::{Reaper, BIN};

/// User + system seconds of process `pid`.
fn cpu_s(pid: u32) -> f64 {
    use wattio_energy::attribution::cputime;
    cputime::read_proc_stat(&wattio_energy::SysRoot::new("/"), pid)
        .map_or(0.0, |st| st.cpu_ticks as f64 / cputime::ticks_per_s())
}

fn read_uj(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The two tests each run QEMU under TCG on a 2-CPU machine: one at a time, so that neither
/// starves the other's guests.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The publisher's wrap: the least its CLI takes at `--interval 500ms` (12 kJ).
const RANGE_UJ: u64 = 12_000_000_000;

/// A fixture with both packages ticking at 10 W (the host's package + DRAM total is 20 W), and
/// the command that runs `wattio vm publish --interval 500ms` on it into `vms`.
struct FakeHost {
    fx: PathBuf,
    vms: PathBuf,
}

const HOST_W: f64 = 20.0;

impl FakeHost {
    fn start(dir: &Path, kids: &mut Reaper) -> FakeHost {
        let fx = dir.join("fx");
        let o = Command::new(BIN)
            .args(["fixture", "intel-server"])
            .arg(&fx)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        kids.0.push(
            Command::new(BIN)
                .args(["fixture", "tick", "--watts", "10"])
                .arg(&fx)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        FakeHost {
            fx,
            vms: dir.join("vms"),
        }
    }

    fn publisher(&self) -> std::process::Child {
        Command::new(script("fake-rapl-ns.sh"))
            .arg(&self.fx)
            .args([
                "--",
                BIN,
                "vm",
                "publish",
                "--source",
                "powercap",
                "--interval",
                "500ms",
                "--max-energy-range-uj",
                &RANGE_UJ.to_string(),
                "--dir",
            ])
            .arg(&self.vms)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// What each test runs in: one at a time, a fake host, its guests' kernel, and the processes
/// to end (the guests, the fixture's ticker, the publishers).
struct Lab {
    // Dropped in this order: the processes, then their directory, then the lock.
    kids: Reaper,
    host: FakeHost,
    kernel: (PathBuf, String),
    d: tempfile::TempDir,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Lab {
    /// `None` (having said why) where the tools are missing.
    fn start() -> Option<Lab> {
        if !can_run() {
            return None;
        }
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let d = tempfile::tempdir().unwrap();
        let mut kids = Reaper(vec![]);
        let host = FakeHost::start(d.path(), &mut kids);
        Some(Lab {
            _one: one,
            kernel: guest_kernel().unwrap(),
            d,
            kids,
            host,
        })
    }

    /// Boots guest `name` running `workload` (spin, idle or lifecycle) for `seconds`, its
    /// share `vms/name`, its QMP socket `name.qmp` in the lab's directory.
    fn boot(&mut self, name: &'static str, workload: &str, seconds: u32) -> Guest {
        Guest::boot(
            &mut self.kids,
            self.d.path(),
            &self.kernel,
            &self.host.vms,
            (name, workload, seconds),
        )
    }
}

/// How much a published counter grew from `a` to `b` µJ, through at most one wrap.
fn grew_uj(a: u64, b: u64) -> u64 {
    if b >= a {
        b - a
    } else {
        RANGE_UJ - a + b + 1
    }
}

#[test]
fn a_guest_measures_with_the_energy_its_host_attributed_to_it() {
    let Some(mut lab) = Lab::start() else { return };
    // Two guests side by side: g1 keeps its vCPU busy, g2 sleeps.
    let mut g1 = lab.boot("g1", "spin", 6);
    let mut g2 = lab.boot("g2", "idle", 6);
    g1.pump_until("READY");
    g2.pump_until("READY");
    // g1's counter starts 20 J before its wrap: about 2 s into its busy loop.
    std::fs::write(
        lab.host.vms.join("g1/.wattio-state"),
        format!("{} {RANGE_UJ}\n", RANGE_UJ - 20_000_000),
    )
    .unwrap();
    lab.kids.0.push(lab.host.publisher());
    let idle = g2.finish();
    let busy = g1.finish();
    let m = busy.json("JSON");
    let (c0, q0, t0) = busy.marks["START"];
    let (c1, q1, t1) = busy.marks["END"];
    assert!(c1 < c0, "g1's counter wrapped between {c0} and {c1} µJ");
    // Where the figure comes from, in the guest's own words.
    assert_eq!(m["mechanism"], "host", "{m}");
    assert_eq!(m["estimated"], false, "{m}");
    assert_eq!(
        m["total_label"],
        "measured (host powercap on the host, attributed to this VM (cpu-time share))"
    );
    // What the host attributed to g1 between the marks: the fixture's power × QEMU's share of
    // the host's 2 CPUs ("idle apart": the share of all CPU time, not of the busy time).
    let window_s = (t1 - t0).as_secs_f64();
    let host_j = grew_uj(c0, c1) as f64 / 1e6;
    let cpus = wattio_energy::attribution::machine_cpus(&wattio_energy::SysRoot::new("/")) as f64;
    let expected_j = HOST_W * (q1 - q0) / cpus;
    // Tolerance: one publishing interval of the VM's share at each end (0.5 s each), and the
    // 10 ms ticks of QEMU's CPU time.
    let slack = HOST_W / cpus * 1.0 + 0.5;
    assert!(
        (host_j - expected_j).abs() < slack,
        "the counter grew {host_j} J over {window_s} s; QEMU used {} CPU-s, so {expected_j} J",
        q1 - q0
    );
    // The guest measured inside that window (its wattio starting and stopping within it): at
    // most what the counter grew, and most of it.
    let guest_j = m["total_j"].as_f64().unwrap();
    eprintln!(
        "vm_e2e: between the guest's marks ({window_s:.2} s) QEMU used {:.2} CPU-s of {cpus} CPUs: the host attributed {host_j:.3} J (expected {expected_j:.3} J at {HOST_W} W), its counter wrapping from {c0} to {c1} µJ; the guest measured {guest_j:.3} J over {} s",
        q1 - q0,
        m["duration_s"]
    );
    let (guest_w, host_w) = (
        guest_j / m["duration_s"].as_f64().unwrap(),
        host_j / window_s,
    );
    // The host's window also holds the guest's wattio starting and stopping, busier or idler
    // than the loop: a quarter apart at most (runs here: 1 % to 10 %).
    assert!(
        (guest_w - host_w).abs() < 0.25 * host_w,
        "guest {guest_w} W, host {host_w} W"
    );
    assert!(
        guest_j <= host_j + 1e-6 && guest_j > 0.5 * host_j,
        "guest {guest_j} J in {} s, host counter {host_j} J in {window_s} s",
        m["duration_s"]
    );
    // The sleeping guest: labelled the same, and a small fraction of the busy one's power (its
    // QEMU still runs timers and the console, and the guest's wattio itself).
    let idle_m = idle.json("JSON");
    assert_eq!(idle_m["mechanism"], "host", "{idle_m}");
    let idle_w = idle_m["total_j"].as_f64().unwrap() / idle_m["duration_s"].as_f64().unwrap();
    let (i0, i1) = (idle.marks["START"], idle.marks["END"]);
    let idle_host_w = grew_uj(i0.0, i1.0) as f64 / 1e6 / (i1.2 - i0.2).as_secs_f64();
    eprintln!("vm_e2e: the sleeping guest g2 measured {idle_w:.3} W (its host counter {idle_host_w:.3} W), the busy g1 {guest_w:.3} W");
    assert!(
        idle_w < 0.5 * guest_w,
        "idle g2 {idle_w} W, busy g1 {guest_w} W"
    );
}

#[test]
fn a_guest_lives_through_a_publisher_restart_a_pause_and_a_publisher_that_dies() {
    let Some(mut lab) = Lab::start() else { return };
    let mut g = lab.boot("g3", "lifecycle", 5);
    g.pump_until("READY");
    // The publisher is the last of the lab's processes while it runs.
    lab.kids.0.push(lab.host.publisher());
    let watcher = Watcher::start(lab.host.vms.join("g3/intel-rapl:0/energy_uj"));
    // The guest's wattio has opened the share and runs the busy loop.
    g.pump_until("RUNNING");
    // 2 s into it: the publisher is stopped (it says so) and another one started.
    std::thread::sleep(Duration::from_secs(2));
    let o = common::terminate(lab.kids.0.pop().unwrap());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    lab.kids.0.push(lab.host.publisher());
    // 1.5 s later: the VM is paused for 1 s, then resumed.
    std::thread::sleep(Duration::from_millis(1500));
    let mut qmp = Qmp::connect(&lab.d.path().join("g3.qmp"));
    qmp.execute("stop");
    std::thread::sleep(Duration::from_secs(1));
    qmp.execute("cont");
    // The guest measures again; once its wattio has opened the share, the publisher dies without
    // a word (SIGKILL, as when the VM moves to a host without one).
    g.pump_until("OPENED");
    let mut publisher = lab.kids.0.pop().unwrap();
    publisher.kill().unwrap();
    publisher.wait().unwrap();
    let run = g.finish();
    let seen = watcher.finish();

    // Through the restart and the pause, the counter never went back, and the guest measured.
    assert!(seen.len() > 100, "{} reads", seen.len());
    assert!(
        seen.windows(2).all(|w| w[1] >= w[0]),
        "the counter went back: {seen:?}"
    );
    let m = run.json("JSON");
    assert_eq!(m["mechanism"], "host", "{m}\n{}", run.console);
    // Not one failed reading through it.
    assert!(
        m.get("read_errors")
            .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())),
        "{m}"
    );
    let guest_j = m["total_j"].as_f64().unwrap();
    let host_j = grew_uj(run.marks["START"].0, run.marks["END"].0) as f64 / 1e6;
    eprintln!(
        "vm_e2e: through a publisher restart and a 1 s pause the guest measured {guest_j:.3} J over {} s; its counter grew {host_j:.3} J between the marks",
        m["duration_s"]
    );
    // What the host attributed, less what was not published while no publisher ran.
    assert!(
        guest_j <= host_j + 1e-6 && guest_j > 0.4 * host_j,
        "guest {guest_j} J, host counter {host_j} J"
    );
    // The second measurement fails with the reason, and the guest then uses the model,
    // saying why.
    let rc = run
        .lines_after("WATTIO-RC")
        .unwrap_or_else(|| panic!("no WATTIO-RC line:\n{}", run.console));
    let orphan = &run.console[run.console.find("WATTIO-ORPHAN").unwrap()..];
    let said = orphan
        .lines()
        .find(|l| l.contains("wattio: error"))
        .unwrap_or("");
    eprintln!(
        "vm_e2e: with its publisher killed, the guest's measurement exited {} saying: {said}",
        rc.trim()
    );
    assert!(
        rc.trim() != "0",
        "the orphaned measurement succeeded:\n{}",
        run.console
    );
    assert!(
        said.contains("the host stopped updating this VM's energy"),
        "{}",
        run.console
    );
    let probe = run.json("PROBE");
    assert_eq!(probe["chosen"], "model", "{probe}");
    let why = probe["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mechanism"] == "host")
        .unwrap()["reason"]
        .to_string();
    assert!(
        why.contains("its publisher is not running, or this VM moved to a host without it"),
        "{why}"
    );
}

/// A thread reading a published counter every 20 ms, until [`Watcher::finish`] or the test
/// ends.
struct Watcher {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<u64>>>,
}

impl Watcher {
    fn start(counter: PathBuf) -> Watcher {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = vec![];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(v) = std::fs::read_to_string(&counter)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                {
                    seen.push(v);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        Watcher {
            done,
            thread: Some(thread),
        }
    }

    /// The values read, in order.
    fn finish(mut self) -> Vec<u64> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A QMP connection to a QEMU's monitor socket.
struct Qmp(BufReader<std::os::unix::net::UnixStream>);

impl Qmp {
    fn connect(path: &Path) -> Qmp {
        let s = std::os::unix::net::UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut q = Qmp(BufReader::new(s));
        q.reply(); // the greeting
        q.execute("qmp_capabilities");
        q
    }

    /// Runs `command` and waits for its answer (events before it are passed over).
    fn execute(&mut self, command: &str) {
        use std::io::Write as _;
        let s = self.0.get_mut();
        writeln!(s, "{{\"execute\": \"{command}\"}}").unwrap();
        loop {
            let v = self.reply();
            assert!(v.get("error").is_none(), "{command}: {v}");
            if v.get("return").is_some() {
                return;
            }
        }
    }

    fn reply(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

/// What the host saw at a guest's mark: the published counter (µJ), QEMU's CPU seconds, when.
type Mark = (u64, f64, Instant);

/// A guest booting, its console read line by line on a thread.
struct Guest {
    name: &'static str,
    rx: mpsc::Receiver<(String, Option<Mark>)>,
    deadline: Instant,
    run: Run,
}

/// What a guest printed: its console, what the host saw at each `WATTIO-NAME` mark, and the
/// blocks between `WATTIO-NAME-BEGIN` and `WATTIO-NAME-END`.
#[derive(Default)]
struct Run {
    console: String,
    marks: HashMap<String, Mark>,
    blocks: HashMap<String, String>,
    open_block: Option<String>,
}

impl Run {
    fn json(&self, block: &str) -> serde_json::Value {
        let text = self
            .blocks
            .get(block)
            .unwrap_or_else(|| panic!("no {block} block: {}", self.console));
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}\n{}", self.console))
    }

    /// The rest of the console line that starts with `prefix`.
    fn lines_after(&self, prefix: &str) -> Option<String> {
        self.console
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(String::from))
    }

    fn take(&mut self, line: &str, mark: Option<Mark>) {
        self.console.push_str(line);
        self.console.push('\n');
        let l = line.trim();
        if let Some(name) = l
            .strip_prefix("WATTIO-")
            .and_then(|b| b.strip_suffix("-END"))
        {
            if self.open_block.as_deref() == Some(name) {
                self.open_block = None;
                return;
            }
        }
        if let Some(name) = l
            .strip_prefix("WATTIO-")
            .and_then(|b| b.strip_suffix("-BEGIN"))
        {
            self.open_block = Some(name.to_string());
            self.blocks.insert(name.to_string(), String::new());
        } else if let Some(block) = &self.open_block {
            self.blocks.get_mut(block).unwrap().push_str(l);
        } else if let (Some(name), Some(mark)) = (mark_name(line), mark) {
            self.marks.insert(name, mark);
        }
    }
}

/// `START` for a console line ending in `WATTIO-START` (the firmware's terminal escapes may
/// precede a mark on its line); block lines (`WATTIO-JSON-BEGIN`) and others are not marks.
fn mark_name(line: &str) -> Option<String> {
    let l = line.trim_end();
    let name = &l[l.rfind("WATTIO-")? + "WATTIO-".len()..];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase())).then(|| name.to_string())
}

impl Guest {
    /// Boots guest `name` running `workload` for `seconds` ([`Lab::boot`]).
    fn boot(
        kids: &mut Reaper,
        dir: &Path,
        (kernel, kver): &(PathBuf, String),
        vms: &Path,
        (name, workload, seconds): (&'static str, &str, u32),
    ) -> Guest {
        let share = vms.join(name);
        std::fs::create_dir_all(&share).unwrap();
        let initrd = dir.join(format!("{name}.gz"));
        let o = Command::new(script("vm-guest-initramfs.sh"))
            .arg(&initrd)
            .arg(BIN)
            .arg(kver)
            .arg(seconds.to_string())
            .arg(workload)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut qemu = Command::new("qemu-system-x86_64")
            .args([
                "-name",
                &format!("guest={name}"),
                "-accel",
                "tcg",
                "-m",
                "512",
                "-smp",
                "1",
            ])
            .args([
                "-nographic",
                "-no-reboot",
                "-nodefaults",
                "-serial",
                "stdio",
                "-qmp",
            ])
            .arg(format!(
                "unix:{},server=on,wait=off",
                dir.join(format!("{name}.qmp")).display()
            ))
            .arg("-kernel")
            .arg(kernel)
            .arg("-initrd")
            .arg(&initrd)
            .args(["-append", "console=ttyS0 quiet panic=-1", "-virtfs"])
            .arg(format!(
                "local,path={},mount_tag=wattio,security_model=none,readonly=on",
                share.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let qemu_pid = qemu.id();
        let out = qemu.stdout.take().unwrap();
        kids.0.push(qemu);
        let (tx, rx) = mpsc::channel();
        let counter = share.join("intel-rapl:0/energy_uj");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let mark =
                    mark_name(&line).map(|_| (read_uj(&counter), cpu_s(qemu_pid), Instant::now()));
                if tx.send((line, mark)).is_err() {
                    break;
                }
            }
        });
        Guest {
            name,
            rx,
            deadline: Instant::now() + Duration::from_secs(240),
            run: Run::default(),
        }
    }

    /// Reads the console until mark `WATTIO-NAME`, or until the guest powers off (`None`).
    fn pump(&mut self, until: Option<&str>) -> bool {
        while let Ok((line, mark)) = self
            .rx
            .recv_timeout(self.deadline.saturating_duration_since(Instant::now()))
        {
            let hit = until.is_some() && mark_name(&line).as_deref() == until;
            self.run.take(&line, mark);
            if hit {
                return true;
            }
        }
        false
    }

    /// Reads the console until mark `WATTIO-NAME`.
    fn pump_until(&mut self, name: &str) {
        assert!(
            self.pump(Some(name)),
            "guest {} never printed WATTIO-{name}: {}",
            self.name,
            self.run.console
        );
    }

    /// Waits for the guest to power off: what it printed.
    fn finish(mut self) -> Run {
        self.pump(None);
        for mark in ["START", "END"] {
            assert!(
                self.run.marks.contains_key(mark),
                "guest {} did not measure: {}",
                self.name,
                self.run.console
            );
        }
        self.run
    }
}
