//! Loading every kind of result file from fixtures, and what the page says about them.
//! Expected numbers are worked out by hand in the comments.

use std::path::{Path, PathBuf};
use wattio_iobench::RunRecord;
use wattio_report::{
    load_result_file, scan_results, CacheSweep, Dataset, IoBenchRuns, LoadRuns, MeasuredCommand,
    Recording,
};
use wattio_results::analyze_load;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn load(rel: &str) -> Dataset {
    load_result_file(&fixtures().join(rel)).unwrap().unwrap()
}

#[test]
fn record_csv_from_the_meter() {
    let Dataset::Record(Recording { counters, .. }) = load("results/record-model.csv") else {
        panic!("not a record")
    };
    assert_eq!(counters.len(), 1);
    assert_eq!(counters[0].rows.len(), 20);
    assert!(counters[0].provenance.estimated);
    assert_eq!(
        counters[0].provenance.label(),
        "estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))"
    );
}

#[test]
fn record_by_process_keeps_the_counters_apart_from_attribution_rows() {
    let d = tempfile::tempdir().unwrap();
    let csv = "timestamp,mechanism,socket,domain,energy_j,estimated,model,entity,pid,comm,cgroup,cpu_s\n\
        1.0,perf,0,package,2,false,,,,,,\n\
        1.0,perf,,total,1.5,false,\"measured (perf), attributed (cpu-time share)\",process,42,gzip,/,0.5\n\
        1.0,perf,,total,0.5,false,\"measured (perf), attributed (cpu-time share)\",idle,,,,0\n\
        2.0,perf,0,package,4,false,,,,,,\n";
    std::fs::write(d.path().join("e.csv"), csv).unwrap();
    let Dataset::Record(Recording { counters, .. }) =
        load_result_file(&d.path().join("e.csv")).unwrap().unwrap()
    else {
        panic!("not a record")
    };
    assert_eq!(counters.len(), 1, "attribution rows are not counters");
    assert_eq!(counters[0].rows, vec![(1.0, 2.0), (2.0, 4.0)]);
    let jsonl = "{\"timestamp\":1.0,\"mechanism\":\"perf\",\"socket\":0,\"domain\":\"package\",\"energy_j\":2,\"estimated\":false,\"model\":null}\n\
        {\"timestamp\":1.0,\"mechanism\":\"perf\",\"domain\":\"total\",\"energy_j\":2,\"estimated\":false,\"model\":\"x\",\"entity\":\"idle\",\"pid\":null,\"comm\":null,\"cgroup\":null,\"cpu_s\":0}\n";
    std::fs::write(d.path().join("e.jsonl"), jsonl).unwrap();
    let Dataset::Record(Recording { counters, .. }) = load_result_file(&d.path().join("e.jsonl"))
        .unwrap()
        .unwrap()
    else {
        panic!("not a record")
    };
    assert_eq!(counters.len(), 1);
}

#[test]
fn record_with_gpu_rows_keeps_each_counters_provenance() {
    let d = tempfile::tempdir().unwrap();
    let csv = "timestamp,mechanism,socket,domain,energy_j,estimated,model\n\
        1.0,model,0,package,2,true,\"ccf-linear(min=0.74W,max=3.5W per vCPU)\"\n\
        1.0,nvml,0,gpu,30,false,\n\
        1.0,nvml,1,gpu,12,false,\"power, integrated\"\n\
        2.0,model,0,package,2,true,\"ccf-linear(min=0.74W,max=3.5W per vCPU)\"\n\
        2.0,nvml,0,gpu,30,false,\n\
        2.0,nvml,1,gpu,12,false,\"power, integrated\"\n";
    std::fs::write(d.path().join("g.csv"), csv).unwrap();
    let Dataset::Record(Recording { counters, .. }) =
        load_result_file(&d.path().join("g.csv")).unwrap().unwrap()
    else {
        panic!("not a record")
    };
    let label = |socket: u32, domain: &str| {
        counters
            .iter()
            .find(|c| c.socket == socket && c.domain == domain)
            .unwrap()
            .provenance
            .label()
    };
    assert_eq!(label(0, "gpu"), "measured (nvml)");
    assert_eq!(label(1, "gpu"), "measured (nvml power, integrated)");
    assert!(label(0, "package").starts_with("estimated (model: ccf-linear"));
}

