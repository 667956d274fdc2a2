//! Attribution end to end: real processes of known CPU loads under `wattio top`, `record --by`
//! and `export --by`, and cgroup attribution on fixture trees and on a real cgroup.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::{wattio, Reaper, BIN};

fn spin(load: f64, seconds: f64) -> Child {
    Command::new(BIN)
        .args([
            "workload",
            "spin",
            "--load",
            &load.to_string(),
            "--seconds",
            &seconds.to_string(),
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("start the spinner")
}

fn entry(snap: &serde_json::Value, pid: u32) -> &serde_json::Value {
    snap["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {snap}"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// CPU ticks (utime + stime) of a live process, read by the test itself.
fn ticks(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest: Vec<&str> = s[s.rfind(')').unwrap() + 1..].split_whitespace().collect();
    rest[11].parse::<f64>().unwrap() + rest[12].parse::<f64>().unwrap()
}

/// Two processes asked for 60 % and 30 % of a CPU: the attributed energies follow the CPU time
/// each really got (measured by the test from /proc, independently of wattio; on a loaded
/// machine the spinners may get less than they ask), the parts add up to the total, and every
/// figure is labelled estimated on this VM.
#[test]
fn top_attributes_energy_in_proportion_to_cpu_load() {
    let kids = Reaper(vec![spin(0.6, 8.0), spin(0.3, 8.0)]);
    let (hi, lo) = (kids.0[0].id(), kids.0[1].id());
    std::thread::sleep(Duration::from_millis(300));
    let (th0, tl0) = (ticks(hi), ticks(lo));
    let o = wattio(
        None,
        &[
            "top",
            "--source",
            "model",
            "--once",
            "--json",
            "--interval",
            "4",
        ],
    );
    let (th, tl) = (ticks(hi) - th0, ticks(lo) - tl0);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(snap["estimated"], true, "{snap}");
    assert_eq!(snap["mechanism"], "model");
    assert!(snap["label"]
        .as_str()
        .unwrap()
        .ends_with("attributed (cpu-time share)"));
    let (eh, el) = (entry(&snap, hi), entry(&snap, lo));
    let interval = f(&snap["interval_s"]);
    let want = th / tl;
    assert!(
        want > 1.2,
        "the 60 % spinner got {th} ticks, the 30 % one {tl}: machine too busy"
    );
    let ratio = f(&eh["energy_j"]) / f(&el["energy_j"]);
    // 10 ms ticks over ~4 s: a few per cent of reading noise on each side.
    assert!(
        (ratio / want - 1.0).abs() < 0.2,
        "energy ratio {ratio}, CPU-time ratio measured apart {want}"
    );
    assert!((f(&eh["power_w"]) * interval - f(&eh["energy_j"])).abs() < 1e-6);
    let parts: f64 = snap["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| f(&e["energy_j"]))
        .sum::<f64>()
        + f(&snap["idle_j"]);
    assert!(
        (parts - f(&snap["total_j"])).abs() < 1e-6 * f(&snap["total_j"]).max(1.0),
        "{parts} vs {}",
        snap["total_j"]
    );
    assert_eq!(eh["comm"], "wattio");
    assert!(eh["cgroup"].is_string());
}

#[test]
fn top_by_cgroup_on_a_fixture_tree_names_containers_and_never_counts_twice() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let w = |p: &str, s: &str| {
        let p = r.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w(
        "/proc/stat",
        "cpu  0 0 0 1000 0 0 0 0 0 0\ncpu0 0 0 0 1000 0 0 0 0 0 0\n",
    );
    w(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n\n",
    );
    w(
        "/sys/devices/system/cpu/cpu0/topology/physical_package_id",
        "0\n",
    );
    w("/sys/devices/system/cpu/online", "0\n");
    w("/sys/fs/cgroup/cgroup.controllers", "cpu\n");
    let ctr = "/sys/fs/cgroup/system.slice/docker-abc.scope";
    let usage = |p: &str, u: u64| w(&format!("{p}/cpu.stat"), &format!("usage_usec {u}\n"));
    usage("/sys/fs/cgroup", 0);
    usage("/sys/fs/cgroup/system.slice", 0);
    usage(ctr, 0);
    // A writer advances the container's usage while `top` watches, until `top` exits. Each
    // file is replaced whole (rename), children before parents, as the kernel's figures never
    // show a parent behind its child.
    let root = r.to_path_buf();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::clone(&done);
    let writer = std::thread::spawn(move || {
        let mut u = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            u += 20_000;
            for p in [ctr, "/sys/fs/cgroup/system.slice", "/sys/fs/cgroup"] {
                let dir = root.join(p.trim_start_matches('/'));
                let tmp = dir.join("cpu.stat.tmp");
                std::fs::write(&tmp, format!("usage_usec {u}\n")).unwrap();
                std::fs::rename(&tmp, dir.join("cpu.stat")).unwrap();
            }
        }
    });
    let o = wattio(
        Some(r),
        &[
            "top",
            "--by",
            "cgroup",
            "--once",
            "--json",
            "--interval",
            "1",
        ],
    );
    let text = wattio(
        Some(r),
        &["top", "--by", "cgroup", "--once", "--interval", "0.5"],
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = snap["entries"].as_array().unwrap();
    // Only the container has time of its own. A read can land between the writer's renames
    // (cgroup files are read parent first, and no order of writes avoids that): then a parent
    // shows one writer step, 20 ms, of its own; counting the container twice would give a
    // parent its whole second.
    let (ctr_entries, others): (Vec<_>, Vec<_>) = entries
        .iter()
        .partition(|e| e["cgroup"] == "/system.slice/docker-abc.scope");
    assert_eq!(
        ctr_entries.len(),
        1,
        "the container has time of its own: {snap}"
    );
    assert!(
        others.iter().all(|e| f(&e["cpu_s"]) <= 0.0201),
        "only the container has time of its own: {snap}"
    );
    let container = ctr_entries[0];
    assert!(container.get("pid").is_none());
    assert!(f(&container["energy_j"]) > 0.0);
    // Text mode names its kind.
    assert!(text.status.success());
    let screen = String::from_utf8_lossy(&text.stdout);
    assert!(screen.contains("docker container"), "{screen}");
}

#[test]
fn a_real_cgroup_gets_the_energy_of_the_process_in_it() {
    let unified = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.controllers").exists());
    let Some(unified) = unified else {
        eprintln!("skipped: no cgroup v2 hierarchy mounted");
        return;
    };
    let cg = unified.join(format!("wattio-test-{}", std::process::id()));
    if std::fs::create_dir(&cg).is_err() {
        eprintln!(
            "skipped: cannot create a cgroup under {} (not root?)",
            unified.display()
        );
        return;
    }
    struct Rmdir(std::path::PathBuf);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            // The cgroup can only go once its processes are gone (the Reaper runs first).
            for _ in 0..50 {
                if std::fs::remove_dir(&self.0).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let _rm = Rmdir(cg.clone());
    let kids = Reaper(vec![spin(0.5, 6.0)]);
    let pid = kids.0[0].id();
    std::fs::write(cg.join("cgroup.procs"), pid.to_string()).unwrap();
    let t0 = ticks(pid);
    let started = std::time::Instant::now();
    let o = wattio(
        None,
        &[
            "top",
            "--by",
            "cgroup",
            "--once",
            "--json",
            "--interval",
            "2",
        ],
    );
    let wall_s = started.elapsed().as_secs_f64();
    let used_s = (ticks(pid) - t0) / 100.0;
    drop(kids);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let name = format!("/{}", cg.file_name().unwrap().to_string_lossy());
    let e = snap["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cgroup"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} not in {snap}"));
    // The cgroup's own time is its one process's, as /proc says. The test's reads bracket the
    // whole command (its start-up and exit too, longer on a loaded host) and wattio's window is
    // its 2 s interval, so the window holds about 2 / wall of what the spinner, busy at a
    // steady half, used; 10 ms ticks and the spinner's phase give the slack.
    let cpu_s = f(&e["cpu_s"]);
    let (lo, hi) = (used_s * 2.0 / wall_s - 0.1, used_s + 0.05);
    assert!(
        (lo..=hi).contains(&cpu_s),
        "cgroup {cpu_s} CPU-s, not in [{lo:.3}, {hi:.3}]: its process used {used_s} CPU-s in the {wall_s:.2} s the command ran"
    );
}

#[test]
fn record_by_process_rows_add_up_to_the_counters() {
    let _kids = Reaper(vec![spin(0.5, 4.0)]);
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("e.csv");
    let o = wattio(
        None,
        &[
            "record",
            "--source",
            "model",
            "--freq",
            "20",
            "--duration",
            "2.5",
            "--by",
            "process",
            "--top",
            "3",
            "--by-interval",
            "0.5",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut rdr = csv::Reader::from_path(&out).unwrap();
    let h = rdr.headers().unwrap().clone();
    assert_eq!(
        h.iter().collect::<Vec<_>>(),
        vec![
            "timestamp",
            "mechanism",
            "socket",
            "domain",
            "energy_j",
            "estimated",
            "model",
            "entity",
            "pid",
            "comm",
            "cgroup",
            "cpu_s"
        ]
    );
    let (mut counters, mut parts, mut idle_rows, mut proc_rows) = (0.0, 0.0, 0, 0);
    for r in rdr.records() {
        let r = r.unwrap();
        let j: f64 = r[4].parse().unwrap();
        match &r[7] {
            "" if matches!(&r[3], "package" | "dram") => counters += j,
            "" => {}
            // The kernel's I/O work where its program loads: part of a total row's energy.
            e if &r[3] == "kernel_io" => {
                assert!(r[6].contains("attributed (kernel I/O work"), "{}", &r[6]);
                assert!(matches!(e, "process" | "other" | "unowned"), "entity {e}");
            }
            e => {
                parts += j;
                assert_eq!(&r[3], "total");
                assert_eq!(&r[5], "true");
                assert!(r[6].ends_with("attributed (cpu-time share)"), "{}", &r[6]);
                match e {
                    "idle" => idle_rows += 1,
                    "process" => {
                        proc_rows += 1;
                        assert!(!r[8].is_empty() && !r[9].is_empty());
                    }
                    "other" => {}
                    x => panic!("entity {x}"),
                }
            }
        }
    }
    assert!(
        idle_rows >= 4,
        "one idle row per 0.5 s interval: {idle_rows}"
    );
    assert!(proc_rows >= 4);
    assert!(
        (parts - counters).abs() < 1e-6 * counters.max(1.0),
        "attribution rows {parts} J vs counter rows {counters} J"
    );
}

#[test]
fn export_by_process_keeps_the_series_bounded() {
    let _kids = Reaper(vec![spin(0.3, 6.0), spin(0.2, 6.0), spin(0.1, 6.0)]);
    let (_ex, addr) = model_exporter(&["--by", "process", "--max-series", "2"]);
    let get = || common::http(&addr, "GET /metrics HTTP/1.1\r\n\r\n");
    get();
    std::thread::sleep(Duration::from_millis(1500));
    let r = get();
    let series: Vec<&str> = r
        .lines()
        .filter(|l| l.starts_with("wattio_process_energy_joules_total{"))
        .collect();
    assert_eq!(series.len(), 3, "2 series + other: {r}");
    assert!(series.iter().any(|l| l.contains("comm=\"other\"")), "{r}");
    assert!(series
        .iter()
        .all(|l| l.contains("estimated=\"true\"") && l.contains("attributed (cpu-time share)")));
    assert!(r.contains("wattio_unattributed_energy_joules_total"), "{r}");
    let value = |l: &str| -> f64 { l.rsplit(' ').next().unwrap().parse().unwrap() };
    let attributed: f64 = series.iter().map(|l| value(l)).sum::<f64>()
        + r.lines()
            .filter(|l| {
                l.starts_with("wattio_unattributed_energy_joules_total")
                    || l.starts_with("wattio_dropped_series_energy_joules_total")
            })
            .map(value)
            .sum::<f64>();
    let total: f64 = r
        .lines()
        .filter(|l| {
            l.starts_with("wattio_energy_joules_total{")
                && (l.contains("domain=\"package\"") || l.contains("domain=\"dram\""))
        })
        .map(value)
        .sum();
    assert!(
        (attributed - total).abs() < 1e-6 * total.max(1.0),
        "series {attributed} J vs counters {total} J"
    );
}

/// Where the kernel I/O program loads (root), the exporter has a family for the kernel's I/O
/// work, labelled as such, and a counter of the work no owner was found for. (Whether a given
/// short-lived writer has a series of it at a given scrape is left out: a series starts at 0,
/// the interval that earned it its place going to `other`, so a `dd` charged its writeback in
/// one interval after it ended has its energy in `other` and a series at 0 only until the next
/// interval drops it as ended.)
#[test]
fn export_by_process_has_a_kernel_io_family() {
    let (_ex, addr) = model_exporter(&["--by", "process"]);
    let get = || common::http(&addr, "GET /metrics HTTP/1.1\r\n\r\n");
    get();
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let of = format!("of={}", d.path().join("out").display());
    let dd = Command::new("dd")
        .args(["if=/dev/zero", &of, "bs=1M", "count=64", "status=none"])
        .status()
        .unwrap();
    assert!(dd.success() && Command::new("sync").status().unwrap().success());
    let r = get();
    if !r.contains("# TYPE wattio_process_kernel_io_energy_joules_total counter") {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_EBPF").is_none_or(|v| v != "1"),
            "no kernel I/O family with WATTIO_REQUIRE_EBPF=1: {r}"
        );
        eprintln!("skipped: the kernel I/O program did not load (not root?)");
        return;
    }
    let series: Vec<&str> = r
        .lines()
        .filter(|l| l.starts_with("wattio_process_kernel_io_energy_joules_total{"))
        .collect();
    assert!(!series.is_empty(), "{r}");
    assert!(
        series
            .iter()
            .all(|l| l.contains("attributed (kernel I/O work: writeback")),
        "{r}"
    );
    assert!(
        r.contains("wattio_kernel_io_unowned_cpu_seconds_total"),
        "{r}"
    );
}

#[test]
fn attribution_flags_are_checked() {
    let o = wattio(None, &["top", "--by", "thread"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("use process, cgroup, vm, container or pod")
    );
    let o = wattio(None, &["top", "--interval", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--interval must be"));
    let o = wattio(None, &["record", "--top", "3", "--duration", "0.1"]);
    assert!(!o.status.success(), "--top needs --by");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--by"));
    let o = wattio(None, &["top", "-n", "0"]);
    assert!(!o.status.success(), "-n 0 is refused");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("x"), "").unwrap();
    let o = wattio(Some(d.path()), &["top", "--once", "--source", "model"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
}

/// `wattio export --source model` on a free loopback port with `extra` flags, and its address.
fn model_exporter(extra: &[&str]) -> (Reaper, String) {
    common::spawn_exporter(&[&common::MODEL_EXPORTER[..], extra].concat(), |_| {})
}

/// `wattio top --by vm --once --json` over one second, on this machine.
fn top_by_vm_once() -> std::process::Output {
    wattio(
        None,
        &[
            "top",
            "--by",
            "vm",
            "--source",
            "model",
            "--once",
            "--json",
            "--interval",
            "1s",
        ],
    )
}

/// A process that looks to the host like a plain QEMU guest named `name`: a shell spinning one
/// CPU under the name `qemu-system-x86_64`, with `-name guest=NAME` on its command line. (The
/// QEMU of the real-guest test boots a kernel; this one only needs to be found.)
fn fake_qemu(dir: &Path, name: &str) -> Child {
    let exe = dir.join("qemu-system-x86_64");
    if !exe.exists() {
        std::fs::copy("/bin/sh", &exe).unwrap();
    }
    Command::new(&exe)
        .args([
            "-c",
            "while :; do :; done",
            "-name",
            &format!("guest={name},debug-threads=on"),
        ])
        .spawn()
        .unwrap()
}

#[test]
fn top_and_export_by_vm_find_a_qemu_guest_and_the_host() {
    let d = tempfile::tempdir().unwrap();
    let _vm = Reaper(vec![fake_qemu(d.path(), "t1")]);
    let pid = _vm.0[0].id();
    let t0 = ticks(pid);
    let started = std::time::Instant::now();
    let o = top_by_vm_once();
    let wall_s = started.elapsed().as_secs_f64();
    let used_s = (ticks(pid) - t0) / 100.0;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["by"], "vm");
    let entries = v["entries"].as_array().unwrap();
    let t1 = entries
        .iter()
        .find(|e| e["vm"] == "t1")
        .unwrap_or_else(|| panic!("no t1: {v}"));
    // Its time is its one process's, as /proc says: the test's reads bracket the whole command
    // and wattio's window is its 1 s interval, so the window holds about 1 / wall of what the
    // spinner got (less than a CPU on a loaded host); 10 ms ticks give the slack.
    let cpu_s = t1["cpu_s"].as_f64().unwrap();
    let (lo, hi) = (used_s / wall_s - 0.1, used_s + 0.05);
    assert!(
        (lo..=hi).contains(&cpu_s) && cpu_s > 0.0,
        "t1 {cpu_s} CPU-s, not in [{lo:.3}, {hi:.3}]: its process used {used_s} CPU-s in the {wall_s:.2} s the command ran"
    );
    assert!(t1["energy_j"].as_f64().unwrap() > 0.0, "{t1}");
    assert!(t1.get("pid").is_none(), "{t1}");
    // Whatever else ran is the host's, apart.
    assert!(
        entries
            .iter()
            .all(|e| e["vm"] == "t1" || e["vm"] == "(host)"),
        "{v}"
    );
    assert!(
        v["label"]
            .as_str()
            .unwrap()
            .ends_with(", attributed (cpu-time share)"),
        "{v}"
    );

    // The exporter: a wattio_vm_energy_joules_total series per VM, which promtool accepts.
    let (_ex, addr) = model_exporter(&["--by", "vm"]);
    let get = || common::http(&addr, "GET /metrics HTTP/1.1\r\n\r\n");
    get();
    std::thread::sleep(Duration::from_millis(500));
    get();
    std::thread::sleep(Duration::from_millis(700));
    let r = get();
    let line = r
        .lines()
        .find(|l| l.starts_with("wattio_vm_energy_joules_total{") && l.contains("vm=\"t1\""))
        .unwrap_or_else(|| panic!("no t1 series: {r}"));
    let j: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(j > 0.0, "{line}");
    assert!(r.contains("vm=\"other\""), "{r}");
    let body = r.split_once("\r\n\r\n").unwrap().1;
    common::assert_promtool_accepts(body);
}

#[test]
fn vm_publish_hands_a_guest_its_share_and_the_guest_says_where_it_comes_from() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("vms");
    let mut kids = Reaper(vec![fake_qemu(d.path(), "t1")]);
    kids.0.push(
        Command::new(BIN)
            .args([
                "vm",
                "publish",
                "--source",
                "model",
                "--interval",
                "200ms",
                "--dir",
            ])
            .arg(&dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let share = dir.join("t1");
    common::wait_until(10, "the publisher to write t1's counter", || {
        share.join("wattio-host.json").exists()
    });
    // The guest's side, with the share where it would mount it.
    let guest = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("WATTIO_HOST_ENERGY", &share)
            .env_remove("WATTIO_ROOT")
            .output()
            .unwrap()
    };
    let o = guest(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["chosen"], "host", "{v}");
    let o = guest(&["measure", "--json", "--", "sleep", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(m["mechanism"], "host");
    // The host estimates here (no RAPL), and the guest says both.
    let label = m["total_label"].as_str().unwrap();
    assert!(
        label.starts_with("estimated (host: ccf-linear")
            && label.ends_with("on the host, attributed to this VM (cpu-time share))"),
        "{label}"
    );
    // t1 spins one of the host's CPUs: its share is a CPU's worth of the model's power, the
    // same the host's own top gives it (a few hundred ms of publishing granularity aside; on a
    // loaded host the spinner and everything else get different shares in the two windows).
    let guest_w = m["total_j"].as_f64().unwrap() / m["duration_s"].as_f64().unwrap();
    let host = top_by_vm_once();
    let t: serde_json::Value = serde_json::from_slice(&host.stdout).unwrap();
    let host_w = t["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vm"] == "t1")
        .unwrap()["power_w"]
        .as_f64()
        .unwrap();
    assert!(
        (guest_w - host_w).abs() < 0.5 * host_w,
        "guest {guest_w} W, host {host_w} W"
    );

    // The publisher ends (SIGTERM): the guest is told, and falls back to the model.
    let publisher = kids.0.pop().unwrap();
    let o = common::terminate(publisher);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = guest(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["chosen"], "model", "{v}");
    let host_status = v["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mechanism"] == "host")
        .unwrap();
    assert!(
        host_status["reason"]
            .as_str()
            .unwrap()
            .contains("publisher for VM t1 has stopped"),
        "{host_status}"
    );
}
