//! `wattio transfer` from servers that carry no wattio listing, started by the tests on
//! loopback: nginx `autoindex` (HTML and JSON), Apache `mod_autoindex` (fancy table and plain
//! list), `python3 -m http.server` (no `Range`), Caddy's `file_server browse` and lighttpd's
//! `mod_dirlisting`; URL lists in aria2's format; checksum files
//! written by the reference tools (`sha256sum`, `md5sum`, `sha512sum`, `xxhsum`); SIGKILL of
//! the client and a rerun that fetches only what is missing. Copies are compared with `diff -r`.
//!
//! `make test` sets WATTIO_REQUIRE_NGINX, which turns a missing server into a failure rather
//! than a skip (nginx, apache2-bin, caddy, lighttpd and python3 come from
//! scripts/install-deps.sh).

mod common;
// the transfer crate's test helpers: nginx on loopback, datasets, the test CA
#[path = "../../http/tests/common/mod.rs"]
mod transfer_common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require, BIN};
use transfer_common::certs::{TestPki, Validity};
use transfer_common::{bytes, free_port, make_dataset, wait_for_part_file, Nginx};

/// A server child process with its configuration directory, killed on drop (also when the
/// test fails).
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn started(mut child: Child, port: u16, dir: tempfile::TempDir, name: &str) -> Server {
    common::wait_listening(&mut child, port, name);
    Server {
        child,
        port,
        _dir: dir,
    }
}

/// The URL of `path` on a loopback nginx.
fn at(ng: &Nginx, path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", ng.port)
}

/// nginx serving `root` with `autoindex on` at `/` (HTML) and `/json/` (JSON), and with
/// `extra` directives in the server block.
fn nginx_autoindex(root: &Path, directives: &str) -> Option<Nginx> {
    Nginx::start_servers(|port| autoindex_server(port, "", root, directives))
}

/// A `server` block listening on `port` (with `listen_options`, e.g. ` ssl`) with `directives`.
fn autoindex_server(port: u16, listen_options: &str, root: &Path, directives: &str) -> String {
    let r = root.display();
    format!(
        "server {{ listen 127.0.0.1:{port}{listen_options}; {directives}\n location / {{ root {r}; autoindex on; }}\n location /json/ {{ alias {r}/; autoindex on; autoindex_format json; }}\n}}\n"
    )
}

/// `python3 ARGS PORT REST` on a free loopback port (`name` in messages); None (skipped) when
/// Python is missing outside `make test`.
fn python_server(args: &[&str], rest: &[&std::ffi::OsStr], name: &str) -> Option<Server> {
    if !require("/usr/bin/python3", "python3") {
        return None;
    }
    let port = free_port();
    let child = Command::new("/usr/bin/python3")
        .args(args)
        .arg(port.to_string())
        .args(rest)
        .stdout(Stdio::null())
        // a probe that drops its connection after the head makes Python log a broken pipe
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(started(child, port, tempfile::tempdir().unwrap(), name))
}

/// `python3 -m http.server` serving `root` (HTTP/1.0, no Range).
fn python_http(root: &Path) -> Option<Server> {
    python_server(
        &["-m", "http.server"],
        &[
            "--bind".as_ref(),
            "127.0.0.1".as_ref(),
            "--directory".as_ref(),
            root.as_os_str(),
        ],
        "python3 -m http.server",
    )
}

/// Apache httpd (Debian's apache2-bin) as one foreground process (`-X`) serving `root` with
/// `Options +Indexes` and the given `IndexOptions`. As root it serves as `nobody`, so the tree
/// is made world-readable.
fn apache(root: &Path, index_options: &str) -> Option<Server> {
    if !require("/usr/sbin/apache2", "apache2-bin") {
        return None;
    }
    make_world_readable(root);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let d = dir.path().display();
    let m = "/usr/lib/apache2/modules";
    let conf = format!(
        "ServerRoot {d}\nListen 127.0.0.1:{port}\nServerName localhost\nPidFile {d}/httpd.pid\nErrorLog {d}/error.log\n\
         LoadModule mpm_event_module {m}/mod_mpm_event.so\nLoadModule authz_core_module {m}/mod_authz_core.so\n\
         LoadModule dir_module {m}/mod_dir.so\nLoadModule autoindex_module {m}/mod_autoindex.so\n\
         LoadModule mime_module {m}/mod_mime.so\nTypesConfig /dev/null\n\
         User nobody\nGroup nogroup\nDocumentRoot {r}\n<Directory {r}>\n Options +Indexes\n Require all granted\n</Directory>\n\
         IndexOptions {index_options}\n",
        r = root.display()
    );
    std::fs::write(dir.path().join("httpd.conf"), conf).unwrap();
    let child = Command::new("/usr/sbin/apache2")
        .arg("-f")
        .arg(dir.path().join("httpd.conf"))
        .arg("-X")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Some(started(child, port, dir, "apache2"))
}