#[test]
fn record_jsonl_power_series() {
    let Dataset::Record(Recording { counters, .. }) = load("results/record-perf.jsonl") else {
        panic!("not a record")
    };
    assert_eq!(counters.len(), 2);
    let pkg = counters.iter().find(|c| c.domain == "package").unwrap();
    assert_eq!(pkg.provenance.label(), "measured (perf)");
    // Rows 1 s apart with 2, 4, 6 J since the previous row: 2, 4, 6 W.
    let p: Vec<f64> = pkg.power_series(3).iter().map(|x| x.1).collect();
    assert_eq!(p, vec![2.0, 4.0, 6.0]);
    // Averaged into one bucket: 12 J over 3 s = 4 W.
    assert_eq!(pkg.power_series(1)[0].1, 4.0);
}

#[test]
fn measure_single_and_repeat() {
    let Dataset::Measure(MeasuredCommand {
        runs,
        provenance,
        command,
    }) = load("results/measure-single.json")
    else {
        panic!()
    };
    assert_eq!((runs.len(), command.as_str()), (1, "sleep 0.3"));
    assert!(provenance.estimated);
    let Dataset::Measure(MeasuredCommand { runs, .. }) = load("results/measure-repeat.json") else {
        panic!()
    };
    assert_eq!(runs.len(), 3);
}

#[test]
fn other_parts_results() {
    let Dataset::IoBench(IoBenchRuns { rows }) = load("results/misc/iobench.csv") else {
        panic!()
    };
    assert_eq!(rows.len(), 8);
    // `wattio cache sweep --workload email --seeds 1`: 7 knobs × 3 ghost-hint variants of the
    // adaptive cache and 7 knob-independent strategies.
    let Dataset::Cache(CacheSweep { rows }) = load("results/misc/cache-sweep.csv") else {
        panic!()
    };
    assert_eq!(rows.len(), 7 * 3 + 7);
    // A real `wattio transfer --json` summary (three files over loopback at 40 Mbit/s, 250 ms
    // intervals); expected figures are read from the file with serde_json.
    let Dataset::Transfer(section) = load("results/misc/transfer.json") else {
        panic!()
    };
    let summary = &section.summary;
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("results/misc/transfer.json")).unwrap(),
    )
    .unwrap();
    let intervals = json["intervals"].as_array().unwrap();
    assert_eq!(summary.intervals.len(), intervals.len());
    assert_eq!(
        summary.energy.as_ref().map(|e| e.total_j),
        json["energy"]["total_j"].as_f64()
    );
    let energy = summary.energy.as_ref().unwrap();
    assert_eq!(
        energy.provenance.estimated,
        json["energy"]["estimated"] == true
    );
    // Pipelining is a list, one per partition: each partition's value is charted.
    let pipelining = intervals[0]["pipelining"].as_array().unwrap();
    assert!(pipelining.len() > 1, "the fixture has several partitions");
    let params = summary.intervals[0].parameters();
    for (i, p) in pipelining.iter().enumerate() {
        let name = format!("pipelining (partition {})", i + 1);
        let charted = params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        assert_eq!(charted, p.as_f64(), "{name}");
    }
    let in_flight = params.iter().find(|(n, _)| n.contains("concurrency"));
    assert_eq!(
        in_flight.map(|(_, v)| *v),
        intervals[0]["files_in_flight"].as_f64()
    );
}

