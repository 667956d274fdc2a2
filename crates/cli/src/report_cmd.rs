//! `wattio report DIR [-o FILE.html]`: one self-contained HTML page from result files.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
    /// Result directory (searched recursively) or a single result file.
    #[arg(value_name = "DIR")]
    input: PathBuf,
    /// Output HTML file (default: DIR/report.html, or FILE.html next to a file).
    #[arg(short = 'o', long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Page title.
    #[arg(long, default_value = "wattio report")]
    title: String,
}

pub fn report(a: ReportArgs) -> Result<ExitCode> {
    if !a.input.exists() {
        bail!(
            "{} does not exist: give a wattio result directory or file",
            a.input.display()
        );
    }
    let output = a.output.clone().unwrap_or_else(|| {
        if a.input.is_dir() {
            a.input.join("report.html")
        } else {
            a.input.with_extension("html")
        }
    });
    let scan = wattio_report::data::scan(&a.input)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", a.input.display()))?;
    if scan.loaded.is_empty() {
        for s in &scan.skipped {
            eprintln!("wattio report: skipped {}: {}", s.path.display(), s.reason);
        }
        bail!(
            "no wattio result files in {} (expected record CSV/JSONL, measure --json, iobench, cache, transfer or overhead results)",
            a.input.display()
        );
    }
    let s = wattio_report::write_report(&a.input, &output, &a.title)?;
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
