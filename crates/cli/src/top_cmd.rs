//! `wattio top`: which process, cgroup or VM is using the energy, live.

use crate::meter_cmd::SourceArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wattio_energy::attribution::{By, IdlePolicy};
use wattio_energy::SysRoot;
use wattio_meter::{render_top, DeviceIntervals, LiveAttribution};
use wattio_units::{format_duration, parse_duration_or_seconds};

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    carbon: crate::meter_cmd::CarbonArgs,
    /// Attribute to processes, to cgroups, to virtual machines (`vm`: libvirt domains, Proxmox
    /// VMs, plain QEMU processes), to containers (`container`: named through docker's or
    /// podman's API socket, or the Kubernetes API in a pod) or to Kubernetes pods (`pod`); the
    /// host's own work as one entry.
    #[arg(long, default_value = "process", value_parser = parse_by)]
    by: By,
    /// Time between refreshes, e.g. 500ms, 2s or 1m (a plain number is seconds).
    #[arg(long, default_value = "2s", value_parser = parse_duration_or_seconds)]
    interval: Duration,
    /// Print one snapshot after one interval and exit.
    #[arg(long)]
    once: bool,
    /// Print snapshots as JSON (one object per line; with --once, one object).
    #[arg(long)]
    json: bool,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// Lines of entries to show (the JSON has them all).
    #[arg(long, default_value_t = 20)]
    rows: usize,
    /// Where the energy nobody's CPU time explains goes: apart (shown as idle/unattributed,
    /// as Scaphandre and Kepler do) or shared (split over the entries by CPU time).
    #[arg(long, default_value = "apart", value_parser = parse_policy)]
    idle: IdlePolicy,
}

fn parse_by(s: &str) -> Result<By, String> {
    s.parse()
}

fn parse_policy(s: &str) -> Result<IdlePolicy, String> {
    s.parse()
}

pub fn top(a: TopArgs) -> Result<ExitCode> {
    if !(Duration::from_millis(50)..=Duration::from_secs(3600)).contains(&a.interval) {
        bail!(
            "--interval must be between 50ms and 1h (got {})",
            format_duration(a.interval)
        );
    }
    let co2e = a.carbon.co2e()?;
    let meter = a.source.open_meter()?;
    let root = SysRoot::from_env();
    let n_cpus = wattio_energy::online_cpu_count(&root)?;
    let mut devices = DeviceIntervals::open(&root).context("listing the block devices")?;
    let mut live = LiveAttribution::start(&meter, root, a.by, a.idle, n_cpus)
        .context("starting attribution")?;
    if let Some(note) = &live.gpu_note {
        crate::say::warn(note);
    }
    if let Some(note) = live.naming_note() {
        crate::say::warn(&note);
    }
    crate::meter_cmd::kernel_io_warning(live.kernel_io_off());
    // Ctrl-C or SIGTERM wakes the wait for the next refresh and ends `top` there.
    let cancel = crate::study_ui::cancel_on_signals()?;
    let iterations = if a.once { Some(1) } else { a.iterations };
    let live_screen = !a.json && std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    let mut n = 0u64;
    let mut failures = 0u32;
    let period = a.interval;
    let mut next = Instant::now() + period;
    loop {
        if cancel.sleep(next.saturating_duration_since(Instant::now())) {
            if live_screen {
                let _ = writeln!(out);
            }
            return Ok(ExitCode::SUCCESS);
        }
        // After a slow refresh (or a suspended machine), go on from now rather than catch up
        // in a burst.
        next = (next + period).max(Instant::now());
        let i = match live.step(&meter) {
            Ok(i) => {
                failures = 0;
                i
            }
            Err(e) if failures < 5 => {
                failures += 1;
                crate::say::warn(format_args!(
                    "reading CPU times failed ({e}); this interval is carried to the next"
                ));
                continue;
            }
            Err(e) => return Err(e).context("reading CPU times failed 6 times in a row"),
        };
        let mut i = i;
        (i.disks, i.nics) = devices.step();
        if let Some(co2e) = &co2e {
            co2e.apply(&mut i);
        }
        let r = if a.json {
            serde_json::to_writer(&mut out, &i)
                .map_err(std::io::Error::from)
                .and_then(|_| writeln!(out))
        } else if live_screen {
            // Home, clear, draw: a refreshing screen as top does.
            write!(
                out,
                "\x1b[H\x1b[2J{}",
                render_top(&i, live.total_j, live.idle_total_j, a.rows)
            )
        } else {
            writeln!(
                out,
                "{}",
                render_top(&i, live.total_j, live.idle_total_j, a.rows)
            )
        };
        // A closed pipe (`| head`) comes back as an error that `main` ends quietly.
        r.context("writing to standard output")?;
        out.flush().ok();
        n += 1;
        if iterations.is_some_and(|k| n >= k) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}