#[test]
fn overhead_runs_analysed_like_appendix_a() {
    let Dataset::OverheadLoad(LoadRuns { runs }) = load("results/overhead/runs.csv") else {
        panic!()
    };
    let t = analyze_load(&runs);
    assert_eq!(t.len(), 1);
    // 3 vs 3, complete separation: exact one-sided p = 1/C(6,3) = 0.05; one test, Holm = p.
    assert!((t[0].p_value - 0.05).abs() < 1e-12);
    assert!((t[0].p_adj - 0.05).abs() < 1e-12);
    // Two-sided: both tails, 2/20 = 0.1.
    assert!((t[0].p_two_sided - 0.1).abs() < 1e-12);
    // Differences x−y: .08 .09 .09 .10 .10 .10 .11 .11 .12 → median 0.10 s.
    assert!((t[0].shift_s - 0.10).abs() < 1e-9);
    // 1410 rows in 1.41 s.
    assert!((t[0].sample_rate - 1000.0).abs() < 1e-6);
}

#[test]
fn bad_files_are_skipped_with_reasons() {
    let s = scan_results(&fixtures().join("bad")).unwrap();
    assert!(s.loaded.is_empty());
    let reason = |name: &str| {
        s.skipped
            .iter()
            .find(|k| k.path.ends_with(name))
            .map(|k| k.reason.clone())
            .unwrap()
    };
    let broken = reason("record-broken.csv");
    assert!(
        broken.starts_with("`wattio record` CSV: line 4: column energy_j: ")
            && broken.ends_with("('oops')"),
        "{broken}"
    );
    assert!(reason("unknown.json").contains("unknown shape"));
    // A study's own manifest, as the runner writes it, is named as such.
    let d = tempfile::tempdir().unwrap();
    wattio_runner::write_manifest(
        d.path(),
        &wattio_runner::StudyManifest {
            study: "wattio overhead".into(),
            command: "wattio overhead --quick".into(),
            plan: serde_json::json!({"rounds": 1}),
            total_runs: 3,
            complete: false,
        },
    )
    .unwrap();
    let why = load_result_file(&d.path().join(wattio_runner::MANIFEST_FILE)).unwrap_err();
    assert!(
        why.starts_with("the manifest of a `wattio overhead` study") && why.contains("CSV files"),
        "{why}"
    );
    // A summary without a field the page shows (the host estimate, which summaries lacked before
    // it was recorded): one line naming the field and the fix.
    let older = reason("transfer-no-host-estimate.json");
    assert!(
        older.starts_with("transfer summary: missing field `energy_process`")
            && older.ends_with("run `wattio transfer --json` again to rewrite it")
            && !older.contains('\n'),
        "{older}"
    );
    // Binary data is generated here rather than committed.
    let d = tempfile::tempdir().unwrap();
    let blob = d.path().join("blob.bin");
    std::fs::write(&blob, b"\x00\x01\x02binary").unwrap();
    assert!(load_result_file(&blob)
        .unwrap_err()
        .starts_with("binary file"));
}

#[test]
fn page_labels_every_figure_and_needs_no_network() {
    let s = scan_results(&fixtures().join("results")).unwrap();
    assert_eq!(s.loaded.len(), 9, "{:?}", s.skipped);
    let html = wattio_report::render_html(&s, &fixtures().join("results"), "t");
    let figures = html.matches("<figure>").count();
    let labelled = html.matches(": <span class=\"prov").count();
    assert!(figures >= 12, "{figures}");
    assert_eq!(figures, labelled);
    assert_eq!(
        html.matches("<svg").count(),
        html.matches("data-provenance=\"").count()
    );
    assert!(html.contains("measured (perf)"));
    assert!(html.contains("estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))"));
    // No external resources: the only URLs are the SVG namespace and the transfer's source,
    // shown as text in its summary table.
    let urls = html.matches("http").count();
    let source = "<td>http://127.0.0.1:18931/</td>";
    assert_eq!(html.matches(source).count(), 1);
    assert_eq!(urls, html.matches("http://www.w3.org/2000/svg").count() + 1);
    assert!(!html.contains(" src="));
    // C-state residency from the idle fixture: mean of 0.10 and 0.12 = 11.0 %.
    assert!(
        html.contains("off: C1 11.0%, C6 84.0% → on: C1 31.0%, C6 49.0%"),
        "C-state summary missing"
    );
}

