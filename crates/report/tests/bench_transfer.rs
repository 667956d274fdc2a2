//! `wattio report bench-transfer` on runs of a real `make bench-transfer` (the fixture: 7 cells
//! × 3 rounds of the HTTPS bench on the cloudlab testbed, see fixtures/bench-transfer/README.md).
//!
//! The expected tables (`expected-report.md`) were written from the same files by the Python
//! report script this command replaced (scripts/transfer_report.py at 25adf4f), an independent
//! implementation; the figures checked by hand below come from the fixture's JSON.

use std::path::{Path, PathBuf};
use wattio_report::{write_bench_transfer, BenchTransfer, BenchTransferError};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-transfer")
}

#[test]
fn tables_match_the_retired_python_report_line_for_line() {
    let bench = BenchTransfer::read(&fixture()).unwrap();
    let expected = std::fs::read_to_string(fixture().join("expected-report.md")).unwrap();
    let got = bench.markdown();
    for (i, (g, e)) in got.lines().zip(expected.lines()).enumerate() {
        assert_eq!(g, e, "line {}", i + 1);
    }
    assert_eq!(got.lines().count(), expected.lines().count());
    assert_eq!(got, expected);
}

#[test]
fn medians_ranges_and_counts_follow_the_run_files() {
    let bench = BenchTransfer::read(&fixture()).unwrap();
    assert_eq!(bench.rows.len(), 21, "7 cells × 3 rounds");
    assert_eq!(bench.cells.len(), 7);
    assert_eq!(bench.link_mbit, 1000.0);
    assert_eq!(bench.model, "ccf-linear(min=0.74W,max=3.5W per vCPU)");
    let me = bench
        .cells
        .iter()
        .find(|c| c.typical.tool == "wattio-me-tls")
        .unwrap();
    assert_eq!((me.n, me.n_complete, me.complete), (3, 3, true));
    // small.wattio-me-tls r1..r3: 105600629 B each in wall_s 1.284738162, 1.342987235,
    // 1.362512461 s: r1 is the fastest (657.57 Mbit/s), r2 the median-time run.
    let r1 = bench
        .rows
        .iter()
        .find(|r| r.tool == "wattio-me-tls" && r.rep == 1)
        .unwrap();
    assert!(
        (r1.throughput_mbit - 657.57).abs() < 0.01,
        "{}",
        r1.throughput_mbit
    );
    assert!((me.throughput_range.1 - 657.57).abs() < 0.01);
    assert_eq!(me.typical.rep, 2);
    // r1's client estimate: energy_j 2.95600295976 J for 0.105600629 GB.
    assert!((r1.client_j_per_gb_est.unwrap() - 27.992).abs() < 0.001);
    assert_eq!(r1.system_mechanism.as_deref(), Some("model"));
    assert!(r1.wattio_reported_mbit.is_some());
}

#[test]
fn writes_every_chart_with_its_provenance_and_the_tables() {
    let out = tempfile::tempdir().unwrap();
    let done = write_bench_transfer(&fixture(), out.path(), "https", false).unwrap();
    let names: Vec<String> = done
        .files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "https-throughput.svg",
            "https-energy.svg",
            "https-cpu.svg",
            "https-eett.svg",
            "results.csv",
            "report.md"
        ]
    );
    let read = |n: &str| std::fs::read_to_string(out.path().join(n)).unwrap();
    let energy = read("https-energy.svg");
    assert!(energy.contains(
        "data-provenance=\"estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))\""
    ));
    assert!(energy.contains("J per GB, estimated"));
    // One bar per complete cell: 5 tools on small; the EETT cells are not tools.
    assert_eq!(energy.matches("<title>small / ").count(), 5);
    let tput = read("https-throughput.svg");
    assert!(tput.contains("link 1000 Mbit/s") && tput.contains("measured (wall clock"));
    let eett = read("https-eett.svg");
    assert!(eett.contains("80 % nginx HTTPS") && eett.contains("target ±10 %"));
    // The band of the 80 % target: 720–880 Mbit/s.
    assert!(eett.contains("80 % nginx HTTPS: 720–880"), "{eett}");
    let csv = read("results.csv");
    assert_eq!(csv.lines().count(), 22, "header and 21 runs");
    assert!(csv.starts_with("dataset,tool,rep,target_mbit,complete,"));

    // Charts only: the tables stay where they were.
    let charts = tempfile::tempdir().unwrap();
    let done = write_bench_transfer(&fixture(), charts.path(), "transfer", true).unwrap();
    assert_eq!(done.files.len(), 4);
    assert!(!charts.path().join("report.md").exists());
}

