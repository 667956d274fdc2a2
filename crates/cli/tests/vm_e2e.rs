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
//! host's CPU time), and that the sleeping guest gets a small fraction of the busy one's.
//!
//! Needs root, `qemu-system-x86`, `linux-image-amd64`, `busybox-static` and `cpio` (`make deps`
//! installs them); without them it says what is missing and passes, unless `WATTIO_REQUIRE_VM`
//! is set (as `make test` does), where it fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::{Reaper, BIN};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

/// The newest kernel with both an image in /boot and its modules, or what is missing.
fn guest_kernel() -> Result<(PathBuf, String), String> {
    let mut found: Vec<String> = std::fs::read_dir("/boot")
        .map_err(|e| format!("/boot: {e}"))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("vmlinuz-"))
                .map(String::from)
        })
        .filter(|v| Path::new("/lib/modules").join(v).is_dir())
        .collect();
    // By version, not text: 6.1.0-10 is newer than 6.1.0-9.
    let key = |v: &String| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    found.sort_by_key(key);
    let v = found
        .pop()
        .ok_or("no /boot/vmlinuz-* with its /lib/modules (apt-get install linux-image-amd64)")?;
    Ok((PathBuf::from(format!("/boot/vmlinuz-{v}")), v))
}

fn missing() -> Option<String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !root {
        return Some("not root (the fake RAPL needs a mount namespace)".into());
    }
    for tool in ["qemu-system-x86_64", "busybox", "cpio", "unshare"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Some(format!("{tool} not found (make deps installs it)"));
        }
    }
    guest_kernel().err()
}

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

#[test]
fn a_guest_measures_with_the_energy_its_host_attributed_to_it() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_VM").is_none(),
            "WATTIO_REQUIRE_VM is set but {why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let (kernel, kver) = guest_kernel().unwrap();
    let d = tempfile::tempdir().unwrap();
    let fx = d.path().join("fx");
    let vms = d.path().join("vms");
    let o = Command::new(BIN)
        .args(["fixture", "intel-server"])
        .arg(&fx)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Two packages at 10 W each: the host's package + DRAM total is 20 W.
    const HOST_W: f64 = 20.0;
    let mut kids = Reaper(vec![Command::new(BIN)
        .args(["fixture", "tick", "--watts", "10"])
        .arg(&fx)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()]);
    kids.0.push(
        Command::new(script("fake-rapl-ns.sh"))
            .arg(&fx)
            .args([
                "--",
                BIN,
                "vm",
                "publish",
                "--source",
                "powercap",
                "--interval",
                "500ms",
                "--dir",
            ])
            .arg(&vms)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Two guests side by side: g1 keeps its vCPU busy, g2 sleeps.
    let g1 = Guest::boot(&mut kids, d.path(), &kernel, &kver, &vms, "g1", "spin");
    let g2 = Guest::boot(&mut kids, d.path(), &kernel, &kver, &vms, "g2", "idle");
    let (idle, idle_m) = g2.wait();
    let (busy, m) = g1.wait();
    let (c0, q0, t0) = busy.start;
    let (c1, q1, t1) = busy.end;
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
    let host_j = (c1 - c0) as f64 / 1e6;
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
        "vm_e2e: between the guest's marks ({window_s:.2} s) QEMU used {:.2} CPU-s of {cpus} CPUs: the host attributed {host_j:.3} J (expected {expected_j:.3} J at {HOST_W} W); the guest measured {guest_j:.3} J over {} s",
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
    assert_eq!(idle_m["mechanism"], "host", "{idle_m}");
    let idle_w = idle_m["total_j"].as_f64().unwrap() / idle_m["duration_s"].as_f64().unwrap();
    let idle_host_w =
        (idle.end.0 - idle.start.0) as f64 / 1e6 / (idle.end.2 - idle.start.2).as_secs_f64();
    eprintln!("vm_e2e: the sleeping guest g2 measured {idle_w:.3} W (its host counter {idle_host_w:.3} W), the busy g1 {guest_w:.3} W");
    assert!(
        idle_w < 0.5 * guest_w,
        "idle g2 {idle_w} W, busy g1 {guest_w} W"
    );
}

/// What the host saw at a guest's mark: the published counter (µJ), QEMU's CPU seconds, when.
type Mark = (u64, f64, Instant);

/// A guest booting, its console read line by line on a thread.
struct Guest {
    name: &'static str,
    rx: mpsc::Receiver<(String, Option<Mark>)>,
}

/// A guest's marks and its measurement.
struct Marks {
    start: Mark,
    end: Mark,
}

impl Guest {
    /// Boots guest `name` running `workload` (spin or idle) for 6 s, its share `vms/name`.
    fn boot(
        kids: &mut Reaper,
        dir: &Path,
        kernel: &Path,
        kver: &str,
        vms: &Path,
        name: &'static str,
        workload: &str,
    ) -> Guest {
        let share = vms.join(name);
        std::fs::create_dir_all(&share).unwrap();
        let initrd = dir.join(format!("{name}.gz"));
        let o = Command::new(script("vm-guest-initramfs.sh"))
            .arg(&initrd)
            .arg(BIN)
            .arg(kver)
            .args(["6", workload])
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
                "-kernel",
            ])
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
                // The firmware's terminal escapes may precede a mark on its line.
                let l = line.trim_end();
                let mark = (l.ends_with("WATTIO-START") || l.ends_with("WATTIO-END"))
                    .then(|| (read_uj(&counter), cpu_s(qemu_pid), Instant::now()));
                if tx.send((line, mark)).is_err() {
                    break;
                }
            }
        });
        Guest { name, rx }
    }

    /// Waits for the guest to power off: its marks and its `measure --json`.
    fn wait(self) -> (Marks, serde_json::Value) {
        let deadline = Instant::now() + Duration::from_secs(240);
        let (mut start, mut end, mut console, mut json) = (None, None, String::new(), None);
        let mut in_json = false;
        while let Ok((line, mark)) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            console.push_str(&line);
            console.push('\n');
            let l = line.trim();
            match l {
                _ if l.ends_with("WATTIO-START") => start = mark,
                _ if l.ends_with("WATTIO-END") => end = mark,
                "WATTIO-JSON-BEGIN" => {
                    in_json = true;
                    json = Some(String::new());
                }
                "WATTIO-JSON-END" => in_json = false,
                _ if in_json => json.get_or_insert_with(String::new).push_str(l),
                _ => {}
            }
        }
        let (Some(start), Some(end), Some(json)) = (start, end, json) else {
            panic!("guest {} did not measure: {console}", self.name);
        };
        let m = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}\n{console}"));
        (Marks { start, end }, m)
    }
}