/// Caddy's `file_server browse` (Debian's caddy) serving `root`: its pages are titled with the
/// path alone, which no "Index of" rule would take.
fn caddy(root: &Path) -> Option<Server> {
    if !require("/usr/bin/caddy", "caddy") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new("/usr/bin/caddy")
        .args(["file-server", "--browse", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--root")
        .arg(root)
        // Caddy keeps its state (certificates, autosave) under XDG_DATA_HOME/XDG_CONFIG_HOME
        .env("XDG_DATA_HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(started(child, port, dir, "caddy"))
}

/// lighttpd (Debian's lighttpd) in the foreground with `mod_dirlisting` serving `root`.
fn lighttpd(root: &Path) -> Option<Server> {
    if !require("/usr/sbin/lighttpd", "lighttpd") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = format!(
        "server.document-root = \"{}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.modules += (\"mod_dirlisting\")\ndir-listing.activate = \"enable\"\n\
         dir-listing.encoding = \"utf-8\"\nserver.errorlog = \"{}/error.log\"\n",
        root.display(),
        dir.path().display()
    );
    std::fs::write(dir.path().join("lighttpd.conf"), conf).unwrap();
    let child = Command::new("/usr/sbin/lighttpd")
        .arg("-D")
        .arg("-f")
        .arg(dir.path().join("lighttpd.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(started(child, port, dir, "lighttpd"))
}

fn make_world_readable(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut p = Some(root);
    // the tree, and its parents up to /tmp, must be searchable by `nobody`
    while let Some(d) = p {
        if d == Path::new("/") || d == std::env::temp_dir() {
            break;
        }
        let mode = std::fs::metadata(d).unwrap().permissions().mode();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o755)).unwrap();
        p = d.parent();
    }
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(root)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Names that need escaping in URLs, HTML and checksum files: spaces, unicode, `#`, `?`, `%`,
/// a literal `%20`, `&`, quotes and angle brackets, `+`, `;`, `=`, a deep directory and empty
/// files; one file large enough to be cut into many ranges.
const AWKWARD: &[(&str, usize)] = &[
    ("large.bin", 3_000_001),
    ("sp ace/with spaces.bin", 70_000),
    ("ünïcödé/ファイル ✓.bin", 33_333),
    ("hash#tag.bin", 1_000),
    ("what?.txt", 12),
    ("100%.bin", 100),
    ("pct%20literal.bin", 10),
    ("amp&semi;eq=+plus,comma'quote.bin", 500),
    ("q\"uote <lt> & gt.txt", 7),
    ("a/b/c/d/e/f/g/h/deep.bin", 4_096),
    ("empty.bin", 0),
    ("sub dir/empty too.bin", 0),
];

fn make_tree(root: &Path, files: &[(&str, usize)]) {
    make_dataset(root, files);
}

/// `diff -r`: the copy is byte-identical and has nothing more (no `.wattio-part` left).
fn assert_identical(src: &Path, dst: &Path) {
    let out = Command::new("diff")
        .arg("-r")
        .arg(src)
        .arg(dst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "diff -r {} {}:\n{}{}",
        src.display(),
        dst.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `wattio transfer ARGS` started without CPU actuation or meter, its output piped (and its
/// standard input, with `stdin`).
fn start_transfer(args: &[&str], stdin: bool) -> Child {
    Command::new(BIN)
        .arg("transfer")
        .args(args)
        .args(["--cpu-actuator", "none", "--no-meter", "--rtt", "1ms"])
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `wattio transfer ARGS --json` without CPU actuation or meter; stdin from `stdin`.
fn transfer(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = start_transfer(args, stdin.is_some());
    if let Some(b) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// The JSON summary of a run that must have succeeded.
fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "transfer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON summary")
}

/// Copies `source` into `dst` (`--sla SLA --json`, then `extra`): the summary of a run that
/// must succeed.
fn copy(source: &str, dst: &Path, sla: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![source, path_str(dst), "--sla", sla, "--json"];
    args.extend_from_slice(extra);
    ok_json(&transfer(&args, None))
}

/// `wattio transfer -i - DST --sla SLA --json` with the URL list `list` on standard input.
fn transfer_list(list: &str, dst: &Path, sla: &str) -> Output {
    let args = ["-i", "-", path_str(dst), "--sla", sla, "--json"];
    transfer(&args, Some(list.as_bytes()))
}

/// Copies the files of the URL list `list` (given on standard input) into `dst`
/// (`--sla max-throughput --json`): the summary of a run that must succeed.
fn copy_list(list: &str, dst: &Path) -> serde_json::Value {
    ok_json(&transfer_list(list, dst, "max-throughput"))
}

/// The one-line error of a run that must have failed with exit code 2.
fn error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("wattio: error: "))
        .unwrap_or_else(|| panic!("no error line in {err}"))
        .to_string();
    // messages are for people: no Rust debug formatting
    assert!(!line.contains("Some(") && !line.contains("None"), "{line}");
    line
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn nginx_autoindex_html_and_json_copy_awkward_names_byte_identical() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let Some(ng) = nginx_autoindex(src.path(), "") else {
        return;
    };
    for (url, detail) in [
        (at(&ng, "/"), "nginx autoindex (html)"),
        (at(&ng, "/json/"), "nginx autoindex (json)"),
    ] {
        let dst = tempfile::tempdir().unwrap();
        let v = copy(&url, dst.path(), "max-throughput", &[]);
        assert_eq!(v["source_kind"], "directory-index", "{url}");
        assert_eq!(v["source_detail"], detail);
        assert_eq!(v["files"], AWKWARD.len());
        let total: usize = AWKWARD.iter().map(|f| f.1).sum();
        assert_eq!(v["bytes"], total);
        assert_eq!(v["whole_file_streams"].as_array().unwrap().len(), 0);
        // no checksum anywhere: every file is reported as checked by size only
        assert_eq!(v["verification"]["unverified"], AWKWARD.len());
        assert_eq!(v["files_verified_checksum"], 0);
        assert_identical(src.path(), dst.path());
    }
    // a directory named without its trailing slash is followed (nginx answers 301), and only
    // that subtree is copied
    let dst = tempfile::tempdir().unwrap();
    let v = copy(&at(&ng, "/a/b"), dst.path(), "min-energy", &[]);
    assert_eq!(v["files"], 1);
    assert_identical(&src.path().join("a/b"), dst.path());
}

/// The same indexes over HTTPS (a CA made by the test, `--cacert`), with the checksum file
/// fetched over HTTPS too.
#[test]
fn nginx_autoindex_over_tls_with_checksums() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let names: Vec<&str> = AWKWARD.iter().map(|f| f.0).collect();
    std::fs::write(
        src.path().join("SHA256SUMS"),
        reference_sums(src.path(), &["sha256sum"], &names),
    )
    .unwrap();
    let pki = TestPki::new();
    let cert = pki.server("localhost", &["localhost"], Validity::Current);
    let tls = format!(
        "ssl_certificate {}; ssl_certificate_key {};",
        cert.cert.display(),
        cert.key.display()
    );
    let Some(ng) = Nginx::start_servers(|port| autoindex_server(port, " ssl", src.path(), &tls))
    else {
        return;
    };
    let base = format!("https://localhost:{}", ng.port);
    for (path, detail) in [
        ("/", "nginx autoindex (html)"),
        ("/json/", "nginx autoindex (json)"),
    ] {
        let dst = tempfile::tempdir().unwrap();
        let v = copy(
            &format!("{base}{path}"),
            dst.path(),
            "max-throughput",
            &[
                "--cacert",
                path_str(&pki.ca_pem()),
                "--checksum-file",
                &format!("{base}/SHA256SUMS"),
            ],
        );
        assert_eq!(v["source_detail"], detail);
        assert_eq!(
            v["verification"]["by_publisher"],
            names.len(),
            "{}",
            v["verification"]
        );
        // only the checksum file itself has no line in it
        assert_eq!(v["verification"]["unverified_files"][0], "SHA256SUMS");
        assert_identical(src.path(), dst.path());
    }
}

#[test]
fn python_http_server_without_range_streams_whole_files() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let Some(py) = python_http(src.path()) else {
        return;
    };
    // a 100 Mbit/s path (the helper gives a 1 ms RTT): the plan's piece is 256 KiB, so the
    // 3 MB large.bin would be cut into ranges and the server is asked whether it honours them
    let small_bdp = ["--bandwidth", "100mbit"];
    let dst = tempfile::tempdir().unwrap();
    let v = copy(&py.url("/"), dst.path(), "max-throughput", &small_bdp);
    assert_eq!(v["source_detail"], "python http.server");
    let whole = v["whole_file_streams"].as_array().unwrap();
    assert_eq!(whole.len(), 1, "{v}");
    assert!(whole[0].as_str().unwrap().contains("ignores Range"));
    assert_identical(src.path(), dst.path());

    // a directory without its slash: python answers 301 with a relative Location. Its one
    // 70 kB file is requested whole, so the server is not asked about Range (and nothing
    // says it ignores it)
    let dst = tempfile::tempdir().unwrap();
    let v = copy(&py.url("/sp%20ace"), dst.path(), "min-energy", &small_bdp);
    assert_eq!(v["files"], 1);
    assert_eq!(v["whole_file_streams"].as_array().unwrap().len(), 0, "{v}");
    assert_identical(&src.path().join("sp ace"), dst.path());

    // the server is asked when a file that needs ranges turns up later in the walk: the root
    // page lists small files only, the 1 MB file is one directory down; it comes whole
    let later = tempfile::tempdir().unwrap();
    make_tree(
        later.path(),
        &[
            ("a.bin", 5_000),
            ("b.bin", 9_000),
            ("deep/big.bin", 1_000_000),
        ],
    );
    let Some(py_later) = python_http(later.path()) else {
        return;
    };
    let dst = tempfile::tempdir().unwrap();
    let v = copy(&py_later.url("/"), dst.path(), "max-throughput", &small_bdp);
    let whole = v["whole_file_streams"].as_array().unwrap();
    assert_eq!(whole.len(), 1, "{v}");
    assert!(whole[0].as_str().unwrap().contains("ignores Range"));
    assert_identical(later.path(), dst.path());

    // one file simply downloads, as with curl or wget
    let dst = tempfile::tempdir().unwrap();
    let url = py.url("/large.bin");
    let mut args = vec![url.as_str(), path_str(dst.path()), "--sla", "min-energy"];
    args.extend(small_bdp);
    let out = transfer(&args, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ignores Range requests"), "{text}");
    assert_eq!(
        std::fs::read(dst.path().join("large.bin")).unwrap(),
        std::fs::read(src.path().join("large.bin")).unwrap()
    );
}

/// A Python server that never states a size: `HEAD` without `Content-Length`, bodies chunked
/// (HTTP/1.1) or ended by closing the connection (HTTP/1.0), no `Range`.
const SIZELESS_SERVER: &str = r#"
import http.server, os, sys, urllib.parse
port, root, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1" if mode == "chunked" else "HTTP/1.0"
    def do_HEAD(self): self.reply(False)
    def do_GET(self): self.reply(True)
    def reply(self, body):
        p = os.path.join(root, urllib.parse.unquote(self.path.split("?")[0]).lstrip("/"))
        if not os.path.isfile(p):
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(200)
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not body:
            return
        with open(p, "rb") as f:
            while True:
                b = f.read(7000)
                if not b:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b) if mode == "chunked" else b)
        if mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

fn sizeless_server(root: &Path, mode: &str) -> Option<Server> {
    python_server(
        &["-c", SIZELESS_SERVER],
        &[root.as_os_str(), mode.as_ref()],
        "python3 (no sizes)",
    )
}

#[test]
fn files_of_unknown_size_come_as_single_streams() {
    let src = tempfile::tempdir().unwrap();
    make_tree(
        src.path(),
        &[("a b.bin", 900_001), ("d/c.bin", 50_000), ("e.bin", 0)],
    );
    let sums = String::from_utf8(reference_sums(
        src.path(),
        &["sha256sum"],
        &["a b.bin", "d/c.bin", "e.bin"],
    ))
    .unwrap();
    let digest = |i: usize| sums.lines().nth(i).unwrap()[..64].to_string();
    for mode in ["chunked", "close"] {
        let Some(srv) = sizeless_server(src.path(), mode) else {
            return;
        };
        let list = |all: bool| {
            let sum = |i: usize| {
                if all || i == 0 {
                    format!("  checksum=sha-256={}\n", digest(i))
                } else {
                    String::new()
                }
            };
            format!(
                "{}\n{}{}\n  out=d/c.bin\n{}{}\n{}",
                srv.url("/a%20b.bin"),
                sum(0),
                srv.url("/d/c.bin"),
                sum(1),
                srv.url("/e.bin"),
                sum(2)
            )
        };
        let dst = tempfile::tempdir().unwrap();
        let out = transfer_list(&list(false), dst.path(), "min-energy");
        if mode == "close" {
            // over plain HTTP a body ended by closing the connection cannot be told from a
            // cut one: taken only with the publisher's digest
            let e = error_line(&out);
            assert!(
                e.contains("unknown length") && e.contains("https://"),
                "{mode}: {e}"
            );
            assert!(!dst.path().join("d/c.bin").exists(), "{mode}");
            let out = transfer_list(&list(true), dst.path(), "min-energy");
            let v = ok_json(&out);
            assert_eq!(v["verification"]["by_publisher"], 3, "{mode}");
            assert_identical(src.path(), dst.path());
            continue;
        }
        let v = ok_json(&out);
        assert_eq!(v["files"], 3, "{mode}");
        assert_eq!(v["total_bytes"], 950_001, "{mode}");
        assert!(
            v["whole_file_streams"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w.as_str().unwrap().contains("3 files of unknown size")),
            "{mode}: {}",
            v["whole_file_streams"]
        );
        assert_eq!(v["verification"]["by_publisher"], 1, "{mode}");
        assert_eq!(v["verification"]["unverified"], 2, "{mode}");
        assert_identical(src.path(), dst.path());
    }
}

#[test]
fn apache_fancy_table_and_plain_list_indexes() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    // Debian's default look (sort links ?C=N;O=D, "Parent Directory" to /), and the plain list
    for options in [
        "FancyIndexing VersionSort HTMLTable NameWidth=* DescriptionWidth=* Charset=UTF-8",
        "Charset=UTF-8",
    ] {
        let Some(ap) = apache(src.path(), options) else {
            return;
        };
        let dst = tempfile::tempdir().unwrap();
        let v = copy(&ap.url("/"), dst.path(), "max-throughput", &[]);
        assert_eq!(v["source_detail"], "apache mod_autoindex", "{options}");
        assert_eq!(v["whole_file_streams"].as_array().unwrap().len(), 0);
        assert_identical(src.path(), dst.path());
    }
}

/// An index is recognised by its links, not a title: Caddy titles its `browse` pages with the
/// path alone (refused as "not a directory index" before), lighttpd with "Index of"; both copy
/// the awkward names and nested directories byte for byte, and Caddy's exact sizes are taken
/// from its page (no `HEAD` per file).
#[test]
fn caddy_browse_and_lighttpd_dir_listing_copy_awkward_names_byte_identical() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let total: usize = AWKWARD.iter().map(|f| f.1).sum();
    for (server, detail) in [
        (caddy(src.path()), "caddy file_server browse"),
        (lighttpd(src.path()), "lighttpd dir-listing"),
    ] {
        let Some(server) = server else {
            return;
        };
        let dst = tempfile::tempdir().unwrap();
        let v = copy(&server.url("/"), dst.path(), "max-throughput", &[]);
        assert_eq!(v["source_kind"], "directory-index", "{detail}");
        assert_eq!(v["source_detail"], detail);
        assert_eq!(v["files"], AWKWARD.len(), "{detail}");
        assert_eq!(v["bytes"], total, "{detail}");
        assert_identical(src.path(), dst.path());
    }
}

