//! A `wattio measure --json` result as a section of a `wattio report` page: each command's
//! runs, the whole machine where a platform meter read it, and the energy by part. Runs are read
//! as `wattio_results::ReportedRun`.

use crate::sections::stack::{stack_chart, stack_table, RunEnergyStack};
use wattio_plot::{
    box_plot, energy_axis, esc, provenance_html, BoxGroup, Chart, HtmlSection, ReportSection,
};
use wattio_results::{ReportedMachine, ReportedProvenance, ReportedRun};

/// One run of a `wattio measure --json` result, as the page shows it.
#[derive(Debug, Clone)]
pub struct RunFigures {
    pub duration_s: f64,
    pub total_j: f64,
    pub mean_power_w: f64,
    pub exit_code: i64,
    /// The whole machine over the run, where a platform meter read it.
    pub machine: Option<ReportedMachine>,
    /// The run's energy by part (CPU package, DRAM, GPU, disks, the platform's rest).
    pub stack: RunEnergyStack,
}

impl RunFigures {
    /// A run as the page shows it.
    pub fn of(run: &ReportedRun) -> RunFigures {
        RunFigures {
            duration_s: run.duration_s,
            total_j: run.total_j,
            mean_power_w: run.mean_power_w(),
            exit_code: run.exit_code.into(),
            machine: run.machine.clone(),
            stack: RunEnergyStack::of(run),
        }
    }
}

/// The whole machine over each run that has it: each platform meter's joules and the rest
/// RAPL and the GPU meters do not see, or why there is none.
fn machine_table(runs: &[RunFigures], out: &mut HtmlSection) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let platforms = r.machine.iter().flat_map(|m| m.platforms.iter());
            platforms.map(move |p| {
                let rest = match (p.rest_j, p.rest_uncertainty_j) {
                    (Some(j), Some(u)) => format!("{j:.3} ± {u:.3}"),
                    _ => "—".into(),
                };
                vec![
                    (i + 1).to_string(),
                    p.meter.clone(),
                    format!("{:.3}", p.platform_j),
                    rest,
                    p.label.clone(),
                    p.note.clone().unwrap_or_default(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    out.paragraph_html(
        "The whole machine as its platform meters read it, and the rest: the meter less package, DRAM and GPUs, what they do not see (given only where the parts are measured and the run spans at least five of the meter's averaging periods plus its delay).",
    );
    out.table(
        &[
            "run",
            "platform meter",
            "machine (J)",
            "rest (J)",
            "provenance",
            "note",
        ],
        &rows,
    );
}

/// One command of a `wattio measure` result: its successful runs and where their energy
/// comes from.
#[derive(Debug, Clone)]
pub struct MeasuredCommand {
    pub command: String,
    pub provenance: ReportedProvenance,
    pub runs: Vec<RunFigures>,
}

impl ReportSection for MeasuredCommand {
    fn kind(&self) -> &'static str {
        "measure"
    }

    fn render(&self, out: &mut HtmlSection) {
        let runs = &self.runs;
        let prov = self.provenance.label();
        out.paragraph_html(&format!(
            "Command: <code>{}</code> — {} run(s), energy {}",
            esc(&self.command),
            runs.len(),
            provenance_html(&prov)
        ));
        let rows: Vec<Vec<String>> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                vec![
                    (i + 1).to_string(),
                    format!("{:.4}", r.duration_s),
                    format!("{:.4}", r.total_j),
                    format!("{:.3}", r.mean_power_w),
                    r.exit_code.to_string(),
                ]
            })
            .collect();
        out.table(
            &[
                "run",
                "duration (s)",
                "energy (J)",
                "mean power (W)",
                "exit",
            ],
            &rows,
        );
        machine_table(runs, out);
        let stacks: Vec<(String, RunEnergyStack)> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("run {}", i + 1), r.stack.clone()))
            .collect();
        if !stacks.is_empty() {
            out.figure(
                &stack_chart(&stacks, &prov),
                "Energy by part per run (disks estimated from what each drive says of itself)",
                &prov,
            );
            let t = stack_table(&stacks);
            out.table(&t.header(), t.rows());
        }
        if runs.len() < 2 {
            return;
        }
        let group = |v: Vec<f64>| BoxGroup {
            label: format!("{} runs", v.len()),
            values: v,
            baseline: false,
        };
        let svg = box_plot(
            &Chart::titled(
                "Energy per run",
                &prov,
                "",
                &energy_axis("Energy (J)", &prov),
            ),
            &[group(runs.iter().map(|r| r.total_j).collect())],
        );
        out.figure(&svg, "Energy per run", &prov);
        let svg = box_plot(
            &Chart::titled("Duration per run", &prov, "", "Duration (s), wall clock"),
            &[group(runs.iter().map(|r| r.duration_s).collect())],
        );
        out.figure(&svg, "Duration per run (wall clock)", &prov);
    }
}
