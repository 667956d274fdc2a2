//! The start-up rules that ship: which controller runs an SLA, with how many channels it opens
//! before any feedback, and how long each timeout lasts. The engine (`wattio-transfer`) and the
//! simulated channel (`crate::sim`) both start transfers through [`StartRules`].

use super::{
    channel_count, channel_split, AlanHeuristic, ChannelTuner, Controller, CpuScaler, EemtTuner,
    EettTuner, FixedParams, MeTuner, NetParams, RequestSplit, Sla, SlaeeTuner, State, StaticTuner,
    Thresholds, TransferPlan,
};
use serde::Serialize;
use std::time::Duration;

/// The families of tuners, as a user picks one (`--tuner`); [`TunerChoice::of_kind`] adds
/// the fixed parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TunerKind {
    /// ME / EEMT / EETT (Di Tacchio et al.).
    Wattio,
    /// MinE / HTEE / SLAEE baselines (Alan, Arslan, Kosar heuristics).
    Alan,
    /// Fixed --cc, --parallelism, --pipelining.
    Fixed,
}

/// Which tuner implementation runs the SLA.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum TunerChoice {
    /// ME / EEMT / EETT (the paper's algorithms).
    Wattio,
    /// MinE / HTEE / SLAEE baselines (Alan, Arslan, Kosar heuristics).
    Alan,
    /// Fixed concurrency, parallelism and pipelining.
    Fixed(FixedParams),
}

impl TunerChoice {
    /// The tuner of `kind`; `fixed` is used by [`TunerKind::Fixed`] only.
    pub fn of_kind(kind: TunerKind, fixed: FixedParams) -> TunerChoice {
        match kind {
            TunerKind::Wattio => TunerChoice::Wattio,
            TunerKind::Alan => TunerChoice::Alan,
            TunerKind::Fixed => TunerChoice::Fixed(fixed),
        }
    }
}

/// EEMT opens this many times Algorithm 1's channels at the start (ours). Algorithm 1 counts
/// channels at full TCP window, but a new connection starts from its initial window and needs
/// several RTTs of slow start to reach it: with Algorithm 1's 2 channels on the CloudLab-like
/// testbed the first few hundred milliseconds carried little (docs/transfer.md). Slow start then
/// sizes the channel count from measurements as before.
pub const EEMT_START_FACTOR: usize = 3;

/// ME and EEMT open this many times their tuner's first channel count right away (ours). With
/// a known bandwidth, slow start's first timeout sees every new connection's TCP ramp and
/// doubles the count (its step limit); opening those channels at once saves them one timeout of
/// ramp. Where the first timeout does not double, the surplus finishes its ranges and leaves.
/// EETT aims below the link and starts from what its target needs.
pub const OPEN_AHEAD: usize = 2;

/// A new TCP connection's initial window in bytes: 10 segments (RFC 6928, Linux's default
/// `initcwnd`) of a 1460-byte MSS (a 1500-byte Ethernet MTU less 40 bytes of IPv4 and TCP
/// headers).
pub const INITIAL_WINDOW_BYTES: u64 = 10 * 1460;

/// EEMT sizes a short transfer's first channels so that TCP's slow start fills the path within
/// this many RTTs (ours; see [`StartRules::ramp_channels`]).
pub const RAMP_RTTS: u32 = 3;

/// A transfer is short when all its bytes take at most this many RTTs at the link's rate
/// (ours): then the RTTs that new connections spend in TCP's slow start are a large share of
/// the whole run, and EEMT's tuner keeps the [`StartRules::ramp_channels`] it opened (a longer
/// transfer has them for its first interval only).
pub const SHORT_TRANSFER_RTTS: u64 = 50;

/// How a transfer is tuned: the tuner family, the SLA and the limits the user set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartRules {
    pub tuner: TunerChoice,
    pub sla: Sla,
    /// `--max-channels`.
    pub max_ch: usize,
    /// Run Algorithm 3 (CPU scaling) with the wattio tuners.
    pub cpu_scaling: bool,
}

impl StartRules {
    /// The channels the wattio tuners open before any feedback: Algorithm 1's count for ME,
    /// [`EEMT_START_FACTOR`] times that for EEMT, and for EETT the channels its target rate
    /// needs rather than the link.
    pub fn first_channels(&self, net: &NetParams) -> usize {
        let max = net.max_ch.max(1);
        match self.sla {
            Sla::MinEnergy => channel_count(net),
            Sla::MaxThroughput => (channel_count(net) * EEMT_START_FACTOR).min(max),
            Sla::Target(r) => ((r / net.channel_tput_bps()).ceil() as usize).clamp(1, max),
        }
    }