/// Runs a reference checksum tool in `dir` over `names` and returns its output.
fn reference_sums(dir: &Path, tool: &[&str], names: &[&str]) -> Vec<u8> {
    let out = Command::new(tool[0])
        .args(&tool[1..])
        .args(names)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", tool[0]));
    assert!(
        out.status.success(),
        "{tool:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn url_encode_path(rel: &str) -> String {
    rel.bytes()
        .map(|c| {
            if c.is_ascii_alphanumeric() || b"-._~/".contains(&c) {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect()
}

#[test]
fn url_list_from_stdin_with_out_options_and_reference_checksum_files() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let Some(ng) = nginx_autoindex(src.path(), "") else {
        return;
    };
    let names: Vec<&str> = AWKWARD.iter().map(|f| f.0).collect();
    // aria2's input-file format: comments, blank lines, indented out= (one renamed into a
    // directory), an ignored aria2 option
    let mut list = String::from("# dataset\n\n");
    for (i, n) in names.iter().enumerate() {
        list.push_str(&at(&ng, &format!("/{}", url_encode_path(n))));
        list.push('\n');
        if i == 1 {
            list.push_str("  out=renamed/first.bin\n\tsplit=4\n");
        } else {
            list.push_str(&format!("  out={n}\n"));
        }
    }
    // the checksum files as the tools write them, in the served directory
    let sha256 = reference_sums(src.path(), &["sha256sum"], &names);
    std::fs::write(src.path().join("SHA256SUMS"), &sha256).unwrap();
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &[
            "-i",
            "-",
            path_str(dst.path()),
            "--sla",
            "max-throughput",
            "--json",
            "--checksum-file",
            &at(&ng, "/SHA256SUMS"),
        ],
        Some(list.as_bytes()),
    );
    let v = ok_json(&out);
    assert_eq!(v["source_kind"], "url-list");
    assert_eq!(v["files"], names.len());
    let ver = &v["verification"];
    assert_eq!(ver["by_publisher"], names.len(), "{ver}");
    assert_eq!(ver["unverified"], 0);
    assert_eq!(ver["checksum_file"]["algorithms"][0], "sha256");
    assert_eq!(ver["checksum_file"]["matched"], names.len());
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("split ignored")),
        "{}",
        v["notes"]
    );
    // the renamed file is the second one; the rest mirror the tree
    std::fs::create_dir_all(dst.path().join(Path::new(names[1]).parent().unwrap())).unwrap();
    std::fs::rename(
        dst.path().join("renamed/first.bin"),
        dst.path().join(names[1]),
    )
    .unwrap();
    std::fs::remove_dir(dst.path().join("renamed")).unwrap();
    std::fs::copy(src.path().join("SHA256SUMS"), dst.path().join("SHA256SUMS")).unwrap();
    assert_identical(src.path(), dst.path());

    // other tools and formats, from local files: md5sum --tag (BSD), sha512sum -b (binary
    // mode), xxhsum -H3 (XXH3-64) and -H2 (XXH128); a checksum file covering only some files
    // leaves the others marked unverified
    let small: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != "large.bin")
        .collect();
    let dir_url = at(&ng, "/json/");
    for (tool, file, algo) in [
        (&["md5sum", "--tag"][..], "MD5SUMS", "md5"),
        (&["sha512sum", "-b"][..], "SHA512SUMS", "sha512"),
        (&["xxhsum", "-H3"][..], "checksums.xxh3", "xxh3-64"),
        (&["xxhsum", "-H2"][..], "checksums.xxh128", "xxh128"),
    ] {
        let sums_dir = tempfile::tempdir().unwrap();
        let path = sums_dir.path().join(file);
        std::fs::write(&path, reference_sums(src.path(), tool, &small)).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let v = copy(
            &dir_url,
            dst.path(),
            "min-energy",
            &["--checksum-file", path_str(&path)],
        );
        let ver = &v["verification"];
        assert_eq!(ver["checksum_file"]["algorithms"][0], algo, "{file}");
        // SHA256SUMS itself and large.bin have no line in it
        assert_eq!(ver["by_publisher"], small.len(), "{file}: {ver}");
        let unverified: Vec<&str> = ver["unverified_files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(unverified, ["SHA256SUMS", "large.bin"], "{file}");
        assert_identical(src.path(), dst.path());
    }
}

