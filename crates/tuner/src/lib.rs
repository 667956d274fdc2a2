//! wattio-tuner: the parameter tuning of Di Tacchio et al., "Energy-Efficient High-Throughput
//! Data Transfers via Dynamic CPU Frequency and Core Scaling": Algorithm 1 (initial
//! parameters), the Figure 1 state machine with slow start (Alg. 2), ME (Alg. 4), EEMT
//! (Alg. 5, reconstructed from §IV-B), EETT (Alg. 6), the threshold CPU scaler (Alg. 3,
//! reconstructed from §III-C) and the baselines.
//!
//! Everything here is pure and deterministic, with no I/O: the transfer engine
//! (`wattio-transfer`) and the simulated channel ([`sim`], a public namespace because
//! `sim::run` reads as the paper's simulation) feed it the same [`Observation`]s.

mod alg1;
mod baseline;
mod fsm;
mod scaler;
pub mod sim;
mod start;

pub use alg1::{
    channel_count, channel_split, classify, initial_plan, NetParams, Partition, PartitionClass,
    RequestSplit, TransferPlan, MIN_CHUNK,
};
pub use baseline::{AlanHeuristic, FixedParams, SlaeeTuner, StaticTuner};
pub use fsm::{EemtTuner, EettTuner, MeTuner, SlowStart, State, Thresholds};
pub use scaler::{CpuScaler, ScalerOrder};
pub use start::{StartRules, Timeouts, TunerChoice, TunerKind, EEMT_START_FACTOR, OPEN_AHEAD};

use serde::Serialize;
use wattio_units::BitRate;

/// The service-level agreement a transfer runs under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Sla {
    /// Minimum energy (ME).
    MinEnergy,
    /// Maximum throughput, energy-efficiently (EEMT).
    MaxThroughput,
    /// Hold this throughput in bits/s (EETT).
    Target(f64),
}

impl Sla {
    /// Parses `min-energy`, `max-throughput` or `target:RATE`.
    pub fn parse(s: &str) -> Result<Sla, String> {
        match s {
            "min-energy" => Ok(Sla::MinEnergy),
            "max-throughput" => Ok(Sla::MaxThroughput),
            _ => match s.strip_prefix("target:") {
                Some(r) => r
                    .parse::<BitRate>()
                    .map(|r| Sla::Target(r.bits_per_second() as f64))
                    .map_err(|e| e.to_string()),
                None => Err(format!(
                    "unknown SLA {s:?}: use min-energy, max-throughput or target:RATE (e.g. target:400mbit)"
                )),
            },
        }
    }

    /// Short name for logs, in the form `--sla` accepts (`target:400mbit`).
    pub fn name(&self) -> String {
        match self {
            Sla::MinEnergy => "min-energy".into(),
            Sla::MaxThroughput => "max-throughput".into(),
            Sla::Target(r) => match BitRate::from_bits_per_second(r.round() as u64) {
                Some(rate) => format!("target:{rate}"),
                None => format!("target:{r:.0}bit"),
            },
        }
    }
}

/// What the tuner sees at each timeout.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Length of the interval in seconds.
    pub dt_s: f64,
    /// Payload bytes received during the interval.
    pub bytes: u64,
    /// Energy spent during the interval (J), when a meter is available.
    pub energy_j: Option<f64>,
    /// Bytes still to move, per partition.
    pub remaining: Vec<u64>,
    /// Our CPU time over the interval divided by (active cores × interval), 0..1.
    pub cpu_load: Option<f64>,
    /// Whether the client's rate cap held reads back during the interval, i.e. the channels
    /// were ahead of the cap's schedule at some point. A dip below the target while this is
    /// set comes from a stall (a busy machine, a late timer), not from a cap that binds too
    /// hard: the pacer lets the channels catch up afterwards.
    pub cap_held: bool,
}

impl Observation {
    /// Throughput in bits/s.
    pub fn tput_bps(&self) -> f64 {
        if self.dt_s > 0.0 {
            self.bytes as f64 * 8.0 / self.dt_s
        } else {
            0.0
        }
    }
    /// Total bytes still to move.
    pub fn remaining_total(&self) -> u64 {
        self.remaining.iter().sum()
    }
}

/// A channel-count policy: one decision per timeout.
pub trait ChannelTuner: Send {
    /// Name for logs (e.g. `ME`).
    fn name(&self) -> &'static str;
    /// Current state of the Figure 1 machine.
    fn state(&self) -> State;
    /// Current total channel count.
    fn num_ch(&self) -> usize;
    /// One timeout: update the channel count.
    fn on_timeout(&mut self, obs: &Observation);
    /// A client-side rate cap in bits/s (EETT below one channel's rate), if any.
    fn rate_cap_bps(&self) -> Option<f64> {
        None
    }
    /// Whether channels are split by remaining size (the paper's updateWeights) or evenly.
    fn weighted(&self) -> bool {
        true
    }
}

