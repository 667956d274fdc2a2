//! The benchmark loop and its statistics (hyperfine's model, for energy).
//!
//! Schedule: for every round, each command once in the order given — warmup rounds first
//! (unmeasured), then the measured rounds: A1 B1 A2 B2 … (round-robin, so slow drifts of the
//! machine — temperature, frequency, background load — fall on every command alike). The
//! `--prepare` command runs before every run, warmups included, and is never measured.
//!
//! A run that exits non-zero stops the benchmark with [`MeasureError::Failed`] unless
//! `ignore_failure` is set; then it is reported and left out of the statistics. A run killed by a
//! signal is *interrupted*: reported and left out. When `stop` is raised (Ctrl-C, SIGTERM) the
//! loop ends after the current run and the runs so far are summarised.
//!
//! Statistics, per command over its kept runs: mean ± σ (sample standard deviation), median,
//! quartiles (R type 7), min and max of duration, total energy, command energy, mean power and
//! CPU time. With two or more commands: each one's mean total energy over the best (lowest)
//! one's, with σ propagated from both (as hyperfine does for time), and a two-sided Wilcoxon
//! rank-sum p-value against the best on the runs' total energy, Holm-adjusted across the
//! comparisons.

use super::{CommandSpec, Executor, MeasureError, RunReport, RunStatus};
use serde::{Deserialize, Serialize};
use std::time::Instant;
use wattio_energy::attribution;
use wattio_energy::Provenance;
use wattio_progress::{Cancel, Eta, Sink, StudyProgress};
use wattio_stats::Alternative;

/// What to run.
#[derive(Debug, Clone)]
pub struct MeasurePlan {
    pub commands: Vec<CommandSpec>,
    /// Measured runs per command.
    pub runs: usize,
    /// Unmeasured runs per command before the measured ones.
    pub warmup: usize,
    /// Run before every run, unmeasured.
    pub prepare: Option<CommandSpec>,
    /// Keep going past failed runs (they are left out of the statistics).
    pub ignore_failure: bool,
}

/// Where the loop is, for a progress display: its runs counted as every study counts them,
/// and which run of which command and phase is next.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchProgress {
    /// Runs finished (warmups included) and the total to do; the label is the command about
    /// to run ([`CommandSpec::display`]), the ETA the mean measured time of each command's
    /// runs times the runs left (nothing is resumed: `resumed` is 0).
    pub runs: StudyProgress,
    /// Index of the command about to run.
    pub command: usize,
    pub warmup: bool,
    /// 1-based run number within the phase (warmup or measured).
    pub run: usize,
    /// Runs of the phase per command.
    pub of: usize,
}

/// One measured run of a command, as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRun {
    /// 1-based run number of this command.
    pub run: usize,
    /// 1-based position among all measured runs of the benchmark (the interleaving).
    pub sequence: usize,
    /// `ok` (kept), `failed` or `interrupted` (left out).
    pub status: RunStatus,
    #[serde(flatten)]
    pub report: RunReport,
}

/// Mean ± σ, median, quartiles and range of one measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one run.
    pub stddev: f64,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    /// `None` for an empty sample or one with a non-finite value.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        let s = wattio_stats::Summary::of(xs).ok()?;
        Some(Stat {
            mean: s.mean,
            stddev: wattio_stats::std_dev(xs).ok()?,
            median: s.median,
            q1: s.q1,
            q3: s.q3,
            min: s.min,
            max: s.max,
        })
    }
}

/// Statistics of a command's kept runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CommandStats {
    pub duration_s: Stat,
    /// The machine's energy during the runs.
    pub total_j: Stat,
    /// The command's CPU-time share of it.
    #[serde(alias = "command_j")]
    pub attributed_j: Stat,
    pub mean_power_w: Stat,
    pub child_cpu_s: Stat,
    /// The CO₂e of `total_j` and of `attributed_j`, with `--carbon-intensity` or `--region`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub co2e_g: Option<Stat>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub attributed_co2e_g: Option<Stat>,
}

