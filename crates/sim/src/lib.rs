//! wattio-sim: replay cache traces on virtual time against device power models, STPM, ghost
//! hints and the spin-down baselines, to reproduce the evaluation of "Ghosts in the Machine".
//!
//! - Traces ([`Trace`] of [`TraceRequest`]s): the CSV and UCB Home IP formats
//!   ([`load_trace_file`], [`UcbSelect`], [`trace_csv`]); seeded e-mail and Web generators
//!   ([`email_trace`], [`web_trace`]).
//! - [`Sim`]: the discrete-event replay, which drives the library an application links against
//!   (`wattio-power`'s power manager and controllers, `wattio-cache`'s cache manager on a
//!   [`SimulatedDisk`]) on a virtual clock, and records a [`Replay`]; [`replay`] for one
//!   [`Strategy`], [`replay_oracle`] (the offline oracle) and [`lower_bound`].
//! - The strategies ([`static_default`], [`adaptive`], [`baselines`]), [`replay_all`] and
//!   [`sweep`] (rows of [`SweepRow`], drawn by [`sweep_charts`]): what `wattio cache
//!   replay|sweep` run.
//!
//! Every energy figure is *simulated* from a device profile: an estimate, labelled as such.

mod engine;
mod rng;
mod trace;

pub use engine::{
    cached_objects, lower_bound, replay, replay_oracle, CachePolicy, DiskIo, DiskLog, ModeChange,
    ReadRecord, Replay, Served, Sim, SimulatedDisk, Strategy,
};
pub use trace::{
    email_trace, encode_ucb, load_trace_file, trace_csv, web_trace, Trace, TraceError, TraceOp,
    TraceRequest, UcbSelect,
};
pub use wattio_power::NetPolicy;
// The rows it writes live with the other result schemas, which the report reads through.
pub use wattio_results::{sweep_csv, RunResult, SweepRow, SWEEP_COLUMNS};

use std::time::{Duration, Instant};
use wattio_power::{DiskPolicy, GhostPolicy, Profile};
use wattio_progress::{Eta, Sink, StudyProgress};

/// The knob values of the paper's Figures 8–12.
pub const SWEEP_KNOBS: [u8; 7] = [0, 50, 70, 90, 95, 99, 100];

/// The device's own network policy from the profile: a timeout (LTE tail) or static PSM.
pub fn default_net(profile: &Profile) -> NetPolicy {
    match profile.network_default_timeout_s {
        Some(t) => NetPolicy::Timeout(t),
        None => NetPolicy::StaticLow,
    }
}

/// The paper's static baseline: fixed cache hierarchy, default device power management
/// (network PSM or its own timeout; disk: an ABLE-like firmware ladder, or the profile's timeout).
pub fn static_default(profile: &Profile) -> Strategy {
    let disk = match profile.storage_default_timeout_s {
        Some(t) => DiskPolicy::FixedTimeout(t),
        None => DiskPolicy::able(&profile.storage),
    };
    Strategy {
        name: "static".into(),
        cache: CachePolicy::Static,
        disk,
        net: default_net(profile),
    }
}

/// The adaptive cache with STPM on both devices.
pub fn adaptive(profile: &Profile, knob: u8, ghost: Option<GhostPolicy>) -> Strategy {
    let name = match ghost {
        None => "adaptive".to_string(),
        Some(g) => format!("adaptive+ghost-{}", g.name()),
    };
    Strategy {
        name,
        cache: CachePolicy::Adaptive(ghost),
        disk: DiskPolicy::Stpm {
            knob: knob as f64,
            base_power_w: profile.base_power_w,
        },
        net: NetPolicy::Stpm,
    }
}

