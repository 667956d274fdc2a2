//! `wattio iobench`: the Java I/O energy study (logic in `wattio-iobench`).

use crate::meter_cmd::SourceArgs;
use crate::study_ui::{self, StudyBar};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use wattio_energy::{Machine, SysRoot};
use wattio_iobench::study::{self, StudyConfig};
use wattio_iobench::{analyse, console_report, write_outputs, CacheMode, Libs, Meta, Op, Size};
use wattio_runner::{read_manifest, StudyEnd};

/// Where results go without -o.
const DEFAULT_OUT: &str = "results/iobench";

/// Which Java file I/O method costs the least energy? The ICSME 2021 study's 28 method/use-case
/// benchmarks run with JMH (one fresh JVM per run, methods interleaved), energy from the meter.
#[derive(Args, Debug)]
pub struct IobenchArgs {
    /// File sizes (Table I): tiny (100 KB), small (15 MB), medium (200 MB), medlarge (3.2 GB), large (16 GB).
    #[arg(long, value_delimiter = ',', default_value = "tiny,small,medium")]
    sizes: Vec<Size>,
    /// Use cases: read (by chunks/lines), readall, seek, write (the paper's unflushed protocol), writesync (each write method, then fsync inside the window); programs: fasta, knucleotide, zip4j, crypto.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "read,readall,seek,write,writesync"
    )]
    ops: Vec<Op>,
    /// Also run the four programs of RQ2 (Fasta, K-nucleotide, Zip4j, javax.crypto) with each of their I/O methods.
    #[arg(long)]
    apps: bool,
    /// Only these methods (e.g. channel,iostream,scanner); default: all of each use case.
    #[arg(long, value_delimiter = ',')]
    methods: Option<Vec<String>>,
    /// Measured runs per cell, each in a fresh JVM.
    #[arg(long, default_value_t = 30)]
    runs: u32,
    /// Page cache before each run: cold (evicted with posix_fadvise) or warm (pre-read).
    #[arg(long, default_value = "warm")]
    cache: CacheMode,
    /// Also run the buffered methods with buffers of 1 KiB to 1 MiB (Figure 5).
    #[arg(long)]
    buffer_sweep: bool,
    /// Library versions: paper (commons-io 2.8.0, Guava 23.0) or current.
    #[arg(long, default_value = "paper")]
    libs: Libs,
    /// Output directory for results.csv, results.json, summary.md and plots
    /// (default: results/iobench).
    #[arg(short = 'o', long, alias = "out")]
    output: Option<PathBuf>,
    /// Continue the interrupted study in DIR: the runs in its results.csv are kept and not
    /// run again. Give the options it was started with; a different plan is refused.
    #[arg(long, value_name = "DIR", conflicts_with = "from")]
    resume: Option<PathBuf>,
    /// Where the generated input files live (reused between studies).
    #[arg(long, default_value = "results/iobench-data")]
    data_dir: PathBuf,
    /// The Maven module (default: iobench/ of this checkout).
    #[arg(long)]
    iobench_dir: Option<PathBuf>,
    /// The java launcher.
    #[arg(long, default_value = "java")]
    java: String,
    /// Heap of each benchmark JVM (-Xms = -Xmx).
    #[arg(long, default_value = "2g")]
    heap: String,
    /// Do not run: re-analyse earlier results.csv files (several are merged) into -o.
    #[arg(long, value_delimiter = ',')]
    from: Option<Vec<PathBuf>>,
    #[command(flatten)]
    source: SourceArgs,
}

