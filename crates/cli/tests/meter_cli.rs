//! The meter commands end to end: the real binary, fixture trees, real signals and sockets.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use wattio_fixture::{self as fixture, MAX_UJ_ESU14};

mod common;
use common::{wattio, Reaper, BIN};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The entry of `mechanism` in a `probe --json` report.
fn mechanism<'a>(report: &'a serde_json::Value, mechanism: &str) -> &'a serde_json::Value {
    report["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mechanism"] == mechanism)
        .unwrap_or_else(|| panic!("no {mechanism} in {report}"))
}

#[test]
fn probe_server_fixture_lists_sockets_domains_and_chooses_powercap() {
    let dir = tempfile::tempdir().unwrap();
    fixture::intel_two_socket_server(dir.path()).unwrap();
    let o = wattio(Some(dir.path()), &["probe", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["chosen"], "powercap");
    assert_eq!(v["provenance"]["estimated"], false);
    let pc = mechanism(&v, "powercap");
    let doms: Vec<String> = pc["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}@{}", c["domain"].as_str().unwrap(), c["socket"]))
        .collect();
    assert_eq!(doms, ["package@0", "dram@0", "package@1", "dram@1"]);
    let perf = mechanism(&v, "perf");
    assert_eq!(perf["usable"], false);
    assert!(perf["fix"].is_string());
    let text = wattio(Some(dir.path()), &["probe"]);
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(
        t.contains("verdict: `--source auto` uses powercap: figures are measured (powercap)"),
        "{t}"
    );
}

