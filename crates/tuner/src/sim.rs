//! A deterministic fluid model of a WAN path and an end host, for testing the tuners without a
//! network, in the fluid view of TCP (window / RTT per stream) behind the paper's Algorithm 1.
//!
//! Throughput = min(link, channels × window / RTT, CPU capacity), reduced by 1 % per channel
//! beyond the count that fills the link (self-inflicted loss), and by an optional rate cap.
//! Power = idle + per-core static + dynamic ∝ f² × utilisation + per-channel overhead.
//! The coefficients are illustrative, not measurements of any machine.

use crate::{Controller, Observation, StartRules, State, Timeouts, TransferPlan};
use std::time::Duration;

/// The simulated path and host.
#[derive(Debug, Clone)]
pub struct SimChannel {
    pub link_bps: f64,
    pub rtt_s: f64,
    pub window_bytes: f64,
    /// Bits/s one core moves at the top frequency.
    pub per_core_bps: f64,
    /// Frequency ladder as fractions of the top frequency.
    pub freqs: Vec<f64>,
    pub idle_w: f64,
    pub core_static_w: f64,
    pub core_dynamic_w: f64,
    pub channel_w: f64,
    /// (time s, new link rate) changes of available bandwidth.
    pub link_changes: Vec<(f64, f64)>,
}

impl SimChannel {
    /// A CloudLab-like path: 1 Gbit/s, 36 ms, 1 MiB windows, 2 cores, 3 frequency steps.
    pub fn cloudlab_like() -> Self {
        SimChannel {
            link_bps: 1e9,
            rtt_s: 0.036,
            window_bytes: 1048576.0,
            per_core_bps: 2e9,
            freqs: vec![0.5, 0.75, 1.0],
            idle_w: 5.0,
            core_static_w: 1.0,
            core_dynamic_w: 6.0,
            channel_w: 0.15,
            link_changes: Vec::new(),
        }
    }

    /// What `wattio transfer` would know of this path: its RTT, its first link rate (as
    /// `--bandwidth`) and its window, with at most `max_ch` channels.
    pub fn net_params(&self, max_ch: usize) -> crate::NetParams {
        crate::NetParams {
            rtt_s: self.rtt_s,
            bandwidth_bps: Some(self.link_bps),
            window_bytes: self.window_bytes as u64,
            max_ch,
        }
    }

    fn link_at(&self, t: f64) -> f64 {
        let mut l = self.link_bps;
        for &(at, r) in &self.link_changes {
            if t >= at {
                l = r;
            }
        }
        l
    }

    /// Throughput (bits/s) and power (W) for a configuration at time `t`.
    pub fn eval(
        &self,
        t: f64,
        ch: usize,
        cores: usize,
        freq_idx: usize,
        cap: Option<f64>,
    ) -> (f64, f64) {
        let link = self.link_at(t);
        let per_ch = self.window_bytes * 8.0 / self.rtt_s;
        let fill = (link / per_ch).ceil();
        let excess = (ch as f64 - fill).max(0.0);
        let net = (ch as f64 * per_ch).min(link) * (1.0 - 0.01 * excess).max(0.5);
        let f = self.freqs[freq_idx.min(self.freqs.len() - 1)];
        let cpu = cores as f64 * f * self.per_core_bps;
        let mut tput = net.min(cpu);
        if let Some(c) = cap {
            tput = tput.min(c);
        }
        let util = (tput / cpu).min(1.0);
        let power = self.idle_w
            + cores as f64 * (self.core_static_w + self.core_dynamic_w * f * f * util)
            + self.channel_w * ch as f64;
        (tput, power)
    }
}

/// One simulated timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct SimStep {
    pub t_s: f64,
    pub state: State,
    pub num_ch: usize,
    pub cores: usize,
    pub freq_idx: usize,
    pub tput_bps: f64,
    pub energy_j: f64,
}

/// Result of a simulated transfer.
#[derive(Debug, Clone)]
pub struct SimRun {
    pub steps: Vec<SimStep>,
    pub seconds: f64,
    pub energy_j: f64,
    pub bytes: f64,
}

impl SimRun {
    /// Mean throughput over steps `from..` in bits/s.
    pub fn mean_tput_from(&self, from: usize) -> f64 {
        let s = &self.steps[from.min(self.steps.len())..];
        s.iter().map(|x| x.tput_bps).sum::<f64>() / s.len().max(1) as f64
    }
}

