//! `wattio calibrate`: fit a model's curve against RAPL and write a model file.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wattio_energy::{SourceChoice, SysRoot};
use wattio_meter::{calibrate as run_calibration, CalibrateConfig, CalibrateError, DriverChoice};
use wattio_units::{format_duration, parse_duration_or_seconds};

#[derive(Args)]
pub struct CalibrateArgs {
    /// RAPL mechanism to measure with: auto (perf, then powercap, then msr), perf, powercap or msr.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<SourceChoice>())]
    source: SourceChoice,
    /// Load levels (fraction of every CPU), comma-separated; at least three distinct.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.25,0.5,0.75,1")]
    levels: Vec<f64>,
    /// How long each level is measured, e.g. 10s or 1m (a plain number is seconds). `--seconds`
    /// is its old name.
    #[arg(long, alias = "seconds", default_value = "10s", value_parser = parse_duration_or_seconds)]
    duration: Duration,
    /// How long each level runs before it is measured, so power settles, e.g. 2s (a plain
    /// number is seconds).
    #[arg(long, default_value = "2s", value_parser = parse_duration_or_seconds)]
    settle: Duration,
    /// What loads the CPUs: auto (stress-ng when installed, else spin), spin or stress-ng.
    #[arg(long, value_enum, default_value_t = DriverChoice::Auto)]
    driver: DriverChoice,
    /// Where to write the model file (JSON), for `--model FILE`.
    #[arg(short = 'o', long)]
    output: PathBuf,
}

pub fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    let root = SysRoot::from_env();
    let n_cpus = wattio_energy::online_cpu_count(&root)?;
    let mut driver = a.driver.open(n_cpus)?;
    if a.output.is_dir() {
        bail!(
            "{} is a directory: give -o a file name, e.g. -o model.json",
            a.output.display()
        );
    }
    let cfg = CalibrateConfig {
        root,
        choice: a.source,
        levels: a.levels.clone(),
        duration: a.duration,
        settle: a.settle,
    };
    // Refuse before announcing anything: bad levels, or no RAPL counter to calibrate against.
    cfg.check()?;
    drop(wattio_meter::open_rapl(&cfg.root, a.source)?);
    // Ctrl-C or SIGTERM stops the level under way (a stress-ng driver is stopped too); no
    // model file is written, since a curve needs every level. Installed before the first line
    // is printed, so a signal after it is always handled.
    let cancel = crate::study_ui::cancel_on_signals()?;
    eprintln!(
        "wattio calibrate: {} levels × {} (+{} settle) with {} on {n_cpus} CPUs",
        a.levels.len(),
        format_duration(a.duration),
        format_duration(a.settle),
        driver.name()
    );
    let levels_measured = wattio_progress::Sink::new(|l: &wattio_energy::LevelResult| {
        eprintln!(
            "  load {:>5.1} %: utilisation {:>5.1} %, {:.3} W per vCPU (package, measured)",
            l.load * 100.0,
            l.utilisation * 100.0,
            l.watts_per_vcpu
        );
    });
    let file = match run_calibration(&cfg, driver.as_mut(), &levels_measured, &cancel) {
        Err(e @ CalibrateError::Cancelled { .. }) => {
            eprintln!(
                "wattio calibrate: {e}; {} was not written: run the command again",
                a.output.display()
            );
            return Ok(crate::study_ui::interrupted_exit_code());
        }
        r => r?,
    };
    crate::output_file::replace_file(&a.output, file.to_json().as_bytes())?;
    println!(
        "calibrated against {} on '{}' ({} vCPUs)",
        file.measured_with, file.cpu, file.vcpus
    );
    println!("curve (utilisation → W per vCPU):");
    for (u, w) in &file.points {
        println!("  {:>5.1} %  {w:.3} W", u * 100.0);
    }
    if let Some(fit) = &file.fit {
        for l in &fit.levels {
            if let (Some(p), Some(e)) = (l.holdout_predicted_w, l.holdout_error_pct) {
                println!(
                    "  held out: utilisation {:.1} %: measured {:.3} W, curve without it {p:.3} W ({e:+.1} %)",
                    l.utilisation * 100.0,
                    l.watts_per_vcpu
                );
            }
        }
        match (fit.holdout_mean_abs_error_pct, fit.holdout_max_abs_error_pct) {
            (Some(mean), Some(max)) => println!(
                "held-out error: mean |{mean:.1}| %, max |{max:.1}| % (levels predicted by the curve fitted without them)"
            ),
            _ => println!("held-out error: none (no interior level to hold out)"),
        }
    }
    println!(
        "wrote {}; use it on machines of this type: wattio record --model {}",
        a.output.display(),
        a.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