impl CommandStats {
    pub fn of(runs: &[&RunReport]) -> Option<CommandStats> {
        let col =
            |f: fn(&RunReport) -> f64| Stat::of(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        Some(CommandStats {
            duration_s: col(|r| r.energy.duration_s)?,
            total_j: col(|r| r.energy.total_j)?,
            attributed_j: col(|r| r.attributed_j)?,
            mean_power_w: col(|r| r.mean_power_w)?,
            child_cpu_s: col(|r| r.child_cpu_s)?,
            co2e_g: Stat::of(
                &runs
                    .iter()
                    .filter_map(|r| r.co2e.as_ref().map(|c| c.co2e_g))
                    .collect::<Vec<_>>(),
            ),
            attributed_co2e_g: Stat::of(
                &runs
                    .iter()
                    .filter_map(|r| r.co2e.as_ref().map(|c| c.attributed_co2e_g))
                    .collect::<Vec<_>>(),
            ),
        })
    }
}

/// One command's runs and figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandResult {
    pub command: String,
    /// Runs in the statistics, and runs left out.
    pub kept: usize,
    pub failed: usize,
    pub interrupted: usize,
    /// Over the kept runs; `null` when none was kept.
    pub summary: Option<CommandStats>,
    /// Mean total energy over the best command's (1 for the best itself); with ≥ 2 commands.
    pub energy_ratio: Option<f64>,
    /// σ of that ratio, propagated from both commands' σ.
    pub energy_ratio_stddev: Option<f64>,
    /// Two-sided Wilcoxon rank-sum p-value of total energy against the best command.
    pub p_value: Option<f64>,
    /// `p_value` after Holm's correction across the comparisons with the best.
    pub p_holm: Option<f64>,
    /// Every measured run, kept or not, in the order it ran.
    pub runs: Vec<MeasuredRun>,
}

impl CommandResult {
    /// The kept runs.
    pub fn kept_runs(&self) -> impl Iterator<Item = &RunReport> {
        self.runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok)
            .map(|r| &r.report)
    }
}

/// The outcome of a benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    /// Index of the command with the least mean total energy, with ≥ 2 commands that kept runs.
    pub best: Option<usize>,
    /// True when a signal stopped the loop before every run was done.
    pub stopped_early: bool,
    pub results: Vec<CommandResult>,
}

impl Benchmark {
    /// Statistics and comparison of the measured runs of each command (`names[i]` ran `runs[i]`).
    pub fn from_runs(names: Vec<String>, runs: Vec<Vec<MeasuredRun>>, stopped_early: bool) -> Self {
        let mut results: Vec<CommandResult> = names
            .into_iter()
            .zip(runs)
            .map(|(command, runs)| {
                let count = |s| runs.iter().filter(|r| r.status == s).count();
                let mut c = CommandResult {
                    command,
                    kept: count(RunStatus::Ok),
                    failed: count(RunStatus::Failed),
                    interrupted: count(RunStatus::Interrupted),
                    summary: None,
                    energy_ratio: None,
                    energy_ratio_stddev: None,
                    p_value: None,
                    p_holm: None,
                    runs,
                };
                c.summary = CommandStats::of(&c.kept_runs().collect::<Vec<_>>());
                c
            })
            .collect();
        let best = compare(&mut results);
        Benchmark {
            best,
            stopped_early,
            results,
        }
    }

    /// The commands none of whose runs was kept.
    pub fn without_kept_runs(&self) -> Vec<&CommandResult> {
        self.results.iter().filter(|r| r.kept == 0).collect()
    }
}

