//! The overhead study's runner: walks the schedule through an [`OverheadExecutor`], writes
//! each run as it finishes, resumes where a study stopped.

use crate::executor::{Measured, OverheadExecutor, RunBody, RunSpec};
use crate::plan::{OverheadPlan, ScheduledRun};
use crate::OverheadError;
use crate::{IdleRun, LoadRun, OFF};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wattio_energy::ModelParams;
use wattio_progress::Cancel;
use wattio_progress::{Eta, Sink, StudyProgress};
use wattio_runner::CsvLog;
use wattio_runner::{check_study_dir, mark_complete, open_study_dir, StudyEnd, StudyManifest};

/// The study's name in `study.json`.
const STUDY: &str = "wattio overhead";

/// Runs an [`OverheadPlan`] into `out_dir`: `runs.csv` (load runs) and `idle.csv` (idle
/// runs), a row appended as each run finishes, and `study.json` (the plan, for `--resume`).
pub struct OverheadRunner<'a> {
    pub plan: &'a OverheadPlan,
    pub out_dir: PathBuf,
    /// Estimates the idle runs' power (labelled with its name in every row).
    pub model: ModelParams,
    /// The command line that started the study, kept in `study.json`.
    pub command: String,
}

/// The result files of the study, in its output directory.
const RESULT_FILES: &[&str] = &["runs.csv", "idle.csv"];

/// Seconds the untimed warm-up run of each workload took ([`OverheadRunner::warm_up`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WarmUp {
    pub seconds: Vec<f64>,
}

/// Every run of a finished study, those of earlier attempts included.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverheadRuns {
    pub load: Vec<LoadRun>,
    pub idle: Vec<IdleRun>,
}

impl OverheadRuns {
    fn len(&self) -> usize {
        self.load.len() + self.idle.len()
    }
}

/// What identifies a run in its row, compared with the schedule on resume.
fn check_row(
    file: &'static str,
    plan: &OverheadPlan,
    runs: &[ScheduledRun],
    seq: usize,
    got: (usize, &str, &str, f64, usize),
) -> Result<(), OverheadError> {
    let not = |why: String| OverheadError::NotThisPlan { file, seq, why };
    let Some(r) = seq.checked_sub(1).and_then(|i| runs.get(i)) else {
        return Err(not(format!("the plan has {} runs", runs.len())));
    };
    let want_target = r
        .workload
        .and_then(|i| plan.workloads.get(i))
        .map_or("idle", |w| w.name.as_str());
    let want = (
        r.round,
        want_target,
        r.mechanism.as_deref().unwrap_or(OFF),
        r.freq_hz,
        r.rep,
    );
    if want != got {
        return Err(not(format!(
            "round {} {} rep {} there, round {} {} rep {} in the plan",
            got.0,
            format_args!("{} {} {} Hz", got.1, got.2, got.3),
            got.4,
            want.0,
            format_args!("{} {} {} Hz", want.1, want.2, want.3),
            want.4
        )));
    }
    Ok(())
}