    /// The channels opened at the start (and connected while the listing is fetched): the
    /// tuner's first count, for ME and EEMT [`OPEN_AHEAD`] times that.
    pub fn opened_channels(&self, net: &NetParams) -> usize {
        let first = self.first_channels(net);
        match self.sla {
            Sla::MinEnergy | Sla::MaxThroughput => (first * OPEN_AHEAD).min(net.max_ch.max(1)),
            Sla::Target(_) => first,
        }
    }

    /// Connections worth opening ahead of the first budget: the wattio tuners' opened
    /// channels, for EEMT at least [`ramp_channels`](Self::ramp_channels) (its first
    /// interval's channels; connections no channel takes are closed at the first timeout);
    /// none for the baselines, which start as their papers do.
    pub fn preconnect(&self, net: &NetParams) -> usize {
        match (self.tuner, self.sla) {
            (TunerChoice::Wattio, Sla::MaxThroughput) => self
                .opened_channels(net)
                .max(self.ramp_channels(net).unwrap_or(0)),
            (TunerChoice::Wattio, _) => self.opened_channels(net),
            _ => 0,
        }
    }

    /// The channels whose initial windows, doubling each RTT of TCP slow start, fill the
    /// path's BDP within [`RAMP_RTTS`]: `⌈BDP / (IW × 2^RAMP_RTTS)⌉`, at most
    /// `--max-channels`; `None` when the bandwidth is not known (no BDP to fill).
    ///
    /// Ours. Algorithm 1 counts channels at their full window, which a new connection reaches
    /// only after `log2(window / IW)` RTTs: on the `cloudlab` testbed (BDP 4.5 MB) EEMT's 12
    /// first channels carried 0.37 Gbit/s over the first six RTTs, and a 106 MB set of small
    /// files, done in about 28 RTTs, spent a quarter of its run below the link.
    pub fn ramp_channels(&self, net: &NetParams) -> Option<usize> {
        net.bandwidth_bps?;
        let per_channel = INITIAL_WINDOW_BYTES << RAMP_RTTS;
        Some((net.bdp_bytes().div_ceil(per_channel) as usize).clamp(1, net.max_ch.max(1)))
    }

    /// Whether a transfer of `bytes` is short on `net`: at most [`SHORT_TRANSFER_RTTS`] RTTs
    /// at the link's rate (never when the bandwidth is not known).
    pub fn is_short(&self, bytes: u64, net: &NetParams) -> bool {
        net.bandwidth_bps.is_some() && bytes <= SHORT_TRANSFER_RTTS * net.bdp_bytes()
    }