/// Fills ratios and p-values against the command of least mean total energy; returns its index.
fn compare(results: &mut [CommandResult]) -> Option<usize> {
    let with_stats: Vec<usize> = (0..results.len())
        .filter(|&i| results[i].summary.is_some())
        .collect();
    if with_stats.len() < 2 {
        return None;
    }
    let mean = |r: &CommandResult| r.summary.map(|s| s.total_j).expect("filtered");
    let best = *with_stats
        .iter()
        .min_by(|&&a, &&b| mean(&results[a]).mean.total_cmp(&mean(&results[b]).mean))?;
    let b = mean(&results[best]);
    let best_j: Vec<f64> = results[best]
        .kept_runs()
        .map(|r| r.energy.total_j)
        .collect();
    let mut tested = Vec::new();
    for &i in &with_stats {
        let s = mean(&results[i]);
        if b.mean > 0.0 && s.mean > 0.0 {
            let ratio = s.mean / b.mean;
            results[i].energy_ratio = Some(ratio);
            results[i].energy_ratio_stddev = Some(if i == best {
                0.0
            } else {
                ratio * ((s.stddev / s.mean).powi(2) + (b.stddev / b.mean).powi(2)).sqrt()
            });
        }
        if i == best {
            continue;
        }
        let xs: Vec<f64> = results[i].kept_runs().map(|r| r.energy.total_j).collect();
        if let Ok(t) = wattio_stats::rank_sum(&xs, &best_j, Alternative::TwoSided) {
            results[i].p_value = Some(t.p_value);
            tested.push(i);
        }
    }
    let ps: Vec<f64> = tested.iter().filter_map(|&i| results[i].p_value).collect();
    if let Ok(adjusted) = wattio_stats::holm(&ps) {
        for (&i, p) in tested.iter().zip(adjusted) {
            results[i].p_holm = Some(p);
        }
    }
    Some(best)
}

/// Runs `plan` with `exec`: warmups, then the measured rounds, interleaved.
///
/// `cancel` is checked before every run; `progress` is told before every run.
pub fn run_benchmark(
    plan: &MeasurePlan,
    exec: &mut dyn Executor,
    cancel: &Cancel,
    progress: &Sink<BenchProgress>,
) -> Result<Benchmark, MeasureError> {
    let n = plan.commands.len();
    if n == 0 {
        return Err(MeasureError::NoCommand);
    }
    if plan.runs == 0 {
        return Err(MeasureError::NoRuns);
    }
    let names: Vec<String> = plan.commands.iter().map(CommandSpec::display).collect();
    let mut runs: Vec<Vec<MeasuredRun>> = vec![Vec::new(); n];
    let total = (plan.warmup + plan.runs) * n;
    let (mut done, mut sequence) = (0, 0);
    let mut stopped = false;
    // Runs go round-robin, so run k (0-based, warmups included) is of command k % n.
    let command_ids: Vec<usize> = (0..n).collect();
    let mut eta: Eta<usize> = Eta::new();
    'rounds: for round in 0..plan.warmup + plan.runs {
        let warmup = round < plan.warmup;
        let (run, of) = if warmup {
            (round + 1, plan.warmup)
        } else {
            (round - plan.warmup + 1, plan.runs)
        };
        for (i, cmd) in plan.commands.iter().enumerate() {
            if cancel.is_set() {
                stopped = true;
                break 'rounds;
            }
            progress.tell(&BenchProgress {
                runs: StudyProgress {
                    done,
                    total,
                    resumed: 0,
                    label: names[i].clone(),
                    eta: eta.remaining((done..total).map(|k| &command_ids[k % n])),
                },
                command: i,
                warmup,
                run,
                of,
            });
            let started = Instant::now();
            if let Some(prep) = &plan.prepare {
                let e = exec.run_unmeasured(prep)?;
                if !e.success() {
                    if cancel.is_set() {
                        stopped = true;
                        break 'rounds;
                    }
                    return Err(MeasureError::PrepareFailed {
                        command: prep.display(),
                        before: names[i].clone(),
                        code: e.code,
                    });
                }
            }
            let phase = if warmup { "warmup run" } else { "run" };
            let exit = if warmup {
                exec.run_unmeasured(cmd)?
            } else {
                let report = exec.run(cmd)?;
                sequence += 1;
                let exit = report.exit();
                runs[i].push(MeasuredRun {
                    run,
                    sequence,
                    status: exit.status(),
                    report,
                });
                exit
            };
            eta.record(i, started.elapsed().as_secs_f64());
            done += 1;
            if exit.status() == RunStatus::Failed && !plan.ignore_failure {
                return Err(MeasureError::Failed {
                    command: names[i].clone(),
                    phase,
                    run,
                    of,
                    code: exit.code,
                });
            }
        }
    }
    Ok(Benchmark::from_runs(names, runs, stopped))
}

