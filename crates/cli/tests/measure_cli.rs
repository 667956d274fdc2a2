//! `wattio measure` end to end with real commands. The test machines have no RAPL, so the meter
//! is the model (`--source model`) and every figure must say *estimated*.

mod common;

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_wattio");
const BUSY: &str = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";

/// `wattio measure --source model ARGS` without the kernel I/O program (`WATTIO_KERNEL_IO=off`:
/// the figures these tests check are those of the CPU-time and dirty-data shares).
fn wattio(args: &[&str]) -> Output {
    wattio_kernel_io(args, "off")
}

/// `wattio measure --source model ARGS` with `WATTIO_KERNEL_IO=mode` (empty: unset, the default).
fn wattio_kernel_io(args: &[&str], mode: &str) -> Output {
    let mut c = Command::new(BIN);
    c.arg("measure")
        .args(["--source", "model"])
        .args(args)
        .env_remove("WATTIO_ROOT")
        .env_remove("WATTIO_KERNEL_IO");
    if !mode.is_empty() {
        c.env("WATTIO_KERNEL_IO", mode);
    }
    c.output().expect("run wattio")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The labels of an estimate: the total says estimated and names the model; the command's share
/// says the same and that it is attributed.
fn assert_estimated_labels(total: &serde_json::Value, command: &serde_json::Value) {
    let (t, c) = (total.as_str().unwrap(), command.as_str().unwrap());
    assert!(t.starts_with("estimated (model: ccf-linear("), "{t}");
    assert_eq!(c, format!("{t}, attributed (cpu-time share)"));
}

#[test]
fn single_command_json_keeps_its_fields_and_passes_the_exit_status_through() {
    let o = wattio(&["--json", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v = json(&o);
    for field in [
        "duration_s",
        "mechanism",
        "estimated",
        "domains",
        "total_j",
        "mean_power_w",
        "child_cpu_s",
        "exit_code",
        "command",
        "attributed_j",
        "attributed_label",
        "total_label",
        "n_cpus",
    ] {
        assert!(!v[field].is_null(), "no {field} in {v}");
    }
    assert_eq!(v["mechanism"], "model");
    assert_eq!(v["estimated"], true);
    assert!(v["model"].as_str().unwrap().starts_with("ccf-linear("));
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["domains"][0]["domain"], "package");
    assert_eq!(v["command"], serde_json::json!(["sh", "-c", "exit 3"]));
    assert!(v.get("command_estimated_j").is_none());
    assert_estimated_labels(&v["total_label"], &v["attributed_label"]);
}

#[test]
fn single_command_energy_is_its_cpu_time_share_of_the_total() {
    let o = wattio(&["--json", "--", "sh", "-c", BUSY]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let (total, cpu, dt) = (f(&v["total_j"]), f(&v["child_cpu_s"]), f(&v["duration_s"]));
    let n = v["n_cpus"].as_u64().unwrap() as f64;
    assert!(cpu > 0.05, "the loop burns CPU: {cpu}");
    // attributed_j = E · c / max(n · Δt, c)
    let want = total * cpu / (n * dt).max(cpu);
    assert!((f(&v["attributed_j"]) - want).abs() < 1e-9, "{v}");
    assert!(f(&v["attributed_j"]) <= total);
    // The text form says the same, labelled.
    let o = wattio(&["--", "sh", "-c", "exit 0"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("ESTIMATED"), "{t}");
    assert!(t.contains("attributed (cpu-time share)"), "{t}");
}

#[test]
fn two_commands_interleaved_compared_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let (ej, ec, em) = (
        dir.path().join("r.json"),
        dir.path().join("r.csv"),
        dir.path().join("r.md"),
    );
    let o = wattio(&[
        "--runs",
        "3",
        "--json",
        "--export-json",
        ej.to_str().unwrap(),
        "--export-csv",
        ec.to_str().unwrap(),
        "--export-markdown",
        em.to_str().unwrap(),
        BUSY,
        "true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["estimated"], true);
    assert_estimated_labels(&v["label"], &v["attributed_label"]);
    let res = v["results"].as_array().unwrap();
    assert_eq!(res.len(), 2);
    assert_eq!(res[0]["command"], BUSY);
    assert_eq!(res[1]["command"], "true");
    for (i, r) in res.iter().enumerate() {
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        assert_eq!(r["kept"], 3);
        for (k, run) in runs.iter().enumerate() {
            // A1 B1 A2 B2 A3 B3.
            assert_eq!(run["sequence"].as_u64().unwrap() as usize, 2 * k + i + 1);
            assert_eq!(run["status"], "ok");
            assert!(f(&run["attributed_j"]) <= f(&run["total_j"]), "{run}");
            assert!(f(&run["attributed_j"]) >= 0.0);
            assert_estimated_labels(&run["total_label"], &run["attributed_label"]);
        }
    }
    let cj = |i: usize| f(&res[i]["summary"]["attributed_j"]["mean"]);
    assert!(
        cj(0) > cj(1),
        "the busy loop's share {} > true's {}",
        cj(0),
        cj(1)
    );
    assert!(f(&res[0]["summary"]["child_cpu_s"]["mean"]) > 0.05);
    // true uses less of the machine's energy: it is the best, the loop is compared with it.
    assert_eq!(v["best"], 1);
    assert_eq!(res[1]["energy_ratio"], 1.0);
    assert!(f(&res[0]["energy_ratio"]) > 1.0);
    // 3 runs each, no ties: the exact two-sided p is 2/20; one comparison, Holm changes nothing.
    assert!(
        (f(&res[0]["p_value"]) - 0.1).abs() < 1e-12,
        "{}",
        res[0]["p_value"]
    );
    assert_eq!(res[0]["p_holm"], res[0]["p_value"]);

    // --export-json holds the same document.
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ej).unwrap()).unwrap();
    assert_eq!(file["results"][0]["runs"], v["results"][0]["runs"]);
    // CSV: one row per command with the statistics and labels.
    let mut rdr = csv::Reader::from_path(&ec).unwrap();
    let headers = rdr.headers().unwrap().clone();
    for col in [
        "command",
        "runs_kept",
        "runs_failed",
        "runs_interrupted",
        "duration_mean_s",
        "total_mean_j",
        "total_stddev_j",
        "total_median_j",
        "attributed_mean_j",
        "energy_ratio",
        "p_holm",
        "estimated",
        "label",
        "attributed_label",
    ] {
        assert!(headers.iter().any(|h| h == col), "no {col} in {headers:?}");
    }
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    let col = |r: &csv::StringRecord, name: &str| {
        r[headers.iter().position(|h| h == name).unwrap()].to_string()
    };
    assert_eq!(col(&rows[0], "command"), BUSY);
    assert_eq!(col(&rows[1], "energy_ratio"), "1");
    assert_eq!(col(&rows[0], "estimated"), "true");
    assert!(col(&rows[0], "label").starts_with("estimated (model:"));
    let total: f64 = col(&rows[0], "total_mean_j").parse().unwrap();
    assert!((total - f(&res[0]["summary"]["total_j"]["mean"])).abs() < 1e-9);
    // Markdown: a table with a header, an alignment row and one row per command.
    let md = std::fs::read_to_string(&em).unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines[0].starts_with("| Command | Time [s] | Energy [J] | Command energy [J] | Relative energy | p (Holm) | Runs |"), "{md}");
    assert!(lines[1].starts_with("|:---|"), "{md}");
    assert!(lines[2].starts_with("| `i=0; while"), "{md}");
    assert!(lines[3].starts_with("| `true` |"), "{md}");
    assert!(md.contains("estimated (model:"), "{md}");
}

#[test]
fn the_human_summary_names_the_least_energy_command() {
    let o = wattio(&["--runs", "2", "sleep 0.05", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("Benchmark 1: sleep 0.05"), "{t}");
    assert!(t.contains("Benchmark 2: true"), "{t}");
    assert!(t.contains("Time    (mean ± σ):"), "{t}");
    assert!(t.contains("Energy  (mean ± σ):"), "{t}");
    assert!(t.contains("[min … max]:"), "{t}");
    assert!(t.contains("estimated (model: ccf-linear("), "{t}");
    assert!(t.contains("'true' used the least energy"), "{t}");
    assert!(t.contains("times less than 'sleep 0.05' (p = "), "{t}");
    assert!(t.contains(", Holm)"), "{t}");
}

/// A shell command whose n-th run (counted in `counter`) does what `case` says.
fn nth_run(counter: &Path, case: &str) -> String {
    let c = counter.display();
    format!("n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; case $n in {case} esac")
}

#[test]
fn failed_and_interrupted_runs_are_left_out_with_ignore_failure() {
    let dir = tempfile::tempdir().unwrap();
    // Run 2 exits 1, run 3 is killed by SIGKILL, runs 1 and 4 succeed.
    let cmd = nth_run(&dir.path().join("n"), "2) exit 1;; 3) kill -9 $$;;");
    let o = wattio(&["--runs", "4", "--ignore-failure", "--json", &cmd]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let r = &v["results"][0];
    assert_eq!(
        (&r["kept"], &r["failed"], &r["interrupted"]),
        (&2.into(), &1.into(), &1.into())
    );
    let runs = r["runs"].as_array().unwrap();
    let status: Vec<&str> = runs.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["ok", "failed", "interrupted", "ok"]);
    assert_eq!(runs[1]["exit_code"], 1);
    assert_eq!(runs[2]["signal"], 9);
    assert_eq!(runs[2]["exit_code"], 137);
    // The statistics are over runs 1 and 4 only.
    let kept = [f(&runs[0]["total_j"]), f(&runs[3]["total_j"])];
    let mean = f(&r["summary"]["total_j"]["mean"]);
    assert!(
        (mean - (kept[0] + kept[1]) / 2.0).abs() < 1e-9,
        "{mean} vs {kept:?}"
    );
    // The text says what was left out.
    std::fs::remove_file(dir.path().join("n")).unwrap();
    let o = wattio(&["--runs", "4", "-i", &cmd]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("1 failed run (exit code 1) and 1 interrupted run (signal 9) left out of the statistics"),
        "{t}"
    );
}

/// SIGTERM (as Ctrl-C) reaches the cancel flag: the loop ends after the run under way and
/// the runs so far are summarised, with status 130.
#[test]
fn a_signal_ends_the_benchmark_after_the_current_run_with_the_runs_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    let cmd = nth_run(&counter, "*) sleep 0.2;;");
    let mut c = Command::new(BIN);
    c.args([
        "measure", "--source", "model", "--runs", "200", "--json", &cmd,
    ])
    .env_remove("WATTIO_ROOT");
    let read_n = || {
        std::fs::read_to_string(&counter)
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .unwrap_or(0)
    };
    let o = common::terminate_when(c, 30, "three runs", || read_n() >= 3);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["stopped_early"], true);
    let runs = v["results"][0]["runs"].as_array().unwrap().len();
    // Every run started was finished and kept; none after the signal.
    assert_eq!(runs, read_n(), "{}", stderr(&o));
    assert!((3..200).contains(&runs), "{runs} runs");
}

#[test]
fn a_failing_command_aborts_without_ignore_failure() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = nth_run(&dir.path().join("n"), "2) exit 5;;");
    let o = wattio(&["--runs", "3", "true", &cmd]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    let line = e.lines().find(|l| l.starts_with("wattio: error:")).unwrap();
    assert!(
        line.contains(&format!(
            "command '{cmd}' failed in run 2 of 3 with exit code 5"
        )),
        "{e}"
    );
    assert!(line.contains("--ignore-failure"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    // Every run failed, even with --ignore-failure: the report is printed and the exit says so.
    let o = wattio(&["--runs", "2", "-i", "--json", "true", "exit 7"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["results"][1]["failed"], 2);
    assert!(v["results"][1]["summary"].is_null());
    assert!(
        stderr(&o).contains("no run of 'exit 7' was kept (2 failed, 0 interrupted)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn warmups_and_prepare_run_but_are_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (p, r) = (dir.path().join("p"), dir.path().join("r"));
    let o = wattio(&[
        "--warmup",
        "2",
        "--runs",
        "3",
        "--prepare",
        &format!("echo p >> {}", p.display()),
        "--json",
        &format!("echo r >> {}", r.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["results"][0]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(
        (&v["warmup"], &v["runs_per_command"]),
        (&2.into(), &3.into())
    );
    let lines = |f: &Path| std::fs::read_to_string(f).unwrap().lines().count();
    assert_eq!(lines(&r), 5, "2 warmups + 3 measured runs");
    assert_eq!(lines(&p), 5, "--prepare before each of them");
}

#[test]
fn repeat_is_the_old_name_of_runs() {
    let o = wattio(&["--repeat", "3", "--json", "--", "sleep", "0.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let r = &v["results"][0];
    assert_eq!(r["command"], "sleep 0.1");
    assert_eq!(r["runs"].as_array().unwrap().len(), 3);
    let med = f(&r["summary"]["duration_s"]["median"]);
    assert!((0.09..1.5).contains(&med), "{med}");
    // An idle 2-vCPU machine draws at least the model's idle power: 0.74 W per vCPU.
    assert!(f(&r["summary"]["mean_power_w"]["median"]) >= 0.7);
    assert_eq!(v["estimated"], true);
}

#[test]
fn bad_invocations_are_refused_with_one_line_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let touch = format!("touch {}", ran.display());
    for (args, needle) in [
        (vec![], "no command given"),
        (vec!["--runs", "0", "true"], "--runs must be at least 1"),
        (
            vec!["--export-csv", "/nonexistent/dir/x.csv", &touch],
            "cannot write --export-csv /nonexistent/dir/x.csv",
        ),
        (
            vec![
                "--export-json",
                "/nonexistent/dir/x.json",
                "--",
                "sh",
                "-c",
                &touch,
            ],
            "cannot write --export-json",
        ),
        (vec![&touch, "--", "true"], "not both"),
        (
            vec!["--", "/nonexistent/cmd"],
            "cannot run \"/nonexistent/cmd\"",
        ),
        (
            vec!["--prepare", "exit 4", &touch],
            "--prepare command 'exit 4' failed with exit code 4",
        ),
        (
            vec!["--warmup", "1", "no-such-command-xyz"],
            "exit code 127 (the shell found no such command)",
        ),
    ] {
        let o = wattio(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        let errors: Vec<&str> = e
            .lines()
            .filter(|l| l.starts_with("wattio: error:"))
            .collect();
        assert_eq!(errors.len(), 1, "{args:?}: {e}");
        assert!(errors[0].contains(needle), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(!ran.exists(), "{args:?} ran the command");
    }
}

/// A scratch directory on a disk-backed file system (tmpfs pages are never dirty: they have no
/// writeback, so a command writing there has nothing to sync).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").expect("a directory under /var/tmp")
}

/// `measure -- dd … of=FILE` waits for the writeback it caused: a sync phase with the bytes the
/// command dirtied, its own time and energy apart from the total, and the command's share of it
/// labelled; with `--no-sync` there is none, and a command that wrote nothing has none either.
#[test]
fn a_writing_command_is_followed_by_its_measured_sync_unless_no_sync() {
    let d = disk_dir();
    let of = format!("of={}", d.path().join("out").display());
    let dd = [
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=64",
        "status=none",
    ];
    let mut args = vec!["--json", "--"];
    args.extend(dd);
    let o = wattio(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let s = &v["sync"];
    assert!(s.is_object(), "no sync phase: {v}");
    assert!(f(&s["written_bytes"]) >= (64u64 << 20) as f64, "{s}");
    assert!(f(&s["duration_s"]) > 0.0 && f(&s["total_j"]) > 0.0, "{s}");
    let share = f(&s["dirty_share"]);
    assert!(share > 0.0 && share <= 1.0, "{s}");
    assert!(f(&s["attributed_j"]) <= f(&s["total_j"]), "{s}");
    let total = s["total_label"].as_str().unwrap();
    assert!(
        total.starts_with("estimated (model: ccf-linear("),
        "{total}"
    );
    let label = s["attributed_label"].as_str().unwrap();
    assert!(
        label.starts_with("estimated (model: ccf-linear(")
            && label.ends_with("attributed (sync's cpu-time share × dirty-data share)"),
        "{label}"
    );

    let mut args = vec!["--json", "--no-sync", "--"];
    args.extend(dd);
    let o = wattio(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(json(&o).get("sync").is_none(), "--no-sync still synced");

    let o = wattio(&["--json", "--", "sh", "-c", BUSY]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        json(&o).get("sync").is_none(),
        "a command that wrote nothing was synced"
    );
}

/// By default, where the kernel I/O program loads (root), the command is charged the kernel's
/// I/O work done for it: the block completions of its run, and in the sync the kworkers'
/// writeback of its pages, measured and labelled so, in place of the dirty-data share.
#[test]
fn the_kernel_io_work_done_for_a_writer_is_measured() {
    let d = disk_dir();
    let of = format!("of={}", d.path().join("out").display());
    let args = [
        "--json",
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=256",
        "status=none",
    ];
    let o = wattio_kernel_io(&args, "");
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let Some(k) = v.get("kernel_io") else {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_EBPF").is_none_or(|r| r != "1"),
            "no kernel_io with WATTIO_REQUIRE_EBPF=1: {v}"
        );
        eprintln!("skipped: the kernel I/O program did not load (not root?)");
        return;
    };
    let label = k["attributed_label"].as_str().unwrap();
    assert!(
        label.contains("attributed (kernel I/O work: writeback"),
        "{label}"
    );
    let s = &v["sync"];
    let in_sync = f(&s["kernel_io_cpu_s"]);
    assert!(in_sync > 0.0, "no writeback measured for 256 MiB: {s}");
    assert!(
        in_sync <= f(&s["busy_cpu_s"]) + 0.02,
        "more than the machine did: {s}"
    );
    let label = s["attributed_label"].as_str().unwrap();
    assert!(label.contains("attributed (kernel I/O work"), "{label}");
    assert!(
        f(&s["attributed_j"]) > 0.0 && f(&s["attributed_j"]) <= f(&s["total_j"]),
        "{s}"
    );
}

/// The text summary names the sync phase and the command's share of it.
#[test]
fn the_summary_shows_the_sync_phase() {
    let d = disk_dir();
    let of = format!("of={}", d.path().join("out").display());
    let o = wattio(&[
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=8",
        "status=none",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("sync         ") && t.contains("after the command"),
        "{t}"
    );
    assert!(
        t.contains("sync share   ") && t.contains("dirty-data share"),
        "{t}"
    );
}
