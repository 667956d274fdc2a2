//! `wattio probe`: every registered mechanism, its counters or why it cannot be used and the
//! fix, the meters read beside the CPU, NVML's GPUs, what `--source auto` would use, and what
//! each disk and NIC says of its own power.

use crate::meter_cmd::{ModelArgs, PlatformArgs};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
use wattio_energy::{ProbeReport, SysRoot, Wrap};

#[derive(Args)]
pub struct ProbeArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    platform: PlatformArgs,
}

pub fn probe(a: ProbeArgs) -> Result<ExitCode> {
    let root = SysRoot::from_env();
    let params = a.model.resolve(&root)?;
    let report = wattio_energy::discover_with_platforms(&root, params, &a.platform.platforms);
    let devices = wattio_devices::probe_devices(&root);
    if a.json {
        // The energy report's fields, and beside them the devices section's.
        let mut json = serde_json::to_value(&report)?;
        if let (Some(obj), serde_json::Value::Object(more)) =
            (json.as_object_mut(), serde_json::to_value(&devices)?)
        {
            obj.extend(more);
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", render_probe(&report));
        println!();
        print!("{}", devices.render());
    }
    Ok(if report.chosen.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn fmt_wrap(w: Wrap, unit_j: f64) -> String {
    match w {
        Wrap::AtMax(m) if m == u64::MAX => "2^64 (never in practice)".into(),
        Wrap::AtMax(m) => format!("{m} raw ({:.0} J)", (m as f64 + 1.0) * unit_j),
        Wrap::Unknown => "UNKNOWN (wraps will be reported as errors)".into(),
        Wrap::LikelyAt(m) => format!("likely {m} raw (a decrease is checked against 2 kW)"),
    }
}

/// The human-readable probe report.
pub fn render_probe(r: &ProbeReport) -> String {
    let mut s = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(s, "wattio probe (root {})", r.root);
    let _ = writeln!(
        s,
        "cpu: {}",
        r.cpu
            .as_deref()
            .unwrap_or("unknown (/proc/cpuinfo unreadable)")
    );
    for m in &r.mechanisms {
        let _ = writeln!(s);
        if m.usable {
            let est = if m.mechanism == wattio_energy::Mechanism::Model {
                " — ESTIMATES, not measurements"
            } else {
                ""
            };
            if m.beside {
                let _ = writeln!(
                    s,
                    "{:<9} usable (beside the CPU total, never added to it; polled on its own thread)",
                    m.mechanism.as_str()
                );
                for (c, label) in m.counters.iter().zip(&m.labels) {
                    let _ = writeln!(s, "  {:<11} {label}", c.name());
                    let _ = writeln!(s, "    from {}", c.origin);
                }
                for n in &m.notes {
                    let _ = writeln!(s, "  note: {n}");
                }
                continue;
            }
            let _ = writeln!(s, "{:<9} usable{est}", m.mechanism.as_str());
            for (i, c) in m.counters.iter().enumerate() {
                let safe = match c.wrap {
                    Wrap::AtMax(u64::MAX) => String::new(),
                    _ => format!("  read every ≤ {:.3} s", wattio_energy::max_safe_period(c)),
                };
                let _ = writeln!(
                    s,
                    "  socket {} {:<7} unit {:.6e} J  wrap {}{safe}",
                    c.socket,
                    c.domain.as_str(),
                    c.unit_j,
                    fmt_wrap(c.wrap, c.unit_j),
                );
                let _ = writeln!(s, "    from {}", c.origin);
                if let Some(Some(u)) = m.update_periods.get(i) {
                    let _ = writeln!(s, "    {}", u.describe());
                }
            }
        } else {
            let _ = writeln!(s, "{:<9} not usable: {}", m.mechanism.as_str(), m.reason);
            if let Some(fix) = &m.fix {
                let _ = writeln!(s, "  fix: {fix}");
            }
        }
        for n in &m.notes {
            let _ = writeln!(s, "  note: {n}");
        }
    }
    let _ = writeln!(s);
    let _ = write!(s, "{}", render_gpu_probe(&r.gpu));
    let _ = writeln!(s);
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    match (&r.chosen, &r.provenance) {
        (Some(m), Some(p)) if p.estimated => {
            let _ = writeln!(
                s,
                "verdict: no hardware energy counter is usable here; `--source auto` uses {m}: figures are {}",
                p.label()
            );
        }
        (Some(m), Some(p)) => {
            let _ = writeln!(
                s,
                "verdict: `--source auto` uses {m}: figures are {}",
                p.label()
            );
        }
        _ => {
            let _ = writeln!(s, "verdict: nothing usable; apply one of the fixes above");
        }
    }
    let beside: Vec<String> = r
        .mechanisms
        .iter()
        .filter(|m| m.beside && m.usable)
        .flat_map(|m| {
            m.counters
                .iter()
                .map(move |c| format!("{} ({})", c.name(), m.mechanism))
        })
        .collect();
    if !beside.is_empty() {
        let _ = writeln!(
            s,
            "beside it, every command also reads: {}",
            beside.join(", ")
        );
    }
    s
}

/// The GPU part of the probe report: NVIDIA GPUs through NVML, or why NVML is not usable.
pub fn render_gpu_probe(g: &wattio_energy::GpuProbe) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if g.usable {
        let _ = writeln!(
            s,
            "{:<9} usable (GPUs, beside the CPU total; library {})",
            "nvml", g.lib
        );
        for (i, gpu) in g.gpus.iter().enumerate() {
            let how = match gpu.counter {
                wattio_energy::GpuCounter::EnergyCounter => {
                    "energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ)"
                }
                wattio_energy::GpuCounter::PowerIntegrated => {
                    "power fallback (nvmlDeviceGetPowerUsage, mW, integrated)"
                }
            };
            let _ = writeln!(s, "  gpu {} {}  {}", gpu.index, gpu.name, gpu.uuid);
            let _ = writeln!(s, "    {how}: {}", gpu.label);
            if let Some(Some(u)) = g.update_periods.get(i) {
                let _ = writeln!(s, "    {}", u.describe());
            }
            if let Some(n) = &gpu.note {
                let _ = writeln!(s, "    note: {n}");
            }
        }
    } else {
        let _ = writeln!(s, "{:<9} not usable: {}", "nvml", g.reason);
        if let Some(fix) = &g.fix {
            let _ = writeln!(s, "  fix: {fix}");
        }
    }
    for n in &g.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}