/// A benchmark with what it was measured by and how it was run: the document `--json` and
/// `--export-json` write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where every `total_j` comes from; written as the `mechanism`, `estimated` and `model`
    /// fields.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The label of every `total_j`: `measured (perf)` or `estimated (model: …)`.
    pub label: String,
    /// The label of every `attributed_j`: the above, attributed (cpu-time share).
    #[serde(alias = "command_label")]
    pub attributed_label: String,
    pub n_cpus: usize,
    pub runs_per_command: usize,
    pub warmup: usize,
    pub prepare: Option<String>,
    pub ignore_failure: bool,
    #[serde(flatten)]
    pub benchmark: Benchmark,
    /// The intensity every `co2e_g` was computed at (`--carbon-intensity` or `--region`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub carbon_intensity: Option<wattio_energy::CarbonIntensity>,
}

impl Report {
    pub fn new(
        provenance: &Provenance,
        n_cpus: usize,
        plan: &MeasurePlan,
        benchmark: Benchmark,
    ) -> Self {
        let label = provenance.label();
        Report {
            provenance: provenance.clone(),
            attributed_label: attribution::attributed_label(&label),
            label,
            n_cpus,
            runs_per_command: plan.runs,
            warmup: plan.warmup,
            prepare: plan.prepare.as_ref().map(CommandSpec::display),
            ignore_failure: plan.ignore_failure,
            benchmark,
            carbon_intensity: None,
        }
    }
}