/// Runs `ctl` on `sim` until `bytes` per partition are moved (or `max_steps` timeouts of
/// `dt` seconds). Without a CPU scaler the host runs at `cores` cores, top frequency.
pub fn run(
    sim: &SimChannel,
    ctl: &mut Controller,
    partition_bytes: &[u64],
    cores: usize,
    dt: f64,
    max_steps: usize,
) -> SimRun {
    let timeouts = Timeouts::uniform(Duration::from_secs_f64(dt));
    run_timed(sim, ctl, None, partition_bytes, cores, &timeouts, max_steps)
}

/// Runs a transfer of `sizes` on `sim` the way `wattio transfer` starts one: Algorithm 1's
/// plan for the simulated path, the controller and first channel budget of `rules`
/// ([`StartRules::controller`]), and the shipped timeouts ([`Timeouts::new`]: slow start's
/// timeout is six RTTs). `interval` is `--interval`.
pub fn run_shipped(
    sim: &SimChannel,
    rules: &StartRules,
    sizes: &[u64],
    cores: usize,
    interval: Duration,
    max_steps: usize,
) -> (SimRun, TransferPlan) {
    let net = sim.net_params(rules.max_ch);
    let base = crate::initial_plan(sizes, &net, rules.sla, cores);
    let bytes = base.partitions.iter().map(|p| p.bytes).sum();
    let (mut ctl, plan) = rules.controller(&base, &net, cores, sim.freqs.len(), Some(bytes));
    let bytes: Vec<u64> = plan.partitions.iter().map(|p| p.bytes).collect();
    let timeouts = Timeouts::new(net.rtt_s, interval);
    let run = run_timed(
        sim,
        &mut ctl,
        Some(&plan.channels),
        &bytes,
        cores,
        &timeouts,
        max_steps,
    );
    (run, plan)
}

