//! `--platform redfish://…` against a Redfish server wattio did not write: `sushy-static` from
//! OpenStack's `sushy-tools` (`make deps` installs it into `target/redfish-venv`), serving a
//! mockup directory in DMTF's layout that the test writes and rewrites as time passes
//! (sushy-static reads each file afresh on every GET), over HTTPS with a CA the test makes.
//!
//! sushy-static has no authentication and answers every POST with 204, so two stand-ins sit in
//! front of it for the cases it cannot play, and only for them: a session service (logins
//! checked, tokens that expire) and a proxy that answers 5 s late. Both forward every GET to a
//! sushy-static over plain HTTP.
//!
//! Without sushy-static the tests skip with a message (WATTIO_REQUIRE_SUSHY=1: they fail).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod common;
use common::{Reaper, BIN};

/// The mockup's chassis power, and its joule counter's rate.
const WATTS: f64 = 300.0;

/// sushy-static: WATTIO_SUSHY_STATIC, else the venv `make deps` fills, else PATH.
fn sushy_static() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WATTIO_SUSHY_STATIC") {
        return Some(PathBuf::from(p));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let venv = target.join("redfish-venv/bin/sushy-static");
    if venv.exists() {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("sushy-static"))
            .find(|p| p.exists())
    })
}

fn sushy_or_skip() -> Option<PathBuf> {
    let found = sushy_static();
    if found.is_none() {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_SUSHY").is_none(),
            "sushy-static not found and WATTIO_REQUIRE_SUSHY is set: run make deps"
        );
        eprintln!("SKIPPED: sushy-static (PyPI sushy-tools) not found: `make deps` installs it into target/redfish-venv");
    }
    found
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// RFC 3339 UTC with milliseconds, as a BMC writes `ReadingTime`.
fn rfc3339(t: f64) -> String {
    let secs = t.floor() as i64;
    let ms = ((t - t.floor()) * 1000.0) as u32;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Writes `rel/index.json` under `dir` atomically (sushy-static may read it at any moment).
fn put(dir: &Path, rel: &str, json: &serde_json::Value) {
    let d = dir.join(rel);
    std::fs::create_dir_all(&d).unwrap();
    let tmp = d.join("index.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(json).unwrap()).unwrap();
    std::fs::rename(tmp, d.join("index.json")).unwrap();
}

fn put_raw(dir: &Path, rel: &str, text: &str) {
    let d = dir.join(rel);
    let tmp = d.join("index.json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, d.join("index.json")).unwrap();
}

/// Which figures the chassis's EnvironmentMetrics offers.
#[derive(Clone, Copy, PartialEq)]
enum Offer {
    /// PowerWatts and EnergyJoules (wattio must take the joules).
    PowerAndEnergy,
    /// PowerWatts alone.
    Power,
}

/// A mockup in DMTF's layout (DSP2043's directory form: one index.json per resource): the
/// service root, one chassis `1U`, its EnvironmentMetrics and the Sensors behind it.
fn write_mockup(dir: &Path, offer: Offer) {
    use serde_json::json;
    put(
        dir,
        "",
        &json!({
            "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "@odata.id": "/redfish/v1/",
            "Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.17.0",
            "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
            "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
            "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}
        }),
    );
    put(
        dir,
        "Chassis",
        &json!({
            "@odata.type": "#ChassisCollection.ChassisCollection", "@odata.id": "/redfish/v1/Chassis",
            "Name": "Chassis Collection", "Members@odata.count": 1,
            "Members": [{"@odata.id": "/redfish/v1/Chassis/1U"}]
        }),
    );
    put(
        dir,
        "Chassis/1U",
        &json!({
            "@odata.type": "#Chassis.v1_25_0.Chassis", "@odata.id": "/redfish/v1/Chassis/1U",
            "Id": "1U", "Name": "Computer System Chassis", "ChassisType": "RackMount",
            "EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics"},
            "Sensors": {"@odata.id": "/redfish/v1/Chassis/1U/Sensors"}
        }),
    );
    let mut env = json!({
        "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
        "@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics",
        "Id": "EnvironmentMetrics", "Name": "Chassis Environment Metrics",
        "PowerWatts": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalPower", "Reading": WATTS}
    });
    if offer == Offer::PowerAndEnergy {
        env["EnergyJoules"] =
            json!({"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalEnergy", "Reading": 0.0});
    }
    put(dir, "Chassis/1U/EnvironmentMetrics", &env);
    put(
        dir,
        "Chassis/1U/Sensors",
        &json!({
            "@odata.type": "#SensorCollection.SensorCollection", "@odata.id": "/redfish/v1/Chassis/1U/Sensors",
            "Name": "Chassis sensors", "Members@odata.count": 2,
            "Members": [{"@odata.id": "/redfish/v1/Chassis/1U/Sensors/TotalPower"},
                        {"@odata.id": "/redfish/v1/Chassis/1U/Sensors/TotalEnergy"}]
        }),
    );
    write_sensors(dir, unix_now(), 1.0e6);
}

/// The two sensors as of `t`: the power, and the joule counter at `joules`.
fn write_sensors(dir: &Path, t: f64, joules: f64) {
    use serde_json::json;
    let when = rfc3339(t);
    put(
        dir,
        "Chassis/1U/Sensors/TotalPower",
        &json!({
            "@odata.type": "#Sensor.v1_7_0.Sensor", "@odata.id": "/redfish/v1/Chassis/1U/Sensors/TotalPower",
            "Id": "TotalPower", "Name": "Chassis input power", "ReadingType": "Power", "ReadingUnits": "W",
            "Reading": WATTS, "ReadingTime": when, "SensingInterval": "PT1S", "PhysicalContext": "Chassis",
            "Status": {"State": "Enabled", "Health": "OK"}
        }),
    );
    put(
        dir,
        "Chassis/1U/Sensors/TotalEnergy",
        &json!({
            "@odata.type": "#Sensor.v1_7_0.Sensor", "@odata.id": "/redfish/v1/Chassis/1U/Sensors/TotalEnergy",
            "Id": "TotalEnergy", "Name": "Chassis input energy", "ReadingType": "EnergyJoules", "ReadingUnits": "J",
            "Reading": joules, "ReadingTime": when, "SensingInterval": "PT1S", "PhysicalContext": "Chassis",
            "Status": {"State": "Enabled", "Health": "OK"}
        }),
    );
}

/// Rewrites the sensors every 250 ms as a BMC updates them: the counter grows at [`WATTS`].
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(dir: &Path) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, dir) = (Arc::clone(&stop), dir.to_path_buf());
        let thread = std::thread::spawn(move || {
            let t0 = unix_now();
            while !s.load(Ordering::Relaxed) {
                let t = unix_now();
                write_sensors(&dir, t, 1.0e6 + WATTS * (t - t0));
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts sushy-static on `dir` (HTTPS with `tls` = (cert, key)), waits until it listens.
fn start_sushy(bin: &Path, dir: &Path, tls: Option<(&Path, &Path)>, reaper: &mut Reaper) -> u16 {
    let port = free_port();
    let mut c = Command::new(bin);
    c.args(["-i", "127.0.0.1", "-p", &port.to_string(), "-m"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some((cert, key)) = tls {
        c.arg("-c").arg(cert).arg("-k").arg(key);
    }
    reaper.0.push(c.spawn().expect("start sushy-static"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "sushy-static did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    port
}

/// A test CA and a certificate for 127.0.0.1 and localhost it signed, as PEM files in `dir`.
fn make_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let (ca_pem, cert_pem, key_pem) =
        (dir.join("ca.pem"), dir.join("bmc.pem"), dir.join("bmc.key"));
    std::fs::write(&ca_pem, ca_cert.pem()).unwrap();
    std::fs::write(&cert_pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    (ca_pem, cert_pem, key_pem)
}

/// A machine for the CPU side: the fake two-socket server (its RAPL does not move).
fn machine(dir: &Path) -> PathBuf {
    let root = dir.join("machine");
    wattio_fixture::intel_two_socket_server(&root).unwrap();
    root
}

fn wattio(root: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("WATTIO_ROOT", root)
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env_remove("WATTIO_REDFISH_CREDENTIALS")
        .env_remove("WATTIO_REDFISH_USER")
        .env_remove("WATTIO_REDFISH_PASSWORD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn out(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `measure --json`'s platform figure: its joules, label, and the run's seconds.
fn platform_figure(o: &Output) -> (f64, String, f64) {
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)));
    let d = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "platform")
        .unwrap_or_else(|| panic!("no platform figure: {}", out(o)))
        .clone();
    (
        d["energy_j"].as_f64().unwrap(),
        d["label"].as_str().unwrap_or_default().to_string(),
        v["duration_s"].as_f64().unwrap(),
    )
}

#[test]
fn joules_over_https_match_the_mockups_power_and_stale_or_malformed_answers_give_no_figure() {
    let Some(sushy) = sushy_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mock = tmp.path().join("mockup");
    write_mockup(&mock, Offer::PowerAndEnergy);
    let (ca, cert, key) = make_ca(tmp.path());
    let mut reaper = Reaper(vec![]);
    let port = start_sushy(&sushy, &mock, Some((&cert, &key)), &mut reaper);
    let mut ticker = Ticker::start(&mock);
    let root = machine(tmp.path());
    let url = format!("redfish://localhost:{port}");
    let ca_env = ("WATTIO_REDFISH_CACERT", ca.to_str().unwrap());

    // Without the test CA, the certificate is refused, saying how to trust it.
    let o = wattio(&root, &[], &["measure", "--platform", &url, "--", "true"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("WATTIO_REDFISH_CACERT"),
        "{}",
        out(&o)
    );
    assert_eq!(e.trim().lines().count(), 1, "{}", out(&o));

    // The joule counter is preferred to the power reading, and its joules are 300 W × the run.
    let probe = wattio(&root, &[ca_env], &["probe", "--platform", &url]);
    let p = String::from_utf8_lossy(&probe.stdout);
    assert!(
        p.contains("redfish") && p.contains("EnvironmentMetrics EnergyJoules, chassis 1U"),
        "{}",
        out(&probe)
    );
    let o = wattio(
        &root,
        &[ca_env],
        &["measure", "--json", "--platform", &url, "--", "sleep", "4"],
    );
    assert!(o.status.success(), "{}", out(&o));
    let (j, label, secs) = platform_figure(&o);
    assert_eq!(label, "measured (redfish EnvironmentMetrics EnergyJoules, chassis 1U, counter, updated every 1 s)");
    assert!(
        (j - WATTS * secs).abs() < 0.05 * WATTS * secs,
        "{j} J over {secs} s at {WATTS} W\n{}",
        out(&o)
    );

    // Readings that stop changing during a run are stale: reported, and no energy is made up
    // for the time they stood still.
    let ca_path = ca.to_str().unwrap().to_string();
    let (r, u) = (root.clone(), url.clone());
    let run = std::thread::spawn(move || {
        let env = [
            ("WATTIO_REDFISH_CACERT", ca_path.as_str()),
            ("WATTIO_REDFISH_MAX_AGE", "2"),
        ];
        wattio(
            &r,
            &env,
            &["measure", "--json", "--platform", &u, "--", "sleep", "7"],
        )
    });
    std::thread::sleep(Duration::from_secs(3));
    ticker.stop();
    let o = run.join().unwrap();
    let all = out(&o);
    assert!(
        all.contains("no new reading") || all.contains("stale"),
        "{all}"
    );
    if o.status.success() {
        let (j, _, secs) = platform_figure(&o);
        assert!(
            j < 0.8 * WATTS * secs,
            "{j} J over {secs} s: the stale time got energy\n{all}"
        );
    }

    // Readings already stale when wattio starts: refused with the reason.
    let o = wattio(
        &root,
        &[ca_env, ("WATTIO_REDFISH_MAX_AGE", "2")],
        &["measure", "--platform", &url, "--", "true"],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("stale"), "{}", out(&o));

    // Malformed JSON: a one-line error naming it, and no figure.
    put_raw(
        &mock,
        "Chassis/1U/EnvironmentMetrics",
        "{\"PowerWatts\": {\"Reading\": 3",
    );
    let o = wattio(
        &root,
        &[ca_env],
        &["measure", "--json", "--platform", &url, "--", "true"],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("malformed JSON"),
        "{}",
        out(&o)
    );
    assert_eq!(e.trim().lines().count(), 1, "{}", out(&o));
    assert!(o.stdout.is_empty(), "{}", out(&o));
}

/// A session service in front of a plain-HTTP sushy-static: logins checked against one
/// account, tokens valid for `ttl`, every other request forwarded with the token checked.
struct SessionStandIn {
    port: u16,
    logins: Arc<AtomicU32>,
    expired: Arc<AtomicU32>,
}

/// A request's line, its headers (names in lower case) and its body.
type Request = (String, Vec<(String, String)>, Vec<u8>);

fn read_head(s: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    s.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if s.read_line(&mut h).ok()? == 0 || h == "\r\n" {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    Some((line, headers, body))
}

/// GETs `path` from the plain-HTTP server on `port`, the whole answer as sent.
fn forward(port: u16, path: &str) -> Vec<u8> {
    let mut up = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        up,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer);
    answer
}

impl SessionStandIn {
    fn start(upstream: u16, ttl: Duration) -> SessionStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let logins = Arc::new(AtomicU32::new(0));
        let expired = Arc::new(AtomicU32::new(0));
        let (l, x) = (Arc::clone(&logins), Arc::clone(&expired));
        let token: Arc<Mutex<Option<(String, Instant)>>> = Arc::new(Mutex::new(None));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { break };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                let Some((line, headers, body)) = read_head(&mut r) else {
                    continue;
                };
                let mut parts = line.split_whitespace();
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let answer: Vec<u8> = if method == "POST" && path.ends_with("/Sessions") {
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    if v["UserName"] == "admin" && v["Password"] == "s3cret" {
                        let n = l.fetch_add(1, Ordering::SeqCst) + 1;
                        let t = format!("token-{n}");
                        *token.lock().unwrap() = Some((t.clone(), Instant::now()));
                        format!("HTTP/1.1 201 Created\r\nX-Auth-Token: {t}\r\nLocation: /redfish/v1/SessionService/Sessions/{n}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").into_bytes()
                    } else {
                        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                    }
                } else if method == "DELETE" {
                    b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_vec()
                } else if path.trim_end_matches('/') == "/redfish/v1" {
                    forward(upstream, path)
                } else {
                    let sent = headers
                        .iter()
                        .find(|(k, _)| k == "x-auth-token")
                        .map(|(_, v)| v.clone());
                    let valid = match &*token.lock().unwrap() {
                        Some((t, at)) => Some(t) == sent.as_ref() && at.elapsed() < ttl,
                        None => false,
                    };
                    if valid {
                        forward(upstream, path)
                    } else {
                        if sent.is_some() {
                            x.fetch_add(1, Ordering::SeqCst);
                        }
                        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                    }
                };
                let _ = w.write_all(&answer);
            }
        });
        SessionStandIn {
            port,
            logins,
            expired,
        }
    }
}

/// A sushy-static over plain HTTP on a power-only mockup that a ticker keeps fresh, for the
/// stand-ins to sit in front of; all of it ends when dropped (fields drop in order).
struct PlainBmc {
    _ticker: Ticker,
    _reaper: Reaper,
    port: u16,
    root: PathBuf,
    tmp: tempfile::TempDir,
}

impl PlainBmc {
    fn start() -> Option<PlainBmc> {
        let sushy = sushy_or_skip()?;
        let tmp = tempfile::tempdir().unwrap();
        let mock = tmp.path().join("mockup");
        write_mockup(&mock, Offer::Power);
        let mut reaper = Reaper(vec![]);
        let port = start_sushy(&sushy, &mock, None, &mut reaper);
        Some(PlainBmc {
            _ticker: Ticker::start(&mock),
            _reaper: reaper,
            port,
            root: machine(tmp.path()),
            tmp,
        })
    }
}

#[test]
fn sessions_are_made_again_when_they_expire_and_wrong_credentials_say_the_fix() {
    let Some(b) = PlainBmc::start() else { return };
    let (tmp, root, upstream) = (b.tmp.path(), b.root.as_path(), b.port);
    let bmc = SessionStandIn::start(upstream, Duration::from_secs(2));
    let url = format!("redfish+http://127.0.0.1:{}", bmc.port);
    let creds = tmp.join("bmc-credentials");

    std::fs::write(&creds, "admin:wrong\n").unwrap();
    let env = [("WATTIO_REDFISH_CREDENTIALS", creds.to_str().unwrap())];
    let o = wattio(root, &env, &["measure", "--platform", &url, "--", "true"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", out(&o));
    assert!(
        e.contains("refused the user name and password")
            && e.contains("WATTIO_REDFISH_CREDENTIALS"),
        "{}",
        out(&o)
    );
    assert_eq!(e.trim().lines().count(), 1, "{}", out(&o));
    assert!(!e.contains("wrong"), "the password is never printed: {e}");

    // Two lines: the user, then the password. The sessions last 2 s, the run 5 s: wattio logs
    // in again each time one expires, and the power reading is read throughout.
    std::fs::write(&creds, "admin\ns3cret\n").unwrap();
    let o = wattio(
        root,
        &env,
        &["measure", "--json", "--platform", &url, "--", "sleep", "5"],
    );
    assert!(o.status.success(), "{}", out(&o));
    let (j, label, secs) = platform_figure(&o);
    assert_eq!(
        label,
        "measured (redfish EnvironmentMetrics PowerWatts, chassis 1U, 1 s average)"
    );
    assert!(
        (j - WATTS * secs).abs() < 0.1 * WATTS * secs,
        "{j} J over {secs} s\n{}",
        out(&o)
    );
    assert!(
        bmc.logins.load(Ordering::SeqCst) >= 3,
        "{} logins",
        bmc.logins.load(Ordering::SeqCst)
    );
    assert!(bmc.expired.load(Ordering::SeqCst) >= 1);
}

/// A proxy that answers each request `delay` late (one request per connection).
fn delaying_proxy(upstream: u16, delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                let Some((line, _, _)) = read_head(&mut r) else {
                    return;
                };
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let answer = forward(upstream, &path);
                if path.contains("/Sensors/") {
                    std::thread::sleep(delay);
                }
                let _ = w.write_all(&answer);
            });
        }
    });
    port
}