impl wattio_energy::Co2eFigures for Report {
    /// Every run's figures; each command's statistics are then taken again over its runs, CO₂e
    /// included.
    fn co2e_slots(
        &mut self,
        intensity: &wattio_energy::CarbonIntensity,
        each: &mut dyn FnMut(wattio_energy::Co2eSlot<'_>),
    ) {
        for c in &mut self.benchmark.results {
            for r in &mut c.runs {
                r.report.co2e_slots(intensity, each);
            }
            if c.summary.is_some() {
                c.summary = CommandStats::of(&c.kept_runs().collect::<Vec<_>>());
            }
        }
        self.carbon_intensity = Some(intensity.clone());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measure::tests::energy;
    use crate::measure::Exit;
    use std::collections::HashMap;

    /// A scripted run: `(total_j, duration_s, cpu_s, exit)`.
    pub(crate) type Scripted = (f64, f64, f64, Exit);

    /// A fake executor: each command gives the next of its scripted outcomes, and every call is
    /// logged.
    #[derive(Default)]
    pub(crate) struct Fake {
        pub script: HashMap<String, Vec<Scripted>>,
        pub log: Vec<String>,
        pub next: HashMap<String, usize>,
        /// Raise this flag when the given log entry is reached.
        pub stop_at: Option<(String, std::sync::Arc<Cancel>)>,
    }

    impl Fake {
        pub(crate) fn with(script: &[(&str, Vec<Scripted>)]) -> Fake {
            Fake {
                script: script
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                ..Default::default()
            }
        }

        fn take(&mut self, name: &str) -> Scripted {
            let i = self.next.entry(name.to_string()).or_insert(0);
            let v = self.script[name][*i % self.script[name].len()];
            *i += 1;
            v
        }

        fn note(&mut self, entry: String) {
            if let Some((at, flag)) = &self.stop_at {
                if *at == entry {
                    flag.set();
                }
            }
            self.log.push(entry);
        }
    }

    impl Executor for Fake {
        fn run(&mut self, cmd: &CommandSpec) -> Result<RunReport, MeasureError> {
            let name = cmd.display();
            self.note(name.clone());
            let (j, d, c, exit) = self.take(&name);
            Ok(RunReport::new(energy(j, d), exit, c, 2))
        }

        fn run_unmeasured(&mut self, cmd: &CommandSpec) -> Result<Exit, MeasureError> {
            let name = cmd.display();
            self.note(format!("unmeasured {name}"));
            Ok(if self.script.contains_key(&name) {
                self.take(&name).3
            } else {
                Exit::code(0)
            })
        }
    }

    pub(crate) fn plan(cmds: &[&str], runs: usize) -> MeasurePlan {
        MeasurePlan {
            commands: cmds
                .iter()
                .map(|c| CommandSpec::Shell(c.to_string()))
                .collect(),
            runs,
            warmup: 0,
            prepare: None,
            ignore_failure: false,
        }
    }

    fn run(plan: &MeasurePlan, fake: &mut Fake) -> Result<Benchmark, MeasureError> {
        run_benchmark(plan, fake, &Cancel::new().unwrap(), &Sink::none())
    }

    const OK: Exit = Exit {
        code: 0,
        signal: None,
    };

    fn ok(j: f64) -> Scripted {
        (j, 1.0, 0.5, OK)
    }

    #[test]
    fn runs_are_interleaved_round_robin_after_unmeasured_warmups_and_prepares() {
        let mut fake = Fake::with(&[("A", vec![ok(1.0)]), ("B", vec![ok(2.0)])]);
        let mut p = plan(&["A", "B"], 2);
        p.warmup = 1;
        p.prepare = Some(CommandSpec::Shell("P".into()));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = std::sync::Arc::clone(&seen);
        let progress = Sink::new(move |pr: &BenchProgress| {
            let r = &pr.runs;
            heard.lock().unwrap().push((
                (r.done, r.total, pr.command, pr.warmup, pr.run),
                r.label.clone(),
                r.eta,
            ));
        });
        let b = run_benchmark(&p, &mut fake, &Cancel::new().unwrap(), &progress).unwrap();
        assert_eq!(
            fake.log,
            [
                "unmeasured P",
                "unmeasured A",
                "unmeasured P",
                "unmeasured B", // warmups
                "unmeasured P",
                "A",
                "unmeasured P",
                "B", // A1 B1
                "unmeasured P",
                "A",
                "unmeasured P",
                "B", // A2 B2
            ]
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].0, (0, 6, 0, true, 1));
        assert_eq!(seen[3].0, (3, 6, 1, false, 1));
        assert_eq!(seen[5].0, (5, 6, 1, false, 2));
        let labels: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(labels, ["A", "B", "A", "B", "A", "B"]);
        // No ETA before a run is measured; one after.
        assert_eq!(seen[0].2, None);
        assert!(seen[1..].iter().all(|s| s.2.is_some()));
        // Warmups are not in the results: two measured runs each, numbered in run order.
        let a = &b.results[0];
        assert_eq!(a.runs.len(), 2);
        assert_eq!(
            a.runs
                .iter()
                .map(|r| (r.run, r.sequence))
                .collect::<Vec<_>>(),
            [(1, 1), (2, 3)]
        );
        assert_eq!(b.results[1].runs[1].sequence, 4);
        assert!(!b.stopped_early);
    }

    #[test]
    fn failed_and_interrupted_runs_are_reported_and_left_out() {
        let fail = (100.0, 1.0, 0.5, Exit::code(1));
        let killed = (200.0, 1.0, 0.5, Exit::signal(9));
        let mut fake = Fake::with(&[("A", vec![ok(1.0), fail, ok(3.0), killed, ok(5.0)])]);
        let mut p = plan(&["A"], 5);
        p.ignore_failure = true;
        let b = run(&p, &mut fake).unwrap();
        let a = &b.results[0];
        assert_eq!((a.kept, a.failed, a.interrupted), (3, 1, 1));
        assert_eq!(a.runs.len(), 5);
        assert_eq!(a.runs[1].status, RunStatus::Failed);
        assert_eq!(a.runs[3].status, RunStatus::Interrupted);
        assert_eq!(a.runs[3].report.exit_code, 137);
        // 1, 3, 5 J only: mean 3, σ 2, median 3.
        let s = a.summary.unwrap().total_j;
        assert_eq!(
            (s.mean, s.stddev, s.median, s.min, s.max),
            (3.0, 2.0, 3.0, 1.0, 5.0)
        );
        assert_eq!(b.best, None, "one command: nothing to compare");
    }

    #[test]
    fn a_failed_run_stops_the_benchmark_without_ignore_failure() {
        let mut fake = Fake::with(&[
            ("A", vec![ok(1.0)]),
            ("B", vec![ok(1.0), (1.0, 1.0, 0.1, Exit::code(2))]),
        ]);
        let e = run(&plan(&["A", "B"], 3), &mut fake).unwrap_err();
        assert_eq!(fake.log, ["A", "B", "A", "B"]);
        let msg = e.to_string();
        assert!(
            msg.contains("command 'B' failed in run 2 of 3 with exit code 2"),
            "{msg}"
        );
        assert!(msg.contains("--ignore-failure"), "{msg}");
        // An interrupted run does not stop it.
        let mut fake = Fake::with(&[("A", vec![ok(1.0), (1.0, 1.0, 0.1, Exit::signal(15))])]);
        let b = run(&plan(&["A"], 3), &mut fake).unwrap();
        assert_eq!((b.results[0].kept, b.results[0].interrupted), (2, 1));
        // A failing warmup stops it too, and so does a failing --prepare.
        let mut fake = Fake::with(&[("A", vec![(1.0, 1.0, 0.1, Exit::code(127))])]);
        let mut p = plan(&["A"], 3);
        p.warmup = 2;
        let msg = run(&p, &mut fake).unwrap_err().to_string();
        assert!(msg.contains("failed in warmup run 1 of 2"), "{msg}");
        assert!(msg.contains("found no such command"), "{msg}");
        let mut fake = Fake::with(&[
            ("A", vec![ok(1.0)]),
            ("P", vec![(0.0, 0.0, 0.0, Exit::code(1))]),
        ]);
        let mut p = plan(&["A"], 3);
        p.prepare = Some(CommandSpec::Shell("P".into()));
        let msg = run(&p, &mut fake).unwrap_err().to_string();
        assert!(msg.contains("--prepare command 'P' failed"), "{msg}");
        assert!(fake.log == ["unmeasured P"], "{:?}", fake.log);
    }

    #[test]
    fn all_runs_failed_is_visible() {
        let mut fake = Fake::with(&[
            ("A", vec![ok(1.0)]),
            ("B", vec![(1.0, 1.0, 0.1, Exit::code(1))]),
        ]);
        let mut p = plan(&["A", "B"], 2);
        p.ignore_failure = true;
        let b = run(&p, &mut fake).unwrap();
        let none: Vec<&str> = b
            .without_kept_runs()
            .iter()
            .map(|r| r.command.as_str())
            .collect();
        assert_eq!(none, ["B"]);
        assert!(b.results[1].summary.is_none());
        assert_eq!(b.best, None, "B has nothing to compare");
        assert_eq!(b.results[0].energy_ratio, None);
    }

    #[test]
    fn a_stop_request_ends_the_loop_after_the_current_run() {
        let flag = std::sync::Arc::new(Cancel::new().unwrap());
        let mut fake = Fake::with(&[
            ("A", vec![ok(1.0)]),
            ("B", vec![(1.0, 1.0, 0.1, Exit::signal(2))]),
        ]);
        fake.stop_at = Some(("B".into(), flag.clone()));
        let b = run_benchmark(&plan(&["A", "B"], 5), &mut fake, &flag, &Sink::none()).unwrap();
        assert_eq!(fake.log, ["A", "B"]);
        assert!(b.stopped_early);
        assert_eq!((b.results[1].kept, b.results[1].interrupted), (0, 1));
    }

    #[test]
    fn no_command_and_no_runs_are_errors() {
        let mut fake = Fake::default();
        assert!(matches!(
            run(&plan(&[], 3), &mut fake),
            Err(MeasureError::NoCommand)
        ));
        assert!(matches!(
            run(&plan(&["A"], 0), &mut fake),
            Err(MeasureError::NoRuns)
        ));
        assert!(fake.log.is_empty());
    }

    #[test]
    fn statistics_ratios_and_holm_adjusted_p_values_by_hand() {
        // Total energy of three runs each; A is the best (mean 2 J).
        //   A = 1, 2, 3    B = 2.5, 3.5, 4.5 (mean 3.5)   C = 7, 8, 9 (mean 8)   D = 1.5, 2.5, 3.5 (mean 2.5)
        // Ratios to A: B 1.75, C 4, D 1.25.
        // Exact two-sided rank-sum tests against A (3 vs 3, no ties; C(6,3) = 20 arrangements,
        // counts of U = 0..9: 1 1 2 3 3 3 3 2 1 1):
        //   C: U = 9             → P(U ≥ 9) = 1/20,        p = 2 · 1/20  = 0.10
        //   B: pooled 1 2 2.5 3 3.5 4.5, U_B = 8 → P(U ≥ 8) = 2/20, p = 0.20
        //   D: pooled 1 1.5 2 2.5 3 3.5, U_D = 6 → P(U ≥ 6) = 7/20, P(U ≤ 6) = 16/20, p = 0.70
        // Holm, 3 comparisons: sorted C 0.10 × 3 = 0.30, B 0.20 × 2 = 0.40, D 0.70 × 1 = 0.70.
        let three = |a: f64, b: f64, c: f64| vec![ok(a), ok(b), ok(c)];
        let mut fake = Fake::with(&[
            ("A", three(1.0, 2.0, 3.0)),
            ("B", three(2.5, 3.5, 4.5)),
            ("C", three(7.0, 8.0, 9.0)),
            ("D", three(1.5, 2.5, 3.5)),
        ]);
        let b = run(&plan(&["A", "B", "C", "D"], 3), &mut fake).unwrap();
        assert_eq!(b.best, Some(0));
        let close = |x: Option<f64>, want: f64| {
            let x = x.unwrap();
            assert!((x - want).abs() < 1e-12, "{x} vs {want}");
        };
        let r = &b.results;
        close(r[0].energy_ratio, 1.0);
        close(r[1].energy_ratio, 1.75);
        close(r[2].energy_ratio, 4.0);
        close(r[3].energy_ratio, 1.25);
        assert_eq!(r[0].p_value, None);
        close(r[2].p_value, 0.1);
        close(r[1].p_value, 0.2);
        close(r[3].p_value, 0.7);
        close(r[2].p_holm, 0.3);
        close(r[1].p_holm, 0.4);
        close(r[3].p_holm, 0.7);
        // σ of A and B is 1 J; ratio σ = 1.75 · √((1/3.5)² + (1/2)²) = 1.75 · 0.575876… = 1.00778…
        close(
            r[1].energy_ratio_stddev,
            1.75 * ((1.0f64 / 3.5).powi(2) + 0.25).sqrt(),
        );
        // Every run of the fake: 1 s on 2 CPUs, 0.5 CPU-s: a quarter of the total is the command's.
        let s = r[2].summary.unwrap();
        assert_eq!(
            (s.attributed_j.mean, s.attributed_j.min, s.attributed_j.max),
            (2.0, 1.75, 2.25)
        );
        assert_eq!(s.total_j.median, 8.0);
        assert_eq!((s.total_j.q1, s.total_j.q3), (7.5, 8.5));
        assert_eq!(s.mean_power_w.mean, 8.0);
        assert_eq!(s.duration_s.stddev, 0.0);
    }

    #[test]
    fn the_report_carries_the_labels_and_round_trips() {
        let mut fake = Fake::with(&[("A", vec![ok(1.0)]), ("B", vec![ok(2.0)])]);
        let p = plan(&["A", "B"], 2);
        let b = run(&p, &mut fake).unwrap();
        let prov = Provenance {
            mechanism: wattio_energy::Mechanism::Model,
            estimated: true,
            model: Some("ccf-linear(min=0.74W,max=3.5W per vCPU)".into()),
        };
        let rep = Report::new(&prov, 2, &p, b);
        assert!(rep.label.starts_with("estimated (model: "));
        assert!(rep
            .attributed_label
            .ends_with(", attributed (cpu-time share)"));
        let v = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["best"], 0);
        assert_eq!(v["results"][1]["energy_ratio"], 2.0);
        assert_eq!(v["results"][0]["runs"][0]["status"], "ok");
        assert_eq!(v["results"][0]["runs"][0]["attributed_j"], 0.25);
        assert_eq!(v["results"][0]["summary"]["total_j"]["mean"], 1.0);
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, rep);
    }
}
