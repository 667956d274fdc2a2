//! `wattio overhead`: the RAPL paper's measurement-overhead protocol (section V) as a
//! command. The plan, schedule, runner and analysis live in `wattio-overhead`.

use crate::study_ui::{self, StudyBar};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wattio_energy::{discover, ModelParams, SysRoot};
use wattio_overhead::{
    default_workloads, scratch_dir, write_summary, OverheadError, OverheadPlan, OverheadRunner,
    ProcessOverheadExecutor, RunOrder, StudyCommand, Workload,
};
use wattio_progress::Cancel;
use wattio_runner::{read_manifest, StudyEnd};
use wattio_units::parse_duration_or_seconds;

#[derive(Args)]
pub struct OverheadArgs {
    /// Small run (~1-2 min): 1 round, workloads at 1/3 size, 1 s idle runs. Too few runs
    /// for Holm-corrected significance; for trying the command, not for conclusions.
    #[arg(long)]
    quick: bool,
    /// Mechanisms to sample with: "auto" (every usable one) or a comma list (model,perf,...).
    #[arg(long, default_value = "auto")]
    mechanisms: String,
    /// Sampling frequencies in Hz (the "off" baseline is always run).
    #[arg(long, value_delimiter = ',', default_value = "0.1,1,10,100,1000")]
    freqs: Vec<f64>,
    /// Consecutive runs of a combination per visit (the paper: 3).
    #[arg(long)]
    reps: Option<usize>,
    /// How many times the whole round-robin cycle is repeated.
    #[arg(long)]
    rounds: Option<usize>,
    /// Length of each idle run, e.g. 3s (a plain number is seconds; 0 = skip the idle study)
    /// [default: 3s, 1s with --quick]. `--idle-s` is its old name.
    #[arg(long, alias = "idle-s", value_parser = parse_duration_or_seconds)]
    idle: Option<Duration>,
    /// Multiplies the stress-ng bogo-op counts (1.0 ≈ 1-2 s per run on a 2-vCPU VM).
    #[arg(long)]
    scale: Option<f64>,
    /// Run order within each round: shuffled (a new order every round, from --seed) or fixed
    /// (the paper's order: off first, then rising frequency).
    #[arg(long, value_enum, default_value_t = RunOrder::Shuffled)]
    order: RunOrder,
    /// Seed of the shuffled order (the run order is reproducible).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time between starting the recorder and starting the workload, e.g. 200ms (a plain number
    /// is seconds).
    #[arg(long, default_value = "200ms", value_parser = parse_duration_or_seconds)]
    settle: Duration,
    /// Output directory (default: results/overhead-<unix time>).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Continue the interrupted study in DIR: the runs it kept are not run again. Give the
    /// options it was started with; a different plan is refused.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Your own workload instead of the stress-ng ones, after `--` (fixed work, exit 0).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

pub fn overhead(a: OverheadArgs) -> Result<ExitCode> {
    let root = SysRoot::from_env();
    let model = ModelParams::default();
    let mut plan = plan_of(&a, &root, &model)?;
    let (out_dir, resume) = study_ui::output_dir(a.output.as_deref(), a.resume.as_deref(), || {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("results/overhead-{t}"))
    })?;
    let exe =
        std::env::current_exe().context("cannot find the wattio executable to run as recorder")?;
    let cancel = study_ui::cancel_on_signals()?;
    let mut exec = ProcessOverheadExecutor::new(exe, scratch_dir(&out_dir), root.clone())
        .with_context(|| format!("preparing {}", out_dir.display()))?;
    if !preflight(&mut exec, &mut plan, a.mechanisms != "auto", &cancel)? {
        return Ok(study_ui::interrupted_exit_code());
    }

    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let runner = OverheadRunner {
        plan: &plan,
        out_dir: out_dir.clone(),
        model: model.clone(),
        command: command.clone(),
    };
    runner.check(resume)?;
    // Warm-up: one untimed run of each workload (page cache, CPU frequency), whose times
    // give the estimate.
    let Some(warm) = runner.warm_up(&mut exec, &cancel)? else {
        return Ok(study_ui::interrupted_exit_code());
    };
    eprintln!(
        "wattio overhead: {} workload(s) × (off + {} mechanism(s) × {} freq) {}, {} rounds × {} reps = {} runs, about {} from the warm-up times; output {}",
        plan.workloads.len(),
        plan.mechanisms.len(),
        plan.freqs.len(),
        if plan.idle.is_zero() { "" } else { "+ idle" },
        plan.rounds,
        plan.reps_per_visit,
        plan.runs().len(),
        runner
            .estimate(&warm)
            .map_or("?".into(), wattio_units::format_duration_rounded),
        out_dir.display()
    );
    let bar = StudyBar::new();
    let end = runner.run(&mut exec, resume, &warm, &bar.progress_sink(), &cancel);
    bar.finish();
    drop(exec);
    let runs = match end {
        Ok(StudyEnd::Complete(runs)) => runs,
        Ok(StudyEnd::Interrupted { kept, total }) => {
            return Ok(study_ui::interrupted(
                "wattio overhead",
                kept,
                total,
                &out_dir,
                "runs.csv, idle.csv",
            ))
        }
        Err(e @ (OverheadError::Study(_) | OverheadError::NotThisPlan { .. })) => {
            return Err(e.into())
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "overhead run stopped; the runs so far are in {}, continue with: {}",
                out_dir.display(),
                study_ui::resume_command(&out_dir)
            )))
        }
    };
    let started_by = read_manifest(&out_dir)
        .ok()
        .flatten()
        .map_or(command.clone(), |m| m.command);
    let who = StudyCommand {
        command: &command,
        started_by: &started_by,
    };
    let md = write_summary(&out_dir, &plan, &runs, &model, &who, &root)
        .with_context(|| format!("writing the study's summary into {}", out_dir.display()))?;
    let report = out_dir.join("report.html");
    wattio_report::write_report(&out_dir, &report, "wattio overhead")?;
    println!("{md}");
    println!(
        "wrote {}/runs.csv, tests.csv, summary.md, report.html",
        out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The study the options ask for, each option checked.
fn plan_of(a: &OverheadArgs, root: &SysRoot, model: &ModelParams) -> Result<OverheadPlan> {
    let reps = a.reps.unwrap_or(3);
    let rounds = a.rounds.unwrap_or(if a.quick { 1 } else { 2 });
    let idle = a
        .idle
        .unwrap_or(Duration::from_secs(if a.quick { 1 } else { 3 }));
    let scale = a.scale.unwrap_or(if a.quick { 1.0 / 3.0 } else { 1.0 });
    if reps == 0 || rounds == 0 {
        bail!("--reps and --rounds must be at least 1");
    }
    if !(scale.is_finite() && scale > 0.0) {
        bail!("--scale must be more than 0 (got {scale})");
    }
    if a.freqs.is_empty()
        || a.freqs
            .iter()
            .any(|f| !(f.is_finite() && (0.001..=1000.0).contains(f)))
    {
        bail!("--freqs must be a comma list of frequencies between 0.001 and 1000 Hz, e.g. 0.1,1,10,100,1000");
    }
    let mechanisms = mechanisms_of(&a.mechanisms, root, model)?;
    Ok(OverheadPlan {
        workloads: workloads_of(a, scale)?,
        mechanisms,
        freqs: a.freqs.clone(),
        reps_per_visit: reps,
        rounds,
        idle,
        settle: a.settle,
        shuffle_seed: a.order.shuffle_seed(a.seed),
    })
}

/// `--mechanisms`: every usable one for "auto", else the list given, each a known name.
fn mechanisms_of(list: &str, root: &SysRoot, model: &ModelParams) -> Result<Vec<String>> {
    let mechanisms: Vec<String> = if list == "auto" {
        discover(root, model.clone())
            .mechanisms
            .iter()
            .filter(|m| m.usable)
            .map(|m| m.mechanism.to_string())
            .collect()
    } else {
        let v: Vec<String> = list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        for m in &v {
            m.parse::<wattio_energy::Mechanism>()
                .map_err(|e| anyhow::anyhow!("--mechanisms: {e}"))?;
        }
        v
    };
    if mechanisms.is_empty() {
        bail!("no usable energy mechanism (run `wattio probe` to see why)");
    }
    Ok(mechanisms)
}

/// The user's command after `--`, else the stress-ng workloads at `scale`.
fn workloads_of(a: &OverheadArgs, scale: f64) -> Result<Vec<Workload>> {
    if !a.command.is_empty() {
        let argv: Vec<String> = a
            .command
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        return Ok(vec![Workload {
            name: argv[0].rsplit('/').next().unwrap_or("cmd").to_string(),
            argv,
        }]);
    }
    if !on_path("stress-ng") {
        bail!("stress-ng not found on PATH: install it (`make deps` or `apt-get install stress-ng`) or give your own workload after `--`");
    }
    // How many stress-ng workers to start: the CPUs this process may run on, not the machine's
    // online count that shares and the model use (a worker on a CPU it cannot use only waits).
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Ok(default_workloads(workers, scale))
}

/// A mechanism `probe` calls usable may still fail to record (e.g. perf counters that never
/// advance in a VM): find out before spending minutes. One that cannot record is an error when
/// the user named it (`explicit`), else left out with a warning. `false`: interrupted.
fn preflight(
    exec: &mut ProcessOverheadExecutor,
    plan: &mut OverheadPlan,
    explicit: bool,
    cancel: &Cancel,
) -> Result<bool> {
    let max_f = plan.freqs.iter().cloned().fold(0.0, f64::max);
    let mut failed = Vec::new();
    for m in &plan.mechanisms {
        match exec.preflight(m, max_f, cancel) {
            Ok(()) => {}
            Err(OverheadError::Cancelled) => return Ok(false),
            Err(e) if explicit => bail!("mechanism {m} cannot record: {e}"),
            Err(e) => {
                eprintln!("wattio overhead: leaving out {m}: {e}");
                failed.push(m.clone());
            }
        }
    }
    plan.mechanisms.retain(|m| !failed.contains(m));
    if plan.mechanisms.is_empty() {
        bail!("no mechanism could record (see above); run `wattio probe`");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use std::ffi::OsString;
    use std::path::Path;
    use wattio_overhead::RecordCommand;

    /// The runner builds `wattio record`'s command line itself; this parser must accept it,
    /// for every mechanism `--mechanisms` lets through (their names are `--source` values).
    #[test]
    fn the_recorder_command_line_is_one_wattio_record_accepts() {
        for source in ["model", "perf", "powercap", "msr", "ebpf"] {
            let rc = RecordCommand::new(source, 0.1, Path::new("/tmp/recorder.csv"));
            let mut argv = vec![OsString::from("wattio")];
            argv.extend(rc.args());
            let cli = crate::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{source}: {e}"));
            assert!(matches!(cli.command, crate::Command::Record(_)));
        }
    }
}
