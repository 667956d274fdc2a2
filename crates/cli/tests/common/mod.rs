//! Helpers shared by the CLI test binaries (each binary uses some of them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Output};
use std::time::{Duration, Instant};

pub mod nvme_tree;
pub mod vm;

pub const BIN: &str = env!("CARGO_BIN_EXE_wattio");

/// Runs the wattio binary with `args`, under the fixture `root` or the real machine.
pub fn wattio(root: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    match root {
        Some(r) => c.env("WATTIO_ROOT", r),
        None => c.env_remove("WATTIO_ROOT"),
    };
    c.output().expect("run wattio")
}

/// Kills and reaps children even when the test fails.
pub struct Reaper(pub Vec<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The `HOST:PORT` a starting `wattio export` prints on stderr (`… http://ADDR/metrics …`).
pub fn exporter_addr(stderr: ChildStderr) -> String {
    let mut err = BufReader::new(stderr);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.split("://").nth(1) {
            // The rest of its stderr goes to the test's (shown when a test fails), and the pipe
            // stays open: a write to a closed stderr would end the exporter.
            std::thread::spawn(move || {
                for l in err.lines().map_while(Result::ok) {
                    eprintln!("exporter: {l}");
                }
            });
            return rest.split('/').next().unwrap().to_string();
        }
    }
    panic!("the exporter did not print its address");
}

/// Sends `request` as is and returns the whole response.
pub fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// Waits up to `secs` seconds for `cond`, checking every 50 ms; panics with `what` if it never
/// holds.
pub fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A real Prometheus (Debian's package) with `config` as its configuration, its data in `dir`,
/// on a free loopback port: the process and its address.
pub fn start_prometheus(dir: &Path, config: &str) -> (Child, std::net::SocketAddr) {
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("prometheus is missing ({e}): run scripts/install-deps.sh"));
    (child, web)
}

/// The answer of Prometheus at `web` to the instant query `q` (URL-encoded), or "" while it is
/// not listening yet.
pub fn prometheus_query(web: std::net::SocketAddr, q: &str) -> String {
    TcpStream::connect(web)
        .ok()
        .map(|_| {
            http(
                &web.to_string(),
                &format!(
                    "GET /api/v1/query?query={q} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                ),
            )
        })
        .unwrap_or_default()
}

/// `wattio export`'s arguments for a model-estimated exporter on a free loopback port, sampling
/// every 100 ms so that a test sees new figures soon.
pub const MODEL_EXPORTER: [&str; 6] = [
    "--source",
    "model",
    "--listen",
    "127.0.0.1:0",
    "--interval",
    "100ms",
];

/// `wattio export ARGS` on its way up (stderr piped, env as given by `configure`), and the
/// address it printed.
pub fn spawn_exporter(args: &[&str], configure: impl FnOnce(&mut Command)) -> (Reaper, String) {
    let mut c = Command::new(BIN);
    c.arg("export")
        .args(args)
        .stderr(std::process::Stdio::piped());
    configure(&mut c);
    let mut ex = Reaper(vec![c.spawn().unwrap()]);
    let addr = exporter_addr(ex.0[0].stderr.take().unwrap());
    (ex, addr)
}

/// Data rows (lines after the header) of a CSV file; 0 when it is missing or empty.
pub fn csv_rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count().saturating_sub(1))
        .unwrap_or(0)
}

/// Starts `cmd` (output captured) and sends it SIGTERM once `cond` holds, within `secs`
/// seconds (panics naming `what` if it exits first or never gets there): its output. It is
/// killed and reaped even when the test fails.
pub fn terminate_when(
    mut cmd: Command,
    secs: u64,
    what: &str,
    mut cond: impl FnMut() -> bool,
) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start wattio");
    let mut reaper = Reaper(vec![child]);
    wait_until(secs, what, || {
        assert!(
            reaper.0[0].try_wait().unwrap().is_none(),
            "it ended before {what}"
        );
        cond()
    });
    terminate(reaper.0.pop().unwrap())
}

/// Sends SIGTERM to `child` (with kill(1)) and waits for it: its output.
pub fn terminate(child: Child) -> Output {
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
    child.wait_with_output().expect("wait for wattio")
}

/// Processes (other than this test) whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(format!("{pid}: {cmd}"));
        }
    }
    found
}

/// Checks how an interrupted study ended: SIGTERM's exit code, the one line saying `kept` of
/// `total` runs are in `dir` and how to resume, and no process of its left (they all name
/// `dir` on their command line).
pub fn check_interrupted(o: &Output, kept: usize, total: usize, dir: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        err.contains(&format!(
            "interrupted: {kept} of {total} runs kept in {dir}"
        )) && err.contains(&format!("--resume {dir}")),
        "{err}"
    );
    let left = processes_mentioning(dir);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Waits until `child` (named `name` in messages) accepts connections on loopback `port`,
/// for at most 10 s; panics with its standard error if it exits first.
pub fn wait_listening(child: &mut Child, port: u16, name: &str) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("{name} exited at start ({st}): {err}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{name} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `bin` exists; when it does not, fails under `make test` and skips otherwise.
pub fn require(bin: &str, package: &str) -> bool {
    if Path::new(bin).exists() {
        return true;
    }
    assert!(
        std::env::var_os("WATTIO_REQUIRE_NGINX").is_none(),
        "{bin} missing: install {package} (scripts/install-deps.sh)"
    );
    eprintln!("SKIPPED: {bin} not installed");
    false
}

/// Asserts that Prometheus's own linter, `promtool check metrics` (Debian's `prometheus`
/// package, which `make deps` installs), finds nothing in the exposition `body`.
pub fn assert_promtool_accepts(body: &str) {
    use std::io::Write as _;
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (make deps installs Debian's prometheus package)");
    lint.stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let o = lint.wait_with_output().unwrap();
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A `wattio serve` of `dir` on a free loopback port, its rate limited to `rate` (`40mbit`):
/// the child (killed and reaped on drop) and the port.
pub fn serve_rate_limited(dir: &Path, rate: &str) -> (Reaper, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(BIN)
        .arg("serve")
        .arg(dir)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--rate-limit", rate])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let reaper = Reaper(vec![child]);
    wait_until(10, "wattio serve to listen", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (reaper, port)
}
