//! A run's energy as a stack, for `wattio report`: CPU package, DRAM, GPU, the disks' interval
//! (its central estimate, or its midpoint, with the interval as a whisker, labelled estimated)
//! and the rest of the platform where a platform meter saw the machine; as one stacked bar per
//! run and a table of the same numbers.

use wattio_plot::{energy_axis, stacked_bar_chart, Chart, StackedBar};
use wattio_results::{disks_interval_total, Align, EnergyInterval, ReportedRun, Table};

/// The parts of a run's energy, J.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnergyStack {
    /// The processor packages (RAPL package domains; the whole CPU figure where the meter has
    /// no package domain, as the model).
    pub package_j: f64,
    /// Memory, where the meter reads it.
    pub dram_j: Option<f64>,
    /// The GPUs, where NVML reads them.
    pub gpu_j: Option<f64>,
    /// The disks' summed interval and its labels, over the disks that have one.
    pub disks: Option<(EnergyInterval, String)>,
    /// What the first platform meter saw beyond RAPL and the GPUs (it includes the disks).
    pub platform_rest_j: Option<f64>,
}

/// The names of the stack's parts, in its order.
pub const STACK_PARTS: [&str; 5] = [
    "CPU package",
    "DRAM",
    "GPU",
    "disks (estimated)",
    "rest of the platform, less the disks",
];

impl RunEnergyStack {
    /// The stack of a run: its energy, and its disks' intervals and machine view where it has
    /// them.
    pub fn of(run: &ReportedRun) -> RunEnergyStack {
        let sum = |domain: &str| {
            let v: Vec<f64> = run
                .domains
                .iter()
                .filter(|e| e.domain == domain)
                .map(|e| e.energy_j)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        };
        let dram_j = sum("dram");
        let disks = run.disks.as_deref().unwrap_or(&[]).iter();
        RunEnergyStack {
            package_j: sum("package").unwrap_or_else(|| run.total_j - dram_j.unwrap_or(0.0)),
            dram_j,
            gpu_j: run.gpu_j,
            disks: disks_interval_total(
                disks.map(|d| (d.device.as_str(), d.interval, d.label.as_deref())),
            ),
            platform_rest_j: run
                .machine
                .as_ref()
                .and_then(|m| m.platforms.iter().find_map(|p| p.rest_j)),
        }
    }

    /// The disks' figure in the stack: the central estimate, else the interval's midpoint.
    pub fn disks_j(&self) -> Option<f64> {
        let (i, _) = self.disks.as_ref()?;
        Some(i.central_j.unwrap_or((i.lower_j + i.upper_j) / 2.0))
    }

    /// The platform's rest less the disks' figure (the platform meter sees the disks too). It
    /// is never clamped: below zero, the disks' figure is more than the platform saw beyond
    /// RAPL and the GPUs, a disagreement the table shows as it is.
    pub fn rest_less_disks_j(&self) -> Option<f64> {
        Some(self.platform_rest_j? - self.disks_j().unwrap_or(0.0))
    }

    /// The values of [`STACK_PARTS`].
    pub fn parts(&self) -> [Option<f64>; 5] {
        [
            Some(self.package_j),
            self.dram_j,
            self.gpu_j,
            self.disks_j(),
            // A bar segment cannot be negative; the table keeps the signed value.
            self.rest_less_disks_j().map(|v| v.max(0.0)),
        ]
    }
}

/// The stacks as a table: one row per run, each part, the disks' bounds, and the labels.
pub fn stack_table(stacks: &[(String, RunEnergyStack)]) -> Table {
    let num = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.3}"));
    let mut t = Table::new(&[
        ("run", Align::Plain),
        ("CPU package J", Align::Right),
        ("DRAM J", Align::Right),
        ("GPU J", Align::Right),
        ("disks J (stacked)", Align::Right),
        ("disks lower J", Align::Right),
        ("disks upper J", Align::Right),
        ("platform rest J", Align::Right),
        ("rest less disks J", Align::Right),
        ("disks label", Align::Plain),
    ]);
    for (name, s) in stacks {
        let i = s.disks.as_ref().map(|d| d.0);
        t.push(vec![
            name.clone(),
            num(Some(s.package_j)),
            num(s.dram_j),
            num(s.gpu_j),
            num(s.disks_j()),
            num(i.map(|i| i.lower_j)),
            num(i.map(|i| i.upper_j)),
            num(s.platform_rest_j),
            num(s.rest_less_disks_j()),
            s.disks
                .as_ref()
                .map_or("no disk interval".into(), |d| d.1.clone()),
        ]);
    }
    t
}

/// The stacks as one stacked bar per run, the disks' interval a whisker over their segment.
pub fn stack_chart(stacks: &[(String, RunEnergyStack)], provenance: &str) -> String {
    let bars: Vec<StackedBar> = stacks
        .iter()
        .map(|(name, s)| StackedBar {
            label: name.clone(),
            parts: s.parts().to_vec(),
            range: s.disks.as_ref().map(|(i, _)| (3, i.lower_j, i.upper_j)),
        })
        .collect();
    let parts: Vec<String> = STACK_PARTS.iter().map(|p| p.to_string()).collect();
    stacked_bar_chart(
        &Chart::titled(
            "Energy by part (disks: estimated, the whisker their interval)",
            provenance,
            &energy_axis("Energy (J)", provenance),
            "run",
        ),
        &parts,
        &bars,
    )
}
