//! `wattio transfer` and `wattio serve` against peers that lie, stall or attack, as
//! processes on loopback: small scripted servers started by the tests (bound to 127.0.0.1,
//! every wait bounded), `wattio serve` itself, and nginx where a real server is needed. Every
//! client runs under a 2 GiB address-space limit (`prlimit --as`), so a size a server makes up
//! cannot be allocated; every case asserts the one-line error or the correct copy, no panic,
//! and nothing written outside DEST.
//!
//! `make test` sets WATTIO_REQUIRE_NGINX, which turns a missing nginx or strace into a
//! failure rather than a skip (scripts/install-deps.sh installs them).

mod common;
#[path = "../../http/tests/common/mod.rs"]
mod transfer_common;

use common::BIN;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use transfer_common::certs::TestPki;
use transfer_common::{bytes, free_port, Nginx};

/// The address-space limit every client runs under.
const MEMORY_LIMIT: &str = "--as=2147483648";

/// What a scripted server answers to one request head: the raw response, or `None` to close
/// the connection.
type Answer = dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync;

/// A server that answers each request with what `answer` says, logging every request head;
/// stopped on drop.
struct Scripted {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scripted {
    fn start(answer: impl Fn(&str) -> Option<Vec<u8>> + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let answer: Arc<Answer> = Arc::new(answer);
        let (l, s) = (log.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((c, _)) => {
                        let (l, a) = (l.clone(), answer.clone());
                        std::thread::spawn(move || serve_one(c, &l, &*a));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Scripted {
            port,
            log,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers the requests of one connection in order until the client closes it, the answer
/// says to close, or 10 s pass without a request.
fn serve_one(mut c: TcpStream, log: &Mutex<Vec<String>>, answer: &Answer) {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            let mut tmp = [0u8; 4096];
            match c.read(&mut tmp) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        log.lock().unwrap().push(head.clone());
        match answer(&head) {
            Some(r) => {
                if c.write_all(&r).is_err() {
                    return;
                }
            }
            None => return,
        }
    }
}

/// The request target of a request head.
fn target(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or("")
}

/// A `200` with `body` and its length.
fn ok(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn not_found() -> Vec<u8> {
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
}

/// A scripted server whose listing is `listing` (JSON) and whose files are `files`.
fn listing_server(listing: String, files: Vec<(&'static str, Vec<u8>)>) -> Scripted {
    Scripted::start(move |head| {
        let t = target(head);
        if t == "/.wattio/listing.json" {
            return Some(ok(listing.as_bytes()));
        }
        let body = files.iter().find(|(p, _)| format!("/{p}") == t);
        Some(match body {
            Some((_, b)) if head.starts_with("HEAD") => {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len()).into_bytes()
            }
            Some((_, b)) => ok(b),
            None => not_found(),
        })
    })
}

/// A listing entry: path, size, XXH3-64.
type Entry<'a> = (&'a str, u64, Option<&'a str>);

/// A listing document of `(path, size, xxh3)` entries.
fn listing(entries: &[Entry]) -> String {
    let files: Vec<String> = entries
        .iter()
        .map(|(p, n, h)| match h {
            Some(h) => format!(r#"{{"path":{},"size":{n},"xxh3":"{h}"}}"#, json_str(p)),
            None => format!(r#"{{"path":{},"size":{n}}}"#, json_str(p)),
        })
        .collect();
    format!(
        r#"{{"format":"wattio-listing/1","checksum":"xxh3-64","total_bytes":0,"files":[{}]}}"#,
        files.join(",")
    )
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// `wattio transfer ARGS` under the memory limit, without CPU actuation or meter.
fn start_transfer(args: &[&str]) -> Child {
    Command::new("prlimit")
        .args([MEMORY_LIMIT, "--", BIN, "transfer"])
        .args(args)
        .args([
            "--cpu-actuator",
            "none",
            "--no-meter",
            "--rtt",
            "1ms",
            "--no-progress",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn transfer(args: &[&str]) -> Output {
    start_transfer(args).wait_with_output().unwrap()
}

/// `wattio transfer URL DEST --sla max-throughput EXTRA`, as [`transfer`].
fn fetch(url: &str, dst: &Path, extra: &[&str]) -> Output {
    let mut args = vec![url, path_str(dst), "--sla", "max-throughput"];
    args.extend_from_slice(extra);
    transfer(&args)
}

/// The one-line error of a run that must have failed with exit status 2 (no panic).
fn error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err.lines()
        .find(|l| l.starts_with("wattio: error: "))
        .unwrap_or_else(|| panic!("no error line in {err}"))
        .to_string()
}

fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "transfer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON summary")
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().to_string();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// XXH3-64 of `data` as the listing writes it, from the reference tool (`xxhsum -H3`).
fn xxh3(data: &[u8]) -> String {
    let mut child = Command::new("xxhsum")
        .arg("-H3")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("xxhsum (package xxhash)");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    // `XXH3 (stdin) = HEX` (BSD style, what xxhsum writes for standard input)
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().last().unwrap().to_string()
}

/// Sizes a server makes up: the largest a JSON number can say, and sizes whose sum wraps. The
/// client allocated one chunk per piece of them up front and died under the limit; it now
/// refuses them before anything is allocated, naming the numbers.
#[test]
fn sizes_a_server_makes_up_are_refused_before_anything_is_allocated() {
    let dst = tempfile::tempdir().unwrap();
    let huge = listing_server(listing(&[("a", u64::MAX, None)]), vec![]);
    let e = error_line(&fetch(&huge.url("/"), dst.path(), &[]));
    assert!(
        e.contains(&u64::MAX.to_string()) && e.contains("bytes free"),
        "{e}"
    );
    let wrap = listing_server(
        listing(&[("a", 1 << 63, None), ("b", 1 << 63, None)]),
        vec![],
    );
    let e = error_line(&transfer(&[
        &wrap.url("/"),
        path_str(dst.path()),
        "--sla",
        "min-energy",
    ]));
    assert!(e.contains("add up to more than 16 EiB"), "{e}");
    // a file URL whose HEAD claims as much
    let head = Scripted::start(|h| {
        Some(if h.starts_with("HEAD") {
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n".to_vec()
        } else {
            not_found()
        })
    });
    let e = error_line(&fetch(&head.url("/big.iso"), dst.path(), &[]));
    assert!(e.contains("bytes free"), "{e}");
    assert!(tree(dst.path()).is_empty(), "{:?}", tree(dst.path()));
}

/// DEST is a jail: a directory link in DEST leading out, and a link where a part file goes,
/// are never written through; the error names the link.
#[test]
fn links_already_in_dest_are_never_followed() {
    let data = bytes(3, 5000);
    let h = xxh3(&data);
    let srv = listing_server(
        listing(&[("sub/x", 5000, Some(&h)), ("y", 5000, Some(&h))]),
        vec![("sub/x", data.clone()), ("y", data.clone())],
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim"), b"keep me").unwrap();
    let dst = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dst.path().join("sub")).unwrap();
    let out = fetch(&srv.url("/"), dst.path(), &[]);
    let e = error_line(&out);
    assert!(e.contains("is a symbolic link"), "{e}");
    assert_eq!(tree(outside.path()), vec!["victim"]);
    // a link where the part file goes: refused, and what it points at is not truncated
    let dst = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("victim"),
        dst.path().join("y.wattio-part"),
    )
    .unwrap();
    let out = fetch(&srv.url("/"), dst.path(), &[]);
    let e = error_line(&out);
    assert!(e.contains("y.wattio-part"), "{e}");
    assert_eq!(
        std::fs::read(outside.path().join("victim")).unwrap(),
        b"keep me"
    );
    assert_eq!(tree(outside.path()), vec!["victim"]);
}

/// A listing whose empty file carries another content's digest: it fails at once with a
/// message that says so; the client never asks for `bytes=0-18446744073709551615`.
#[test]
fn an_empty_file_with_a_wrong_digest_fails_without_a_wrapped_range() {
    let srv = listing_server(
        listing(&[("e", 0, Some(&xxh3(b"abc")))]),
        vec![("e", Vec::new())],
    );
    let dst = tempfile::tempdir().unwrap();
    let e = error_line(&fetch(&srv.url("/"), dst.path(), &[]));
    assert!(e.contains("empty on the server"), "{e}");
    let reqs = srv.requests();
    assert!(
        reqs.iter().all(|r| !r.contains("18446744073709551615")),
        "{reqs:?}"
    );
}

/// Two entries for one path, a file and a directory at one path, and names wattio keeps for
/// its temporary files: refused before a byte is written, the error naming both URLs (and
/// escaping what a peer put in a name).
#[test]
fn duplicate_and_reserved_output_paths_are_refused_before_any_byte() {
    let data = bytes(4, 100);
    let h = xxh3(&data);
    let cases: [(&[Entry], &str); 4] = [
        (&[("a", 100, Some(&h)), ("a", 100, Some(&h))], "same path"),
        (
            &[("d", 100, Some(&h)), ("d/b", 100, Some(&h))],
            "both a file",
        ),
        (
            &[("x.wattio-part", 100, Some(&h))],
            "keeps for its temporary files",
        ),
        (
            &[
                ("\u{1b}[2Jred", 100, Some(&h)),
                ("\u{1b}[2Jred", 100, Some(&h)),
            ],
            "\\u{1b}[2Jred",
        ),
    ];
    for (entries, want) in cases {
        let srv = listing_server(listing(entries), vec![]);
        let dst = tempfile::tempdir().unwrap();
        let out = fetch(&srv.url("/"), dst.path(), &[]);
        let e = error_line(&out);
        assert!(e.contains(want), "{want}: {e}");
        assert!(
            !out.stderr.contains(&0x1b),
            "a raw escape reached the terminal"
        );
        assert!(
            tree(dst.path()).is_empty(),
            "{want}: {:?}",
            tree(dst.path())
        );
        // the listing (and the index page asked beside it), at most a one-byte Range probe
        let reqs = srv.requests();
        assert!(
            reqs.iter()
                .all(|r| matches!(target(r), "/.wattio/listing.json" | "/")
                    || r.contains("Range: bytes=0-0")),
            "{want}: {reqs:?}"
        );
    }
}

/// `wattio serve` on a free port, its stderr kept.
struct Serve {
    child: Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(root: &Path, extra: &[&str], prefix: &[&str]) -> Serve {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = match prefix.split_first() {
        Some((bin, rest)) => {
            let mut c = Command::new(bin);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    let mut child = c
        .arg("serve")
        .arg(root)
        .args(["--listen", &listen])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_listening(&mut child, port, "wattio serve");
    Serve { child, port }
}

impl Serve {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// Waits until the `.done` log of `name` in `dst` holds a record, for at most 20 s, while the
/// transfer that writes it runs (its stderr shown if it ends first).
fn wait_for_record(dst: &Path, name: &str, transfer: &mut Child) {
    let t = Instant::now();
    loop {
        let log = dst.join(format!("{name}.wattio-part.done"));
        if std::fs::metadata(log).is_ok_and(|m| m.len() > 32) {
            return;
        }
        if let Some(status) = transfer.try_wait().unwrap() {
            let mut err = String::new();
            let _ = transfer.stderr.take().unwrap().read_to_string(&mut err);
            panic!("the transfer ended ({status}) before it recorded a range of {name}: {err}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no range was recorded"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A file that changes on the server at the same size between two runs: the rerun sees the
/// server's new ETag, drops the partial copy instead of mixing versions and says so; an
/// unchanged file resumes. A complete copy of a file that changed since is fetched again.
#[test]
fn resume_never_mixes_two_versions_of_a_file() {
    let src = tempfile::tempdir().unwrap();
    let old = bytes(10, 6_000_000);
    let new = bytes(11, 6_000_000);
    std::fs::write(src.path().join("f.bin"), &old).unwrap();
    std::fs::write(src.path().join("g.bin"), &old).unwrap();
    let srv = serve(src.path(), &[], &[]);
    let dst = tempfile::tempdir().unwrap();
    for name in ["f.bin", "g.bin"] {
        // held to 12 Mbit/s by the client's own rate cap (EETT): it cannot finish before the
        // kill, and its ranges are recorded every interval
        let mut child = start_transfer(&[
            &srv.url(&format!("/{name}")),
            path_str(dst.path()),
            "--sla",
            "target:12mbit",
        ]);
        wait_for_record(dst.path(), name, &mut child);
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // f.bin changes (same size, new bytes); g.bin does not
    std::fs::write(src.path().join("f.bin"), &new).unwrap();
    let copy = |name: &str| {
        ok_json(&fetch(
            &srv.url(&format!("/{name}")),
            dst.path(),
            &["--json"],
        ))
    };
    let v = copy("f.bin");
    assert_eq!(v["verification"]["restarted"], serde_json::json!(["f.bin"]));
    assert_eq!(v["resumed_bytes"], 0);
    assert_eq!(std::fs::read(dst.path().join("f.bin")).unwrap(), new);
    let v = copy("g.bin");
    assert!(v["resumed_bytes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["verification"]["restarted"], serde_json::json!([]));
    assert_eq!(std::fs::read(dst.path().join("g.bin")).unwrap(), old);
    // g.bin complete; it changes at the same size: fetched again (where DEST keeps xattrs)
    std::fs::write(src.path().join("g.bin"), &new).unwrap();
    let v = copy("g.bin");
    if v["files_skipped"] == 1 {
        eprintln!("SKIPPED: DEST's file system keeps no extended attributes");
    } else {
        assert_eq!(v["verification"]["restarted"], serde_json::json!(["g.bin"]));
        assert_eq!(std::fs::read(dst.path().join("g.bin")).unwrap(), new);
    }
}

/// One system call of an `strace -f -y` log: its name, the path of its first descriptor
/// argument, and the rest of the line.
#[derive(Debug)]
struct Call {
    name: String,
    fd_path: String,
    line: String,
}

/// The calls of an `strace -f -y` log in the order they completed (an `<unfinished ...>` call
/// is placed where it resumed).
fn calls(log: &str) -> Vec<Call> {
    let mut out = Vec::new();
    let mut pending: std::collections::HashMap<String, String> = Default::default();
    for l in log.lines() {
        let (pid, rest) = l.split_once(' ').unwrap_or(("", l));
        let rest = rest.trim_start();
        let text = if let Some(start) = rest.strip_suffix("<unfinished ...>") {
            pending.insert(pid.to_string(), start.to_string());
            continue;
        } else if rest.starts_with("<... ") {
            let Some(start) = pending.remove(pid) else {
                continue;
            };
            let tail = rest.split_once("resumed>").map_or("", |x| x.1);
            format!("{start}{tail}")
        } else {
            rest.to_string()
        };
        let Some((name, args)) = text.split_once('(') else {
            continue;
        };
        let fd_path = args
            .split_once('<')
            .and_then(|(_, r)| r.split_once('>'))
            .map_or(String::new(), |(p, _)| p.to_string());
        out.push(Call {
            name: name.to_string(),
            fd_path,
            line: text.clone(),
        });
    }
    out
}

/// The `strace -f -y` log of the system calls `syscalls` (a comma list) of a successful
/// `wattio transfer ARGS` without CPU actuation, meter or progress.
fn strace_transfer(syscalls: &str, args: &[&str]) -> String {
    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("trace.txt");
    let out = Command::new("strace")
        .args(["-f", "-y", "-qq", "-o"])
        .arg(&trace)
        .args(["-e", &format!("trace={syscalls}"), BIN, "transfer"])
        .args(args)
        .args(["--cpu-actuator", "none", "--no-meter", "--no-progress"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&trace).unwrap()
}

/// The durability order, read from the system calls of a real transfer (`strace -f -y`):
/// every `.done` record is written after the part file's data was synced, every file is
/// synced after its last write and before its rename into place, and its directory is synced
/// after the rename.
#[test]
fn data_is_synced_before_its_records_and_renames() {
    if !common::require("/usr/bin/strace", "strace") {
        return;
    }
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("big.bin"), bytes(20, 6_000_000)).unwrap();
    for i in 0..4 {
        std::fs::write(src.path().join(format!("s{i}.bin")), bytes(30 + i, 50_000)).unwrap();
    }
    let srv = serve(src.path(), &[], &[]);
    let dst = tempfile::tempdir().unwrap();
    let log = strace_transfer(
        "pwrite64,write,fdatasync,fsync,rename,renameat,renameat2",
        &[
            &srv.url("/"),
            path_str(dst.path()),
            // 24 Mbit/s: two seconds or more, ranges recorded every interval
            "--sla",
            "target:24mbit",
            "--rtt",
            "1ms",
            "--interval",
            "200ms",
        ],
    );
    let calls = calls(&log);
    let dest = dst.path().canonicalize().unwrap();
    let dest = dest.to_str().unwrap();
    let mut records = 0;
    for name in ["big.bin", "s0.bin", "s1.bin", "s2.bin", "s3.bin"] {
        let part = format!("{dest}/{name}.wattio-part");
        let done = format!("{part}.done");
        let last =
            |pred: &dyn Fn(&Call) -> bool, before: usize| calls[..before].iter().rposition(pred);
        let is = |n: &'static str, p: &str| {
            let p = p.to_string();
            move |c: &Call| c.name == n && c.fd_path == p
        };
        let rename = calls
            .iter()
            .position(|c| c.name.starts_with("rename") && c.line.contains(&format!("\"{name}\"")))
            .unwrap_or_else(|| panic!("{name} never renamed:\n{log}"));
        let sync = last(&is("fdatasync", &part), rename)
            .unwrap_or_else(|| panic!("{name} renamed unsynced"));
        let write = last(&is("pwrite64", &part), rename).expect("data written");
        assert!(write < sync, "{name}: data written after its sync");
        let dir_sync = calls[rename..]
            .iter()
            .position(|c| c.name == "fsync" && c.fd_path == dest)
            .unwrap_or_else(|| panic!("{name}: directory not synced after the rename"));
        assert!(dir_sync > 0);
        // every record write follows a sync of the part file made since the previous one
        let mut since = 0;
        for (i, c) in calls.iter().enumerate() {
            if c.name == "write" && c.fd_path == done {
                assert!(
                    calls[since..i]
                        .iter()
                        .any(|c| c.name == "fdatasync" && c.fd_path == part),
                    "{name}: a record written without the data synced first"
                );
                since = i;
                records += 1;
            }
        }
    }
    assert!(
        records > 0,
        "no record was written: the check checked nothing"
    );
}

/// Many small files, one create each and synced in batches: a file that arrives within one
/// interval is written as its part file alone (no `.done` log made and deleted beside it: the
/// old protocol made one per file with `--fsync off`), and files are put into place in
/// batches, every file's data synced (its own `fdatasync` or a `syncfs`) after its last write
/// and before its rename, the rename synced after (its directory's `fsync` or a `syncfs`), with
/// far fewer syncs than files (the old protocol: two per file). The files are byte for byte the
/// server's; with `--fsync off`, nothing is synced.
#[test]
fn small_files_cost_one_create_each_and_are_synced_in_batches() {
    if !common::require("/usr/bin/strace", "strace") {
        return;
    }
    const FILES: usize = 200;
    let src = tempfile::tempdir().unwrap();
    let rel = |i: usize| format!("{}/f{i:03}.bin", ["a", "b"][i % 2]);
    for i in 0..FILES {
        let path = src.path().join(rel(i));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes(i as u64, 4096)).unwrap();
    }
    let srv = serve(src.path(), &[], &[]);
    for fsync in ["on", "off"] {
        let dst = tempfile::tempdir().unwrap();
        let log = strace_transfer(
            "openat,unlinkat,pwrite64,fdatasync,fsync,syncfs,rename,renameat,renameat2",
            &[
                &srv.url("/"),
                path_str(dst.path()),
                "--sla",
                "max-throughput",
                "--interval",
                "10s",
                "--fsync",
                fsync,
            ],
        );
        for i in 0..FILES {
            assert_eq!(
                std::fs::read(dst.path().join(rel(i))).unwrap(),
                std::fs::read(src.path().join(rel(i))).unwrap(),
                "{} (--fsync {fsync})",
                rel(i)
            );
        }
        let calls = calls(&log);
        let dest = dst.path().canonicalize().unwrap();
        let dest = dest.to_str().unwrap();
        let count = |pred: &dyn Fn(&Call) -> bool| calls.iter().filter(|c| pred(c)).count();
        let part_creates = count(&|c| {
            c.name == "openat" && c.line.contains("O_CREAT") && c.line.contains(".wattio-part\"")
        });
        let logs = count(&|c| {
            c.name == "openat"
                && c.line.contains("O_CREAT")
                && c.line.contains(".wattio-part.done\"")
        });
        // (a stale log's removal is tried for every new file: it finds none, `ENOENT`)
        let log_unlinks = count(&|c| {
            c.name == "unlinkat"
                && c.line.contains(".wattio-part.done\"")
                && c.line.trim_end().ends_with("= 0")
        });
        let in_dest = |c: &Call| c.fd_path.starts_with(dest);
        let syncs =
            count(&|c| ["fdatasync", "fsync", "syncfs"].contains(&c.name.as_str()) && in_dest(c));
        assert_eq!(part_creates, FILES, "--fsync {fsync}: one create per file");
        // only a file in flight when an interval's records are written (every 200 ms in slow
        // start) gets a log, deleted once the file is in place
        assert!(
            logs <= FILES / 20 && log_unlinks == logs,
            "--fsync {fsync}: {logs} .done logs made, {log_unlinks} deleted, for {FILES} files"
        );
        eprintln!("--fsync {fsync}: {syncs} syncs for {FILES} files");
        if fsync == "off" {
            assert_eq!(syncs, 0, "--fsync off synced");
            continue;
        }
        assert!(
            syncs < FILES,
            "{syncs} syncs for {FILES} files: not batched"
        );
        for i in 0..FILES {
            let (dir, name) = rel(i)
                .split_once('/')
                .map(|(d, n)| (d.to_string(), n.to_string()))
                .unwrap();
            let part = format!("{dest}/{dir}/{name}.wattio-part");
            let rename = calls
                .iter()
                .position(|c| {
                    c.name.starts_with("rename") && c.line.contains(&format!("\"{name}\""))
                })
                .unwrap_or_else(|| panic!("{name} never renamed"));
            let write = calls[..rename]
                .iter()
                .rposition(|c| c.name == "pwrite64" && c.fd_path == part)
                .unwrap_or_else(|| panic!("{name}: no write before its rename"));
            let data_synced = calls[write..rename].iter().any(|c| {
                (c.name == "syncfs" && in_dest(c)) || (c.name == "fdatasync" && c.fd_path == part)
            });
            assert!(data_synced, "{name} renamed before its data was synced");
            let dir_path = format!("{dest}/{dir}");
            let name_synced = calls[rename..].iter().any(|c| {
                (c.name == "syncfs" && in_dest(c)) || (c.name == "fsync" && c.fd_path == dir_path)
            });
            assert!(name_synced, "{name}: its rename was never synced");
        }
    }
}

/// `-k` covers the server named on the command line only: a redirect to another server with
/// a certificate nobody trusts fails, naming `--insecure-all`, which then lets it through.
#[test]
fn insecure_covers_the_named_server_only() {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("f.bin"), bytes(40, 10_000)).unwrap();
    let pki = TestPki::new();
    let a = pki.self_signed("a", &["localhost"]);
    let b = pki.self_signed("b", &["127.0.0.1"]);
    let other = free_port();
    let Some(ng) = Nginx::start_servers(|port| {
        format!(
            "server {{ listen 127.0.0.1:{port} ssl; ssl_certificate {}; ssl_certificate_key {}; location / {{ return 302 https://127.0.0.1:{other}$request_uri; }} }}\n\
             server {{ listen 127.0.0.1:{other} ssl; ssl_certificate {}; ssl_certificate_key {}; root {}; }}\n",
            a.cert.display(),
            a.key.display(),
            b.cert.display(),
            b.key.display(),
            src.path().display()
        )
    }) else {
        return;
    };
    let url = format!("https://localhost:{}/f.bin", ng.port);
    let dst = tempfile::tempdir().unwrap();
    let run = |flag: &str| fetch(&url, dst.path(), &[flag]);
    let e = error_line(&run("-k"));
    assert!(
        e.contains("127.0.0.1") && e.contains("--insecure-all"),
        "{e}"
    );
    assert!(!dst.path().join("f.bin").exists());
    let out = run("--insecure-all");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dst.path().join("f.bin")).unwrap(),
        std::fs::read(src.path().join("f.bin")).unwrap()
    );
}

/// A checksum file's line finds its file by the longest run of path components that ends the
/// file's URL path (`with space/a b.dat` for `…/with%20space/a%20b.dat` from a URL list);
/// one line that ends two files' paths is an error; an `http://` checksum file is warned of.
#[test]
fn checksum_lines_find_their_files_by_path_suffix() {
    let src = tempfile::tempdir().unwrap();
    for d in ["with space", "x", "y"] {
        std::fs::create_dir(src.path().join(d)).unwrap();
    }
    let data = bytes(50, 3000);
    std::fs::write(src.path().join("with space/a b.dat"), &data).unwrap();
    std::fs::write(src.path().join("x/a.dat"), &data).unwrap();
    std::fs::write(src.path().join("y/a.dat"), &data).unwrap();
    let sums = Command::new("sha256sum")
        .args(["with space/a b.dat", "x/a.dat"])
        .current_dir(src.path())
        .output()
        .unwrap();
    std::fs::write(src.path().join("SHA256SUMS"), &sums.stdout).unwrap();
    let srv = serve(src.path(), &[], &[]);
    let lists = tempfile::tempdir().unwrap();
    let list = lists.path().join("urls.txt");
    std::fs::write(&list, format!("{}\n", srv.url("/with%20space/a%20b.dat"))).unwrap();
    let sums_path = src.path().join("SHA256SUMS");
    let dst = tempfile::tempdir().unwrap();
    let from_list = |dst: &Path, sums: &Path, extra: &[&str]| {
        let mut args = vec![
            "-i",
            path_str(&list),
            path_str(dst),
            "--sla",
            "max-throughput",
        ];
        args.extend_from_slice(&["--checksum-file", path_str(sums)]);
        args.extend_from_slice(extra);
        transfer(&args)
    };
    let v = ok_json(&from_list(dst.path(), &sums_path, &["--json"]));
    assert_eq!(v["verification"]["by_publisher"], 1, "{v}");
    assert_eq!(v["verification"]["collision_resistant"], 1, "{v}");
    // `a.dat` ends both x/a.dat and y/a.dat
    std::fs::write(
        lists.path().join("SHA256SUMS"),
        format!("{}  a.dat\n", "0".repeat(64)),
    )
    .unwrap();
    std::fs::write(
        &list,
        format!(
            "{}\n  out=x/a.dat\n{}\n  out=y/a.dat\n",
            srv.url("/x/a.dat"),
            srv.url("/y/a.dat")
        ),
    )
    .unwrap();
    let dst = tempfile::tempdir().unwrap();
    let e = error_line(&from_list(
        dst.path(),
        &lists.path().join("SHA256SUMS"),
        &[],
    ));
    assert!(e.contains("ends the paths of 2 files"), "{e}");
    // over plain http: a warning
    let dst = tempfile::tempdir().unwrap();
    let sums_url = srv.url("/SHA256SUMS");
    let out = fetch(
        &srv.url("/with%20space/a%20b.dat"),
        dst.path(),
        &["--checksum-file", &sums_url],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: the checksum file") && err.contains("plain http://"),
        "{err}"
    );
}

/// Open descriptors of a process.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `n` TCP connections from 127.0.0.2 to `port` that never send a byte (those the kernel
/// completed; a connect the server's backlog refused is left out).
fn silent_connects(port: u16, n: usize) -> Vec<TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..n {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            if let Ok(c) = s
                .connect(format!("127.0.0.1:{port}").parse().unwrap())
                .await
            {
                // a plain socket, so it outlives this runtime
                v.push(c.into_std().unwrap());
            }
        }
        v
    })
}

/// A full server stays open (issue 33): with `serve`'s defaults (no per-client limit) and 4
/// connections allowed, 400 silent connects from one address, over TLS and over plain HTTP,
/// used to keep every slot and lock a real client out. Now a new connection takes the place of
/// the one that has waited longest without a request: a real client is served at its first
/// attempt while the flood stays connected, and the server's descriptors stay bounded.
#[test]
fn silent_connects_cannot_lock_a_real_client_out_of_a_full_server() {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("f.bin"), bytes(61, 5000)).unwrap();
    let pki = TestPki::new();
    let cert = pki.server(
        "s",
        &["127.0.0.1"],
        transfer_common::certs::Validity::Current,
    );
    for tls in [true, false] {
        let mut args = vec!["--max-connections", "4"];
        if tls {
            args.extend([
                "--tls-cert",
                path_str(&cert.cert),
                "--tls-key",
                path_str(&cert.key),
            ]);
        }
        let srv = serve(src.path(), &args, &[]);
        let silent = silent_connects(srv.port, 400);
        assert!(silent.len() >= 390, "{} connects", silent.len());
        std::thread::sleep(Duration::from_millis(300));
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://127.0.0.1:{}/f.bin", srv.port);
        let dst = tempfile::tempdir().unwrap();
        let t = Instant::now();
        // --retries 0: the first attempt of each request must be served.
        let out = fetch(
            &url,
            dst.path(),
            &[
                "--cacert",
                path_str(&pki.ca_pem()),
                "--max-channels",
                "1",
                "--retries",
                "0",
            ],
        );
        assert!(
            out.status.success(),
            "{scheme}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read(dst.path().join("f.bin")).unwrap(),
            bytes(61, 5000)
        );
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{scheme}: {:?}",
            t.elapsed()
        );
        let most = fds(srv.child.id());
        assert!(
            most < 120,
            "{scheme}: {most} descriptors open under 400 silent connects"
        );
        drop(silent);
    }
}

/// Silent TCP connects to a TLS server with 256 descriptors and few connections allowed:
/// they pushed it to its descriptor limit (the handshake ran before a connection permit was
/// taken) and a real client timed out. Now connections past the limit are refused at once
/// and handshakes have a deadline: the server stays far from its limit and a client from
/// another address is served meanwhile.
#[test]
fn silent_tls_connects_cannot_exhaust_descriptors() {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("f.bin"), bytes(60, 1000)).unwrap();
    let pki = TestPki::new();
    let cert = pki.server(
        "s",
        &["127.0.0.1"],
        transfer_common::certs::Validity::Current,
    );
    let srv = serve(
        src.path(),
        &[
            "--tls-cert",
            path_str(&cert.cert),
            "--tls-key",
            path_str(&cert.key),
            "--max-connections",
            "8",
            "--max-connections-per-client",
            "4",
            "--handshake-timeout",
            "3s",
        ],
        &["prlimit", "--nofile=256:256", "--"],
    );
    let pid = srv.child.id();
    let silent = silent_connects(srv.port, 378);
    assert_eq!(silent.len(), 378);
    let mut most = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1500) {
        most = most.max(fds(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        most < 160,
        "{most} descriptors open under 378 silent connects"
    );
    let dst = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{}/f.bin", srv.port);
    // The silent address holds its 4 slots until their handshakes time out; the real client,
    // from another address, has its own 4: one channel and the HEAD fit whenever they connect
    // (over the limit a TLS connect is dropped, which a client sees as a reset handshake).
    let out = fetch(
        &url,
        dst.path(),
        &["--cacert", path_str(&pki.ca_pem()), "--max-channels", "1"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(silent);
    // and too small a limit for the connections asked is said at start-up, with the fix
    let out = Command::new("prlimit")
        .args(["--nofile=64:64", "--", BIN, "serve"])
        .arg(src.path())
        .args(["--listen", "127.0.0.1:0", "--max-connections", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ulimit -n") && err.contains("--max-connections"),
        "{err}"
    );
}

/// A file replaced on the server by another of the same size while it is copied (a new file
/// renamed over it, as deployments do): the next answers' new ETag starts that file over (its
/// bytes so far are dropped, no record of them kept), and the copy ends with the new version,
/// the file named as restarted. (A file rewritten in place while a response is being sent
/// mixes versions inside that one response; no client can see that without a checksum.)
#[test]
fn a_file_that_changes_during_the_copy_starts_over() {
    let src = tempfile::tempdir().unwrap();
    let old = bytes(12, 48 << 20);
    let new = bytes(13, 48 << 20);
    std::fs::write(src.path().join("f.bin"), &old).unwrap();
    // paced by the server, so that it answers the later ranges after the change: twelve
    // 4 MiB ranges, four asked at first on two connections of 8 MB/s, about three seconds
    let srv = serve(src.path(), &["--rate-limit", "8MB/s"], &[]);
    let dst = tempfile::tempdir().unwrap();
    let mut child = start_transfer(&[
        &srv.url("/f.bin"),
        path_str(dst.path()),
        "--sla",
        "max-throughput",
        "--max-channels",
        "2",
        "--json",
    ]);
    wait_for_record(dst.path(), "f.bin", &mut child);
    std::fs::write(src.path().join("f.new"), &new).unwrap();
    std::fs::rename(src.path().join("f.new"), src.path().join("f.bin")).unwrap();
    let v = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(
        v["verification"]["restarted"],
        serde_json::json!(["f.bin"]),
        "{}",
        v["verification"]
    );
    assert!(std::fs::read(dst.path().join("f.bin")).unwrap() == new);
}

/// A server whose validators change from one answer to the next (replicas that are not
/// identical behind one name): the file starts over twice, then the transfer stops with a
/// message that says why and what to do, instead of looping.
#[test]
fn validators_that_keep_changing_end_the_transfer_with_the_cause() {
    let data = bytes(14, 3 << 20);
    let n = std::sync::atomic::AtomicU64::new(0);
    let srv = Scripted::start(move |head| {
        let etag = n.fetch_add(1, Ordering::SeqCst);
        let range = head
            .lines()
            .find_map(|l| l.strip_prefix("Range: bytes="))
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)));
        let head_only = head.starts_with("HEAD");
        let (status, first, last) = match range {
            Some((a, b)) => ("206 Partial Content", a, b.min(data.len() - 1)),
            None => ("200 OK", 0, data.len() - 1),
        };
        let mut r = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\nETag: \"v{etag}\"\r\n{}\r\n",
            last + 1 - first,
            if range.is_some() {
                format!("Content-Range: bytes {first}-{last}/{}\r\n", data.len())
            } else {
                String::new()
            }
        )
        .into_bytes();
        if !head_only {
            r.extend_from_slice(&data[first..=last]);
        }
        Some(r)
    });
    let dst = tempfile::tempdir().unwrap();
    let e = error_line(&fetch(
        &srv.url("/f.bin"),
        dst.path(),
        &["--max-channels", "2"],
    ));
    assert!(
        e.contains("keep changing") && e.contains("one replica"),
        "{e}"
    );
}
