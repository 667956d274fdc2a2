//! `wattio power`: the Ghosts power manager on this machine's devices, through the kernel's own
//! knobs (`status`, `run`, `restore`). The logic is in `wattio_devices::manage`.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wattio_devices::manage::{
    power_status, restore_pending, run_manager, ManageOptions, PowerDecision, PowerEvent,
    PowerStatus, RestoreOutcome,
};
use wattio_energy::SysRoot;
use wattio_power::GhostPolicy;
use wattio_units::parse_duration_or_seconds;

use crate::say;
use crate::study_ui;

/// `wattio power`.
#[derive(Args)]
pub struct PowerArgs {
    #[command(subcommand)]
    command: PowerCommand,
}

#[derive(Subcommand)]
enum PowerCommand {
    /// Each storage device's kernel power knobs and values, runtime-PM state and residency,
    /// and whether a restore record is pending.
    Status(StateDirArg),
    /// Manage the devices with one knob, STPM and ghost hints (a dry run unless --apply).
    Run(RunArgs),
    /// Apply a restore record left by a killed `power run` and remove it.
    Restore(StateDirArg),
}

#[derive(Args)]
struct StateDirArg {
    /// Where the restore record lives (under WATTIO_ROOT when it is set).
    #[arg(long, default_value = "/var/lib/wattio")]
    state_dir: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// Write the knobs (needs root); without it, each decision is only printed.
    #[arg(long, conflicts_with = "dry_run")]
    apply: bool,
    /// Only print each decision, what it would write and what it trades (the default; says
    /// so explicitly in scripts).
    #[arg(long)]
    dry_run: bool,
    /// Manage the device holding / too.
    #[arg(long)]
    allow_root_device: bool,
    /// Only this block device (kernel name, e.g. sda); repeatable. Default: every device.
    #[arg(long = "device", value_name = "NAME")]
    devices: Vec<String>,
    /// The Ghosts knob: 0 saves the most energy, 100 never gives up performance.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    knob: u8,
    /// The platform's base power, W (STPM charges it for the time a wake-up delays I/O).
    #[arg(long, default_value_t = 10.0)]
    base_power: f64,
    /// Idle time before a device without power figures goes to its generic low level.
    #[arg(long, default_value = "10s", value_parser = parse_duration_or_seconds)]
    idle_timeout: Duration,
    /// How often each device's I/O counters are read.
    #[arg(long, default_value = "1s", value_parser = parse_duration_or_seconds)]
    interval: Duration,
    /// Stop after this long (else at Ctrl-C or SIGTERM).
    #[arg(long, value_parser = parse_duration_or_seconds)]
    duration: Option<Duration>,
    /// Ghost-hint rule: paper or predictive.
    #[arg(long, default_value = "paper")]
    ghost_policy: GhostPolicy,
    /// Take ghost hints on this Unix datagram socket, one a line:
    /// `DEVICE DELTA_T_S DELTA_E_J [fg|bg] [BYTES]`.
    #[arg(long, value_name = "PATH")]
    hints: Option<PathBuf>,
    #[command(flatten)]
    state: StateDirArg,
}

/// Runs `wattio power`.
pub fn power(a: PowerArgs) -> Result<ExitCode> {
    let root = SysRoot::from_env();
    match a.command {
        PowerCommand::Status(s) => {
            print_status(&power_status(&root, &s.state_dir)?);
            Ok(ExitCode::SUCCESS)
        }
        PowerCommand::Restore(s) => {
            match restore_pending(&root, &s.state_dir)? {
                Some(outcome) => {
                    print_restored("restore record applied", &outcome);
                    if !outcome.failed.is_empty() {
                        bail!("some knobs could not be restored; the record is kept");
                    }
                }
                None => say::note("no restore record pending: nothing to restore"),
            }
            Ok(ExitCode::SUCCESS)
        }
        PowerCommand::Run(r) => run(&root, r),
    }
}