fn reanalyse(a: &IobenchArgs, files: &[PathBuf]) -> Result<ExitCode> {
    let out_dir = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT));
    let mut rows = vec![];
    for f in files {
        rows.extend(wattio_iobench::read_results_csv(f)?);
    }
    anyhow::ensure!(
        !rows.is_empty(),
        "no runs in {}: give results.csv files written by wattio iobench",
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let runs = rows.iter().map(|r| r.run).max().unwrap_or(0);
    let meta = Meta {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: Machine::read(&SysRoot::from_env()).to_string(),
        java: "see the original runs".into(),
        energy: wattio_iobench::provenance_of(&rows),
        cache: {
            let mut c: Vec<String> = rows.iter().map(|r| r.cache.clone()).collect();
            c.sort();
            c.dedup();
            c.join(", ")
        },
        libs: {
            let mut c: Vec<&str> = rows.iter().map(|r| r.libs.as_str()).collect();
            c.sort();
            c.dedup();
            c.join(", ")
        },
        jvm_args: "see the original runs".into(),
        runs,
        started_unix_s: wattio_meter::unix_now(),
        notes: vec![format!(
            "re-analysed from {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )],
    };
    let out = analyse(meta, rows);
    let w = write_outputs(&out, &out_dir)?;
    print!("{}", console_report(&out));
    println!(
        "\nwrote {} and {} plot(s) in {}",
        w.summary.display(),
        w.plots.len(),
        out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn iobench(a: IobenchArgs) -> Result<ExitCode> {
    if let Some(files) = &a.from {
        return reanalyse(&a, files);
    }
    let meter = Arc::new(a.source.open_meter()?);
    let meter_cfg = a.source.config()?;
    let mut ops = a.ops.clone();
    if a.apps {
        ops.extend(Op::APPS.iter().filter(|o| !a.ops.contains(o)));
    }
    let (out_dir, resume) = study_ui::output_dir(a.output.as_deref(), a.resume.as_deref(), || {
        PathBuf::from(DEFAULT_OUT)
    })?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let cfg = StudyConfig {
        sizes: a.sizes.clone(),
        ops,
        methods: a.methods.clone(),
        runs: a.runs,
        cache: a.cache,
        buffer_sweep: a.buffer_sweep,
        libs: a.libs,
        out_dir: out_dir.clone(),
        data_dir: a.data_dir.clone(),
        module_dir: a.iobench_dir.clone(),
        java: a.java.clone(),
        root: meter_cfg.root.clone(),
        heap: a.heap.clone(),
        resume,
        command: command.clone(),
    };
    let cancel = study_ui::cancel_on_signals()?;
    let started = wattio_meter::unix_now();
    let bar = StudyBar::new();
    let end = study::run(
        &cfg,
        meter,
        meter_cfg.model,
        &bar.message_sink("wattio iobench"),
        &bar.progress_sink(),
        &cancel,
    );
    bar.finish();
    let run = match end {
        Ok(StudyEnd::Complete(run)) => run,
        Ok(StudyEnd::Interrupted { kept, total }) => {
            return Ok(study_ui::interrupted(
                "wattio iobench",
                kept,
                total,
                &out_dir,
                "results.csv",
            ))
        }
        Err(e) => {
            let kept = out_dir.join("results.csv");
            if std::fs::metadata(&kept).is_ok_and(|m| m.len() > 0) {
                return Err(anyhow::Error::new(e).context(format!(
                    "the runs so far are in {}; continue with: {}",
                    kept.display(),
                    study_ui::resume_command(&out_dir)
                )));
            }
            return Err(e.into());
        }
    };
    let started_by = read_manifest(&out_dir)
        .ok()
        .flatten()
        .map_or(command.clone(), |m| m.command);
    let mut notes = run.notes.clone();
    if started_by != command {
        notes.push(format!("interrupted, then resumed by `{command}`"));
    }
    let meta = Meta {
        command: started_by,
        machine: Machine::read(&SysRoot::from_env()).to_string(),
        java: wattio_iobench::java_version(&a.java),
        energy: wattio_iobench::provenance_of(&run.records),
        cache: a.cache.as_str().into(),
        libs: a.libs.as_str().into(),
        jvm_args: run.jvm_args.clone(),
        runs: a.runs,
        started_unix_s: started,
        notes,
    };
    let out = analyse(meta, run.records);
    let w = write_outputs(&out, &out_dir)?;
    print!("{}", console_report(&out));
    println!(
        "\nwrote {}, {}, {} and {} plot(s) in {}",
        w.csv.file_name().unwrap_or_default().to_string_lossy(),
        w.json.file_name().unwrap_or_default().to_string_lossy(),
        w.summary.file_name().unwrap_or_default().to_string_lossy(),
        w.plots.len(),
        out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