/// Spin-down baselines on the static cache (fixed timeout, break-even, Douglis adaptive timeout), network as the device's default.
pub fn baselines(profile: &Profile, fixed_timeout: Duration) -> Vec<Strategy> {
    let fixed_timeout_s = fixed_timeout.as_secs_f64();
    let s = &profile.storage;
    let net = default_net(profile);
    let mk = |name: String, disk| Strategy {
        name,
        cache: CachePolicy::Static,
        disk,
        net,
    };
    vec![
        mk(
            format!("static+fixed-{fixed_timeout_s}s"),
            DiskPolicy::FixedTimeout(fixed_timeout_s),
        ),
        mk("static+break-even".into(), DiskPolicy::BreakEven),
        mk(
            "static+adaptive-timeout".into(),
            DiskPolicy::adaptive_timeout(s),
        ),
        Strategy {
            name: "static+no-pm".into(),
            cache: CachePolicy::Static,
            disk: DiskPolicy::Never,
            net: NetPolicy::AlwaysHigh,
        },
    ]
}

/// Which ghost-hint variants to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GhostSelection {
    /// Without ghost hints only.
    Off,
    /// With ghost hints only, using this policy.
    On(GhostPolicy),
    /// Without, with the paper's rule, and with ours.
    All,
}

/// Every strategy at one knob: static, baselines, oracle, adaptive variants, lower bound.
pub fn replay_all(
    profile: &Profile,
    trace: &Trace,
    knob: u8,
    ghosts: GhostSelection,
    fixed_timeout: Duration,
) -> Vec<RunResult> {
    let mut out = vec![replay(profile, &static_default(profile), knob, trace)];
    for b in baselines(profile, fixed_timeout) {
        out.push(replay(profile, &b, knob, trace));
    }
    out.push(replay_oracle(profile, default_net(profile), trace));
    let variants: Vec<Option<GhostPolicy>> = match ghosts {
        GhostSelection::Off => vec![None],
        GhostSelection::On(g) => vec![Some(g)],
        GhostSelection::All => vec![
            None,
            Some(GhostPolicy::Paper),
            Some(GhostPolicy::Predictive),
        ],
    };
    for g in variants {
        out.push(replay(profile, &adaptive(profile, knob, g), knob, trace));
    }
    out.push(lower_bound(profile, trace));
    for r in &mut out {
        r.knob = knob;
    }
    out
}

/// Run every knob of [`SWEEP_KNOBS`] with and without ghost hints (both policies), plus the
/// knob-independent baselines once, for each trace built by `make(seed)`; mean over `seeds`.
/// `progress` is told after each (seed, knob) step: steps done of `seeds × knobs`, labelled
/// with the seed and knob just run, the time left from the steps' measured times.
pub fn sweep(
    profile: &Profile,
    workload: &str,
    make: &dyn Fn(u64) -> Trace,
    seeds: &[u64],
    fixed_timeout: Duration,
    progress: &Sink<StudyProgress>,
) -> Vec<SweepRow> {
    // (strategy, knob, ghost, Σ response, Σ energy, Σ spin-ups, Σ hints, energy kind)
    type Acc = (String, u8, String, f64, f64, f64, f64, String);
    let mut acc: Vec<Acc> = Vec::new();
    let mut add = |r: &RunResult, knob: u8| {
        if let Some(a) = acc
            .iter_mut()
            .find(|a| a.0 == r.strategy && a.1 == knob && a.2 == r.ghost_hints)
        {
            a.3 += r.mean_response_s;
            a.4 += r.energy_j;
            a.5 += r.disk_spinups as f64;
            a.6 += r.ghost_hints_issued as f64;
        } else {
            acc.push((
                r.strategy.clone(),
                knob,
                r.ghost_hints.clone(),
                r.mean_response_s,
                r.energy_j,
                r.disk_spinups as f64,
                r.ghost_hints_issued as f64,
                r.energy_kind.clone(),
            ));
        }
    };
    let total = seeds.len() * SWEEP_KNOBS.len();
    let mut eta: Eta<u8> = Eta::new();
    let mut done = 0;
    for &seed in seeds {
        let trace = make(seed);
        // Knob-independent strategies once per seed (reported at knob 50, the paper's default).
        let mut fixed = vec![replay(profile, &static_default(profile), 50, &trace)];
        for b in baselines(profile, fixed_timeout) {
            fixed.push(replay(profile, &b, 50, &trace));
        }
        fixed.push(replay_oracle(profile, default_net(profile), &trace));
        fixed.push(lower_bound(profile, &trace));
        for r in &fixed {
            add(r, 50);
        }
        for k in SWEEP_KNOBS {
            let started = Instant::now();
            for g in [
                None,
                Some(GhostPolicy::Paper),
                Some(GhostPolicy::Predictive),
            ] {
                let r = replay(profile, &adaptive(profile, k, g), k, &trace);
                add(&r, k);
            }
            eta.record(k, started.elapsed().as_secs_f64());
            done += 1;
            // Step i (0-based) runs knob i % knobs.
            let left = (done..total).map(|i| &SWEEP_KNOBS[i % SWEEP_KNOBS.len()]);
            progress.tell(&StudyProgress {
                done,
                total,
                resumed: 0,
                label: format!("seed {seed}, knob {k}"),
                eta: eta.remaining(left),
            });
        }
    }
    let n = seeds.len().max(1) as f64;
    acc.into_iter()
        .map(
            |(strategy, knob, ghost_hints, rt, e, su, gh, kind)| SweepRow {
                workload: workload.to_string(),
                strategy,
                knob,
                ghost_hints,
                mean_response_s: rt / n,
                energy_j: e / n,
                seeds: seeds.len(),
                disk_spinups: su / n,
                ghost_hints_issued: gh / n,
                energy_kind: kind,
            },
        )
        .collect()
}