impl OverheadRunner<'_> {
    /// `study.json` for this plan: what a resume must match.
    pub fn manifest(&self) -> StudyManifest {
        let mut plan = serde_json::to_value(self.plan).expect("a plan always serialises");
        if let Some(o) = plan.as_object_mut() {
            o.insert("model".into(), self.model.name().into());
        }
        StudyManifest {
            study: STUDY.into(),
            command: self.command.clone(),
            plan,
            total_runs: self.plan.runs().len(),
            complete: false,
        }
    }

    /// Whether the study may start (`resume == false`: `out_dir` holds no unfinished study
    /// with runs) or resume (`out_dir` holds this plan), without writing anything: the
    /// check [`run`](Self::run) makes first, to make before the warm-up.
    pub fn check(&self, resume: bool) -> Result<(), OverheadError> {
        check_study_dir(&self.out_dir, &self.manifest(), resume, RESULT_FILES)?;
        Ok(())
    }

    /// One untimed run of each workload (page cache, CPU frequency), before the study; its
    /// times start the ETA. `None` when cancelled.
    pub fn warm_up(
        &self,
        exec: &mut dyn OverheadExecutor,
        cancel: &Cancel,
    ) -> Result<Option<WarmUp>, OverheadError> {
        let mut seconds = Vec::new();
        for w in &self.plan.workloads {
            if cancel.is_set() {
                return Ok(None);
            }
            let spec = RunSpec {
                body: RunBody::Workload(w),
                recorder: None,
                settle: Duration::ZERO,
            };
            match exec.run(&spec, cancel) {
                Ok(m) => seconds.push(m.elapsed_s),
                Err(OverheadError::Cancelled) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(WarmUp { seconds }))
    }

    /// The ETA before any run: a workload run takes its warm-up time plus the settle pause,
    /// an idle run its window plus the pause, until runs are measured.
    fn eta(&self, warm: &WarmUp) -> Eta<Option<usize>> {
        let mut eta = Eta::new();
        let settle_s = self.plan.settle.as_secs_f64();
        if !self.plan.idle.is_zero() {
            eta.record(None, self.plan.idle.as_secs_f64() + settle_s);
        }
        for (i, s) in warm.seconds.iter().enumerate() {
            eta.record(Some(i), s + settle_s);
        }
        eta
    }

    /// The time the whole plan should take, from the warm-up's measured times.
    pub fn estimate(&self, warm: &WarmUp) -> Option<std::time::Duration> {
        let runs = self.plan.runs();
        self.eta(warm).remaining(runs.iter().map(|r| &r.workload))
    }

    /// Runs every run of the schedule not already in `out_dir` (with `resume`), each
    /// appended to `runs.csv` or `idle.csv` as it finishes. `progress` is told before every
    /// run and at the end. When `cancel` is set the run in progress is abandoned (its
    /// processes ended) and the study returns [`StudyEnd::Interrupted`] with the runs kept.
    pub fn run(
        &self,
        exec: &mut dyn OverheadExecutor,
        resume: bool,
        warm: &WarmUp,
        progress: &Sink<StudyProgress>,
        cancel: &Cancel,
    ) -> Result<StudyEnd<OverheadRuns>, OverheadError> {
        let manifest = self.manifest();
        std::fs::create_dir_all(&self.out_dir)?;
        open_study_dir(&self.out_dir, &manifest, resume, RESULT_FILES)?;
        let runs = self.plan.runs();
        let total = runs.len();
        let (mut logs, mut out) = self.open_logs(resume)?;
        let mut done = self.runs_done(&runs, &out)?;
        let resumed = done.len();
        let mut eta = self.eta(warm);
        let n_cpus = exec.n_cpus();
        for (idx, r) in runs.iter().enumerate() {
            if done.contains(&r.seq) {
                continue;
            }
            let interrupted = StudyEnd::Interrupted {
                kept: done.len(),
                total,
            };
            if cancel.is_set() {
                return Ok(interrupted);
            }
            let left = runs[idx..]
                .iter()
                .filter(|x| !done.contains(&x.seq))
                .map(|x| &x.workload);
            progress.tell(&StudyProgress {
                done: done.len(),
                total,
                resumed,
                label: self.plan.describe(r),
                eta: eta.remaining(left),
            });
            let t0 = Instant::now();
            let m = match exec.run(&self.spec(r), cancel) {
                Ok(m) => m,
                Err(OverheadError::Cancelled) => return Ok(interrupted),
                Err(e) => return Err(e),
            };
            eta.record(r.workload, t0.elapsed().as_secs_f64());
            self.keep(r, m, n_cpus, &mut logs, &mut out)?;
            done.insert(r.seq);
        }
        progress.tell(&StudyProgress {
            done: done.len(),
            total,
            resumed,
            label: "done".into(),
            eta: Some(std::time::Duration::ZERO),
        });
        mark_complete(&self.out_dir)?;
        Ok(StudyEnd::Complete(out))
    }

    /// The study's result logs, fresh or (with `resume`) with the rows already in them.
    fn open_logs(&self, resume: bool) -> Result<(Logs, OverheadRuns), OverheadError> {
        let load_path = self.out_dir.join(RESULT_FILES[0]);
        let idle_path = self.out_dir.join(RESULT_FILES[1]);
        let (load_log, load) = if resume {
            CsvLog::<LoadRun>::resume(&load_path)?
        } else {
            (CsvLog::create(&load_path)?, vec![])
        };
        let (idle_log, idle) = match (!self.plan.idle.is_zero(), resume) {
            (false, _) => (None, vec![]),
            (true, true) => {
                let (log, rows) = CsvLog::<IdleRun>::resume(&idle_path)?;
                (Some(log), rows)
            }
            (true, false) => (Some(CsvLog::create(&idle_path)?), vec![]),
        };
        let logs = Logs {
            load: load_log,
            idle: idle_log,
        };
        Ok((logs, OverheadRuns { load, idle }))
    }

    /// The schedule's runs the rows already kept, each checked against the plan: a row the
    /// plan does not have, or a run kept twice, is an error.
    fn runs_done(
        &self,
        runs: &[ScheduledRun],
        kept: &OverheadRuns,
    ) -> Result<BTreeSet<usize>, OverheadError> {
        let mut done: BTreeSet<usize> = BTreeSet::new();
        for r in &kept.load {
            let key = (
                r.round,
                r.workload.as_str(),
                r.mechanism.as_str(),
                r.freq_hz,
                r.rep,
            );
            check_row("runs.csv", self.plan, runs, r.seq, key)?;
            done.insert(r.seq);
        }
        for r in &kept.idle {
            let key = (r.round, "idle", r.mechanism.as_str(), r.freq_hz, r.rep);
            check_row("idle.csv", self.plan, runs, r.seq, key)?;
            done.insert(r.seq);
        }
        if done.len() != kept.len() {
            return Err(OverheadError::NotThisPlan {
                file: "runs.csv",
                seq: 0,
                why: "some runs appear twice".into(),
            });
        }
        Ok(done)
    }

    /// What the executor runs for `r`.
    fn spec<'r>(&'r self, r: &'r ScheduledRun) -> RunSpec<'r> {
        RunSpec {
            body: match r.workload {
                Some(i) => RunBody::Workload(&self.plan.workloads[i]),
                None => RunBody::Idle {
                    window: self.plan.idle,
                },
            },
            recorder: r.mechanism.as_deref().map(|m| (m, r.freq_hz)),
            settle: self.plan.settle,
        }
    }

    /// Appends run `r`'s row, measured as `m` on a machine of `n_cpus` CPUs, to its log and
    /// to `out`.
    fn keep(
        &self,
        r: &ScheduledRun,
        m: Measured,
        n_cpus: usize,
        logs: &mut Logs,
        out: &mut OverheadRuns,
    ) -> Result<(), OverheadError> {
        let mechanism = r.mechanism.clone().unwrap_or_else(|| OFF.into());
        match (r.workload, m.idle) {
            (Some(i), _) => {
                let row = LoadRun {
                    round: r.round,
                    seq: r.seq,
                    workload: self.plan.workloads[i].name.clone(),
                    mechanism,
                    freq_hz: r.freq_hz,
                    rep: r.rep,
                    elapsed_s: m.elapsed_s,
                    samples: m.recorder.samples,
                    recorder_s: m.recorder.ran_s,
                    recorder_cpu_s: m.recorder.cpu_s,
                    start_unix: m.start_unix,
                };
                logs.load.append(&row)?;
                out.load.push(row);
            }
            (None, Some(readings)) => {
                let e = self
                    .model
                    .energy_j(n_cpus, m.elapsed_s, readings.busy_cpu_s);
                let row = IdleRun {
                    round: r.round,
                    seq: r.seq,
                    mechanism,
                    freq_hz: r.freq_hz,
                    rep: r.rep,
                    wall_s: m.elapsed_s,
                    busy_cpu_s: readings.busy_cpu_s,
                    recorder_s: m.recorder.ran_s,
                    recorder_cpu_s: m.recorder.cpu_s,
                    samples: m.recorder.samples,
                    est_power_w: e / m.elapsed_s.max(1e-9),
                    model: self.model.name(),
                    cstates: readings.cstates,
                    n_cpus: Some(n_cpus),
                };
                if let Some(log) = logs.idle.as_mut() {
                    log.append(&row)?;
                }
                out.idle.push(row);
            }
            (None, None) => {}
        }
        Ok(())
    }
}