/// One URL list, two servers: nginx (Range) and python http.server (none). Channels switch
/// servers between files; only the server without Range gets whole-file streams.
#[test]
fn a_url_list_across_two_servers() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), AWKWARD);
    let (Some(ng), Some(py)) = (nginx_autoindex(src.path(), ""), python_http(src.path())) else {
        return;
    };
    let mut list = String::new();
    for (i, (n, _)) in AWKWARD.iter().enumerate() {
        let path = format!("/{}", url_encode_path(n));
        let url = if i % 2 == 0 {
            at(&ng, &path)
        } else {
            py.url(&path)
        };
        list.push_str(&format!("{url}\n  out={n}\n"));
    }
    let dst = tempfile::tempdir().unwrap();
    let v = copy_list(&list, dst.path());
    let whole = v["whole_file_streams"].as_array().unwrap();
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert!(
        whole[0]
            .as_str()
            .unwrap()
            .contains(&format!(":{}", py.port)),
        "{whole:?}"
    );
    assert_identical(src.path(), dst.path());
}

#[test]
fn a_checksum_mismatch_is_fetched_again_once_then_refused() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), &[("good.bin", 300_000), ("bad.bin", 1_500_000)]);
    let Some(ng) = nginx_autoindex(src.path(), "") else {
        return;
    };
    let sums_dir = tempfile::tempdir().unwrap();
    let sums = sums_dir.path().join("SHA256SUMS");
    let mut text = String::from_utf8(reference_sums(
        src.path(),
        &["sha256sum"],
        &["good.bin", "bad.bin"],
    ))
    .unwrap();
    // the publisher's digest of bad.bin is for other bytes
    let bad_line = text.lines().nth(1).unwrap().to_string();
    let wrong = format!("{}{}", "0".repeat(64), &bad_line[64..]);
    text = text.replace(&bad_line, &wrong);
    std::fs::write(&sums, text).unwrap();
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &[
            &at(&ng, "/json/"),
            path_str(dst.path()),
            "--sla",
            "max-throughput",
            "--checksum-file",
            path_str(&sums),
        ],
        None,
    );
    let err = error_line(&out);
    assert!(
        err.contains("bad.bin")
            && err.contains("even after fetching it again")
            && err.contains("line 2"),
        "{err}"
    );
    assert!(
        !err.contains("rerun the same command"),
        "a rerun cannot help: {err}"
    );
    assert!(!dst.path().join("bad.bin").exists(), "never put in place");
}

/// Starts `wattio transfer ARGS` in the background, waits until it has kept some bytes a rerun
/// can resume from (a range in a `.wattio-part.done` log, or a finished file) and SIGKILLs it.
/// Pair it with a [`Stall`] on one file, the last the run comes to (in the deepest directory
/// or at the end of a list, so the channels cannot all be held by it before another file
/// finishes): the run then cannot finish before the kill, however fast the host, so the rerun
/// always has bytes to fetch.
fn kill_mid_transfer(args: &[&str], dst: &Path) {
    let child = start_transfer(args, false);
    // SIGKILL on drop (Child::kill), also when the wait below fails
    let _reaper = common::Reaper(vec![child]);
    let t = Instant::now();
    while !kept_bytes(dst) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the transfer never finished a range"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Holds chosen files of an nginx server to 4 kB/s while they are marked, so that a run
/// cannot finish them before the test kills it, and releases them for the rerun.
///
/// nginx's `limit_rate` alone cannot do this: it lets each request send one second's worth
/// at once (`ngx_http_write_filter_module.c` allows `rate * (elapsed + 1)` bytes), so a
/// `limit_rate 1m` server sends a 1 MB range unthrottled, and a run meant to take seconds
/// once finished before the kill on a fast host. A mark is an empty file at the URI's path
/// under a private directory, tested by nginx on every request.
struct Stall {
    marks: tempfile::TempDir,
}

impl Stall {
    fn new() -> Self {
        Stall {
            marks: tempfile::tempdir().unwrap(),
        }
    }

    /// The nginx directive (for a `server` or `location` block) that slows marked files.
    fn directive(&self) -> String {
        format!(
            "if (-f {}$uri) {{ set $limit_rate 4k; }}",
            self.marks.path().display()
        )
    }

    /// Marks `name` (a path below the served root): its next requests crawl.
    fn hold(&self, name: &str) {
        let mark = self.marks.path().join(name);
        std::fs::create_dir_all(mark.parent().unwrap()).unwrap();
        std::fs::write(mark, b"").unwrap();
    }

    /// Unmarks every file: requests from now on go at full speed.
    fn release(&self) {
        for e in std::fs::read_dir(self.marks.path()).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(p).unwrap();
            } else {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
}

/// Whether `dir` holds a finished file or a `.done` log with at least one 16-byte range record.
fn kept_bytes(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if p.is_dir() {
            kept_bytes(&p)
        } else if name.ends_with(".wattio-part.done") {
            e.metadata().map(|m| m.len() >= 16).unwrap_or(false)
        } else {
            !name.contains(".wattio") && !name.starts_with('.')
        }
    })
}

/// A rerun whose first files found are all complete already (a first run got them before it
/// was stopped) plans its transfer from the files discovery finds next, for an index walk and
/// a URL list alike. It once panicked: the plan made from no file to fetch had no partition
/// for the files found later.
#[test]
fn a_rerun_whose_first_files_are_complete_fetches_the_rest() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("a.bin", 100_000),
        ("b/c.bin", 200_000),
        ("b/d/e.bin", 300_000),
    ];
    make_tree(src.path(), files);
    let Some(ng) = nginx_autoindex(src.path(), "") else {
        return;
    };
    let list: String = files
        .iter()
        .map(|(n, _)| format!("{}\n  out={n}\n", at(&ng, &format!("/{n}"))))
        .collect();
    for name in ["directory index", "URL list"] {
        let dst = tempfile::tempdir().unwrap();
        std::fs::copy(src.path().join("a.bin"), dst.path().join("a.bin")).unwrap();
        let v = match name {
            "URL list" => copy_list(&list, dst.path()),
            _ => copy(&at(&ng, "/"), dst.path(), "max-throughput", &[]),
        };
        assert_eq!(
            (&v["files_skipped"], &v["resumed_bytes"], &v["bytes"]),
            (&1.into(), &100_000.into(), &500_000.into()),
            "{name}"
        );
        assert_identical(src.path(), dst.path());
    }
}

