//! `wattio vm publish`: on a host, each VM's attributed energy as a counter its guest reads with
//! `--source host`.

use crate::meter_cmd::SourceArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wattio_energy::attribution::{By, IdlePolicy, HOST_ENTRY};
use wattio_energy::SysRoot;
use wattio_energy::MAX_VM_POWER_W;
use wattio_meter::{LiveAttribution, VmPublisher, DEFAULT_MAX_ENERGY_RANGE_UJ};
use wattio_units::{format_duration, parse_duration_or_seconds};

#[derive(Args)]
pub struct VmArgs {
    #[command(subcommand)]
    action: VmAction,
}

#[derive(Subcommand)]
enum VmAction {
    /// On a host: keep, for every running VM, a counter of the energy attributed to it (its
    /// CPU-time share), in DIR/VM/ shaped as a powercap zone, for its guest to read with
    /// `--source host` (share DIR/VM with the guest over virtiofs or 9p).
    Publish(PublishArgs),
}

#[derive(Args)]
struct PublishArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// The directory to publish in, one sub-directory per VM.
    #[arg(long)]
    dir: PathBuf,
    /// Time between two updates, 100ms to 1m (a plain number is seconds).
    #[arg(long, default_value = "1s", value_parser = parse_duration_or_seconds)]
    interval: Duration,
    /// Where each counter wraps to 0, as a RAPL counter does (default 2^38 µJ, about 275 kJ, or
    /// the next power of two that a long --interval needs).
    #[arg(long)]
    max_energy_range_uj: Option<u64>,
    /// Stop after this many updates (default: until Ctrl-C or SIGTERM).
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
}

pub fn vm(a: VmArgs) -> Result<ExitCode> {
    match a.action {
        VmAction::Publish(p) => publish(p),
    }
}

fn publish(a: PublishArgs) -> Result<ExitCode> {
    crate::say::set_command("vm publish");
    if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&a.interval) {
        bail!(
            "--interval must be between 100ms and 1m (got {})",
            format_duration(a.interval)
        );
    }
    // A VM drawing up to MAX_VM_POWER_W must not wrap its counter more than a quarter of the
    // way in one write plus a guest's read period (1 s at most), nor may the range overflow a
    // guest's arithmetic.
    let least = 4.0 * MAX_VM_POWER_W * (a.interval.as_secs_f64() + 1.0) * 1e6;
    let range = a
        .max_energy_range_uj
        .unwrap_or_else(|| DEFAULT_MAX_ENERGY_RANGE_UJ.max((least as u64).next_power_of_two()));
    if (range as f64) < least || range > 1 << 62 {
        bail!(
            "--max-energy-range-uj must be between {least:.0} ({:.0} J, so that no VM wraps its counter within a few --interval) and 2^62 (got {range})",
            least / 1e6,
        );
    }
    let meter = a.source.open_meter()?;
    let root = SysRoot::from_env();
    let n_cpus = wattio_energy::online_cpu_count(&root)?;
    let mut live = LiveAttribution::start(&meter, root, By::Vm, IdlePolicy::Apart, n_cpus)
        .context("starting attribution")?;
    let mut publisher = VmPublisher::new(
        &a.dir,
        meter.provenance().clone(),
        a.interval.as_secs_f64(),
        range,
    )?;
    eprintln!(
        "wattio vm publish: every {} into {}/VM/ ({}, attributed by CPU-time share); Ctrl-C stops",
        format_duration(a.interval),
        a.dir.display(),
        meter.provenance().label()
    );
    let cancel = crate::study_ui::cancel_on_signals()?;
    let terminal = std::io::stderr().is_terminal();
    let mut next = Instant::now() + a.interval;
    let (mut n, mut failures) = (0u64, 0u32);
    let mut known: Vec<String> = Vec::new();
    loop {
        if cancel.sleep(next.saturating_duration_since(Instant::now())) {
            break;
        }
        next = (next + a.interval).max(Instant::now());
        let i = match live.step(&meter) {
            Ok(i) => i.interval,
            Err(e) if failures < 5 => {
                failures += 1;
                crate::say::warn(format_args!(
                    "reading CPU times failed ({e}); this interval is carried to the next"
                ));
                continue;
            }
            Err(e) => {
                publisher.stop();
                return Err(e).context("reading CPU times failed 6 times in a row");
            }
        };
        failures = 0;
        match publisher.publish(&i) {
            Ok(problems) => {
                for p in problems {
                    crate::say::warn(p);
                }
            }
            Err(e) => {
                publisher.stop();
                return Err(e).with_context(|| format!("writing into {}", a.dir.display()));
            }
        }
        // Progress: a refreshing line on a terminal, the VMs that appear otherwise.
        let vms: Vec<(String, f64)> = i
            .entries
            .iter()
            .filter_map(|e| e.vm.clone().map(|v| (v, e.power_w)))
            .filter(|(v, _)| v != HOST_ENTRY)
            .collect();
        if terminal {
            let list: Vec<String> = vms.iter().map(|(v, w)| format!("{v} {w:.2} W")).collect();
            eprint!(
                "\r\x1b[Kwattio vm publish: {} VMs: {}",
                vms.len(),
                list.join(", ")
            );
        }
        for (v, _) in &vms {
            if !known.contains(v) {
                known.push(v.clone());
                if !terminal {
                    eprintln!(
                        "wattio vm publish: VM {v} found, publishing into {}",
                        publisher.vm_dir(v).display()
                    );
                }
            }
        }
        n += 1;
        if a.iterations.is_some_and(|k| n >= k) {
            break;
        }
    }
    publisher.stop();
    if terminal {
        eprintln!();
    }
    Ok(ExitCode::SUCCESS)
}