#[test]
fn a_bmc_that_answers_in_5_s_still_gives_the_runs_energy_placed_where_it_was_measured() {
    let Some(b) = PlainBmc::start() else { return };
    let (root, upstream) = (b.root.as_path(), b.port);
    let url = format!(
        "redfish+http://127.0.0.1:{}",
        delaying_proxy(upstream, Duration::from_secs(5))
    );
    let o = wattio(
        root,
        &[],
        &["measure", "--platform", &url, "--", "sleep", "6"],
    );
    let t = out(&o);
    assert!(o.status.success(), "{t}");
    // The machine line gives the meter's delay: its readings arrive about 5 s old.
    let machine = t
        .lines()
        .find(|l| l.starts_with("machine") && l.contains("redfish"))
        .unwrap_or_else(|| panic!("no delay in {t}"));
    let late: f64 = machine
        .split(", ")
        .find_map(|p| p.strip_suffix(" s late"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{machine}"));
    assert!((4.5..7.0).contains(&late), "{machine}");
    eprintln!("{machine}");
    let o = wattio(
        root,
        &[],
        &["measure", "--json", "--platform", &url, "--", "sleep", "6"],
    );
    let (j, _, secs) = platform_figure(&o);
    assert!(
        (j - WATTS * secs).abs() < 0.1 * WATTS * secs,
        "{j} J over {secs} s\n{}",
        out(&o)
    );
}
