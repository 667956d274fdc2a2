//! `wattio export` as an SRE deploys it: over TLS with basic authentication from a Prometheus
//! web-config file, scraped by a real Prometheus using its own `tls_config` and `basic_auth`,
//! with `/healthz` and the agent's own metrics, sampling on its own clock so two scrapers at
//! different intervals see the same counters.

#[path = "../../http/tests/common/certs.rs"]
mod certs;
mod common;

use certs::{TestPki, Validity};
use common::{Reaper, BIN};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

/// A bcrypt hash of `password` made by Apache's `htpasswd`, the tool the docs name.
fn htpasswd(password: &str) -> String {
    let o = Command::new("htpasswd")
        .args(["-nbBC", "10", "", password])
        .output()
        .expect("htpasswd (Debian's apache2-utils; make deps installs it)");
    assert!(o.status.success());
    String::from_utf8(o.stdout)
        .unwrap()
        .trim()
        .trim_start_matches(':')
        .to_string()
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `wattio export` on a free loopback port with `web.yml` in `dir`, sampled every `interval`.
fn exporter(dir: &Path, interval: &str) -> (Reaper, String) {
    let web = dir.join("web.yml");
    let args = [
        "--source",
        "model",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        interval,
    ];
    common::spawn_exporter(&args, |c| {
        c.arg("--web-config").arg(&web);
    })
}

/// The value of the unlabelled sample `name` in a metrics body.
fn sample(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in {body}"))
        .parse()
        .unwrap()
}

#[test]
fn export_over_tls_with_basic_auth_is_scraped_by_prometheus_on_its_own_clock() {
    let pki = TestPki::new();
    let cert = pki.server("srv", &["localhost"], Validity::Current);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prom: '{}'\n",
            cert.cert.display(),
            cert.key.display(),
            htpasswd("s3cret")
        ),
    )
    .unwrap();
    let (mut children, addr) = exporter(dir.path(), "2s");
    let port = addr.rsplit(':').next().unwrap().to_string();
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let ca = pki.ca_pem();
    let ca = ca.to_str().unwrap();

    // Credentials: none and wrong ones get 401 with a challenge; the right ones the metrics.
    let o = curl(&["-i", "--cacert", ca, &url("/metrics")]);
    let t = text(&o);
    assert!(t.starts_with("HTTP/1.1 401"), "{t}");
    assert!(
        t.contains("WWW-Authenticate: Basic realm=\"wattio\""),
        "{t}"
    );
    let o = curl(&["-i", "--cacert", ca, "-u", "prom:wrong", &url("/metrics")]);
    assert!(text(&o).starts_with("HTTP/1.1 401"), "{}", text(&o));
    let scrape = || {
        let o = curl(&[
            "--fail",
            "--cacert",
            ca,
            "-u",
            "prom:s3cret",
            &url("/metrics"),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    let body = scrape();
    for family in [
        "wattio_energy_joules_total{",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "wattio_samples_total ",
        "wattio_sample_interval_seconds 2\n",
    ] {
        assert!(body.contains(family), "no {family} in {body}");
    }
    // The health check needs no credentials; plain HTTP on the TLS port is told the fix.
    let o = curl(&["--fail", "--cacert", ca, &url("/healthz")]);
    assert_eq!(text(&o), "ok\n");
    let o = curl(&["-i", &format!("http://127.0.0.1:{port}/metrics")]);
    let t = text(&o);
    assert!(
        t.starts_with("HTTP/1.1 400") && t.contains("speaks HTTPS"),
        "{t}"
    );
    // An untrusted client sees an unknown certificate authority.
    let o = curl(&["-u", "prom:s3cret", &url("/metrics")]);
    assert!(!o.status.success());

    // Prometheus scrapes it with its own TLS and basic-auth settings, as three jobs: every
    // second and every three seconds with the password, and once with a wrong one.
    let job = |name: &str, every: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scrape_interval: {every}\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n      server_name: localhost\n    basic_auth:\n      username: prom\n      password: {password}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
    };
    let (prometheus, web) = common::start_prometheus(
        dir.path(),
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n{}{}{}",
            job("fast", "1s", "s3cret"),
            job("slow", "3s", "s3cret"),
            job("intruder", "1s", "guess")
        ),
    );
    children.0.push(prometheus);
    let query = |q: &str| common::prometheus_query(web, q);
    // Wait until the slow job holds at least five scrapes of the energy counter.
    common::wait_until(
        60,
        "Prometheus's slow job to scrape wattio five times",
        || {
            query("count_over_time(wattio_energy_joules_total%7Bjob=%22slow%22%7D%5B1m%5D)")
                .contains(",\"5\"]")
                || query("count_over_time(wattio_energy_joules_total%7Bjob=%22slow%22%7D%5B1m%5D)")
                    .contains(",\"6\"]")
        },
    );
    let up = query("up");
    let job_up = |job: &str, v: &str| {
        up.contains(&format!("\"job\":\"{job}\"}},\"value\":[")) && {
            let at = up.find(&format!("\"job\":\"{job}\"")).unwrap();
            up[at..]
                .split(']')
                .next()
                .unwrap()
                .ends_with(&format!("\"{v}\""))
        }
    };
    assert!(job_up("fast", "1") && job_up("slow", "1"), "{up}");
    assert!(job_up("intruder", "0"), "the wrong password got in: {up}");

    // Both jobs saw the counter's values, each a value of one sample of the exporter's clock:
    // the values the slow job saw are among the fast job's (a scrape takes no sample of its
    // own, so two scrapers never split each other's intervals).
    let values = |job: &str| -> BTreeSet<String> {
        let r = query(&format!(
            "wattio_energy_joules_total%7Bjob=%22{job}%22%7D%5B1m%5D"
        ));
        r.split("\"values\":[")
            .nth(1)
            .unwrap_or_else(|| panic!("no values for {job}: {r}"))
            .split("],[")
            .map(|pair| {
                pair.rsplit(',')
                    .next()
                    .unwrap()
                    .trim_matches(|c| c == '"' || c == ']' || c == '}')
                    .to_string()
            })
            .collect()
    };
    let (fast, slow) = (values("fast"), values("slow"));
    assert!(slow.len() >= 3, "{slow:?}");
    // The fast job's first scrape may come a scrape after the slow one's: its oldest value
    // aside, every value of the slow job is one the fast job saw.
    let missing: Vec<&String> = slow.iter().filter(|v| !fast.contains(*v)).collect();
    assert!(
        missing.len() <= 1,
        "the slow job saw values the fast one never did: {missing:?}\nfast {fast:?}\nslow {slow:?}"
    );
    // The clock, not the scrapes, set the samples: about one per 2 s whatever the scrapers did.
    let body = scrape();
    let samples = sample(&body, "wattio_samples_total");
    let started = sample(&body, "process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let expected = (now - started) / 2.0;
    assert!(
        (samples - expected).abs() <= 2.0,
        "{samples} samples in {:.1} s at 2 s a sample",
        now - started
    );
}

#[test]
fn export_refuses_a_bad_web_config_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["export", "--source", "model", "--listen", "127.0.0.1:0"])
        .arg("--web-config")
        .arg(dir.path().join("web.yml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tls_server_config.cert_file") && err.contains("missing.crt"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = Command::new(BIN)
        .args(["export", "--source", "model", "--interval", "10ms"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("--interval must be between 50ms and 1h"));
}

#[test]
fn a_bearer_token_admits_a_scraper_without_a_web_config() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "3f9c2a7b5d1e4f60a8b9c0d1e2f3a4b5\n").unwrap();
    let (_ex, addr) = common::spawn_exporter(&common::MODEL_EXPORTER, |c| {
        c.arg("--bearer-token-file").arg(&token);
    });
    let url = format!("http://{addr}/metrics");
    let t = text(&curl(&["-i", &url]));
    assert!(t.starts_with("HTTP/1.1 401"), "{t}");
    assert!(
        t.contains("WWW-Authenticate: Bearer realm=\"wattio\""),
        "{t}"
    );
    let t = text(&curl(&[
        "-i",
        "-H",
        "Authorization: Bearer wrong-token-of-some-length",
        &url,
    ]));
    assert!(t.starts_with("HTTP/1.1 401"), "{t}");
    let o = curl(&[
        "--fail",
        "-H",
        "Authorization: Bearer 3f9c2a7b5d1e4f60a8b9c0d1e2f3a4b5",
        &url,
    ]);
    assert!(
        text(&o).contains("wattio_energy_joules_total{"),
        "{}",
        text(&o)
    );
    assert_eq!(text(&curl(&[&format!("http://{addr}/healthz")])), "ok\n");
}

#[test]
fn a_request_trickled_in_is_cut_off_at_the_deadline() {
    use std::io::{Read, Write};
    let (_ex, addr) = common::spawn_exporter(&common::MODEL_EXPORTER, |_| {});
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let started = std::time::Instant::now();
    // One byte a second, each within the per-read timeout: the whole request still has 5 s.
    let mut closed_after = None;
    for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
        .iter()
        .cycle()
        .take(20)
    {
        if s.write_all(&[*b]).is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        s.set_nonblocking(true).unwrap();
        let mut probe = [0u8; 64];
        let gone = matches!(s.read(&mut probe), Ok(0));
        s.set_nonblocking(false).unwrap();
        if gone {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    let after = closed_after.expect("the exporter kept a trickling request open for 20 s");
    assert!(after.as_secs_f64() < 8.0, "closed after {after:?}");
}