fn run(root: &SysRoot, r: RunArgs) -> Result<ExitCode> {
    if r.apply && !rustix::process::geteuid().is_root() {
        bail!("power run --apply writes kernel knobs and needs root: run it as root (or drop --apply for a dry run)");
    }
    if !(r.base_power.is_finite() && (0.0..=10_000.0).contains(&r.base_power)) {
        bail!("--base-power must be a number of watts in [0, 10000]");
    }
    let cancel = study_ui::cancel_on_signals()?;
    let opts = ManageOptions {
        apply: r.apply && !r.dry_run,
        allow_root_device: r.allow_root_device,
        devices: r.devices,
        knob: r.knob,
        base_power_w: r.base_power,
        idle_timeout: r.idle_timeout,
        poll_interval: r.interval.max(Duration::from_millis(10)),
        duration: r.duration,
        state_dir: r.state.state_dir,
        ghost: r.ghost_policy,
        hints: r.hints,
    };
    if !opts.apply {
        say::note("dry run: decisions are printed, nothing is written (--apply to write)");
    }
    let summary = run_manager(root, &opts, &cancel, &mut print_event)?;
    if !summary.unrestored.is_empty() {
        bail!(
            "{} knob(s) could not be restored; fix them, then run `wattio power restore`",
            summary.unrestored.len()
        );
    }
    if cancel.is_set() {
        return Ok(study_ui::interrupted_exit_code());
    }
    Ok(if summary.failed_devices.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_decision(d: &PowerDecision) {
    let trade = match d.trade {
        Some((w, ms)) => format!("saves {w:.3} W, adds {ms:.3} ms wake latency (device figures)"),
        None if d.from == "(as found)" => "trade unknown (from the setting as found)".to_string(),
        None => "trade unknown (no figures for these knobs)".to_string(),
    };
    let verb = if d.applied { "wrote" } else { "would write" };
    let writes = if d.writes.is_empty() {
        "nothing".to_string()
    } else {
        d.writes
            .iter()
            .map(|(p, v)| format!("{} = {v}", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{:>9.3}s {} {} → {}: {verb} {writes}; {trade}",
        d.t_s, d.device, d.from, d.to
    );
}

fn print_restored(what: &str, o: &RestoreOutcome) {
    say::note(format!(
        "{what}: {} knob(s) restored, {} already at their original value",
        o.restored.len(),
        o.unchanged
    ));
    for k in &o.restored {
        say::note_detail(format!("{} = {}", k.path.display(), k.original));
    }
    for f in &o.failed {
        say::warn(f);
    }
}

fn print_event(e: PowerEvent) {
    match e {
        PowerEvent::PendingRestored(o) => {
            print_restored("a restore record left by a killed run was applied", &o)
        }
        PowerEvent::Managing {
            device,
            modes,
            figures,
        } => say::note(format!(
            "{device}: managing, modes {} ({})",
            modes.join(" → "),
            figures.unwrap_or_else(|| "generic ladder: no figures for these knobs".into())
        )),
        PowerEvent::Skipped { device, why } => say::note(format!("{device}: skipped: {why}")),
        PowerEvent::Decision(d) => print_decision(&d),
        PowerEvent::DeviceFailed { device, error } => say::warn(format!(
            "{device}: {error}; its knobs are restored and it is no longer managed"
        )),
        PowerEvent::Hint { device, woke } => say::note_detail(format!(
            "{device}: ghost hint{}",
            if woke { ", waking it" } else { "" }
        )),
        PowerEvent::BadHint(e) => say::warn(format!("ghost hint ignored: {e}")),
        PowerEvent::Restored(o) => print_restored("knobs restored", &o),
    }
}

fn print_status(s: &PowerStatus) {
    println!("storage devices:");
    for d in &s.devices {
        let root = if d.device.holds_root { ", holds /" } else { "" };
        println!("  {} ({}{root})", d.device.name, d.device.kind);
        if d.knobs.is_empty() {
            println!("    no kernel power knob");
        }
        for (k, v) in &d.knobs {
            match v {
                Ok(v) => println!("    {} = {v}", k.path.display()),
                Err(e) => println!("    {}: {e}", k.path.display()),
            }
        }
    }
    println!("runtime PM (PCIe, USB):");
    let show = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in &s.runtime_pm {
        println!(
            "  {}: control {}, {}, active {} ms, suspended {} ms, autosuspend delay {} ms",
            r.path.display(),
            show(r.control.clone()),
            show(r.status.clone()),
            show(r.active_ms.map(|v| v.to_string())),
            show(r.suspended_ms.map(|v| v.to_string())),
            show(r.autosuspend_delay_ms.map(|v| v.to_string())),
        );
    }
    match &s.pending {
        Some(r) => println!(
            "restore record pending (pid {}, {} knob(s)): `wattio power restore` applies it",
            r.pid,
            r.knobs.len()
        ),
        None => println!("no restore record pending"),
    }
}
