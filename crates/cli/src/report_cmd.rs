//! `wattio report DIR [-o FILE.html]`: one self-contained HTML page from result files;
//! `wattio report bench-transfer RUN_DIR [-o DIR]`: the tables and charts of a
//! `make bench-transfer` run.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReportArgs {
    #[command(subcommand)]
    kind: Option<ReportKind>,
    /// Result directory (searched recursively) or a single result file.
    #[arg(value_name = "DIR", required = true)]
    input: Option<PathBuf>,
    /// Output HTML file (default: DIR/report.html, or FILE.html next to a file).
    #[arg(short = 'o', long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Page title.
    #[arg(long, default_value = "wattio report")]
    title: String,
}

#[derive(Subcommand)]
enum ReportKind {
    /// Markdown tables (report.md), every run (results.csv) and SVG charts of a
    /// `make bench-transfer` run directory (RUN_DIR/runs/*.meta.json and their stats).
    BenchTransfer(BenchTransferArgs),
}

#[derive(Args)]
struct BenchTransferArgs {
    /// The directory `make bench-transfer` wrote (results/transfer/run-…).
    #[arg(value_name = "RUN_DIR")]
    run_dir: PathBuf,
    /// Where the charts and tables go (default: RUN_DIR).
    #[arg(short = 'o', long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Chart file names: PREFIX-throughput.svg, PREFIX-energy.svg, PREFIX-cpu.svg, PREFIX-eett.svg.
    #[arg(long, default_value = "transfer")]
    prefix: String,
    /// Write only the charts (e.g. into docs/results/transfer), not report.md and results.csv.
    #[arg(long)]
    charts_only: bool,
}

fn bench_transfer(a: BenchTransferArgs) -> Result<ExitCode> {
    let out_dir = a.output.unwrap_or_else(|| a.run_dir.clone());
    let done = wattio_report::write_bench_transfer(&a.run_dir, &out_dir, &a.prefix, a.charts_only)?;
    if !a.charts_only {
        print!("{}", done.markdown);
    }
    for f in &done.files {
        println!("wrote {}", f.display());
    }
    println!("({} runs)", done.runs);
    Ok(ExitCode::SUCCESS)
}

pub fn report(a: ReportArgs) -> Result<ExitCode> {
    if let Some(ReportKind::BenchTransfer(b)) = a.kind {
        return bench_transfer(b);
    }
    let Some(input) = a.input else {
        bail!("give a wattio result directory or file: wattio report DIR");
    };
    if !input.exists() {
        bail!(
            "{} does not exist: give a wattio result directory or file",
            input.display()
        );
    }
    let output = a.output.clone().unwrap_or_else(|| {
        if input.is_dir() {
            input.join("report.html")
        } else {
            input.with_extension("html")
        }
    });
    let scan = wattio_report::scan_results(&input)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", input.display()))?;
    if scan.loaded.is_empty() {
        for s in &scan.skipped {
            eprintln!("wattio report: skipped {}: {}", s.path.display(), s.reason);
        }
        bail!(
            "no wattio result files in {} (expected record CSV/JSONL, measure --json, iobench, cache, transfer or overhead results)",
            input.display()
        );
    }
    let s = wattio_report::write_report(&input, &output, &a.title)?;
    for (p, why) in s.skipped.iter().take(10) {
        eprintln!("wattio report: skipped {p}: {why}");
    }
    if s.skipped.len() > 10 {
        eprintln!(
            "wattio report: ... and {} more skipped (listed in the page)",
            s.skipped.len() - 10
        );
    }
    println!(
        "wrote {} ({} result file(s), {} skipped, {} other file(s) not read, {} KiB)",
        output.display(),
        s.datasets,
        s.skipped.len(),
        s.ignored,
        s.bytes.div_ceil(1024)
    );
    Ok(ExitCode::SUCCESS)
}