    /// The controller and the plan it starts from (Algorithm 1's `plan`, adjusted to the
    /// tuner family), for a host of `n_cores` cores and `n_freqs` frequency steps.
    /// `transfer_bytes`: the whole transfer's bytes, which tell whether it is short — the
    /// plan's when it covers every file, an estimate when the source says how many files
    /// there are but has sized only some (a URL list), `None` while a directory index is
    /// still being walked.
    pub fn controller(
        &self,
        plan: &TransferPlan,
        net: &NetParams,
        n_cores: usize,
        n_freqs: usize,
        transfer_bytes: Option<u64>,
    ) -> (Controller, TransferPlan) {
        let th = Thresholds {
            max_ch: self.max_ch,
            ..Thresholds::default()
        };
        let scaler = |cores| {
            self.cpu_scaling
                .then(|| CpuScaler::new(cores, n_cores, 0, n_freqs))
        };
        match self.tuner {
            TunerChoice::Wattio => {
                let mut first = self.first_channels(net);
                let mut plan = plan.clone();
                if matches!(self.sla, Sla::MinEnergy | Sla::MaxThroughput) {
                    // Algorithm 1 lines 10-13 again, for the channels opened at the start
                    plan.num_ch = self.opened_channels(net);
                }
                if let (Sla::MaxThroughput, Some(ramp)) = (self.sla, self.ramp_channels(net)) {
                    plan.num_ch = plan.num_ch.max(ramp);
                    if transfer_bytes.is_some_and(|b| self.is_short(b, net)) {
                        first = first.max(ramp);
                    }
                }
                if matches!(self.sla, Sla::MinEnergy | Sla::MaxThroughput) {
                    plan.channels = channel_split(&plan.partitions, plan.num_ch);
                }
                let t: Box<dyn ChannelTuner> = match self.sla {
                    Sla::MinEnergy => Box::new(MeTuner::new(first, net.bandwidth_bps, th)),
                    Sla::MaxThroughput => Box::new(EemtTuner::new(first, net.bandwidth_bps, th)),
                    Sla::Target(r) => Box::new(EettTuner::new(first, r, th)),
                };
                (Controller::new(t, scaler(plan.cores)), plan)
            }
            TunerChoice::Alan => {
                let mut p = plan.clone();
                let max_cc = match self.sla {
                    Sla::MinEnergy => 2,
                    _ => self.max_ch,
                };
                let mut total = 0;
                for (i, part) in p.partitions.iter_mut().enumerate() {
                    let avg = part.bytes as f64 / part.n_files.max(1) as f64;
                    let h = AlanHeuristic::best_params(
                        avg,
                        part.n_files,
                        plan.bdp_bytes,
                        net.window_bytes,
                        max_cc,
                    );
                    part.pipelining = h.pp;
                    part.split = if h.p > 1 {
                        RequestSplit::Parts(h.p)
                    } else {
                        RequestSplit::Whole
                    };
                    p.channels[i] = h.cc * h.p;
                    total += h.cc * h.p;
                }
                p.num_ch = total.clamp(1, self.max_ch);
                let t: Box<dyn ChannelTuner> = match self.sla {
                    Sla::MinEnergy => Box::new(StaticTuner::new("MinE", p.num_ch)),
                    Sla::MaxThroughput => Box::new(StaticTuner::new("HTEE", p.num_ch)),
                    Sla::Target(r) => Box::new(SlaeeTuner::new(r, self.max_ch)),
                };
                (Controller::new(t, None), p)
            }
            TunerChoice::Fixed(f) => {
                let mut p = plan.clone();
                for part in p.partitions.iter_mut() {
                    part.pipelining = f.pp.max(1);
                    part.split = if f.p > 1 {
                        RequestSplit::Parts(f.p)
                    } else {
                        RequestSplit::Whole
                    };
                }
                p.num_ch = (f.cc * f.p).max(1);
                (
                    Controller::new(Box::new(StaticTuner::new("fixed", p.num_ch)), None),
                    p,
                )
            }
        }
    }
}

/// How long each timeout of the state machine lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `--interval`: every state but slow start.
    pub interval: Duration,
    /// Slow start's timeout.
    pub slow_start: Duration,
}

impl Timeouts {
    /// The shipped timeouts on a path of `rtt_s` seconds: slow start's is six RTTs, at least
    /// 200 ms, at most the tuning interval.
    ///
    /// Ours: the paper times slow start with the same timeout as the later states. With a 1 s
    /// timeout every transfer spends its first seconds on the channels Algorithm 1 guessed, and
    /// a small dataset is done before slow start has acted. Six RTTs are not enough for a new
    /// TCP stream to finish its own slow start, so these timeouts underestimate the channels'
    /// rate; slow start's ×2 step limit is what keeps that from opening too many channels.
    pub fn new(rtt_s: f64, interval: Duration) -> Timeouts {
        Timeouts {
            interval,
            slow_start: Duration::from_secs_f64(rtt_s.max(0.0) * 6.0)
                .max(Duration::from_millis(200))
                .min(interval),
        }
    }

    /// The same timeout in every state (the paper's timing).
    pub fn uniform(interval: Duration) -> Timeouts {
        Timeouts {
            interval,
            slow_start: interval,
        }
    }