/// Runs `ctl` on `sim` with the timeouts of `timeouts` (each step lasts the timeout of the
/// state the controller is in). `first_channels` is the first channel budget per partition
/// when the engine starts from the plan's rather than the controller's (as `wattio transfer`
/// does); later budgets are the controller's.
pub fn run_timed(
    sim: &SimChannel,
    ctl: &mut Controller,
    first_channels: Option<&[usize]>,
    partition_bytes: &[u64],
    cores: usize,
    timeouts: &Timeouts,
    max_steps: usize,
) -> SimRun {
    let mut remaining: Vec<f64> = partition_bytes.iter().map(|&b| b as f64).collect();
    let rem_u64 = |r: &[f64]| {
        r.iter()
            .map(|&x| x.max(0.0).round() as u64)
            .collect::<Vec<_>>()
    };
    let mut d = ctl.initial(&rem_u64(&remaining));
    if let Some(first) = first_channels {
        d.channels = first.iter().map(|&c| c.max(1)).collect();
    }
    let mut steps = Vec::new();
    let (mut t, mut energy, mut moved) = (0.0, 0.0, 0.0);
    for _ in 0..max_steps {
        if remaining.iter().all(|&r| r <= 0.0) {
            break;
        }
        let dt = timeouts.for_state(d.state).as_secs_f64();
        let ch: usize = d.channels.iter().sum::<usize>().max(1);
        let c = d.cores.unwrap_or(cores);
        let fi = d.freq_idx.unwrap_or(sim.freqs.len() - 1);
        let (tput, power) = sim.eval(t, ch, c, fi, d.rate_cap_bps);
        let bytes = tput / 8.0 * dt;
        // share the bytes by channels, spilling over from partitions that finish
        let mut left = bytes;
        let total_ch: usize = d.channels.iter().sum::<usize>().max(1);
        for (i, r) in remaining.iter_mut().enumerate() {
            let share = bytes * d.channels.get(i).copied().unwrap_or(0) as f64 / total_ch as f64;
            let take = share.min(r.max(0.0));
            *r -= take;
            left -= take;
        }
        for r in remaining.iter_mut() {
            let take = left.min(r.max(0.0));
            *r -= take;
            left -= take;
        }
        let moved_now = bytes - left;
        moved += moved_now;
        energy += power * dt;
        t += dt;
        let fi_f = sim.freqs[fi.min(sim.freqs.len() - 1)];
        let load = (tput / (c as f64 * fi_f * sim.per_core_bps)).min(1.0);
        let obs = Observation {
            dt_s: dt,
            bytes: moved_now.round() as u64,
            energy_j: Some(power * dt),
            remaining: rem_u64(&remaining),
            cpu_load: Some(load),
            // the simulated pacer holds back exactly when the channels reach the cap
            cap_held: d.rate_cap_bps.is_some_and(|c| tput >= c),
        };
        d = ctl.on_interval(&obs);
        steps.push(SimStep {
            t_s: t,
            state: d.state,
            num_ch: ch,
            cores: c,
            freq_idx: fi,
            tput_bps: tput,
            energy_j: power * dt,
        });
    }
    SimRun {
        steps,
        seconds: t,
        energy_j: energy,
        bytes: moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    const GB: u64 = 1_000_000_000;

    fn ctl(t: Box<dyn ChannelTuner>, scaler: Option<CpuScaler>) -> Controller {
        Controller::new(t, scaler)
    }

    #[test]
    fn model_by_hand() {
        let s = SimChannel::cloudlab_like();
        // one channel: 1 MiB × 8 / 36 ms = 233.0 Mbit/s
        let (t1, _) = s.eval(0.0, 1, 2, 2, None);
        assert!((t1 - 233.017e6).abs() < 0.01e6, "{t1}");
        // five channels fill the link; ten channels lose 5 %
        assert_eq!(s.eval(0.0, 5, 2, 2, None).0, 1e9);
        assert!((s.eval(0.0, 10, 2, 2, None).0 - 0.95e9).abs() < 1.0);
        // one core at half frequency caps at 1 Gbit/s × 1 × 0.5 × 2 = 1 Gbit/s... × 0.5 → 1e9
        assert_eq!(s.eval(0.0, 5, 1, 0, None).0, 1e9);
        // power at 1 core, f=0.5, util 1: 5 + 1 + 6 × 0.25 + 0.15 × 5 = 8.25 W
        assert!((s.eval(0.0, 5, 1, 0, None).1 - 8.25).abs() < 1e-9);
    }

    #[test]
    fn eemt_reaches_90_percent_of_the_link_with_few_channels() {
        let sim = SimChannel::cloudlab_like();
        let th = Thresholds::default();
        let mut c = ctl(Box::new(EemtTuner::new(2, Some(1e9), th)), None);
        let r = run(&sim, &mut c, &[GB, 4 * GB], 2, 1.0, 200);
        let tail = r.mean_tput_from(5);
        assert!(tail >= 0.9e9, "mean after convergence {tail}");
        let max_ch = r.steps.iter().skip(5).map(|s| s.num_ch).max().unwrap();
        assert!(max_ch <= 8, "channels kept low, saw {max_ch}");
    }

    #[test]
    fn unknown_bandwidth_slow_start_finds_the_link() {
        // doubling 1 → 2 → 4 → 8 channels: 233, 466, 932, 970 Mbit/s (+4 % < 10 %: stop)
        let sim = SimChannel::cloudlab_like();
        let mut c = ctl(
            Box::new(EemtTuner::new(1, None, Thresholds::default())),
            None,
        );
        let r = run(&sim, &mut c, &[20 * GB], 2, 1.0, 40);
        let ch: Vec<usize> = r.steps.iter().take(4).map(|s| s.num_ch).collect();
        assert_eq!(ch, vec![1, 2, 4, 8]);
        assert!(r.mean_tput_from(5) >= 0.9e9, "{}", r.mean_tput_from(5));
        let mut me = ctl(
            Box::new(MeTuner::new(1, None, Thresholds::default())),
            Some(CpuScaler::new(1, 2, 0, 3)),
        );
        let r = run(&sim, &mut me, &[20 * GB], 2, 1.0, 40);
        assert!(r.mean_tput_from(5) >= 0.9e9, "{}", r.mean_tput_from(5));
    }

    #[test]
    fn eemt_follows_a_bandwidth_drop_and_recovers_after() {
        let mut sim = SimChannel::cloudlab_like();
        sim.link_changes = vec![(15.0, 0.5e9), (30.0, 1e9)];
        let mut c = ctl(
            Box::new(EemtTuner::new(2, Some(1e9), Thresholds::default())),
            None,
        );
        let r = run(&sim, &mut c, &[20 * GB], 2, 1.0, 60);
        let states: Vec<State> = r.steps.iter().map(|s| s.state).collect();
        assert!(states.contains(&State::Warning), "{states:?}");
        let after: f64 = r.steps[40..].iter().map(|s| s.tput_bps).sum::<f64>() / 20.0;
        assert!(
            after >= 0.9e9,
            "back to the link after it recovered: {after}"
        );
    }

    #[test]
    fn me_spends_less_energy_than_fixed_extremes() {
        let sim = SimChannel::cloudlab_like();
        let bytes = [2 * GB, 6 * GB];
        let mut me = ctl(
            Box::new(MeTuner::new(2, Some(1e9), Thresholds::default())),
            Some(CpuScaler::new(1, 2, 0, 3)),
        );
        let r_me = run(&sim, &mut me, &bytes, 2, 1.0, 2000);
        let mut one = ctl(Box::new(StaticTuner::new("fixed", 1)), None);
        let r_one = run(&sim, &mut one, &bytes, 2, 1.0, 2000);
        let mut many = ctl(Box::new(StaticTuner::new("fixed", 32)), None);
        let r_many = run(&sim, &mut many, &bytes, 2, 1.0, 2000);
        for r in [&r_me, &r_one, &r_many] {
            assert!((r.bytes - 8e9).abs() < 1.0, "all finish");
        }
        assert!(
            r_me.energy_j < r_one.energy_j,
            "{} vs {}",
            r_me.energy_j,
            r_one.energy_j
        );
        assert!(
            r_me.energy_j < r_many.energy_j,
            "{} vs {}",
            r_me.energy_j,
            r_many.energy_j
        );
    }

    #[test]
    fn eett_holds_targets_within_ten_percent() {
        let sim = SimChannel::cloudlab_like();
        for frac in [0.8, 0.6, 0.4, 0.2] {
            let target = frac * 1e9;
            let mut c = ctl(
                Box::new(EettTuner::new(1, target, Thresholds::default())),
                None,
            );
            let r = run(&sim, &mut c, &[100 * GB], 2, 1.0, 60);
            let tail = r.mean_tput_from(20);
            assert!(
                (tail - target).abs() <= 0.1 * target,
                "target {target}: got {tail}"
            );
        }
    }

    #[test]
    fn scaler_sheds_cores_when_load_is_low() {
        let sim = SimChannel::cloudlab_like();
        let mut c = ctl(
            Box::new(StaticTuner::new("fixed", 1)),
            Some(CpuScaler::new(2, 2, 2, 3)),
        );
        let r = run(&sim, &mut c, &[GB], 2, 1.0, 50);
        let last = r.steps.last().unwrap();
        assert_eq!((last.cores, last.freq_idx), (1, 0));
    }

    fn shipped(sla: Sla) -> StartRules {
        StartRules {
            tuner: TunerChoice::Wattio,
            sla,
            max_ch: 32,
            cpu_scaling: true,
        }
    }

    #[test]
    fn shipped_eemt_opens_ahead_on_six_rtt_timeouts() {
        let sim = SimChannel::cloudlab_like();
        let rules = shipped(Sla::MaxThroughput);
        let (r, plan) = run_shipped(&sim, &rules, &[10 * GB], 2, Duration::from_secs(1), 500);
        // Algorithm 1: 5 channels fill 1 Gbit/s at 233 Mbit/s each; EEMT's tuner starts at
        // 3 × 5 and the engine opens twice that at once; its first interval has the ramp's
        // ⌈4.5 MB / (14,600 B × 8)⌉ = 39 channels, within --max-channels 32
        assert_eq!(plan.num_ch, 32);
        assert_eq!(r.steps[0].num_ch, 32, "the first interval runs them all");
        // slow start's timeouts are six RTTs of 36 ms, not --interval
        assert!((r.steps[0].t_s - 0.216).abs() < 1e-9, "{}", r.steps[0].t_s);
        assert_eq!(r.steps[0].state, State::SlowStart);
        assert!((r.steps[1].t_s - 0.432).abs() < 1e-9, "{}", r.steps[1].t_s);
        assert!((r.bytes - 10e9).abs() < 1.0, "finishes");
    }

    #[test]
    fn shipped_me_spends_less_than_the_fixed_extremes() {
        let sim = SimChannel::cloudlab_like();
        let sizes = [2 * GB, 3 * GB, 3 * GB];
        let (me, _) = run_shipped(
            &sim,
            &shipped(Sla::MinEnergy),
            &sizes,
            2,
            Duration::from_secs(1),
            2000,
        );
        assert!((me.bytes - 8e9).abs() < 1.0, "finishes");
        for ch in [1, 32] {
            let mut fixed = ctl(Box::new(StaticTuner::new("fixed", ch)), None);
            let r = run(&sim, &mut fixed, &[8 * GB], 2, 1.0, 2000);
            assert!(
                me.energy_j < r.energy_j,
                "ME {} J vs {ch} fixed channels {} J",
                me.energy_j,
                r.energy_j
            );
        }
    }

    #[test]
    fn shipped_eett_holds_targets_within_ten_percent() {
        let sim = SimChannel::cloudlab_like();
        for frac in [0.8, 0.6, 0.4, 0.2] {
            let target = frac * 1e9;
            let (r, _) = run_shipped(
                &sim,
                &shipped(Sla::Target(target)),
                &[100 * GB],
                2,
                Duration::from_secs(1),
                60,
            );
            let tail = r.mean_tput_from(20);
            assert!(
                (tail - target).abs() <= 0.1 * target,
                "target {target}: got {tail}"
            );
        }
    }
}
