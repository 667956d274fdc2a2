//! What the overhead study runs and in which order.

use serde::{Serialize, Serializer};
use std::time::Duration;
use wattio_stats::SplitMix64;

/// A workload: a name and the command that does a fixed amount of work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub name: String,
    pub argv: Vec<String>,
}

/// The default `stress-ng` workloads: CPU-bound (matrix product), memory-bound (STREAM)
/// and mixed (one matrix worker beside one memory reader). Work is fixed by bogo-op
/// counts so the running time is what changes. `scale` multiplies the op counts
/// (1.0 ≈ 1–2 s each on a 2-vCPU VM).
pub fn default_workloads(workers: usize, scale: f64) -> Vec<Workload> {
    let ops = |base: f64| ((base * scale).round() as u64).max(1).to_string();
    let w = workers.max(1).to_string();
    let half = (workers / 2).max(1).to_string();
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        Workload {
            name: "cpu-matrixprod".into(),
            argv: [
                v(&[
                    "stress-ng",
                    "--cpu",
                    &w,
                    "--cpu-method",
                    "matrixprod",
                    "--cpu-ops",
                ]),
                vec![ops(1000.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
        Workload {
            name: "mem-stream".into(),
            argv: [
                v(&["stress-ng", "--stream", &w, "--stream-ops"]),
                vec![ops(2.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
        Workload {
            name: "mixed-cpu+vm".into(),
            argv: [
                v(&[
                    "stress-ng",
                    "--cpu",
                    &half,
                    "--cpu-method",
                    "matrixprod",
                    "--cpu-ops",
                ]),
                vec![ops(500.0)],
                v(&[
                    "--vm",
                    &half,
                    "--vm-bytes",
                    "64M",
                    "--vm-keep",
                    "--vm-method",
                    "read64",
                    "--vm-ops",
                ]),
                vec![ops(5000.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
    ]
}

/// The run order within each round (`wattio overhead --order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RunOrder {
    /// A new order every round, from a seed (reproducible).
    Shuffled,
    /// The paper's order: off first, then rising frequency.
    Fixed,
}

impl RunOrder {
    /// [`OverheadPlan::shuffle_seed`] for this order and `seed`.
    pub fn shuffle_seed(self, seed: u64) -> Option<u64> {
        (self == RunOrder::Shuffled).then_some(seed)
    }
}

/// What `wattio overhead` runs. Serialised into `study.json`, where a resume compares it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverheadPlan {
    pub workloads: Vec<Workload>,
    /// Mechanisms to sample with, as `wattio record --source` accepts them.
    pub mechanisms: Vec<String>,
    /// Sampling frequencies (Hz), not including "off" which is always run.
    pub freqs: Vec<f64>,
    pub reps_per_visit: usize,
    pub rounds: usize,
    /// How long each idle run is; zero skips the idle study. (`idle_s` in `study.json`.)
    #[serde(rename = "idle_s", serialize_with = "as_seconds")]
    pub idle: Duration,
    /// Pause after starting the recorder (and in "off" runs) before the workload starts.
    /// (`settle_s` in `study.json`.)
    #[serde(rename = "settle_s", serialize_with = "as_seconds")]
    pub settle: Duration,
    /// Shuffle the order of combinations in every round with this seed; `None` keeps the
    /// paper's fixed order. A fixed order ties each combination to one position in the
    /// cycle, so anything that drifts with that position (other tenants' load, the
    /// transition between workloads) looks like an effect of the combination.
    pub shuffle_seed: Option<u64>,
}

/// A duration as a number of seconds, the unit `study.json` has always had (a resume compares
/// the plan it holds with the new one).
fn as_seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// One visit of the round-robin schedule: `reps` consecutive runs of one combination.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    pub round: usize,
    /// Index into `OverheadPlan::workloads`, or None for an idle run.
    pub workload: Option<usize>,
    /// None = off.
    pub mechanism: Option<String>,
    pub freq_hz: f64,
    pub reps: usize,
}

/// One run of the schedule, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledRun {
    /// 1-based position in the whole schedule: the `seq` column of the result rows.
    pub seq: usize,
    pub round: usize,
    /// Index into `OverheadPlan::workloads`, or None for an idle run.
    pub workload: Option<usize>,
    /// None = off.
    pub mechanism: Option<String>,
    pub freq_hz: f64,
    /// 0-based repetition within its visit.
    pub rep: usize,
}

impl OverheadPlan {
    /// Combinations in their fixed order: for each workload (then idle), off first,
    /// then each mechanism × frequency.
    pub fn combinations(&self) -> Vec<(Option<usize>, Option<String>, f64)> {
        let mut targets: Vec<Option<usize>> = (0..self.workloads.len()).map(Some).collect();
        if !self.idle.is_zero() {
            targets.push(None);
        }
        let mut out = Vec::new();
        for t in targets {
            out.push((t, None, 0.0));
            for m in &self.mechanisms {
                for f in &self.freqs {
                    out.push((t, Some(m.clone()), *f));
                }
            }
        }
        out
    }

    /// The schedule of the paper's Figure 6: every combination gets `reps_per_visit` runs,
    /// then the next one, and the whole cycle repeats `rounds` times — in the same order
    /// each round, or shuffled per round ([`SplitMix64::shuffle`]) when `shuffle_seed` is set.
    pub fn schedule(&self) -> Vec<Visit> {
        let mut combos = self.combinations();
        let mut rng = self.shuffle_seed.map(SplitMix64::new);
        let mut v = Vec::new();
        for round in 0..self.rounds {
            if let Some(rng) = rng.as_mut() {
                rng.shuffle(&mut combos);
            }
            for (w, m, f) in &combos {
                v.push(Visit {
                    round,
                    workload: *w,
                    mechanism: m.clone(),
                    freq_hz: *f,
                    reps: self.reps_per_visit,
                });
            }
        }
        v
    }

    /// Every run of the [`schedule`](Self::schedule), numbered.
    pub fn runs(&self) -> Vec<ScheduledRun> {
        let mut out = Vec::new();
        for v in self.schedule() {
            for rep in 0..v.reps {
                out.push(ScheduledRun {
                    seq: out.len() + 1,
                    round: v.round,
                    workload: v.workload,
                    mechanism: v.mechanism.clone(),
                    freq_hz: v.freq_hz,
                    rep,
                });
            }
        }
        out
    }

    /// "cpu-matrixprod model 10 Hz", "idle off": what a run is, in words.
    pub fn describe(&self, r: &ScheduledRun) -> String {
        let target = r
            .workload
            .and_then(|i| self.workloads.get(i))
            .map_or("idle", |w| w.name.as_str());
        match &r.mechanism {
            Some(m) => format!("{target} {m} {} Hz", r.freq_hz),
            None => format!("{target} {}", crate::OFF),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> OverheadPlan {
        OverheadPlan {
            workloads: default_workloads(2, 1.0),
            mechanisms: vec!["model".into()],
            freqs: vec![0.1, 1.0, 10.0, 100.0, 1000.0],
            reps_per_visit: 3,
            rounds: 2,
            idle: Duration::from_secs(2),
            settle: Duration::from_millis(200),
            shuffle_seed: None,
        }
    }

    #[test]
    fn study_json_keeps_the_durations_as_seconds() {
        // A resume compares this with the plan in an existing study.json: same keys, numbers.
        let v = serde_json::to_value(plan()).unwrap();
        assert_eq!(v["idle_s"], serde_json::json!(2.0));
        assert_eq!(v["settle_s"], serde_json::json!(0.2));
        assert!(v.get("idle").is_none() && v.get("settle").is_none(), "{v}");
    }

    #[test]
    fn schedule_is_round_robin_like_figure_6() {
        let p = plan();
        let s = p.schedule();
        // 3 workloads + idle, each: off + 5 freqs, two rounds.
        assert_eq!(s.len(), 4 * 6 * 2);
        assert_eq!(s[0].mechanism, None);
        assert_eq!(s[1].freq_hz, 0.1);
        // The second round starts over with the first combination.
        assert_eq!(s[24].round, 1);
        assert_eq!((s[24].workload, s[24].mechanism.clone()), (Some(0), None));
        assert!(s.iter().all(|v| v.reps == 3));
        let runs = p.runs();
        assert_eq!(runs.len(), 4 * 6 * 2 * 3);
        assert_eq!(
            (runs[3].seq, runs[3].rep, runs[3].freq_hz, runs[2].rep),
            (4, 0, 0.1, 2)
        );
        assert_eq!(p.describe(&runs[3]), "cpu-matrixprod model 0.1 Hz");
        assert_eq!(p.describe(&runs[runs.len() - 1]), "idle model 1000 Hz");
        assert_eq!(p.describe(&runs[0]), "cpu-matrixprod off");
    }

    #[test]
    fn shuffled_schedule_covers_every_combination_each_round() {
        let mut p = plan();
        p.shuffle_seed = Some(42);
        let s = p.schedule();
        let fixed = plan().schedule();
        assert_eq!(s.len(), fixed.len());
        assert_ne!(s, fixed, "seed 42 should change the order");
        let key = |v: &Visit| format!("{:?}{:?}{}", v.workload, v.mechanism, v.freq_hz);
        for round in 0..2 {
            let mut a: Vec<String> = s.iter().filter(|v| v.round == round).map(key).collect();
            let mut b: Vec<String> = fixed.iter().filter(|v| v.round == round).map(key).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
        // Same seed, same order.
        assert_eq!(s, p.schedule());
    }
}