#[test]
fn killed_index_and_url_list_transfers_resume_with_only_the_missing_bytes() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("x/one.bin", 1_200_000),
        ("x/two words.bin", 900_000),
        ("three#.bin", 700_000),
        ("x/y/four.bin", 300_000),
    ];
    make_tree(src.path(), files);
    let total: u64 = files.iter().map(|f| f.1 as u64).sum();
    let stall = Stall::new();
    let Some(ng) = nginx_autoindex(src.path(), &stall.directive()) else {
        return;
    };
    let names: Vec<&str> = files.iter().map(|f| f.0).collect();
    std::fs::write(
        src.path().join("SHA256SUMS"),
        reference_sums(src.path(), &["sha256sum"], &names),
    )
    .unwrap();
    let list_dir = tempfile::tempdir().unwrap();
    let list = list_dir.path().join("urls.txt");
    let mut text = String::new();
    for n in &names {
        text.push_str(&format!(
            "{}\n  out={n}\n",
            at(&ng, &format!("/{}", url_encode_path(n)))
        ));
    }
    std::fs::write(&list, text).unwrap();
    let slow = ["--sla", "max-throughput", "--max-channels", "2"];
    let sums_url = at(&ng, "/SHA256SUMS");
    for (name, source) in [
        ("directory index", vec![at(&ng, "/x/")]),
        (
            "URL list",
            vec!["-i".to_string(), path_str(&list).to_string()],
        ),
    ] {
        let dst = tempfile::tempdir().unwrap();
        let mut args: Vec<&str> = source.iter().map(String::as_str).collect();
        args.push(path_str(dst.path()));
        args.extend(slow);
        args.extend(["--checksum-file", &sums_url]);
        stall.hold("x/y/four.bin");
        kill_mid_transfer(&args, dst.path());
        stall.release();
        args.push("--json");
        let v = ok_json(&transfer(&args, None));
        let want_total = if name == "URL list" {
            total
        } else {
            files
                .iter()
                .filter(|f| f.0.starts_with("x/"))
                .map(|f| f.1 as u64)
                .sum()
        };
        let (got, resumed) = (
            v["bytes"].as_u64().unwrap(),
            v["resumed_bytes"].as_u64().unwrap(),
        );
        assert_eq!(v["total_bytes"], want_total, "{name}");
        assert!(resumed > 0, "{name}: the rerun resumed nothing");
        assert!(got > 0, "{name}: the first run was not interrupted");
        assert_eq!(
            got + resumed,
            want_total,
            "{name}: only the missing bytes are fetched"
        );
        assert_eq!(
            v["verification"]["unverified"], 0,
            "{name}: {}",
            v["verification"]
        );
        match name {
            "URL list" => {
                for n in &names {
                    assert_eq!(
                        std::fs::read(dst.path().join(n)).unwrap(),
                        std::fs::read(src.path().join(n)).unwrap(),
                        "{n}"
                    );
                }
            }
            _ => assert_identical(&src.path().join("x"), dst.path()),
        }
    }
}

#[test]
fn errors_name_their_cause_and_fix() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), &[("a.bin", 50_000), ("d/b.bin", 20_000)]);
    // a listing written, then a file changed: nginx serves a stale listing
    let st = Command::new(BIN)
        .arg("serve")
        .arg(src.path())
        .arg("--write-listing")
        .output()
        .unwrap();
    assert!(st.status.success());
    std::fs::write(src.path().join("a.bin"), bytes(99, 50_000)).unwrap();
    let r = src.path().display();
    let Some(ng) = Nginx::start_servers(|port| {
        format!(
            "server {{ listen 127.0.0.1:{port}; location / {{ root {r}; }} location /idx/ {{ alias {r}/; autoindex on; }} }}"
        )
    }) else {
        return;
    };
    let dst = tempfile::tempdir().unwrap();
    let err = error_line(&transfer(
        &[&at(&ng, "/"), path_str(dst.path()), "--sla", "min-energy"],
        None,
    ));
    assert!(
        err.contains("a.bin") && err.contains("--write-listing"),
        "{err}"
    );
    assert!(!err.contains("rerun the same command"), "{err}");

    // no listing and no index (nginx without autoindex answers 403): the ways out are named
    let err = error_line(&transfer(
        &[&at(&ng, "/d/"), path_str(dst.path()), "--sla", "min-energy"],
        None,
    ));
    assert!(
        err.contains("HTTP 403") && err.contains("autoindex") && err.contains("-i"),
        "{err}"
    );

    // a checksum file that is not there, and one that is not a checksum file
    let err = error_line(&transfer(
        &[
            &at(&ng, "/idx/d/"),
            path_str(dst.path()),
            "--sla",
            "min-energy",
            "--checksum-file",
            &at(&ng, "/SHA256SUMS"),
        ],
        None,
    ));
    assert!(
        err.contains("--checksum-file") && err.contains("HTTP 404"),
        "{err}"
    );
    let err = error_line(&transfer(
        &[
            &at(&ng, "/idx/d/"),
            path_str(dst.path()),
            "--sla",
            "min-energy",
            "--checksum-file",
            &at(&ng, "/a.bin"),
        ],
        None,
    ));
    assert!(err.contains("--checksum-file"), "{err}");

    // a URL list line that names a directory, and a URL that is gone
    let err = error_line(&transfer(
        &["-i", "-", path_str(dst.path()), "--sla", "min-energy"],
        Some(format!("{}\n", at(&ng, "/idx/")).as_bytes()),
    ));
    assert!(
        err.contains("standard input:1") && err.contains("out="),
        "{err}"
    );
    let err = error_line(&transfer(
        &["-i", "-", path_str(dst.path()), "--sla", "min-energy"],
        Some(format!("# x\n{}\n", at(&ng, "/gone.bin")).as_bytes()),
    ));
    assert!(
        err.contains("standard input:2") && err.contains("HTTP 404"),
        "{err}"
    );
    let err = error_line(&transfer(
        &[
            "-i",
            "-",
            "extra",
            path_str(dst.path()),
            "--sla",
            "min-energy",
        ],
        Some(b""),
    ));
    assert!(err.contains("only DEST"), "{err}");
}