#[test]
fn write_report_is_atomic_and_errors_name_the_problem() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.html");
    let s = wattio_report::write_report(&fixtures().join("results"), &out, "t").unwrap();
    assert_eq!(s.datasets, 9);
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    // no temporary file left beside it
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["r.html"]);
    let e = wattio_report::write_report(
        &fixtures().join("results"),
        &d.path().join("no/such/dir/r.html"),
        "t",
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot write"), "{e}");
    let e = wattio_report::write_report(&d.path().join("missing"), &out, "t").unwrap_err();
    assert!(
        e.to_string().contains("cannot read result directory"),
        "{e}"
    );
}

/// Eight runs of two read methods and one write method, as the iobench study records them.
fn iobench_runs() -> Vec<RunRecord> {
    use wattio_iobench::{Op, Size};
    let run = |method: &str, op: Op, run: u32, energy_j: f64| RunRecord {
        method: method.into(),
        op,
        size: Size::Small,
        buffer: 8192,
        run,
        energy_j,
        time_s: 0.1,
        bytes: 10_000_000,
        mechanism: "model".into(),
        estimated: true,
        model: "ccf-linear(min=0.74W,max=3.5W per vCPU)".into(),
        energy_scope: "process".into(),
        system_energy_j: 3.0,
        cpu_s: 0.1,
        window_s: 0.2,
        cache: "warm".into(),
        cache_resident: Some(1.0),
        libs: wattio_iobench::Libs::Paper,
        checked: true,
        attributed_j: Some(0.25),
        disk: None,
        disk_lower_j: None,
        disk_central_j: None,
        disk_upper_j: None,
        disk_label: None,
    };
    vec![
        run("FileChannel", Op::Read, 1, 0.50),
        run("FileChannel", Op::Read, 2, 0.52),
        run("FileChannel", Op::Read, 3, 0.48),
        run("Scanner", Op::Read, 1, 2.00),
        run("Scanner", Op::Read, 2, 2.10),
        run("Scanner", Op::Read, 3, 1.90),
        run("FileWriter", Op::Write, 1, 1.00),
        run("FileWriter", Op::Write, 2, 1.05),
    ]
}

#[test]
fn iobench_csv_and_json_twins_load_once_and_other_files_are_not_read() {
    let d = tempfile::tempdir().unwrap();
    // results.csv, results.json, summary.md and the plots, by the study's own writer.
    let meta = wattio_iobench::Meta {
        command: "wattio iobench".into(),
        machine: "test".into(),
        java: "21".into(),
        energy: "estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))".into(),
        cache: "warm".into(),
        libs: "paper".into(),
        jvm_args: String::new(),
        runs: 3,
        started_unix_s: 0.0,
        notes: vec![],
    };
    let study = wattio_iobench::analyse(meta, iobench_runs());
    let written = wattio_iobench::write_outputs(&study, d.path()).unwrap();
    for path in [&written.csv, &written.json] {
        let Dataset::IoBench(IoBenchRuns { rows }) = load_result_file(path).unwrap().unwrap()
        else {
            panic!("{} is not iobench", path.display())
        };
        assert_eq!(rows, iobench_runs());
    }
    std::fs::write(d.path().join("dataset.bin"), vec![0u8; 4096]).unwrap();
    std::fs::write(d.path().join("other.csv"), "a,b\n1,2\n").unwrap();
    let s = scan_results(d.path()).unwrap();
    assert_eq!(
        s.loaded.len(),
        1,
        "json twin of results.csv must be dropped"
    );
    assert!(s.loaded[0].path.ends_with("results.csv"));
    // dataset.bin and the study's own summary.md and SVG plots are not read.
    assert_eq!(s.ignored, 2 + written.plots.len());
    assert_eq!(s.skipped.len(), 1);
    assert_eq!(s.skipped[0].reason, "CSV with unknown columns (a,b)");
}