/// Response-time and energy charts of a workload's sweep rows: the adaptive strategies as
/// lines on a categorical knob axis (the sweep's knobs evenly spaced), the static cache and
/// the lower bound, which do not depend on the knob, as horizontal reference lines.
pub fn sweep_charts(rows: &[SweepRow], workload: &str, profile: &str) -> (String, String) {
    use wattio_plot::{line_chart, Chart, LineOpts, Reference, Series, XScale};
    let pick = |strategy: &str| {
        rows.iter()
            .find(|r| r.workload == workload && r.strategy == strategy)
    };
    let series = |f: &dyn Fn(&SweepRow) -> f64| -> Vec<Series> {
        [
            ("adaptive", "no ghost hints"),
            ("adaptive+ghost-paper", "ghost hints (paper)"),
            ("adaptive+ghost-predictive", "ghost hints (ours)"),
        ]
        .iter()
        .map(|(s, label)| Series {
            name: label.to_string(),
            points: rows
                .iter()
                .filter(|r| r.workload == workload && r.strategy == *s)
                .map(|r| (r.knob as f64, f(r)))
                .collect(),
        })
        .collect()
    };
    let reference = |strategy: &str, name: &str, f: &dyn Fn(&SweepRow) -> f64| {
        pick(strategy).map(|r| Reference {
            name: name.into(),
            y: f(r),
        })
    };
    let seeds = rows.first().map(|r| r.seeds).unwrap_or(0);
    let kind = rows
        .iter()
        .find(|r| r.workload == workload)
        .map(|r| r.energy_kind.clone())
        .unwrap_or_default();
    let chart = |title: String, y_label: &str| {
        Chart {
        title,
        provenance: kind.clone(),
        x_label: "knob (0 = save energy … 100 = performance)".into(),
        y_label: y_label.into(),
        footnote: format!(
            "simulated (estimated) from profile {profile}; mean of {seeds} seed(s); `wattio cache sweep`"
        ),
        ..Default::default()
    }
    };
    let opts = |y_zero: bool| LineOpts {
        x_scale: XScale::Categorical,
        markers: true,
        y_zero,
        ..Default::default()
    };
    let response = |r: &SweepRow| r.mean_response_s;
    let energy = |r: &SweepRow| r.energy_j;
    let rt = line_chart(
        &chart(
            format!("{workload}: mean interactive response time"),
            "Mean response time (s)",
        ),
        &series(&response),
        &reference("static", "static cache", &response)
            .into_iter()
            .collect::<Vec<_>>(),
        &opts(true),
    );
    let en = line_chart(
        &chart(
            format!("{workload}: total energy (simulated)"),
            "Energy (J), estimated (simulated)",
        ),
        &series(&energy),
        &[
            reference("static", "static cache", &energy),
            reference("lower-bound", "lower bound", &energy),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
        &opts(false),
    );
    (rt, en)
}