/// A URL list with dead lines copies every other file, as wget and aria2 do, then fails
/// naming the lines: two 404s told as one cause, and 40 lines on a server that refuses
/// connections told once (it is tried in one round, not once a line). The JSON summary lists
/// every failed line. A dead first server does not stop the copy either, even where the RTT is
/// measured (to the next server). A list none of whose lines answers fails before anything is
/// fetched.
#[test]
fn a_url_list_copies_what_it_can_and_names_the_lines_that_failed() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[("a.bin", 200_000), ("b.bin", 30_000), ("c.bin", 5_000)];
    make_tree(src.path(), files);
    let Some(ng) = Nginx::start(src.path()) else {
        return;
    };
    let dead = format!("http://127.0.0.1:{}", free_port());
    let mut list = format!(
        "{}\n{}\n{}\n{}\n",
        at(&ng, "/a.bin"),
        at(&ng, "/gone1.bin"),
        at(&ng, "/b.bin"),
        at(&ng, "/gone2.bin")
    );
    for i in 0..40 {
        list.push_str(&format!("{dead}/d{i}.bin\n"));
    }
    list.push_str(&format!("{}\n", at(&ng, "/c.bin")));
    let dst = tempfile::tempdir().unwrap();
    let out = transfer_list(&list, dst.path(), "min-energy");
    let err = error_line(&out);
    assert_identical(src.path(), dst.path());
    assert!(
        err.contains("42 lines of the URL list could not be fetched (every other file was copied)"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "standard input:2 {} and 1 more line (standard input:4) answers HTTP 404",
            at(&ng, "/gone1.bin")
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "standard input:5 {dead}/d0.bin and 39 more lines (standard input:6, standard input:7, …) cannot be reached"
        )),
        "{err}"
    );
    assert_eq!(err.matches("cannot be reached").count(), 1, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON summary");
    assert_eq!(v["failed_lines"].as_array().unwrap().len(), 42);
    assert_eq!(v["failed_lines"][0]["line"], "standard input:2");
    assert_eq!(v["failed_lines"][0]["why"], "answers HTTP 404");
    assert_eq!(v["files"], 3);

    // a dead first server, with the RTT measured (no --rtt): measured to the next server, and
    // only the dead server's line fails
    let dst = tempfile::tempdir().unwrap();
    let dead_first = format!("{dead}/x.bin\n{}\n", at(&ng, "/b.bin"));
    let mut child = Command::new(BIN)
        .args([
            "transfer",
            "-i",
            "-",
            path_str(dst.path()),
            "--sla",
            "min-energy",
        ])
        .args(["--cpu-actuator", "none", "--no-meter", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(dead_first.as_bytes()).unwrap();
    }
    let err = error_line(&child.wait_with_output().unwrap());
    assert!(
        err.contains(&format!("1 line of the URL list could not be fetched (every other file was copied): standard input:1 {dead}/x.bin cannot be reached")),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dst.path().join("b.bin")).unwrap(),
        std::fs::read(src.path().join("b.bin")).unwrap()
    );

    let dst = tempfile::tempdir().unwrap();
    let only_dead = format!("{}\n{dead}/x.bin\n", at(&ng, "/gone1.bin"));
    let err = error_line(&transfer_list(&only_dead, dst.path(), "min-energy"));
    assert!(
        err.contains("no line of standard input could be fetched: standard input:1"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
}

/// Checksum files written by GNU coreutils `b2sum` over the served files: its default
/// BLAKE2b-512 (a file named `B2SUMS`, fetched by URL), `-l 256` and `-l 160 -b` (named by
/// their extension: bare lines do not say their algorithm), and both `--tag` forms (whatever
/// the name: the tag says). Every file is verified by the publisher's digest.
#[test]
fn b2sum_checksum_files_of_every_length_and_form_verify_the_copy() {
    if !require("/usr/bin/b2sum", "coreutils") {
        return;
    }
    let src = tempfile::tempdir().unwrap();
    let data = src.path().join("data");
    let files: &[(&str, usize)] = &[
        ("large.bin", 3_000_001),
        ("sp ace/with spaces.bin", 70_000),
        ("ünïcödé/ファイル ✓.bin", 33_333),
        ("empty.bin", 0),
    ];
    make_tree(&data, files);
    let names: Vec<&str> = files.iter().map(|f| f.0).collect();
    std::fs::write(
        src.path().join("B2SUMS"),
        reference_sums(&data, &["b2sum"], &names),
    )
    .unwrap();
    let Some(ng) = nginx_autoindex(src.path(), "") else {
        return;
    };
    let sums_dir = tempfile::tempdir().unwrap();
    for (tool, file, algo) in [
        (&["b2sum"][..], "", "blake2b"),
        (&["b2sum", "-l", "256"][..], "data.b2", "blake2b-256"),
        (
            &["b2sum", "-l", "160", "-b"][..],
            "sums.blake2b",
            "blake2b-160",
        ),
        (&["b2sum", "--tag"][..], "CHECKSUMS", "blake2b"),
        (
            &["b2sum", "--tag", "-l", "256"][..],
            "CHECKSUMS",
            "blake2b-256",
        ),
    ] {
        let spec = if file.is_empty() {
            at(&ng, "/B2SUMS")
        } else {
            let p = sums_dir.path().join(file);
            std::fs::write(&p, reference_sums(&data, tool, &names)).unwrap();
            path_str(&p).to_string()
        };
        let dst = tempfile::tempdir().unwrap();
        let v = copy(
            &at(&ng, "/json/data/"),
            dst.path(),
            "max-throughput",
            &["--checksum-file", &spec],
        );
        let ver = &v["verification"];
        assert_eq!(ver["checksum_file"]["algorithms"][0], algo, "{tool:?}");
        assert_eq!(ver["by_publisher"], names.len(), "{tool:?}: {ver}");
        assert_eq!(ver["unverified"], 0, "{tool:?}: {ver}");
        assert_identical(&data, dst.path());
    }

    // a BLAKE2b-256 digest that is not the served file's: fetched again once, then refused
    let mut text =
        String::from_utf8(reference_sums(&data, &["b2sum", "-l", "256"], &names)).unwrap();
    let line = text.lines().next().unwrap().to_string();
    text = text.replace(&line, &format!("{}{}", "0".repeat(64), &line[64..]));
    let bad = sums_dir.path().join("bad.b2");
    std::fs::write(&bad, text).unwrap();
    let dst = tempfile::tempdir().unwrap();
    let err = error_line(&transfer(
        &[
            &at(&ng, "/json/data/"),
            path_str(dst.path()),
            "--sla",
            "max-throughput",
            "--checksum-file",
            path_str(&bad),
        ],
        None,
    ));
    assert!(
        err.contains("large.bin")
            && err.contains("blake2b-256")
            && err.contains("even after fetching it again")
            && err.contains("line 1"),
        "{err}"
    );
    assert!(!dst.path().join("large.bin").exists(), "never put in place");
}

/// `wattio serve ROOT` on a free loopback port.
fn wattio_serve(root: &Path) -> Server {
    let port = free_port();
    let child = Command::new(BIN)
        .arg("serve")
        .arg(root)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    started(child, port, tempfile::tempdir().unwrap(), "wattio serve")
}

/// `wattio serve` honours `Range` on every file, so a transfer from its listing sends no
/// `Range` probe: nginx, proxying to it and passing its `Server: wattio` on, logs every
/// request the client makes. Behind a proxy that puts its own `Server` there the client
/// cannot know, and probes (the control: the log shows the probe when one is sent).
#[test]
fn a_listing_from_wattio_serve_needs_no_range_probe() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), &[("a.bin", 300_000), ("d/b.bin", 70_000)]);
    let ws = wattio_serve(src.path());
    for (pass_server, probes) in [(true, false), (false, true)] {
        let logs = tempfile::tempdir().unwrap();
        let log = logs.path().join("access.log");
        let pass = if pass_server {
            "proxy_pass_header Server;"
        } else {
            ""
        };
        let Some(ng) = Nginx::start_servers(|port| {
            format!(
                "log_format events '$request_method $uri $status $http_range';\n\
                 server {{ listen 127.0.0.1:{port}; access_log {} events;\n\
                 location / {{ proxy_pass http://127.0.0.1:{}; {pass} }} }}\n",
                log.display(),
                ws.port
            )
        }) else {
            return;
        };
        let dst = tempfile::tempdir().unwrap();
        // a 256 KiB piece (100 Mbit/s, the helper's 1 ms): a.bin would be cut into ranges
        let small_bdp = ["--bandwidth", "100mbit"];
        let v = copy(&at(&ng, "/"), dst.path(), "max-throughput", &small_bdp);
        assert_eq!(v["source_kind"], "wattio-listing");
        assert_identical(src.path(), dst.path());
        drop(ng);
        let requests = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            requests.lines().any(|l| l.ends_with(" bytes=0-0")),
            probes,
            "Server: wattio passed on: {pass_server}\n{requests}"
        );
    }
}

/// A URL list whose lines name each file on two servers, TAB-separated (aria2's mirrors).
fn mirror_list(lines: &[(String, String)]) -> String {
    lines.iter().map(|(a, b)| format!("{a}\t{b}\n")).collect()
}

