//! `--quiet` on the meter commands: `record`, `export`, `top`, `measure` and the `fixture tick`
//! that moves their counters write their output and nothing on standard error, since every
//! note they write goes through one place that the switch silences (and a fixture machine in
//! good order gives them no warning to write).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{Reaper, BIN};

/// `wattio ARGS` on the fixture at `root`, away from this machine's own GPUs and kernel program.
fn wattio(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("WATTIO_ROOT", root)
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env("WATTIO_KERNEL_IO", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Asserts that `o` succeeded with `expected` in its standard output and an empty standard
/// error; its standard output.
fn quiet_output(what: &str, o: &Output, expected: &str) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what}: {}: {err}", o.status);
    assert!(err.is_empty(), "{what} --quiet wrote on stderr:\n{err}");
    assert!(out.contains(expected), "{what}: no {expected:?} in:\n{out}");
    out
}

#[test]
fn quiet_meter_commands_write_their_output_and_no_notes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    wattio_fixture::intel_laptop(root).unwrap();
    let ticker = wattio(root, &["fixture", "tick", "--quiet", "--watts", "10"])
        .arg(root)
        .args(["--duration", "60s"])
        .spawn()
        .unwrap();
    let mut ticker = Reaper(vec![ticker]);
    // The ticker's first rewrite, before any command reads.
    std::thread::sleep(std::time::Duration::from_millis(300));

    let record = ["record", "--duration", "0.3"];
    let loud = wattio(root, &record).output().unwrap();
    let notes = String::from_utf8_lossy(&loud.stderr);
    assert!(
        notes.contains("wattio record: "),
        "no notes to silence: {notes}"
    );
    let o = wattio(root, &record).arg("--quiet").output().unwrap();
    quiet_output("record", &o, "timestamp,mechanism,socket,domain");

    let o = wattio(root, &["top", "--quiet", "--once", "--interval", "0.3"])
        .output()
        .unwrap();
    quiet_output("top", &o, "total");

    let o = wattio(root, &["measure", "--quiet", "--", "sleep", "0.2"])
        .output()
        .unwrap();
    quiet_output("measure", &o, "total");

    // A free port picked here: under --quiet the exporter does not say where it listens.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let export = [
        "export",
        "--quiet",
        "--interval",
        "100ms",
        "--listen",
        &listen,
    ];
    let mut exporter = Reaper(vec![wattio(root, &export).spawn().unwrap()]);
    common::wait_listening(&mut exporter.0[0], port, "wattio export");
    let body = common::http(&listen, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(body.contains("wattio_energy_joules_total"), "{body}");
    let o = common::terminate(exporter.0.pop().unwrap());
    quiet_output("export", &o, "");

    let o = common::terminate(ticker.0.pop().unwrap());
    quiet_output("fixture tick", &o, "");
}
