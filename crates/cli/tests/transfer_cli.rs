//! `wattio serve` / `wattio transfer` as processes: JSON summary, SIGKILL of the server
//! mid-transfer and restart, bad input; HTTPS with wattio, curl and aria2 as clients.

#[path = "../../http/tests/common/certs.rs"]
mod certs;

use certs::{ServerCert, TestPki, Validity};
use rustix::process::{kill_process, Pid, Signal};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_wattio");

/// A `wattio serve` child, killed on drop.
struct Serve(Child);

impl Serve {
    fn start(dir: &Path, port: u16, extra: &[&str]) -> Serve {
        let child = Command::new(BIN)
            .arg("serve")
            .arg(dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "wattio serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve(child)
    }
    /// `wattio serve --tls-cert --tls-key`.
    fn start_tls(dir: &Path, port: u16, cert: &ServerCert) -> Serve {
        let (c, k) = (cert.cert.to_str().unwrap(), cert.key.to_str().unwrap());
        Serve::start(dir, port, &["--tls-cert", c, "--tls-key", k])
    }

    fn kill9(&mut self) {
        // SIGKILL: no chance to close connections gracefully
        let _ = kill_process(Pid::from_child(&self.0), Signal::KILL);
        let _ = self.0.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn dataset(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut x: u64 = 0x1234_5678_9abc_def1;
    for (name, n) in [
        ("a.bin", 2_500_000usize),
        ("d/b.bin", 1_800_000),
        ("c.bin", 70_000),
    ] {
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.truncate(n);
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &v).unwrap();
        out.push((name.to_string(), v));
    }
    out
}

fn transfer(url: &str, dest: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("transfer")
        .arg(url)
        .arg(dest)
        .args(["--cpu-actuator", "none", "--cpufreq", "off"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn json_summary_fields() {
    let src = tempfile::tempdir().unwrap();
    let files = dataset(src.path());
    let port = free_port();
    let _s = Serve::start(src.path(), port, &["--rate-limit", "40mbit"]);
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &format!("http://127.0.0.1:{port}/"),
        dst.path(),
        &[
            "--sla",
            "max-throughput",
            "--json",
            "--interval",
            "100ms",
            "--rtt",
            "1ms",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["bytes"], 4_370_000);
    assert_eq!(v["files"], 3);
    assert_eq!(v["tuner"], "EEMT");
    assert!(v["throughput_bps"].as_f64().unwrap() > 0.0);
    let e = &v["energy"];
    if e["estimated"] == true {
        assert!(
            e["provenance"]
                .as_str()
                .unwrap()
                .starts_with("estimated (model:"),
            "{e}"
        );
    }
    let pe = &v["energy_process"];
    assert_eq!(pe["estimated"], true);
    assert!(
        pe["provenance"]
            .as_str()
            .unwrap()
            .starts_with("estimated (model: ccf-linear"),
        "{pe}"
    );
    assert!(pe["total_j"].as_f64().unwrap() > 0.0);
    // With a meter, the attributed share of its whole-machine window, labelled, within it.
    if let Some(total) = e["total_j"].as_f64() {
        let a = pe["attributed_j"].as_f64().unwrap();
        assert!((0.0..=total + 1e-9).contains(&a), "{a} of {total}");
        assert!(pe["attributed_label"]
            .as_str()
            .unwrap()
            .ends_with(", attributed (cpu-time share)"));
    }
    let fb = v["energy_feedback"].as_str().unwrap();
    assert!(fb == "meter" || fb == "process-estimate", "{fb}");
    let iv = v["intervals"].as_array().unwrap();
    assert!(!iv.is_empty(), "parameters logged each interval");
    for k in [
        "t_s",
        "num_ch",
        "channels",
        "pipelining",
        "state",
        "throughput_mbps",
    ] {
        assert!(iv[0].get(k).is_some(), "interval field {k}");
    }
    for (name, data) in files {
        assert_eq!(
            std::fs::read(dst.path().join(&name)).unwrap(),
            data,
            "{name}"
        );
    }
}

#[test]
fn sigkill_server_mid_transfer_restart_and_finish() {
    let src = tempfile::tempdir().unwrap();
    let files = dataset(src.path());
    let port = free_port();
    let rate = ["--rate-limit", "16mbit"]; // 2 MB/s per connection
    let mut s = Serve::start(src.path(), port, &rate);
    let dst = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let dst_path = dst.path().to_path_buf();
    let client = std::thread::spawn(move || {
        transfer(
            &url,
            &dst_path,
            &[
                "--sla",
                "max-throughput",
                "--tuner",
                "fixed",
                "--cc",
                "2",
                "--json",
                "--retries",
                "15",
            ],
        )
    });
    // wait until the transfer is writing, then let it run a little
    let t = Instant::now();
    while !std::fs::read_dir(dst.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".wattio-part")
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the transfer never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    s.kill9();
    std::thread::sleep(Duration::from_millis(700));
    let _s2 = Serve::start(src.path(), port, &[]);
    let out = client.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["reconnects"].as_u64().unwrap() > 0,
        "the kill was noticed"
    );
    assert_eq!(v["files_verified_checksum"], 3);
    for (name, data) in files {
        assert_eq!(
            std::fs::read(dst.path().join(&name)).unwrap(),
            data,
            "{name}"
        );
        assert!(!dst.path().join(format!("{name}.wattio-part")).exists());
    }
}

#[test]
fn bad_input_one_line_errors() {
    let dst = tempfile::tempdir().unwrap();
    let out = transfer("http://127.0.0.1:1/", dst.path(), &["--sla", "fastest"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("wattio: error: --sla: unknown SLA"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    let out = transfer(
        "http://127.0.0.1:1/",
        dst.path(),
        &["--sla", "min-energy", "--rtt", "soon"],
    );
    assert_eq!(out.status.code(), Some(2));

    let out = Command::new(BIN)
        .args(["serve", "/nonexistent/dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot serve /nonexistent/dir"), "{err}");

    let src = tempfile::tempdir().unwrap();
    dataset(src.path());
    let out = Command::new(BIN)
        .arg("serve")
        .arg(src.path())
        .arg("--write-listing")
        .output()
        .unwrap();
    assert!(out.status.success());
    let l: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.path().join(".wattio/listing.json")).unwrap())
            .unwrap();
    assert_eq!(l["format"], "wattio-listing/1");
    assert_eq!(l["files"].as_array().unwrap().len(), 3);
}

/// 1500 files through a process limited to 128 descriptors: part files are opened lazily and
/// closed when finished, so a dataset of many small files cannot exhaust descriptors.
#[test]
fn many_small_files_under_a_low_descriptor_limit() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_NGINX").is_none(),
            "prlimit (util-linux) missing"
        );
        eprintln!("SKIPPED: prlimit not installed");
        return;
    }
    let src = tempfile::tempdir().unwrap();
    for i in 0..1500 {
        let d = src.path().join(format!("d{}", i % 10));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(format!("f{i}")),
            format!("file {i} ").repeat(i % 50 + 1),
        )
        .unwrap();
    }
    let port = free_port();
    let _s = Serve::start(src.path(), port, &[]);
    let dst = tempfile::tempdir().unwrap();
    let out = Command::new("prlimit")
        .arg("--nofile=128")
        .arg(BIN)
        .arg("transfer")
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(dst.path())
        .args([
            "--sla",
            "max-throughput",
            "--json",
            "--cpu-actuator",
            "none",
            "--max-channels",
            "16",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files_verified_checksum"], 1500);
    for i in [0usize, 777, 1499] {
        let rel = format!("d{}/f{i}", i % 10);
        assert_eq!(
            std::fs::read(dst.path().join(&rel)).unwrap(),
            std::fs::read(src.path().join(&rel)).unwrap()
        );
    }
}

/// With a cpufreq fixture under WATTIO_ROOT, the transfer clamps scaling_max_freq (Algorithm 1
/// starts min-energy at the lowest step); SIGTERM mid-transfer ends it with a one-line error,
/// keeps the partial data and puts the original limit back.
#[test]
fn sigterm_restores_cpufreq_and_keeps_partial_data() {
    let root = tempfile::tempdir().unwrap();
    let pol = root.path().join("sys/devices/system/cpu/cpufreq/policy0");
    std::fs::create_dir_all(&pol).unwrap();
    std::fs::write(pol.join("cpuinfo_min_freq"), "800000\n").unwrap();
    std::fs::write(pol.join("cpuinfo_max_freq"), "3500000\n").unwrap();
    std::fs::write(pol.join("scaling_max_freq"), "3500000\n").unwrap();
    std::fs::write(pol.join("scaling_governor"), "performance\n").unwrap();
    std::fs::write(
        pol.join("scaling_available_governors"),
        "performance powersave\n",
    )
    .unwrap();

    let src = tempfile::tempdir().unwrap();
    dataset(src.path());
    let port = free_port();
    let _s = Serve::start(src.path(), port, &["--rate-limit", "8mbit"]);
    let dst = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .env("WATTIO_ROOT", root.path())
        .arg("transfer")
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(dst.path())
        .args(["--sla", "min-energy", "--cpu-actuator", "none", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::fs::read_to_string(pol.join("scaling_max_freq"))
        .unwrap()
        .trim()
        != "800000"
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "frequency never clamped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interrupted by SIGTERM") && err.contains("rerun the same command to resume"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(pol.join("scaling_max_freq"))
            .unwrap()
            .trim(),
        "3500000"
    );
    assert!(
        dst.path().join("a.bin.wattio-part").exists(),
        "partial data kept"
    );
}

/// Without --json: a short human summary in which every energy figure carries its label.
#[test]
fn human_summary_labels_energy() {
    let src = tempfile::tempdir().unwrap();
    dataset(src.path());
    let port = free_port();
    let _s = Serve::start(src.path(), port, &[]);
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &format!("http://127.0.0.1:{port}/"),
        dst.path(),
        &["--sla", "min-energy"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines().filter(|l| l.starts_with("energy")) {
        assert!(
            line.contains("estimated (model:") || line.contains("measured"),
            "unlabelled energy: {line}"
        );
    }
    assert!(
        text.contains("estimated energy of a host running only this process"),
        "{text}"
    );
    for line in text
        .lines()
        .filter(|l| l.contains("share of the machine's energy"))
    {
        assert!(line.contains("attributed (cpu-time share)"), "{line}");
    }
    assert!(text.contains("verified: 3 files by XXH3-64"), "{text}");
    assert!(text.contains("cpu (last setting)"), "{text}");
}

/// Runs a client tool; None (skipped) when it is not installed and WATTIO_REQUIRE_NGINX (set
/// by `make test`, which installs curl and aria2) is unset.
fn tool(cmd: &mut Command) -> Option<Output> {
    match cmd.output() {
        Ok(o) => Some(o),
        Err(e) if std::env::var_os("WATTIO_REQUIRE_NGINX").is_none() => {
            eprintln!("SKIPPED {:?}: {e}", cmd.get_program());
            None
        }
        Err(e) => panic!("{:?}: {e}; run scripts/install-deps.sh", cmd.get_program()),
    }
}

fn assert_ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `wattio serve` over TLS with `wattio transfer` (the tree, checksums verified), curl (a
/// whole file and a range) and aria2 (four connections, 1 MiB pieces) as clients.
#[test]
fn https_serve_with_wattio_curl_and_aria2_as_clients() {
    let pki = TestPki::new();
    let cert = pki.server("srv", &["localhost"], Validity::Current);
    let src = tempfile::tempdir().unwrap();
    let files = dataset(src.path());
    let port = free_port();
    let _s = Serve::start_tls(src.path(), port, &cert);
    let base = format!("https://localhost:{port}");
    let ca = pki.ca_pem();

    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &format!("{base}/"),
        dst.path(),
        &[
            "--sla",
            "max-throughput",
            "--json",
            "--interval",
            "100ms",
            "--cacert",
            ca.to_str().unwrap(),
        ],
    );
    assert_ok(&out, "wattio transfer");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files_verified_checksum"], 3);
    for (rel, data) in &files {
        assert!(
            std::fs::read(dst.path().join(rel)).unwrap() == *data,
            "{rel}"
        );
    }
    let (big, data) = (&files[0].0, &files[0].1);

    let d = tempfile::tempdir().unwrap();
    let got = d.path().join("curl.bin");
    let Some(o) = tool(
        Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&ca)
            .arg(format!("{base}/{big}"))
            .arg("-o")
            .arg(&got),
    ) else {
        return;
    };
    assert_ok(&o, "curl");
    assert!(std::fs::read(&got).unwrap() == *data, "curl: {big}");
    let o = tool(
        Command::new("curl")
            .args(["-sS", "--fail", "-r", "1000-1999", "--cacert"])
            .arg(&ca)
            .arg(format!("{base}/{big}")),
    )
    .unwrap();
    assert_ok(&o, "curl -r");
    assert!(o.stdout == data[1000..2000], "curl: range");

    let Some(o) = tool(
        Command::new("aria2c")
            .args(["-q", "-x4", "-s4", "-k1M", "--allow-overwrite=true"])
            .arg(format!("--ca-certificate={}", ca.display()))
            .arg(format!("--dir={}", d.path().display()))
            .arg("--out=aria2.bin")
            .arg(format!("{base}/{big}")),
    ) else {
        return;
    };
    assert_ok(&o, "aria2c");
    assert!(
        std::fs::read(d.path().join("aria2.bin")).unwrap() == *data,
        "aria2: {big}"
    );
}

/// The TLS errors a user meets first: a server certificate from an unknown CA, a key that does
/// not belong to the certificate, a certificate without its key. One line each, exit 2.
#[test]
fn tls_errors_are_one_line() {
    let pki = TestPki::new();
    let cert = pki.server("srv", &["localhost"], Validity::Current);
    let other = pki.server("other", &["localhost"], Validity::Current);
    let src = tempfile::tempdir().unwrap();
    dataset(src.path());
    let port = free_port();
    let _s = Serve::start_tls(src.path(), port, &cert);
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &format!("https://localhost:{port}/a.bin"),
        dst.path(),
        &["--sla", "min-energy", "--no-meter"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("wattio: error: localhost: the server's certificate is signed by an unknown certificate authority; give that CA with --cacert FILE"),
        "{err}"
    );

    for (args, want) in [
        (
            vec![
                "--tls-cert",
                cert.cert.to_str().unwrap(),
                "--tls-key",
                other.key.to_str().unwrap(),
            ],
            "give the key that belongs to the certificate",
        ),
        // clap's own message, with its usage lines
        (vec!["--tls-cert", cert.cert.to_str().unwrap()], "--tls-key"),
    ] {
        let out = Command::new(BIN)
            .arg("serve")
            .arg(src.path())
            .args(["--listen", &format!("127.0.0.1:{}", free_port())])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert!(
            !err.contains("Error {") && !err.contains("Custom {"),
            "{err}"
        );
        if want.starts_with("give") {
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
    }
}