/// The summary's mirror report of `file`: (served_by, [(during, reason)]).
fn mirror_of(v: &serde_json::Value, file: &str) -> (String, Vec<(String, String)>) {
    let m = v["mirrors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["file"] == file)
        .unwrap_or_else(|| panic!("no mirror report for {file}: {}", v["mirrors"]));
    let fallbacks = m["fallbacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["during"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (m["served_by"].as_str().unwrap().to_string(), fallbacks)
}

/// Mirrors in a URL list stand in for a server that cannot be reached, and for one that
/// answers 404 or 500 when the files are sized (`HEAD`) or only when they are fetched (`GET`);
/// a mirror whose copy has another size is refused, named.
#[test]
fn url_list_mirrors_stand_in_for_a_dead_server_a_404_and_a_5xx() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("a.bin", 400_000),
        ("b.bin", 300_000),
        ("c.bin", 200_000),
        ("d.bin", 1_000_000),
        ("e.bin", 100_000),
        ("f.bin", 50_000),
    ];
    make_tree(src.path(), files);
    let r = src.path().display();
    // b: 404 and c: 500 to everything; d: 503 and e: 404 to GET only (HEAD gives the size)
    let Some(ng) = Nginx::start_servers(|port| {
        format!(
            "server {{ listen 127.0.0.1:{port}; root {r};\n location = /b.bin {{ return 404; }}\n location = /c.bin {{ return 500; }}\n location = /d.bin {{ if ($request_method = GET) {{ return 503; }} }}\n location = /e.bin {{ if ($request_method = GET) {{ return 404; }} }}\n}}\n"
        )
    }) else {
        return;
    };
    let mirror = wattio_serve(src.path());
    let dead = format!("http://127.0.0.1:{}", free_port());
    let mut lines: Vec<(String, String)> = files
        .iter()
        .map(|(n, _)| (at(&ng, &format!("/{n}")), mirror.url(&format!("/{n}"))))
        .collect();
    lines[0] = (format!("{dead}/a.bin"), at(&ng, "/a.bin"));
    let dst = tempfile::tempdir().unwrap();
    let v = ok_json(&transfer(
        &[
            "-i",
            "-",
            path_str(dst.path()),
            "--sla",
            "max-throughput",
            "--json",
        ],
        Some(mirror_list(&lines).as_bytes()),
    ));
    assert_identical(src.path(), dst.path());
    assert_eq!(v["mirrors"].as_array().unwrap().len(), files.len());
    let (by, fb) = mirror_of(&v, "a.bin");
    assert_eq!(by, at(&ng, "/a.bin"));
    assert_eq!(fb.len(), 1);
    assert_eq!(fb[0].0, "start");
    assert!(fb[0].1.starts_with("cannot be reached"), "{fb:?}");
    for (file, during, reason) in [
        ("b.bin", "start", "HTTP 404"),
        ("c.bin", "start", "HTTP 500"),
        ("d.bin", "transfer", "HTTP 503"),
        ("e.bin", "transfer", "HTTP 404"),
    ] {
        let (by, fb) = mirror_of(&v, file);
        assert_eq!(by, mirror.url(&format!("/{file}")), "{file}");
        assert_eq!(fb, [(during.to_string(), reason.to_string())], "{file}");
    }
    let (by, fb) = mirror_of(&v, "f.bin");
    assert_eq!((by, fb.len()), (at(&ng, "/f.bin"), 0));

    // the text summary says it too
    let dst = tempfile::tempdir().unwrap();
    let out = transfer(
        &["-i", "-", path_str(dst.path()), "--sla", "max-throughput"],
        Some(mirror_list(&lines).as_bytes()),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("mirrors: 6 files with mirrors, 5 served after a fallback"),
        "{text}"
    );

    // a mirror with another size is not the same file
    let other = tempfile::tempdir().unwrap();
    make_tree(other.path(), &[("f.bin", 50_001)]);
    let other_server = wattio_serve(other.path());
    let list = format!("{}\t{}\n", at(&ng, "/f.bin"), other_server.url("/f.bin"));
    let err = error_line(&transfer(
        &["-i", "-", path_str(dst.path()), "--sla", "min-energy"],
        Some(list.as_bytes()),
    ));
    assert!(
        err.contains("standard input:1")
            && err.contains(&format!(
                "mirror {} has 50001 bytes",
                other_server.url("/f.bin")
            ))
            && err.contains("not the same file"),
        "{err}"
    );
}

/// A server that dies mid-transfer hands its files' remaining bytes to their mirrors; a
/// transfer killed and rerun after its first server died resumes from the mirror, fetching
/// only the missing bytes.
#[test]
fn a_mirror_takes_over_from_a_server_that_dies_and_a_rerun_resumes_from_it() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("one.bin", 1_200_000),
        ("two.bin", 900_000),
        ("three.bin", 700_000),
    ];
    make_tree(src.path(), files);
    let total: u64 = files.iter().map(|f| f.1 as u64).sum();
    let mirror = wattio_serve(src.path());
    let stall = Stall::new();
    let list_of = |ng: &Nginx| {
        let lines: Vec<(String, String)> = files
            .iter()
            .map(|(n, _)| (at(ng, &format!("/{n}")), mirror.url(&format!("/{n}"))))
            .collect();
        mirror_list(&lines)
    };
    let list_dir = tempfile::tempdir().unwrap();
    let list = list_dir.path().join("urls.txt");

    // killed, then rerun after the first server is gone; three.bin crawls, so the first run
    // cannot finish it
    stall.hold("three.bin");
    let Some(ng) = nginx_autoindex(src.path(), &stall.directive()) else {
        return;
    };
    std::fs::write(&list, list_of(&ng)).unwrap();
    let dst = tempfile::tempdir().unwrap();
    let mut args = vec![
        "-i",
        path_str(&list),
        path_str(dst.path()),
        "--sla",
        "max-throughput",
        "--max-channels",
        "2",
    ];
    kill_mid_transfer(&args, dst.path());
    drop(ng);
    args.push("--json");
    let v = ok_json(&transfer(&args, None));
    let (got, resumed) = (
        v["bytes"].as_u64().unwrap(),
        v["resumed_bytes"].as_u64().unwrap(),
    );
    assert!(resumed > 0, "the rerun resumed nothing");
    assert!(got > 0, "the first run was not interrupted");
    assert_eq!(got + resumed, total, "only the missing bytes are fetched");
    assert_identical(src.path(), dst.path());
    // every file the rerun fetched (one finished before the kill is only checked) came from
    // the mirror, the first server passed over at the start
    let fetched: Vec<&str> = v["mirrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["file"].as_str().unwrap())
        .collect();
    assert!(!fetched.is_empty(), "{}", v["mirrors"]);
    for n in fetched {
        let (by, fb) = mirror_of(&v, n);
        assert_eq!(by, mirror.url(&format!("/{n}")), "{n}");
        assert_eq!(fb.len(), 1, "{n}: {fb:?}");
        assert_eq!(fb[0].0, "start", "{n}");
        assert!(fb[0].1.starts_with("cannot be reached"), "{n}: {fb:?}");
    }

    // the first server dies while the transfer runs (300 kB/s per connection: seconds for
    // the set, the files finishing one by one)
    let Some(ng) = nginx_autoindex(src.path(), "limit_rate 300k;") else {
        return;
    };
    std::fs::write(&list, list_of(&ng)).unwrap();
    let dst = tempfile::tempdir().unwrap();
    let args = [
        "-i",
        path_str(&list),
        path_str(dst.path()),
        "--sla",
        "max-throughput",
        "--max-channels",
        "2",
        "--json",
    ];
    let child = start_transfer(&args, false);
    wait_for_part_file(dst.path());
    std::thread::sleep(Duration::from_millis(300));
    drop(ng);
    let v = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(v["bytes"], total);
    assert_identical(src.path(), dst.path());
    let moved: Vec<String> = v["mirrors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["served_by"]
                .as_str()
                .unwrap()
                .starts_with(&mirror.url("/"))
        })
        .map(|m| m["file"].as_str().unwrap().to_string())
        .collect();
    assert!(!moved.is_empty(), "{}", v["mirrors"]);
    for n in &moved {
        let (_, fb) = mirror_of(&v, n);
        assert_eq!(fb.len(), 1, "{n}: {fb:?}");
        assert_eq!(fb[0].0, "transfer", "{n}: {fb:?}");
    }
}

/// nginx with `autoindex on` over `root` (its stock HTML index, exact sizes in bytes) that logs
/// every request (`METHOD URI STATUS RANGE`, in the order requests end) to the returned file;
/// `locations` come before the catch-all `location /`.
fn logged_nginx(root: &Path, locations: &str) -> Option<(Nginx, tempfile::TempDir)> {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let (r, l) = (root.display(), log.display());
    let ng = Nginx::start_servers(|port| {
        format!(
            "log_format events '$request_method $uri $status $http_range';\n\
             server {{ listen 127.0.0.1:{port}; access_log {l} events;\n {locations}\n location / {{ root {r}; autoindex on; }}\n}}\n"
        )
    })?;
    Some((ng, logs))
}