/// The study's result logs: `runs.csv`, and `idle.csv` when the plan has idle runs.
struct Logs {
    load: CsvLog<LoadRun>,
    idle: Option<CsvLog<IdleRun>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{IdleReadings, Measured};
    use crate::plan::Workload;
    use crate::record::RecorderStats;
    use std::sync::{Arc, Mutex};

    fn plan() -> OverheadPlan {
        OverheadPlan {
            workloads: vec![
                Workload {
                    name: "a".into(),
                    argv: vec!["a".into()],
                },
                Workload {
                    name: "b, with a comma".into(),
                    argv: vec!["b".into()],
                },
            ],
            mechanisms: vec!["model".into(), "ebpf".into()],
            freqs: vec![1.0, 1000.0],
            reps_per_visit: 2,
            rounds: 2,
            idle: Duration::from_secs(3),
            settle: Duration::from_millis(500),
            shuffle_seed: Some(7),
        }
    }

    /// Answers from a script: workload `a` takes 2 s, `b` 4 s, idle 3 s; the recorder writes
    /// `freq × time` rows. Cancels the study after `cancel_after` runs.
    struct Fake<'c> {
        calls: Vec<String>,
        cancel_after: Option<(usize, &'c Cancel)>,
    }

    impl<'c> Fake<'c> {
        fn new(cancel_after: Option<(usize, &'c Cancel)>) -> Self {
            Fake {
                calls: vec![],
                cancel_after,
            }
        }
    }