#[test]
fn probe_on_this_machine_never_fails_and_says_what_auto_uses() {
    let o = wattio(None, &["probe"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t.contains("verdict:"), "{t}");
    for m in ["perf", "powercap", "msr", "model"] {
        assert!(t.lines().any(|l| l.starts_with(m)), "no line for {m}: {t}");
    }
}

#[test]
fn unreadable_energy_uj_gives_the_platypus_fix() {
    let dir = tempfile::tempdir().unwrap();
    let t = fixture::intel_laptop(dir.path()).unwrap();
    let energy = t.path("/sys/class/powercap/intel-rapl:0/energy_uj");
    std::fs::set_permissions(&energy, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    // Root reads mode-0 files anyway: drop the capabilities that allow it, as an unprivileged
    // user would be. Everything else in the tree stays world-readable.
    make_world_readable(dir.path());
    std::fs::set_permissions(&energy, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let is_root = rustix::process::geteuid().is_root();
    let mut c = if is_root {
        let mut c = Command::new("setpriv");
        c.args([
            "--inh-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search",
            "--",
            BIN,
        ]);
        c
    } else {
        Command::new(BIN)
    };
    let o = c
        .args(["record", "--source", "powercap", "--duration", "0.1"])
        .env("WATTIO_ROOT", dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("intel-rapl:0/energy_uj: permission denied"),
        "{e}"
    );
    assert!(e.contains("root only since Linux 5.10"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one-line error: {e}");
}

fn make_world_readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walk(dir) {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn record_corrects_wraps_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let t = fixture::intel_laptop(dir.path()).unwrap();
    let out = dir.path().join("rows.csv");
    // Package starts 10 J below its limit and gains 3 J every 30 ms for 60 steps: 180 J,
    // crossing the wrap once; the recorder reads every 10 ms.
    let start = MAX_UJ_ESU14 - 10_000_000;
    t.set_energy_uj("intel-rapl:0", start).unwrap();
    let child = Command::new(BIN)
        .args([
            "record",
            "--source",
            "powercap",
            "--domains",
            "package",
            "--freq",
            "100",
            "-o",
        ])
        .arg(&out)
        .env("WATTIO_ROOT", dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(vec![child]);
    // The steps begin once the recorder has taken its first readings (a row is written):
    // a fixed wait once ran out on a loaded host, and the first step went unseen.
    common::wait_until(20, "the recorder's first row", || {
        common::csv_rows(&out) >= 1
    });
    let mut v = start;
    let mut truth_uj: u64 = 0;
    for _ in 0..60 {
        let step = 3_000_000;
        truth_uj += step;
        v = (v + step) % (MAX_UJ_ESU14 + 1);
        t.set_energy_uj("intel-rapl:0", v).unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    std::thread::sleep(Duration::from_millis(200));
    let pid = child.0[0].id();
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let mut c = child.0.pop().unwrap();
    let status = c.wait().unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
    assert!(err.contains("1 wraps corrected"), "{err}");
    let mut rdr = csv::Reader::from_path(&out).unwrap();
    let headers = rdr.headers().unwrap().clone();
    assert_eq!(
        headers.iter().collect::<Vec<_>>(),
        [
            "timestamp",
            "mechanism",
            "socket",
            "domain",
            "energy_j",
            "estimated",
            "model"
        ]
    );
    let mut total = 0.0;
    let mut rows = 0;
    let mut last_ts = 0.0;
    for r in rdr.records() {
        let r = r.unwrap();
        assert_eq!(&r[1], "powercap");
        assert_eq!(&r[3], "package");
        assert_eq!(&r[5], "false");
        let ts: f64 = r[0].parse().unwrap();
        assert!(ts >= last_ts, "timestamps go forward");
        last_ts = ts;
        let j: f64 = r[4].parse().unwrap();
        assert!(j >= 0.0);
        total += j;
        rows += 1;
    }
    // The wrap adds one raw step (1 µJ) for max → 0.
    let expected = truth_uj as f64 * 1e-6 + 1e-6;
    assert!(
        (total - expected).abs() < 1e-6,
        "recorded {total} J, truth {expected} J over {rows} rows"
    );
    assert!(rows > 150, "{rows} rows");
}

// `wattio measure`: tests/measure_cli.rs.

#[test]
fn bad_flags_are_refused_with_one_line() {
    for (args, needle) in [
        (
            vec!["record", "--freq", "5000", "--duration", "1"],
            "--freq must be between",
        ),
        (
            vec!["record", "--duration", "0"],
            "--duration must be more than 0",
        ),
        (vec!["record", "--domains", "watts"], "unknown domain"),
        (vec!["record", "--source", "rapl"], "unknown mechanism"),
        (
            vec![
                "record",
                "--source",
                "model",
                "--duration",
                "0.1",
                "-o",
                "/nonexistent/dir/x.csv",
            ],
            "cannot create",
        ),
        (
            vec![
                "record",
                "--source",
                "model",
                "--model-min-w",
                "9",
                "--model-max-w",
                "1",
                "--duration",
                "0.1",
            ],
            "max ≥ min",
        ),
    ] {
        let o = wattio(None, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}

#[test]
fn record_on_this_machine_writes_estimated_rows_at_the_asked_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("e.jsonl");
    let o = Command::new(BIN)
        .args([
            "record",
            "--source",
            "model",
            "--freq",
            "50",
            "--duration",
            "1",
            "--format",
            "jsonl",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One row per tick for one socket; a tick the loaded machine let pass is reported as late
    // and its energy lands in the next row.
    let e = stderr(&o);
    let late: usize = e
        .split(" late timer ticks")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no late-tick count in {e}"));
    assert_eq!(rows.len() + late, 50, "{e}");
    assert!(rows
        .iter()
        .all(|r| r["estimated"] == true && r["mechanism"] == "model"));
    assert!(rows
        .iter()
        .all(|r| r["model"].as_str().unwrap().contains("ccf-linear")));
}

#[test]
fn export_serves_prometheus_text_or_openmetrics_as_asked_and_refuses_bad_requests() {
    let child = Command::new(BIN)
        .args(["export", "--source", "model", "--listen", "127.0.0.1:0"])
        .args(["--interval", "100ms"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(vec![child]);
    let addr = common::exporter_addr(child.0[0].stderr.take().unwrap());
    let get = |req: &str| common::http(&addr, req);
    let om = get("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n");
    assert!(
        om.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{om}"
    );
    assert!(
        om.contains("\n# TYPE wattio_energy_joules counter\n# UNIT wattio_energy_joules joules\n"),
        "{om}"
    );
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    let r = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    assert!(
        r.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{r}"
    );
    assert!(r.contains("\n# HELP wattio_energy_joules_total "), "{r}");
    assert!(
        r.contains("\n# TYPE wattio_energy_joules_total counter\n"),
        "{r}"
    );
    assert!(!r.contains("# EOF") && !r.contains("# UNIT"), "{r}");
    let line = r
        .lines()
        .find(|l| l.starts_with("wattio_energy_joules_total{"))
        .unwrap_or_else(|| panic!("{r}"));
    assert!(line.contains("socket=\"0\""), "{line}");
    assert!(line.contains("domain=\"package\""), "{line}");
    assert!(line.contains("mechanism=\"model\""), "{line}");
    assert!(line.contains("estimated=\"true\""), "{line}");
    assert!(line.contains("model=\"ccf-linear("), "{line}");
    std::thread::sleep(Duration::from_millis(200));
    let r2 = get("GET /metrics HTTP/1.1\r\n\r\n");
    let value = |resp: &str| -> f64 {
        let l = resp
            .lines()
            .find(|l| l.starts_with("wattio_energy_joules_total{"))
            .unwrap();
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value(&r2) > value(&r), "the counter grows between scrapes");
    assert!(get("BLAH\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(get("GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    let pid = child.0[0].id();
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let status = child.0.pop().unwrap().wait().unwrap();
    assert!(status.success());
}

/// The body after the head of an HTTP response.
fn body_of(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// Runs `program args` with `input` on its standard input; its exit status and output.
fn run_with_input(program: &str, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} is missing ({e}): run scripts/install-deps.sh"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn export_bodies_pass_promtool_the_openmetrics_parser_and_a_prometheus_scrape() {
    let child = Command::new(BIN)
        .args([
            "export",
            "--interval",
            "100ms",
            "--source",
            "model",
            "--by",
            "process",
            "--carbon-intensity",
            "300",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut children = Reaper(vec![child]);
    let addr = common::exporter_addr(children.0[0].stderr.take().unwrap());
    let get = |req: &str| common::http(&addr, req);

    // The Prometheus project's own linter on the default format: no finding at all.
    let text = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let lint = run_with_input("promtool", &["check", "metrics"], body_of(&text));
    let findings = format!("{}{}", stdout(&lint), stderr(&lint));
    assert!(
        lint.status.success() && findings.trim().is_empty(),
        "{findings}\n{text}"
    );
    // The CO2e series is its energy series at 300 g/kWh, from the same scrape.
    let value = |prefix: &str| -> f64 {
        body_of(&text)
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
    };
    let joules = value("wattio_energy_joules_total{");
    let grams = value("wattio_energy_co2e_grams_total{");
    assert!(
        (grams - joules / 3.6e6 * 300.0).abs() <= 1e-12 * joules.max(1.0),
        "{text}"
    );
    assert!(
        text.contains("carbon_intensity=\"300.0 g CO2e/kWh (given (--carbon-intensity))\""),
        "{text}"
    );

    // The OpenMetrics body through the reference parser of the Python client (strict about
    // metadata, units, `_total` and `# EOF`). promtool 2.42 lints only the 0.0.4 format.
    let om = get("GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
    let parse = run_with_input(
        "/usr/bin/python3",
        &[
            "-c",
            "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()): print(f.name, f.type, f.unit, len(f.samples))",
        ],
        body_of(&om),
    );
    let families = stdout(&parse);
    assert!(parse.status.success(), "{}\n{om}", stderr(&parse));
    assert!(
        families.contains("wattio_energy_joules counter joules 1\n"),
        "{families}"
    );
    assert!(
        families.contains("wattio_energy_co2e_grams counter grams 1\n"),
        "{families}"
    );
    assert!(
        families.contains("wattio_process_energy_joules counter joules"),
        "{families}"
    );
    assert!(
        families.contains("wattio_unattributed_energy_joules counter joules 1\n"),
        "{families}"
    );

    // A real Prometheus scrapes it (asking for OpenMetrics first, as it does) and can query it.
    let dir = tempfile::tempdir().unwrap();
    let (prometheus, web) = common::start_prometheus(
        dir.path(),
        &format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: wattio\n    static_configs:\n      - targets: ['{addr}']\n"),
    );
    children.0.push(prometheus);
    let query = |q: &str| common::prometheus_query(web, q);
    common::wait_until(
        60,
        "Prometheus to scrape wattio_energy_joules_total",
        || query("wattio_energy_joules_total").contains("\"domain\":\"package\""),
    );
    let up = query("up");
    assert!(up.contains("\"value\":[") && up.contains(",\"1\"]"), "{up}");
    let scraped = query("scrape_samples_scraped");
    assert!(!scraped.contains(",\"0\"]"), "{scraped}");
}

#[test]
fn fixture_command_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep"), "data").unwrap();
    let o = wattio(None, &["fixture", "amd-epyc", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not empty"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep")).unwrap(),
        "data"
    );
    let fresh = dir.path().join("amd");
    let o = wattio(None, &["fixture", "amd-epyc", fresh.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = wattio(Some(&fresh), &["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    let msr = mechanism(&v, "msr");
    assert_eq!(msr["usable"], true);
}

/// An intel-laptop fixture whose package counter `wattio fixture tick` moves every `interval`.
fn fixture_ticking_every(dir: &Path, interval: &str) -> (std::path::PathBuf, Reaper) {
    let fx = dir.join("fx");
    let o = wattio(None, &["fixture", "intel-laptop", fx.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = dir.join("tick.csv");
    let ticker = Command::new(BIN)
        .args(["fixture", "tick", fx.to_str().unwrap(), "--watts", "10"])
        .args(["--interval", interval, "--log", log.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reaper = Reaper(vec![ticker]);
    common::wait_until(10, "the ticker to start", || {
        std::fs::read_to_string(&log).map_or(0, |s| s.lines().count()) >= 3
    });
    (fx, reaper)
}

#[test]
fn probe_measures_how_often_a_counter_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (fx, _ticker) = fixture_ticking_every(dir.path(), "5ms");
    let o = wattio(Some(&fx), &["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let powercap = mechanism(&v, "powercap");
    let counters = powercap["counters"].as_array().unwrap();
    let periods = powercap["update_periods"].as_array().unwrap();
    assert_eq!(counters.len(), periods.len());
    for (c, p) in counters.iter().zip(periods) {
        if c["domain"] == "package" {
            let ms = p["period_ms"].as_f64().unwrap_or_else(|| panic!("{p}"));
            assert!((4.0..=7.5).contains(&ms), "{ms} ms");
        } else {
            // The ticker moves the package counter only.
            assert_eq!(p["changes"], 0, "{c} {p}");
            assert!(p["period_ms"].is_null());
        }
    }
    // The model's estimates have no counter to watch.
    assert!(mechanism(&v, "model")["update_periods"]
        .as_array()
        .unwrap()
        .is_empty());
    let text = String::from_utf8_lossy(&wattio(Some(&fx), &["probe"]).stdout).into_owned();
    assert!(text.contains("    changes every "), "{text}");
    assert!(text.contains("    did not change twice in "), "{text}");
}

#[test]
fn record_warns_when_rows_repeat_because_the_counter_changes_less_often() {
    let dir = tempfile::tempdir().unwrap();
    let (fx, _ticker) = fixture_ticking_every(dir.path(), "5ms");
    let out = dir.path().join("rows.csv");
    let args = |freq: &'static str| {
        [
            "record",
            "--source",
            "powercap",
            "--domains",
            "package",
            "--freq",
            freq,
            "--duration",
            "1s",
            "-o",
        ]
    };
    let mut a = args("1000").to_vec();
    a.push(out.to_str().unwrap());
    let o = wattio(Some(&fx), &a);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    let warning = e
        .lines()
        .find(|l| l.contains("warning:") && l.contains("repeat the previous value"))
        .unwrap_or_else(|| panic!("no warning: {e}"));
    assert!(warning.contains("socket 0 package"), "{warning}");
    let ms: f64 = warning
        .split("changed about every ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{warning}"));
    assert!((4.0..=7.5).contains(&ms), "{warning}");
    // At 20 Hz each row spans ten updates: no warning.
    let mut a = args("20").to_vec();
    a.push(out.to_str().unwrap());
    let o = wattio(Some(&fx), &a);
    assert!(
        o.status.success() && !stderr(&o).contains("warning"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn measure_gives_co2e_beside_the_energy_at_a_given_or_a_regional_intensity() {
    // Given: every CO2e figure is its energy figure in kWh times the intensity.
    let o = wattio(
        None,
        &[
            "measure",
            "--source",
            "model",
            "--carbon-intensity",
            "360",
            "--json",
            "--",
            "sleep",
            "0.2",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(g("total_j") > 0.0);
    assert!(
        (g("co2e_g") - g("total_j") / 3.6e6 * 360.0).abs() < 1e-12,
        "{v}"
    );
    assert!((g("attributed_co2e_g") - g("attributed_j") / 3.6e6 * 360.0).abs() < 1e-12);
    assert_eq!(v["carbon_intensity"]["g_per_kwh"], 360.0);
    assert_eq!(
        v["carbon_intensity"]["source"],
        "given (--carbon-intensity)"
    );

    // A region: the figure of its line in the shipped table.
    let table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../energy/data/carbon-intensity.tsv"),
    )
    .unwrap();
    let deu: f64 = table
        .lines()
        .find(|l| l.starts_with("DEU\t"))
        .and_then(|l| l.split('\t').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    let o = wattio(
        None,
        &[
            "measure", "--source", "model", "--region", "deu", "--runs", "2", "--json", "true",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["carbon_intensity"]["g_per_kwh"], deu);
    let summary = &v["results"][0]["summary"];
    let (total, co2e) = (
        summary["total_j"]["mean"].as_f64().unwrap(),
        summary["co2e_g"]["mean"].as_f64().unwrap(),
    );
    assert!((co2e - total / 3.6e6 * deu).abs() < 1e-12, "{summary}");

    // The text names the intensity and says the energy under it is estimated.
    let o = wattio(
        None,
        &[
            "measure", "--source", "model", "--region", "FRA", "--", "true",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("CO2e "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("ESTIMATED energy at ") && line.contains("g CO2e/kWh (FRA "),
        "{line}"
    );

    // Bad input: one line with the fix, nothing measured.
    let o = wattio(
        None,
        &[
            "measure", "--source", "model", "--region", "FR", "--", "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("did you mean FRA (France)") && e.contains("--carbon-intensity"),
        "{e}"
    );
    let o = wattio(
        None,
        &[
            "measure",
            "--source",
            "model",
            "--carbon-intensity",
            "lots",
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("grams of CO2e per kWh"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn top_gives_co2e_beside_each_energy_figure() {
    let o = wattio(
        None,
        &[
            "top",
            "--source",
            "model",
            "--carbon-intensity",
            "100",
            "--once",
            "--json",
            "--interval",
            "300ms",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let co2e = |j: &serde_json::Value| j.as_f64().unwrap() / 3.6e6 * 100.0;
    let close =
        |a: &serde_json::Value, b: f64| (a.as_f64().unwrap() - b).abs() <= 1e-15 + 1e-12 * b;
    assert!(close(&v["co2e_g"], co2e(&v["total_j"])), "{v}");
    assert!(close(&v["idle_co2e_g"], co2e(&v["idle_j"])), "{v}");
    assert_eq!(v["carbon_intensity"]["g_per_kwh"], 100.0);
    for e in v["entries"].as_array().unwrap() {
        assert!(close(&e["co2e_g"], co2e(&e["energy_j"])), "{e}");
        assert!(close(&e["total_co2e_g"], co2e(&e["total_energy_j"])), "{e}");
    }
    // The screen: a CO2e line with the intensity's source and a CO2E column.
    let o = wattio(
        None,
        &[
            "top",
            "--source",
            "model",
            "--region",
            "FRA",
            "--once",
            "--interval",
            "300ms",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("CO2e ") && l.contains("(FRA ")),
        "{text}"
    );
    assert!(text.contains(" CO2E "), "{text}");
    // Without the flags, no CO2e anywhere.
    let o = wattio(
        None,
        &[
            "top",
            "--source",
            "model",
            "--once",
            "--json",
            "--interval",
            "300ms",
        ],
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("co2e"));
}

#[test]
fn record_summary_gives_each_counters_joules_and_co2e() {
    let dir = tempfile::tempdir().unwrap();
    let (fx, _ticker) = fixture_ticking_every(dir.path(), "1ms");
    let out = dir.path().join("rows.csv");
    let o = wattio(
        Some(&fx),
        &[
            "record",
            "--source",
            "powercap",
            "--domains",
            "package",
            "--freq",
            "10",
            "--duration",
            "1s",
            "--carbon-intensity",
            "360",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("wattio record: CO2e at 360.0 g CO2e/kWh (given (--carbon-intensity)):"),
        "{e}"
    );
    let line = e
        .lines()
        .find(|l| l.trim_start().starts_with("socket 0 package: "))
        .unwrap_or_else(|| panic!("{e}"));
    // "socket 0 package: 10.012 J, CO2e 1.001 mg": the ticker's 10 W over about a second.
    let fields: Vec<&str> = line.split_whitespace().collect();
    let joules: f64 = fields[3].parse().unwrap();
    assert!((8.0..=12.0).contains(&joules), "{line}");
    let milligrams = fields[6].parse::<f64>().unwrap()
        * match fields[7] {
            "µg" => 1e-3,
            "mg" => 1.0,
            "g" => 1e3,
            other => panic!("unit {other} in {line}"),
        };
    // 360 g/kWh is 0.1 mg per joule.
    assert!(
        (milligrams - joules * 0.1).abs() <= 0.001 + 1e-3 * milligrams,
        "{line}"
    );
    // The rows hold the same joules.
    let rows = std::fs::read_to_string(&out).unwrap();
    let sum: f64 = rows
        .lines()
        .skip(1)
        .map(|r| r.split(',').nth(4).unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(
        (sum - joules).abs() < 0.002,
        "{sum} J in the rows, {joules} J in the summary"
    );
}