/// The requests nginx logged so far, in the order they ended.
fn access_log(logs: &tempfile::TempDir) -> Vec<String> {
    std::fs::read_to_string(logs.path().join("access.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// nginx's stock index states every size in bytes: nothing needs a `HEAD`.
fn assert_no_head(log: &[String]) {
    assert!(
        !log.iter().any(|l| l.starts_with("HEAD ")),
        "HEAD sent though the index gives exact sizes: {log:#?}"
    );
}

/// Transfers start while the index is still walked: a file at the top is fetched (its GET
/// ends in nginx's log) before the page of a deeper directory, sent slowly, has been read. No
/// HEAD is sent: nginx's stock HTML index gives exact sizes.
#[test]
fn an_index_walk_streams_files_to_the_transfer_and_sends_no_head_for_exact_sizes() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("top.bin", 300_000),
        ("small.txt", 17),
        ("deep/one.bin", 150_000),
        ("deep/er/two.bin", 70_000),
        ("deep/er/empty", 0),
    ];
    make_tree(src.path(), files);
    let r = src.path().display();
    // the pages under /deep/ (about 500 bytes) trickle out at 100 bytes/s after nginx's first
    // second's worth: about four seconds each, ample for top.bin's GET on a loaded host
    let slow_pages =
        format!("location ~ ^/deep(/.*)?/$ {{ root {r}; autoindex on; limit_rate 100; }}");
    let Some((ng, logs)) = logged_nginx(src.path(), &slow_pages) else {
        return;
    };
    let dst = tempfile::tempdir().unwrap();
    let v = copy(&at(&ng, "/"), dst.path(), "max-throughput", &[]);
    assert_identical(src.path(), dst.path());
    assert_eq!(v["source_kind"], "directory-index");
    assert_eq!(v["source_detail"], "nginx autoindex (html)");
    assert_eq!(v["files"], files.len());
    assert_eq!(
        v["total_bytes"],
        files.iter().map(|f| f.1 as u64).sum::<u64>()
    );
    let log = access_log(&logs);
    let pos = |prefix: &str| {
        log.iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in nginx's log: {log:#?}"))
    };
    let top_fetched = log
        .iter()
        .position(|l| l.starts_with("GET /top.bin 206 bytes=") && !l.ends_with("bytes=0-0"))
        .unwrap_or_else(|| panic!("top.bin never fetched by range: {log:#?}"));
    assert!(
        top_fetched < pos("GET /deep/ 200"),
        "the first file waited for the walk: {log:#?}"
    );
    assert!(pos("GET /deep/ 200") < pos("GET /deep/one.bin 206"));
    assert_no_head(&log);
}

/// A URL list streams into the transfer as its lines are sized, as an index walk does: the
/// first file is fetched (its GET ends in nginx's log) before the last URL's HEAD, which
/// nginx holds back (HEADs of the last 20 lines are rate-limited to 5 a second with
/// `limit_req`, so sizing them takes about four seconds; their GETs are not held). The
/// sizing's rounds (128 lines, then the other 172) share their 8 keep-alive connections:
/// nginx's `$connection` serials of the HEADs number 8, not 16 (this server keeps a
/// connection for 1000 requests, not the 7 of the other tests).
#[test]
fn a_url_list_streams_files_to_the_transfer_as_its_lines_are_sized() {
    let src = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..300)
        .map(|i| match i {
            0..=279 => format!("f{i:03}.bin"),
            _ => format!("late{i:03}.bin"),
        })
        .collect();
    let files: Vec<(&str, usize)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), 1_000 + 37 * i))
        .collect();
    make_tree(src.path(), &files);
    let logs = tempfile::tempdir().unwrap();
    let (r, l) = (src.path().display(), logs.path().join("access.log"));
    let l = l.display();
    let Some(ng) = Nginx::start_servers(|port| {
        format!(
            "log_format events '$request_method $uri $status c$connection $http_range';\n\
             map $request_method $late_head {{ HEAD $binary_remote_addr; default \"\"; }}\n\
             limit_req_zone $late_head zone=late:1m rate=5r/s;\n\
             server {{ listen 127.0.0.1:{port}; access_log {l} events; root {r};\n\
              keepalive_requests 1000;\n\
              location ~ ^/late {{ limit_req zone=late burst=100; }}\n}}\n"
        )
    }) else {
        return;
    };
    let list: String = names
        .iter()
        .map(|n| format!("{}\n", at(&ng, &format!("/{n}"))))
        .collect();
    let dst = tempfile::tempdir().unwrap();
    let v = copy_list(&list, dst.path());
    assert_identical(src.path(), dst.path());
    assert_eq!(v["source_kind"], "url-list");
    assert_eq!(v["files"], names.len());
    let log = access_log(&logs);
    let first_fetched = log
        .iter()
        .position(|l| l.starts_with("GET /f000.bin 20") && !l.ends_with("bytes=0-0"))
        .unwrap_or_else(|| panic!("f000.bin never fetched: {log:#?}"));
    let last_sized = log
        .iter()
        .position(|l| l.starts_with("HEAD /late299.bin 200"))
        .unwrap_or_else(|| panic!("late299.bin never sized: {log:#?}"));
    assert!(
        first_fetched < last_sized,
        "the first file waited for the whole list to be sized: {log:#?}"
    );
    let head_connections: std::collections::BTreeSet<&str> = log
        .iter()
        .filter(|l| l.starts_with("HEAD "))
        .filter_map(|l| l.split(' ').find(|w| w.starts_with('c')))
        .collect();
    assert_eq!(
        head_connections.len(),
        8,
        "each HEAD round opened its own connections: {head_connections:?}"
    );
}

/// A size taken from the index is checked against every answer: a file whose size differs
/// (here the index is generated from one tree and the files served from another, so the
/// difference is there on every run) stops the transfer with a message that names the file
/// and the fix, and leaves no file under the final name.
#[test]
fn a_size_from_the_index_that_the_server_contradicts_is_a_changed_file() {
    let listed = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    make_tree(
        listed.path(),
        &[("g/grew.bin", 40_000), ("s/shrank.bin", 90_000)],
    );
    make_tree(
        served.path(),
        &[("g/grew.bin", 65_000), ("s/shrank.bin", 30_000)],
    );
    let (l, s) = (listed.path().display(), served.path().display());
    let Some(ng) = Nginx::start_servers(|port| {
        format!(
            "server {{ listen 127.0.0.1:{port}; location ~ /$ {{ root {l}; autoindex on; }} location / {{ root {s}; }} }}"
        )
    }) else {
        return;
    };
    for name in ["g/grew.bin", "s/shrank.bin"] {
        let dst = tempfile::tempdir().unwrap();
        let dir = &name[..2];
        let err = error_line(&transfer(
            &[
                &at(&ng, &format!("/{dir}")),
                path_str(dst.path()),
                "--sla",
                "max-throughput",
            ],
            None,
        ));
        let file = &name[2..];
        assert!(
            err.contains(file) && err.contains("changed") && err.contains("rerun the same command"),
            "{name}: {err}"
        );
        assert!(
            !dst.path().join(file).exists(),
            "{name} written under its final name though its size was wrong"
        );
    }
}

/// A transfer from nginx's stock index killed mid-way, then rerun: the rerun walks the index
/// again (no HEAD for sizes: they are exact), keeps what the first run wrote and fetches only
/// the missing bytes. It asks (HEAD) only about the files the first run finished, which no
/// checksum covers, to see that they did not change since; a partly fetched one would be
/// resumed with If-Range, which needs no question.
#[test]
fn a_killed_index_transfer_without_checksums_resumes_with_only_the_missing_bytes() {
    let src = tempfile::tempdir().unwrap();
    let files: &[(&str, usize)] = &[
        ("a.bin", 1_100_000),
        ("b/c.bin", 800_000),
        ("b/d/e.bin", 600_000),
        ("b/d/f g.bin", 50_000),
    ];
    make_tree(src.path(), files);
    let total: u64 = files.iter().map(|f| f.1 as u64).sum();
    let r = src.path().display();
    let stall = Stall::new();
    let Some((ng, logs)) = logged_nginx(
        src.path(),
        &format!("location ~ [^/]$ {{ root {r}; {} }}", stall.directive()),
    ) else {
        return;
    };
    let dst = tempfile::tempdir().unwrap();
    let mut args = vec![
        at(&ng, "/"),
        path_str(dst.path()).to_string(),
        "--sla".into(),
        "max-throughput".into(),
        "--max-channels".into(),
        "2".into(),
    ];
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    stall.hold("b/d/e.bin");
    kill_mid_transfer(&argv, dst.path());
    stall.release();
    let first_run = access_log(&logs).len();
    args.push("--json".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = ok_json(&transfer(&argv, None));
    assert_identical(src.path(), dst.path());
    let (got, resumed) = (
        v["bytes"].as_u64().unwrap(),
        v["resumed_bytes"].as_u64().unwrap(),
    );
    assert_eq!(v["total_bytes"], total);
    assert!(resumed > 0 && got > 0, "got {got}, resumed {resumed}");
    assert_eq!(got + resumed, total, "only the missing bytes are fetched");
    let rerun = &access_log(&logs)[first_run..];
    assert!(
        !rerun.iter().any(|l| l.starts_with("HEAD /b/d/e.bin ")),
        "the file the first run did not finish needs no HEAD: {rerun:#?}"
    );
}