    impl OverheadExecutor for Fake<'_> {
        fn run(&mut self, run: &RunSpec<'_>, cancel: &Cancel) -> Result<Measured, OverheadError> {
            if cancel.is_set() {
                return Err(OverheadError::Cancelled);
            }
            let (elapsed_s, idle) = match run.body {
                RunBody::Workload(w) if w.name == "a" => (2.0, None),
                RunBody::Workload(_) => (4.0, None),
                RunBody::Idle { window } => (
                    window.as_secs_f64(),
                    Some(IdleReadings {
                        busy_cpu_s: 0.3,
                        cstates: "unavailable: fake".into(),
                    }),
                ),
            };
            let what = match run.body {
                RunBody::Workload(w) => w.name.clone(),
                RunBody::Idle { .. } => "idle".into(),
            };
            self.calls.push(format!("{what} {:?}", run.recorder));
            if let Some((n, c)) = self.cancel_after {
                if self.calls.len() >= n {
                    c.set();
                }
            }
            Ok(Measured {
                elapsed_s,
                start_unix: self.calls.len() as f64,
                recorder: run
                    .recorder
                    .map_or(RecorderStats::default(), |(_, f)| RecorderStats {
                        samples: (f * elapsed_s) as u64,
                        ran_s: elapsed_s,
                        cpu_s: 0.01,
                    }),
                idle,
            })
        }

        fn n_cpus(&self) -> usize {
            2
        }
    }

    /// Warm-up, then the study, as `wattio overhead` does.
    fn go(
        r: &OverheadRunner<'_>,
        exec: &mut Fake<'_>,
        resume: bool,
        progress: &Sink<StudyProgress>,
        cancel: &Cancel,
    ) -> Result<StudyEnd<OverheadRuns>, OverheadError> {
        let warm = r
            .warm_up(exec, cancel)?
            .expect("not cancelled during the warm-up");
        r.run(exec, resume, &warm, progress, cancel)
    }

