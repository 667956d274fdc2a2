//! What a finished study leaves beside its rows: the appendix-shaped test tables as CSV
//! (`tests.csv`, `idle_tests.csv`) and `summary.md`, which names the command, the machine and
//! the schedule before the tables.

use crate::{
    analyze_idle, analyze_load, cstate_times, idle_table_markdown, idle_tests_csv,
    time_table_markdown, time_tests_csv, OverheadPlan, OverheadRuns,
};
use std::fmt::Write as _;
use std::path::Path;
use wattio_energy::{ModelParams, SysRoot};

/// Who ran the study: `command` finished it; `started_by` started it (the same command unless
/// it was interrupted and resumed).
pub struct StudyCommand<'a> {
    pub command: &'a str,
    pub started_by: &'a str,
}

/// Analyses `runs` and writes `tests.csv`, `idle_tests.csv` (when there are idle runs) and
/// `summary.md` into `out_dir`, each replaced atomically. Returns the markdown.
pub fn write_summary(
    out_dir: &Path,
    plan: &OverheadPlan,
    runs: &OverheadRuns,
    model: &ModelParams,
    who: &StudyCommand,
    root: &SysRoot,
) -> std::io::Result<String> {
    let write = |name: &str, text: &str| {
        wattio_files::write_atomically(&out_dir.join(name), |w| w.write_all(text.as_bytes()))
            .map_err(std::io::Error::from)
    };
    let time_tests = analyze_load(&runs.load);
    let idle_tests = analyze_idle(&runs.idle, model);
    write("tests.csv", &time_tests_csv(&time_tests))?;
    if !runs.idle.is_empty() {
        write("idle_tests.csv", &idle_tests_csv(&idle_tests, model))?;
    }
    let mut md = String::new();
    if who.started_by == who.command {
        let _ = writeln!(md, "# wattio overhead\n\nCommand: `{}`\n", who.command);
    } else {
        let _ = writeln!(
            md,
            "# wattio overhead\n\nCommand: `{}` (interrupted, then resumed by `{}`)\n",
            who.started_by, who.command
        );
    }
    let _ = writeln!(md, "Machine: {}\n", machine_line(root));
    let _ = writeln!(
        md,
        "Schedule: {} rounds × {} consecutive runs per combination, order {}; outliers outside [q1 − 3·IQR, q3 + 3·IQR] removed per combination; one-sided Wilcoxon rank-sum (H1: slower / more power with measurement), Holm over each table; shift = Hodges–Lehmann (with − without).\n",
        plan.rounds,
        plan.reps_per_visit,
        match plan.shuffle_seed {
            Some(s) => format!("shuffled per round (seed {s})"),
            None => "fixed (off first, then rising frequency, as in the paper)".into(),
        }
    );
    for w in &plan.workloads {
        let _ = writeln!(md, "- workload `{}`: `{}`", w.name, w.argv.join(" "));
    }
    let _ = writeln!(
        md,
        "\n## Running time (Appendix A shape)\n\n{}",
        time_table_markdown(&time_tests)
    );
    if !idle_tests.is_empty() {
        let _ = writeln!(
            md,
            "## Idle machine (Appendix B shape; power ESTIMATED by {})\n\n{}",
            model.name(),
            idle_table_markdown(&idle_tests)
        );
    }
    write("summary.md", &md)?;
    Ok(md)
}

/// The machine and the C-states it exposes (or why none can be read).
fn machine_line(root: &SysRoot) -> String {
    let machine = wattio_energy::Machine::read(root);
    let cstates = match cstate_times(root) {
        Ok(m) => format!(
            "C-states: {}",
            m.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
        Err(e) => format!("C-states {e}"),
    };
    format!("{machine}; {cstates}")
}
