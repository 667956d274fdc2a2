//! `wattio cache ...`: replay cache traces against device power models (the Ghosts evaluation).

use crate::output_file::replace_file;
use crate::OnOff;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use wattio_power::{GhostPolicy, Profile};
use wattio_sim::{
    cached_objects, email_trace, load_trace_file, replay_all, trace_csv, web_trace, GhostSelection,
    RunResult, SweepRow, Trace, TraceOp, UcbSelect,
};
use wattio_units::{parse_duration_bare, parse_duration_or_seconds, BareUnit};

/// `wattio cache`.
#[derive(Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    cmd: CacheCmd,
}

#[derive(Subcommand)]
enum CacheCmd {
    /// Replay a workload under every strategy at one knob: mean response time and total energy.
    Replay(ReplayArgs),
    /// Knobs 0, 50, 70, 90, 95, 99, 100 with and without ghost hints: tables, CSV and SVG plots.
    Sweep(SweepArgs),
    /// List the built-in device profiles, or print one as TOML (a template for your own).
    Profiles {
        /// Profile to print.
        name: Option<String>,
    },
    /// Print a generated workload as a CSV trace (time_s,object,size_bytes,op,cached).
    Trace {
        /// email, web or web-full.
        #[arg(long, default_value = "email")]
        workload: String,
        /// Generator seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Args)]
struct ReplayArgs {
    /// email, web, web-full (Figure 12: every object cached), or a trace file (CSV or UCB binary).
    #[arg(long)]
    workload: String,
    /// Built-in profile name (see `wattio cache profiles`) or a TOML file.
    #[arg(long, default_value = "paper-2004")]
    profile: String,
    /// Performance/energy knob, 0 (energy) to 100 (performance).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    knob: u8,
    /// Only with (on) or only without (off) ghost hints; default both.
    #[arg(long, value_enum)]
    ghost_hints: Option<OnOff>,
    /// Device-side ghost-hint rule when ghost hints are on: paper or predictive (ours).
    #[arg(long, default_value = "paper")]
    ghost_policy: String,
    /// Seed of the generator (and of the cached half of a UCB trace).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timeout of the fixed-timeout spin-down baseline, e.g. 30s or 2m (a plain number is
    /// seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration_or_seconds)]
    fixed_timeout: Duration,
    /// UCB Home IP traces: replay this client (dotted IPv4); default the busiest client.
    #[arg(long)]
    ucb_client: Option<std::net::Ipv4Addr>,
    /// UCB Home IP traces: how much of the client's trace to replay, from its first request,
    /// e.g. 20m or 1h30m (a plain number is seconds).
    #[arg(long, default_value = "20m", value_parser = parse_duration_or_seconds)]
    ucb_span: Duration,
    /// The old spelling of --ucb-span, where a plain number is minutes.
    #[arg(long, hide = true, conflicts_with = "ucb_span", value_parser = |s: &str| parse_duration_bare(s, BareUnit::Minutes))]
    minutes: Option<Duration>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SweepArgs {
    /// Comma-separated workloads: email, web, web-full, or trace files.
    #[arg(long, default_value = "email,web,web-full")]
    workload: String,
    /// Built-in profile name or a TOML file.
    #[arg(long, default_value = "paper-2004")]
    profile: String,
    /// Number of generator seeds to average (1..=N).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Timeout of the fixed-timeout spin-down baseline, e.g. 30s or 2m (a plain number is
    /// seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration_or_seconds)]
    fixed_timeout: Duration,
    /// Output directory for CSV and SVG files.
    #[arg(short = 'o', long, alias = "out", default_value = "results/cache")]
    output: PathBuf,
}

/// Run `wattio cache`.
pub fn cache(a: CacheArgs) -> Result<ExitCode> {
    match a.cmd {
        CacheCmd::Replay(r) => replay(r),
        CacheCmd::Sweep(s) => sweep(s),
        CacheCmd::Profiles { name } => profiles(name),
        CacheCmd::Trace { workload, seed } => {
            let t = load_workload(&workload, seed)?;
            print!("{}", trace_csv(&t.requests));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load_profile(p: &str) -> Result<Profile> {
    Ok(Profile::resolve(p)?)
}

fn load_workload(w: &str, seed: u64) -> Result<Trace> {
    load_workload_with(w, seed, UcbSelect::default())
}

fn load_workload_with(w: &str, seed: u64, ucb: UcbSelect) -> Result<Trace> {
    let t = match w {
        "email" => email_trace(seed),
        "web" => web_trace(seed, false),
        "web-full" => web_trace(seed, true),
        f => {
            let p = Path::new(f);
            if !p.exists() {
                bail!("workload {f:?} is neither email, web, web-full nor an existing trace file");
            }
            load_trace_file(p, seed, ucb)?
        }
    };
    if !t.requests.iter().any(|r| r.op == TraceOp::Read) {
        bail!(
            "trace {:?} has no read events to replay (check the file or the UCB client filter)",
            t.name
        );
    }
    Ok(t)
}

fn print_table(rows: &[RunResult], profile: &Profile, trace: &Trace) {
    let (cached, objects) = cached_objects(trace);
    println!(
        "workload {} ({} events, {} objects, {} cached at start), profile {}, knob {}",
        trace.name,
        trace.requests.len(),
        objects,
        cached,
        profile.name,
        rows.first().map(|r| r.knob).unwrap_or(0)
    );
    println!("energy: simulated, estimated from the device profile (not measured)");
    println!(
        "{:<28} {:>10} {:>12} {:>11} {:>9} {:>8} {:>7}",
        "strategy", "ghost", "response_s", "energy_J", "time_s", "spinups", "hints"
    );
    for r in rows {
        println!(
            "{:<28} {:>10} {:>12.3} {:>11.1} {:>9.1} {:>8} {:>7}",
            r.strategy,
            r.ghost_hints,
            r.mean_response_s,
            r.energy_j,
            r.duration_s,
            r.disk_spinups,
            r.ghost_hints_issued
        );
    }
}

fn replay(a: ReplayArgs) -> Result<ExitCode> {
    let profile = load_profile(&a.profile)?;
    let span = a.minutes.unwrap_or(a.ucb_span);
    if span.is_zero() {
        bail!("--ucb-span must be more than 0, e.g. 20m");
    }
    let ucb = UcbSelect {
        client: a.ucb_client.map(u32::from),
        span,
    };
    let trace = load_workload_with(&a.workload, a.seed, ucb)?;
    let policy: GhostPolicy = a.ghost_policy.parse().map_err(anyhow::Error::msg)?;
    let sel = match a.ghost_hints {
        None => GhostSelection::All,
        Some(OnOff::On) => GhostSelection::On(policy),
        Some(OnOff::Off) => GhostSelection::Off,
    };
    let rows = replay_all(&profile, &trace, a.knob, sel, a.fixed_timeout);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows, &profile, &trace);
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep(a: SweepArgs) -> Result<ExitCode> {
    let profile = load_profile(&a.profile)?;
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    std::fs::create_dir_all(&a.output).with_context(|| {
        format!(
            "cannot create output directory {} (check permissions)",
            a.output.display()
        )
    })?;
    let workloads: Vec<String> = a
        .workload
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    // Fail early on a bad workload, before minutes of work.
    for w in &workloads {
        load_workload(w, 1)?;
    }
    let seeds: Vec<u64> = (1..=a.seeds).collect();
    let bar = indicatif::ProgressBar::new(
        (workloads.len() * seeds.len() * wattio_sim::SWEEP_KNOBS.len()) as u64,
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} knob runs {msg}")
            .expect("static template"),
    );
    let steps = {
        let bar = bar.clone();
        wattio_progress::Sink::new(move |_: &wattio_progress::StudyProgress| bar.inc(1))
    };
    let mut all: Vec<SweepRow> = Vec::new();
    for w in &workloads {
        bar.set_message(w.clone());
        let make = |seed: u64| load_workload(w, seed).expect("checked above");
        let name = make(1).name;
        let mut rows = wattio_sim::sweep(&profile, &name, &make, &seeds, a.fixed_timeout, &steps);
        all.append(&mut rows);
        let (rt, en) = wattio_sim::sweep_charts(&all, &name, &profile.name);
        let stem = sanitize(&name);
        replace_file(
            &a.output.join(format!("{stem}-response.svg")),
            rt.as_bytes(),
        )?;
        replace_file(&a.output.join(format!("{stem}-energy.svg")), en.as_bytes())?;
    }
    bar.finish_and_clear();
    let csv_path = a.output.join("sweep.csv");
    replace_file(&csv_path, wattio_sim::sweep_csv(&all).as_bytes())?;
    println!(
        "profile {}; energy simulated (estimated from the profile); mean of {} seed(s)",
        profile.name,
        seeds.len()
    );
    for w in all
        .iter()
        .map(|r| r.workload.clone())
        .collect::<std::collections::BTreeSet<_>>()
    {
        println!("\n== {w}");
        println!(
            "{:<28} {:>5} {:>11} {:>12} {:>10} {:>8}",
            "strategy", "knob", "ghost", "response_s", "energy_J", "spinups"
        );
        for r in all.iter().filter(|r| r.workload == w) {
            println!(
                "{:<28} {:>5} {:>11} {:>12.3} {:>10.1} {:>8.1}",
                r.strategy, r.knob, r.ghost_hints, r.mean_response_s, r.energy_j, r.disk_spinups
            );
        }
    }
    println!(
        "\nwrote {} and {}/*-response.svg, *-energy.svg",
        csv_path.display(),
        a.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn profiles(name: Option<String>) -> Result<ExitCode> {
    match name {
        Some(n) => match Profile::builtin_text(&n) {
            Some(t) => print!("{t}"),
            None => {
                let p = load_profile(&n)?;
                println!("{} — {} (valid)", p.name, p.description);
            }
        },
        None => {
            for n in Profile::builtin_names() {
                let p = Profile::builtin(n)?;
                println!("{:<18} base {:.2} W  {}", n, p.base_power_w, p.description);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