    /// [`go`] with no one listening to the progress.
    fn go_unheard(
        r: &OverheadRunner<'_>,
        exec: &mut Fake<'_>,
        resume: bool,
        cancel: &Cancel,
    ) -> Result<StudyEnd<OverheadRuns>, OverheadError> {
        go(r, exec, resume, &Sink::none(), cancel)
    }

    fn runner<'a>(p: &'a OverheadPlan, dir: &std::path::Path) -> OverheadRunner<'a> {
        OverheadRunner {
            plan: p,
            out_dir: dir.to_path_buf(),
            model: ModelParams::default(),
            command: "wattio overhead --rounds 2".into(),
        }
    }

    #[test]
    fn runs_follow_the_schedule_and_every_row_is_on_disk() {
        let d = tempfile::tempdir().unwrap();
        let p = plan();
        let cancel = Cancel::new().unwrap();
        let mut fake = Fake::new(None);
        let seen = Arc::new(Mutex::new(vec![]));
        let heard = Arc::clone(&seen);
        let r = runner(&p, d.path());
        let warm = r.warm_up(&mut fake, &cancel).unwrap().unwrap();
        assert_eq!(warm.seconds, [2.0, 4.0]);
        // 20 runs of each workload and 20 idle runs, at warm-up time + settle pause.
        let whole = r.estimate(&warm).unwrap().as_secs_f64();
        assert!((whole - (20.0 * 2.5 + 20.0 * 4.5 + 20.0 * 3.5)).abs() < 1e-9);
        let end = r
            .run(
                &mut fake,
                false,
                &warm,
                &Sink::new(move |s: &StudyProgress| heard.lock().unwrap().push((s.done, s.eta))),
                &cancel,
            )
            .unwrap();
        let StudyEnd::Complete(out) = end else {
            panic!("not complete")
        };
        let runs = p.runs();
        // 2 warm-ups, then every run in schedule order.
        assert_eq!(fake.calls.len(), 2 + runs.len());
        assert_eq!(&fake.calls[..2], ["a None", "b, with a comma None"]);
        for (call, r) in fake.calls[2..].iter().zip(&runs) {
            let target = r.workload.map_or("idle", |i| p.workloads[i].name.as_str());
            let rec = r.mechanism.as_deref().map(|m| (m, r.freq_hz));
            assert_eq!(call, &format!("{target} {rec:?}"));
        }
        // (2 workloads + idle) × (off + 2 mechanisms × 2 freqs) × 2 reps × 2 rounds.
        assert_eq!(runs.len(), 3 * 5 * 2 * 2);
        assert_eq!(out.load.len(), 2 * 5 * 2 * 2);
        assert_eq!(out.idle.len(), 5 * 2 * 2);
        let on_disk: Vec<LoadRun> =
            wattio_runner::read_rows(&std::fs::read(d.path().join("runs.csv")).unwrap()).unwrap();
        assert_eq!(on_disk, out.load);
        let idle: Vec<IdleRun> =
            wattio_runner::read_rows(&std::fs::read(d.path().join("idle.csv")).unwrap()).unwrap();
        assert_eq!(idle, out.idle);
        let r = out.idle.iter().find(|r| r.mechanism == "ebpf").unwrap();
        assert_eq!(
            (r.samples, r.n_cpus, r.wall_s),
            ((r.freq_hz * 3.0) as u64, Some(2), 3.0)
        );
        // est. power from the model, 0.3 busy CPU-s over 3 s on 2 vCPUs.
        let want = ModelParams::default().energy_j(2, 3.0, 0.3) / 3.0;
        assert!((r.est_power_w - want).abs() < 1e-12);
        // Progress before every run and once at the end; the first ETA is the estimate from
        // the warm-up, later ones take the runs' own times in.
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), runs.len() + 1);
        let first = seen[0].1.unwrap().as_secs_f64();
        assert!((first - whole).abs() < 1e-9, "{first} vs {whole}");
        assert_eq!(seen.last().unwrap().0, runs.len());
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("study.json")).unwrap()).unwrap();
        assert_eq!(m["complete"], true);
        assert_eq!(m["plan"]["mechanisms"][1], "ebpf");
    }

    #[test]
    fn an_interrupted_study_keeps_its_runs_and_a_resume_does_only_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let p = plan();
        let total = p.runs().len();
        let cancel = Cancel::new().unwrap();
        // 2 warm-ups + 11 runs.
        let mut fake = Fake::new(Some((13, &cancel)));
        let end = go_unheard(&runner(&p, d.path()), &mut fake, false, &cancel).unwrap();
        assert_eq!(end, StudyEnd::Interrupted { kept: 11, total });
        let load: Vec<LoadRun> =
            wattio_runner::read_rows(&std::fs::read(d.path().join("runs.csv")).unwrap()).unwrap();
        let idle: Vec<IdleRun> =
            wattio_runner::read_rows(&std::fs::read(d.path().join("idle.csv")).unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(load.len() + idle.len(), 11);

        // A fresh start in that directory is refused; so is a resume with another plan.
        let fresh = Cancel::new().unwrap();
        let mut fake = Fake::new(None);
        let e = go_unheard(&runner(&p, d.path()), &mut fake, false, &fresh)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unfinished wattio overhead study"), "{e}");
        let mut other = plan();
        other.rounds = 3;
        let e = go_unheard(&runner(&other, d.path()), &mut fake, true, &fresh)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rounds: 2 there, 3 now"), "{e}");
        assert_eq!(fake.calls.len(), 4, "nothing but warm-ups ran");
        fake.calls.clear();

        let resumed_from = Arc::new(Mutex::new(None));
        let first = Arc::clone(&resumed_from);
        let end = go(
            &runner(&p, d.path()),
            &mut fake,
            true,
            &Sink::new(move |s: &StudyProgress| {
                first.lock().unwrap().get_or_insert(s.resumed);
            }),
            &fresh,
        )
        .unwrap();
        let StudyEnd::Complete(out) = end else {
            panic!("not complete")
        };
        assert_eq!(*resumed_from.lock().unwrap(), Some(11));
        // Warm-ups, then only the runs not done.
        assert_eq!(fake.calls.len(), 2 + total - 11);
        let mut seqs: Vec<usize> = out
            .load
            .iter()
            .map(|r| r.seq)
            .chain(out.idle.iter().map(|r| r.seq))
            .collect();
        seqs.sort();
        assert_eq!(
            seqs,
            (1..=total).collect::<Vec<_>>(),
            "all runs, no duplicate"
        );
        let on_disk: Vec<LoadRun> =
            wattio_runner::read_rows(&std::fs::read(d.path().join("runs.csv")).unwrap()).unwrap();
        assert_eq!(on_disk.len(), out.load.len());
    }

    #[test]
    fn rows_of_another_plan_are_refused_on_resume() {
        let d = tempfile::tempdir().unwrap();
        let p = plan();
        let cancel = Cancel::new().unwrap();
        let mut fake = Fake::new(Some((5, &cancel)));
        go_unheard(&runner(&p, d.path()), &mut fake, false, &cancel).unwrap();
        // Edit the first row's workload.
        let text = std::fs::read_to_string(d.path().join("runs.csv")).unwrap();
        let (head, rest) = text.split_once('\n').unwrap();
        let edited = format!("{head}\n{}", rest.replacen(",a,", ",zz,", 1));
        std::fs::write(d.path().join("runs.csv"), edited).unwrap();
        let fresh = Cancel::new().unwrap();
        let e = go_unheard(&runner(&p, d.path()), &mut fake, true, &fresh)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("runs.csv row with seq") && e.contains("zz"),
            "{e}"
        );
    }
}
