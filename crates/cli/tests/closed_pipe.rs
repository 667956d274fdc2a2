//! A reader that goes away (`wattio … | head`) ends every command quietly: exit status 141
//! (128 + SIGPIPE, as the shell reports for `seq | head`), nothing on the other stream, no
//! panic message, no waiting, and files the command writes stay whole.
//!
//! Most cases hand the command a pipe whose read end is already closed, so the first write
//! fails every time (a `| head` that has not exited yet would let small outputs through); one
//! case runs real shell pipelines into `head`.

mod common;

use common::BIN;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The write end of a pipe nobody reads.
fn reader_gone() -> OwnedFd {
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    drop(read);
    write
}

#[derive(Clone, Copy, Debug)]
enum Stream {
    Stdout,
    Stderr,
}

/// Runs wattio under the fixture `root` with `closed` connected to a pipe without reader and
/// the other stream captured; fails the test if it takes more than 20 s.
fn run_closed(root: &Path, closed: Stream, args: &[&str]) -> (Output, Duration) {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("WATTIO_ROOT", root)
        .env("WATTIO_DEFAULT_MODEL", "ccf-linear")
        .stdin(Stdio::null());
    match closed {
        Stream::Stdout => c.stdout(reader_gone()).stderr(Stdio::piped()),
        Stream::Stderr => c.stderr(reader_gone()).stdout(Stdio::piped()),
    };
    let start = Instant::now();
    let mut child = common::Reaper(vec![c.spawn().expect("run wattio")]);
    while child.0[0].try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "wattio {args:?} still running 20 s after its {closed:?} closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.0.pop().unwrap().wait_with_output().unwrap();
    (out, start.elapsed())
}

fn fixture() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let st = Command::new(BIN)
        .args(["fixture", "amd-epyc"])
        .arg(d.path().join("fx"))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    d
}

fn assert_quiet(what: &str, out: &Output) {
    let other = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    assert_eq!(
        out.status.code(),
        Some(141),
        "{what}: {}",
        String::from_utf8_lossy(other)
    );
    assert!(
        out.stderr.is_empty() && out.stdout.is_empty(),
        "{what} printed: {}",
        String::from_utf8_lossy(other)
    );
}

#[test]
fn a_closed_standard_output_ends_every_kind_of_command_quietly() {
    let d = fixture();
    let root = d.path().join("fx");
    for args in [
        // A report printed at once, as text and as JSON.
        &["probe"][..],
        &["probe", "--json"],
        // Streams with no end of their own: they must notice and stop.
        &["record", "--freq", "100"],
        &["top", "--json", "--interval", "0.1"],
        // A report printed after work.
        &["measure", "--", "true"],
        // Plain listings (println! all the way).
        &["testbed", "profiles"],
    ] {
        let (out, took) = run_closed(&root, Stream::Stdout, args);
        assert_quiet(&format!("wattio {}", args.join(" ")), &out);
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
}

#[test]
fn a_closed_standard_error_keeps_the_output_file_whole() {
    let d = fixture();
    let root = d.path().join("fx");
    let csv = d.path().join("rows.csv");
    let args = [
        "record",
        "--freq",
        "50",
        "--duration",
        "1",
        "-o",
        csv.to_str().unwrap(),
    ];
    let (out, _) = run_closed(&root, Stream::Stderr, &args);
    assert_quiet("record -o with stderr closed", &out);
    // Every row the sampler took is on disk, none cut short: the command ended through its
    // normal path (the summary line on stderr was what failed), not by a signal.
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.ends_with('\n'), "last row cut: {text:?}");
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows[0].starts_with("timestamp,"), "{}", rows[0]);
    assert!(
        rows.len() > 20,
        "only {} rows in a 1 s run at 50 Hz",
        rows.len()
    );
    let width = rows[0].split(',').count();
    assert!(rows.iter().all(|r| r.split(',').count() == width), "{text}");
}

#[test]
fn shell_pipelines_into_head() {
    let d = fixture();
    let root = d.path().join("fx");
    // `set -o pipefail` and PIPESTATUS: the status of wattio itself, not of head.
    for (pipeline, statuses) in [
        ("\"$W\" record --freq 200 | head -n1", &[141][..]),
        ("\"$W\" top --json --interval 0.1 | head -c1", &[141]),
        // Small enough to fit the pipe buffer before head exits: 0 or 141, never noise.
        ("\"$W\" probe | head -c1", &[0, 141]),
        ("\"$W\" --help | head -n1", &[0]),
    ] {
        let start = Instant::now();
        let out = Command::new("bash")
            .args([
                "-c",
                &format!("{pipeline} >/dev/null; echo ${{PIPESTATUS[0]}}"),
            ])
            .env("W", BIN)
            .env("WATTIO_ROOT", &root)
            .env("WATTIO_DEFAULT_MODEL", "ccf-linear")
            .output()
            .unwrap();
        let status: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(statuses.contains(&status), "{pipeline}: exit {status}");
        assert!(
            out.stderr.is_empty(),
            "{pipeline}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(start.elapsed() < Duration::from_secs(10), "{pipeline}");
    }
}

#[test]
fn other_errors_still_speak_when_the_output_is_closed() {
    // A closed pipe silences only its own failure: a bad flag's error still reaches stderr.
    let d = fixture();
    let root = d.path().join("fx");
    let (out, _) = run_closed(&root, Stream::Stdout, &["record", "--freq", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("wattio: error:") && err.contains("--freq"),
        "{err}"
    );
}