#[test]
fn iobench_results_without_later_columns_read_and_others_name_the_missing_column() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("results.csv");
    wattio_iobench::write_results_csv(&path, &iobench_runs()).unwrap();
    // Written before the attributed_j and disk columns existed: they are dropped from every
    // line (the model cell, quoted, holds a comma: the CSV is read back to cut its fields).
    let mut rd = csv::Reader::from_path(&path).unwrap();
    let keep = wattio_iobench::RESULTS_CSV_COLUMNS.len();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(rd.headers().unwrap().iter().take(keep))
        .unwrap();
    for r in rd.records() {
        w.write_record(r.unwrap().iter().take(keep)).unwrap();
    }
    let old = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert!(old.lines().next().unwrap().ends_with(",checked"));
    std::fs::write(&path, old).unwrap();
    let Dataset::IoBench(IoBenchRuns { rows }) = load_result_file(&path).unwrap().unwrap() else {
        panic!("not iobench")
    };
    assert_eq!(rows.len(), 8);
    assert!(rows
        .iter()
        .all(|r| r.attributed_j.is_none() && r.disk.is_none() && r.disk_lower_j.is_none()));
    // A bad cell names its line and column.
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("0.52", "x", 1);
    std::fs::write(&path, text).unwrap();
    let e = load_result_file(&path).unwrap_err();
    assert!(
        e.starts_with("iobench results: line 3: column energy_j: "),
        "{e}"
    );
    // A results.json whose runs lack a column every version wrote: the error says how to fix it.
    let runs = serde_json::to_value(iobench_runs()).unwrap();
    let mut runs = runs.as_array().unwrap().clone();
    runs[0].as_object_mut().unwrap().remove("model");
    let json = d.path().join("results.json");
    std::fs::write(&json, serde_json::json!({ "runs": runs }).to_string()).unwrap();
    assert_eq!(
        load_result_file(&json).unwrap_err(),
        "iobench results: missing field `model`; written by an older wattio? run `wattio \
         iobench` again to rewrite it"
    );
}

/// A measured command with RAPL packages and DRAM, a GPU, a platform meter and three disks: the
/// stack table and chart carry each part.
#[test]
fn a_measure_run_is_drawn_as_a_stack_with_the_disks_interval() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stack/measure-disks.json");
    let datasets = wattio_report::load_result_files(&path).unwrap();
    let Dataset::Measure(m) = &datasets[0] else {
        panic!("not a measure result")
    };
    let mut out = wattio_plot::HtmlSection::new();
    wattio_plot::ReportSection::render(m, &mut out);
    let html = out.into_html();
    // By hand: packages 10 + 2.5 = 12.5 J; DRAM 1.5 J; GPU 4 J; disks nvme0n1 [0.3, 2.4] and
    // sda [0.5, 1.5] sum to [0.8, 3.9], sda has no central estimate so the stack takes the
    // midpoint 2.35 J (vda, virtual, has no interval); the platform's rest 5 J less the disks'
    // 2.35 J is 2.65 J.
    let row = [
        "run 1", "12.500", "1.500", "4.000", "2.350", "0.800", "3.900", "5.000", "2.650",
    ]
    .map(|c| format!("<td>{c}</td>"))
    .concat();
    assert!(html.contains(&row), "{html}");
    assert!(
        html.contains("nvme0n1: estimated (device-reported interval"),
        "{html}"
    );
    assert!(html.contains("Energy by part"), "{html}");
    for part in wattio_report::STACK_PARTS {
        assert!(html.contains(part), "{part}");
    }
}

#[test]
fn a_transfer_summary_written_before_its_source_kind_and_verification_reads() {
    // A real summary from the bench fixtures, written before the summary recorded its source
    // kind and verification: the page shows none of those, so it reads, figures as written.
    let path = fixtures().join("older/transfer-older.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(json.get("source_kind").is_none() && json.get("verification").is_none());
    let Dataset::Transfer(section) = load_result_file(&path).unwrap().unwrap() else {
        panic!("not a transfer summary")
    };
    let summary = &section.summary;
    assert_eq!(summary.files as u64, json["files"].as_u64().unwrap());
    assert_eq!(
        summary.energy_process.total_j,
        json["energy_process"]["total_j"].as_f64().unwrap()
    );
    assert_eq!(
        summary.intervals.len(),
        json["intervals"].as_array().unwrap().len()
    );
}