/// The decision applied to the engine after a timeout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub state: State,
    pub num_ch: usize,
    /// Channels per partition.
    pub channels: Vec<usize>,
    /// Active cores wanted (Alg. 3), if CPU scaling is on.
    pub cores: Option<usize>,
    /// Index into the frequency ladder (0 = lowest), if CPU scaling is on.
    pub freq_idx: Option<usize>,
    pub rate_cap_bps: Option<f64>,
}

/// updateWeights + ccLevel_i = weight_i × numCh: channels per partition in proportion to the
/// bytes each still has to move (largest-remainder rounding; every partition with data left
/// gets at least one channel — ours, so no partition starves).
pub fn distribute(num_ch: usize, remaining: &[u64], weighted: bool) -> Vec<usize> {
    let active: Vec<usize> = (0..remaining.len()).filter(|&i| remaining[i] > 0).collect();
    let mut out = vec![0; remaining.len()];
    if active.is_empty() {
        return out;
    }
    let total: f64 = if weighted {
        active.iter().map(|&i| remaining[i] as f64).sum()
    } else {
        active.len() as f64
    };
    let shares: Vec<f64> = active
        .iter()
        .map(|&i| {
            let w = if weighted { remaining[i] as f64 } else { 1.0 };
            w / total * num_ch as f64
        })
        .collect();
    let mut given = 0;
    for (k, &i) in active.iter().enumerate() {
        out[i] = shares[k].floor() as usize;
        given += out[i];
    }
    let mut order: Vec<usize> = (0..active.len()).collect();
    order.sort_by(|&a, &b| {
        let fa = shares[a] - shares[a].floor();
        let fb = shares[b] - shares[b].floor();
        fb.partial_cmp(&fa).unwrap().then(a.cmp(&b))
    });
    for &k in order.iter().take(num_ch.saturating_sub(given)) {
        out[active[k]] += 1;
    }
    for &i in &active {
        out[i] = out[i].max(1);
    }
    out
}

/// Joins a channel tuner, the weight distribution and the CPU scaler.
pub struct Controller {
    tuner: Box<dyn ChannelTuner>,
    scaler: Option<CpuScaler>,
}

impl Controller {
    pub fn new(tuner: Box<dyn ChannelTuner>, scaler: Option<CpuScaler>) -> Self {
        Controller { tuner, scaler }
    }

    /// Name of the channel tuner.
    pub fn name(&self) -> &'static str {
        self.tuner.name()
    }

    /// The decision before any measurement (from the initial plan).
    pub fn initial(&self, remaining: &[u64]) -> Decision {
        self.decision(remaining)
    }

    /// One timeout.
    pub fn on_interval(&mut self, obs: &Observation) -> Decision {
        self.tuner.on_timeout(obs);
        if let (Some(s), Some(load)) = (self.scaler.as_mut(), obs.cpu_load) {
            s.step(load);
        }
        self.decision(&obs.remaining)
    }

    fn decision(&self, remaining: &[u64]) -> Decision {
        let n = self.tuner.num_ch();
        Decision {
            state: self.tuner.state(),
            num_ch: n,
            channels: distribute(n, remaining, self.tuner.weighted()),
            cores: self.scaler.as_ref().map(|s| s.cores()),
            freq_idx: self.scaler.as_ref().map(|s| s.freq_idx()),
            rate_cap_bps: self.tuner.rate_cap_bps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribute_by_remaining() {
        assert_eq!(distribute(10, &[300, 100, 600], true), vec![3, 1, 6]);
        // every partition with data left keeps a channel, even past numCh:
        // shares 1.996, 0.002, 0.002 → floors 1, 0, 0; the spare one goes to the largest
        // remainder (partition 0); then the empty-handed ones get their minimum of one
        assert_eq!(distribute(2, &[1000, 1, 1], true), vec![2, 1, 1]);
        assert_eq!(distribute(5, &[0, 10, 0], true), vec![0, 5, 0]);
        assert_eq!(distribute(4, &[1, 1000], false), vec![2, 2]);
        assert_eq!(distribute(7, &[0, 0], true), vec![0, 0]);
    }

    #[test]
    fn sla_parse() {
        assert_eq!(Sla::parse("min-energy"), Ok(Sla::MinEnergy));
        assert_eq!(Sla::parse("target:400mbit"), Ok(Sla::Target(400e6)));
        assert!(Sla::parse("fastest").unwrap_err().contains("min-energy"));
        assert_eq!(Sla::Target(400e6).name(), "target:400mbit");
        assert_eq!(Sla::Target(2e9).name(), "target:2gbit");
        assert_eq!(Sla::Target(1500e3).name(), "target:1500kbit");
        assert_eq!(Sla::Target(1234.0).name(), "target:1234bit");
        for sla in [
            Sla::MinEnergy,
            Sla::MaxThroughput,
            Sla::Target(40e6),
            Sla::Target(999.0),
        ] {
            assert_eq!(Sla::parse(&sla.name()), Ok(sla), "name() reads back");
        }
    }
}