    /// The timeout of a state.
    pub fn for_state(&self, state: State) -> Duration {
        if state == State::SlowStart {
            self.slow_start
        } else {
            self.interval
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_timeout_is_six_rtts_within_bounds() {
        let ms = Duration::from_millis;
        let ss = |rtt, iv| Timeouts::new(rtt, iv).slow_start;
        assert_eq!(ss(0.036, ms(1000)), ms(216));
        assert_eq!(ss(0.0001, ms(1000)), ms(200), "floor on short paths");
        assert_eq!(ss(0.5, ms(1000)), ms(1000), "never past --interval");
        assert_eq!(ss(0.036, ms(100)), ms(100));
        let t = Timeouts::new(0.036, ms(1000));
        assert_eq!(t.for_state(State::SlowStart), ms(216));
        assert_eq!(t.for_state(State::Increase), ms(1000));
        assert_eq!(
            Timeouts::uniform(ms(500)).for_state(State::SlowStart),
            ms(500)
        );
    }

    /// EEMT opens the channels whose initial windows fill the BDP in three RTTs of slow start;
    /// its tuner starts from that count on a short transfer, and from Algorithm 1's × 3 on a
    /// long one or one whose files are still being found. Expected counts worked by hand from
    /// the formula's inputs.
    #[test]
    fn eemt_opens_ramp_channels_and_keeps_them_on_a_short_transfer_only() {
        let rules = |sla, max_ch| StartRules {
            tuner: TunerChoice::Wattio,
            sla,
            max_ch,
            cpu_scaling: false,
        };
        // 1 Gbit/s over 10 ms: BDP 1.25 MB; IW 14,600 B × 8 = 116,800 B a channel after 3 RTTs;
        // 1,250,000 / 116,800 = 10.7 → 11. 4 MiB windows: Algorithm 1's 1 channel, EEMT's 3.
        let net = NetParams {
            rtt_s: 0.010,
            bandwidth_bps: Some(1e9),
            window_bytes: 4 << 20,
            max_ch: 32,
        };
        let eemt = rules(Sla::MaxThroughput, 32);
        assert_eq!(eemt.ramp_channels(&net), Some(11));
        assert_eq!(eemt.preconnect(&net), 11, "max(6 opened, 11)");
        assert_eq!(rules(Sla::MinEnergy, 32).preconnect(&net), 2);
        let tight = NetParams { max_ch: 8, ..net };
        assert_eq!(eemt.ramp_channels(&tight), Some(8), "within --max-channels");
        let unknown = NetParams {
            bandwidth_bps: None,
            ..net
        };
        assert_eq!(eemt.ramp_channels(&unknown), None);
        assert!(!eemt.is_short(1, &unknown));
        // short: at most 50 RTTs at the link rate, 50 × 1.25 MB = 62.5 MB
        assert!(eemt.is_short(62_500_000, &net));
        assert!(!eemt.is_short(62_500_001, &net));
        let plan_of =
            |bytes: u64| crate::initial_plan(&[bytes / 2, bytes / 2], &net, Sla::MaxThroughput, 2);
        // (channels open in the first interval, the tuner's own count)
        let opened = |sla, bytes, transfer| {
            let (ctl, p) = rules(sla, 32).controller(&plan_of(bytes), &net, 2, 1, transfer);
            (p.num_ch, ctl.initial(&[bytes]).num_ch)
        };
        assert_eq!(
            opened(Sla::MaxThroughput, 60_000_000, Some(60_000_000)),
            (11, 11),
            "short: the tuner starts from the ramp"
        );
        assert_eq!(
            opened(Sla::MaxThroughput, 60_000_000, None),
            (11, 3),
            "files still found: the ramp for the first interval only"
        );
        assert_eq!(
            opened(Sla::MaxThroughput, 6_000_000, Some(600_000_000)),
            (11, 3),
            "a few files sized of a long list"
        );
        assert_eq!(
            opened(Sla::MaxThroughput, 600_000_000, Some(600_000_000)),
            (11, 3),
            "long"
        );
        assert_eq!(
            opened(Sla::MinEnergy, 60_000_000, Some(60_000_000)),
            (2, 1),
            "ME keeps its start"
        );
    }

    #[test]
    fn first_channels_per_sla() {
        let rules = |sla| StartRules {
            tuner: TunerChoice::Wattio,
            sla,
            max_ch: 32,
            cpu_scaling: true,
        };
        // 1 MiB windows over 36 ms: 233 Mbit/s a channel, 5 channels for 1 Gbit/s
        let mut net = NetParams {
            rtt_s: 0.036,
            bandwidth_bps: Some(1e9),
            window_bytes: 1 << 20,
            max_ch: 32,
        };
        assert_eq!(rules(Sla::MinEnergy).first_channels(&net), 5);
        assert_eq!(rules(Sla::MaxThroughput).first_channels(&net), 15);
        assert_eq!(rules(Sla::Target(400e6)).first_channels(&net), 2);
        net.max_ch = 8;
        assert_eq!(rules(Sla::MaxThroughput).first_channels(&net), 8);
        // ME and EEMT open twice their first count at once, within --max-channels; EETT as many
        assert_eq!(rules(Sla::MaxThroughput).opened_channels(&net), 8);
        net.max_ch = 32;
        assert_eq!(rules(Sla::MaxThroughput).opened_channels(&net), 30);
        assert_eq!(rules(Sla::MinEnergy).opened_channels(&net), 10);
        assert_eq!(rules(Sla::Target(400e6)).opened_channels(&net), 2);
        assert_eq!(rules(Sla::MinEnergy).preconnect(&net), 10);
        let alan = StartRules {
            tuner: TunerChoice::Alan,
            ..rules(Sla::MinEnergy)
        };
        assert_eq!(alan.preconnect(&net), 0);
    }
}