#[test]
fn a_directory_without_runs_is_refused_with_the_fix() {
    let empty = tempfile::tempdir().unwrap();
    let err = BenchTransfer::read(empty.path()).err().unwrap();
    assert!(matches!(err, BenchTransferError::NoRuns(_)));
    assert!(err.to_string().contains("make bench-transfer"), "{err}");

    // A cut-short meta file names the file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("runs")).unwrap();
    std::fs::write(
        dir.path().join("runs/small.curl-par.r1.meta.json"),
        "{\"tool\":",
    )
    .unwrap();
    std::fs::copy(
        fixture().join("runs/small.curl-par.r1.stats.json"),
        dir.path().join("runs/small.curl-par.r1.stats.json"),
    )
    .unwrap();
    let err = BenchTransfer::read(dir.path()).err().unwrap().to_string();
    assert!(err.contains("small.curl-par.r1.meta.json"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn an_incomplete_cell_says_what_arrived_and_draws_no_bar() {
    // The fixture's curl-par runs, one of them turned into a run that lost bytes.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("runs")).unwrap();
    for rep in 1..=3 {
        for ext in ["meta.json", "stats.json", "measure.json"] {
            let name = format!("small.curl-par.r{rep}.{ext}");
            let mut text = std::fs::read_to_string(fixture().join("runs").join(&name)).unwrap();
            if rep == 2 && ext == "meta.json" {
                text = text
                    .replace("\"rc\":0", "\"rc\":22")
                    .replace("\"got_bytes\":105600629", "\"got_bytes\":1000");
            }
            std::fs::write(dir.path().join("runs").join(&name), text).unwrap();
        }
    }
    let bench = BenchTransfer::read(dir.path()).unwrap();
    let md = bench.markdown();
    // Medians over the 2 complete runs; the cell is marked incomplete and shows the exit code
    // and bytes of the median-time complete run (of r3 at 1.139 s and r1 at 1.191 s, the upper
    // one: r1, complete).
    assert!(
        md.contains("| curl-par | NO: 2/3 (exit 0, 105600629/105600629 B) |"),
        "{md}"
    );
    let (name, svg) = &bench.charts()[0];
    assert_eq!(*name, "throughput.svg");
    assert!(
        !svg.contains("<title>small / curl-par"),
        "no bar for an incomplete cell"
    );
}

#[test]
fn wattio_given_the_url_list_gets_its_own_goal_table_beside_the_index_walk() {
    // A real run with the -tls-list rows (fixtures/bench-transfer-list/README.md).
    let list_fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-transfer-list");
    let md = BenchTransfer::read(&list_fixture).unwrap().markdown();
    let header = "| dataset | least J/GB (est.): tool | ME J/GB | ME least? | best other Mbit/s: tool | EEMT Mbit/s | EEMT ≥ best? |\n\
                  |---|---|---:|---|---|---:|---|\n";
    // The index walk's table: the list rows take no part in it.
    let index = format!(
        "### Goals on the HTTPS rows (nginx over TLS, no wattio server)\n\n{header}\
         | small | 27.5: wattio-me-tls | 27.5 | yes | 719: curl-par-tls | 662 | NO |\n\
         | large | 16.7: wattio-me-tls | 16.7 | yes | 961: aria2-tuned-tls | 958 | NO |\n\n"
    );
    assert!(md.contains(&index), "{md}");
    // wattio with the URL list against the same other tools: on small curl-par-tls has the
    // least J/GB (31.3 against ME's 32.1).
    let list = format!(
        "### Goals on the HTTPS rows, wattio given the same URL list as the other tools (-i)\n\n{header}\
         | small | 31.3: curl-par-tls | 32.1 | NO | 719: curl-par-tls | 531 | NO |\n\
         | large | 16.5: wattio-me-tls-list | 16.5 | yes | 961: aria2-tuned-tls | 958 | NO |\n\n"
    );
    assert!(md.ends_with(&list), "{md}");
    // The per-dataset tables list the list rows after the index walk's.
    let at = |row: &str| md.find(&format!("| {row} | 3/3 |")).unwrap();
    assert!(at("wattio-eemt-tls") < at("wattio-me-tls-list"));
    assert!(at("wattio-me-tls-list") < at("wattio-eemt-tls-list"));
}
