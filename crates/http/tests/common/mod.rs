//! Shared helpers of the HTTP and transfer integration tests (wattio-transfer's tests include this
//! file by path): datasets, digests, raw HTTP requests, an nginx guard.
#![allow(dead_code)]

pub mod certs;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Deterministic pseudo-random bytes (xorshift64*), so files are not compressible or equal.
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545F4914F6CDD1D).to_le_bytes());
    }
    v.truncate(n);
    v
}

/// Writes a small mixed dataset (sizes in bytes) and returns the relative paths.
pub fn make_dataset(root: &Path, files: &[(&str, usize)]) -> Vec<String> {
    for (i, (rel, n)) in files.iter().enumerate() {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes(i as u64 + 1, *n)).unwrap();
    }
    files.iter().map(|(r, _)| r.to_string()).collect()
}

/// The default test dataset: small, medium, large files, a nested one, an empty one and a
/// name that needs percent-encoding.
pub fn default_dataset(root: &Path) -> Vec<String> {
    let mut f: Vec<(String, usize)> = (0..24)
        .map(|i| (format!("small/s{i:02}.bin"), 20_000 + i * 997))
        .collect();
    f.extend((0..4).map(|i| (format!("medium/m{i}.bin"), 700_000 + i * 13_001)));
    f.push(("large/l0.bin".into(), 6_000_000));
    f.push(("large/deep/l1.bin".into(), 3_300_001));
    f.push(("empty.bin".into(), 0));
    f.push(("name with spaces & ünïcode.bin".into(), 12_345));
    let refs: Vec<(&str, usize)> = f.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    make_dataset(root, &refs)
}

/// Asserts DEST holds byte-identical copies of every listed file and no leftovers.
pub fn assert_same_tree(src: &Path, dst: &Path, rels: &[String]) {
    for r in rels {
        let a = std::fs::read(src.join(r)).unwrap();
        let b = std::fs::read(dst.join(r)).unwrap_or_else(|e| panic!("{r} missing in dest: {e}"));
        assert!(a == b, "{r} differs ({} vs {} bytes)", a.len(), b.len());
    }
    let mut leftovers = Vec::new();
    walk(dst, &mut leftovers);
    leftovers.retain(|p| p.to_string_lossy().contains(".wattio-part"));
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

fn walk(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx on a loopback port with a temporary configuration; killed on drop. It closes every
/// connection after 7 requests (`keepalive_requests 7`), so clients must handle a server that
/// ends a keep-alive connection with requests still pipelined behind.
pub struct Nginx {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx serving `root`, or returns None when nginx is not installed and
    /// WATTIO_REQUIRE_NGINX is unset (`make test` sets it, so CI cannot skip silently).
    pub fn start(root: &Path) -> Option<Nginx> {
        Nginx::start_servers(|port| {
            format!(
                "server {{ listen 127.0.0.1:{port}; root {}; }}\n",
                root.display()
            )
        })
    }

    /// Starts nginx with the `server` blocks `servers(port)` writes for a free loopback port
    /// (the rest of the configuration as in [`Nginx::start`]).
    pub fn start_servers(servers: impl FnOnce(u16) -> String) -> Option<Nginx> {
        let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let Some(bin) = bin else {
            if std::env::var_os("WATTIO_REQUIRE_NGINX").is_some() {
                panic!("nginx not installed; run scripts/install-deps.sh");
            }
            eprintln!("SKIPPED: nginx not installed (make test installs it)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 512; }}\n\
             http {{\n access_log off;\n client_body_temp_path {d}/b;\n proxy_temp_path {d}/p;\n fastcgi_temp_path {d}/f;\n uwsgi_temp_path {d}/u;\n scgi_temp_path {d}/s;\n\
              sendfile on;\n keepalive_requests 7;\n default_type application/octet-stream;\n\
              {}}}\n",
            servers(port)
        );
        let cfg = dir.path().join("nginx.conf");
        std::fs::write(&cfg, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn nginx");
        let n = Nginx {
            child,
            port,
            _dir: dir,
        };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "nginx did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(n)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until a transfer into `dst` has started writing (a `.wattio-part` file exists), so an
/// interruption test interrupts a running transfer even on a slow, busy machine.
pub fn wait_for_part_file(dst: &Path) {
    let t = Instant::now();
    loop {
        let mut files = Vec::new();
        walk(dst, &mut files);
        if files
            .iter()
            .any(|p| p.to_string_lossy().ends_with(".wattio-part"))
        {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the transfer never started writing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A TCP connection to `addr` from the local address `from` (e.g. `127.0.0.2:0`: every
/// 127/8 address is the loopback, so tests can act as several clients), with a receive
/// buffer of `rcvbuf` bytes when given (set before the handshake, so the window the peer
/// sees is that small). Blocking, 10 s read timeout.
pub fn connect_from(
    from: &str,
    addr: std::net::SocketAddr,
    rcvbuf: Option<u32>,
) -> std::net::TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        if let Some(n) = rcvbuf {
            sock.set_recv_buffer_size(n).unwrap();
        }
        sock.bind(from.parse().unwrap()).unwrap();
        sock.connect(addr).await.unwrap()
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads one response: (status, headers lower-cased, body by Content-Length).
pub fn read_response(
    s: &mut std::net::TcpStream,
    head_only: bool,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut b).unwrap();
        assert!(
            n == 1,
            "connection closed before a full head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(b[0]);
    }
    let text = String::from_utf8(buf).unwrap();
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; if head_only { 0 } else { len }];
    s.read_exact(&mut body).unwrap();
    (status, headers, body)
}

pub fn header<'a>(h: &'a [(String, String)], k: &str) -> Option<&'a str> {
    h.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

/// A connection to a test server, with a 10 s read timeout.
pub fn connect(h: &wattio_http::ServerHandle) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One request on a fresh connection and its response (no body read for `HEAD`).
pub fn get(h: &wattio_http::ServerHandle, req: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    use std::io::Write;
    let mut s = connect(h);
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut s, req.starts_with("HEAD"))
}
