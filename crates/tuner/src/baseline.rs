//! Baselines: fixed parameters, and the Alan/Arslan/Kosar heuristics: `getBestParams` of
//! AdaptiveGridFTPClient (<https://github.com/earslan10/AdaptiveGridFTPClient>; Arslan et al.,
//! "Dynamic Protocol Tuning Algorithms for High Performance Data Transfers", Euro-Par 2013) and
//! the MinE/HTEE algorithms of Alan, Arslan and Kosar ("Energy-Aware Data Transfer Tuning",
//! CCGrid 2014; "Energy-Aware Data Transfer Algorithms", SC15). The energy algorithms have no
//! public code; these are reconstructions from the papers' descriptions.
//!
//! - `getBestParams` (AdaptiveGridFTPClient, §1.2): with fileCountToFillThePipe =
//!   round(BDP/avgFileSize), cc = min(min(max(fill, 2), fileCount), maxCC),
//!   pp = min(fill, 100), p = max(min(ceil(BDP/buf), ceil(avgFileSize/buf)), 1).
//!   Used statically per partition by MinE (maxCC = 2, ours: the notes do not say which cap
//!   MinE used) and HTEE (maxCC = the channel limit).
//! - SLAEE (§1.4 and the paper's §V-B description of it): the same p/pp, starting from one
//!   channel and adding or removing one per timeout until the target is met, channels split
//!   evenly across partitions (not by remaining size).

use super::{ChannelTuner, Observation, State};
use serde::Serialize;

/// getBestParams output for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AlanHeuristic {
    pub cc: usize,
    pub p: usize,
    pub pp: usize,
}

impl AlanHeuristic {
    /// getBestParams(avgFileSize, fileCount, BDP, buffer, maxCC).
    pub fn best_params(
        avg_file: f64,
        file_count: usize,
        bdp: u64,
        buf: u64,
        max_cc: usize,
    ) -> Self {
        let fill = (bdp as f64 / avg_file.max(1.0)).round() as usize;
        let buf = buf.max(1) as f64;
        let p_pipe = (bdp as f64 / buf).ceil() as usize;
        let p_buf = (avg_file / buf).ceil() as usize;
        AlanHeuristic {
            cc: fill.max(2).min(file_count.max(1)).min(max_cc.max(1)),
            pp: fill.clamp(1, 100),
            p: p_pipe.min(p_buf).max(1),
        }
    }
}

/// Fixed (cc, p, pp) for every partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FixedParams {
    pub cc: usize,
    pub p: usize,
    pub pp: usize,
}

/// A tuner that never changes the channel count (fixed parameters, MinE, HTEE).
pub struct StaticTuner {
    name: &'static str,
    num_ch: usize,
}

impl StaticTuner {
    pub fn new(name: &'static str, num_ch: usize) -> Self {
        StaticTuner {
            name,
            num_ch: num_ch.max(1),
        }
    }
}

impl ChannelTuner for StaticTuner {
    fn name(&self) -> &'static str {
        self.name
    }
    fn state(&self) -> State {
        State::Static
    }
    fn num_ch(&self) -> usize {
        self.num_ch
    }
    fn on_timeout(&mut self, _obs: &Observation) {}
    fn weighted(&self) -> bool {
        false
    }
}

/// SLAEE-style target tuner: one channel at a time.
pub struct SlaeeTuner {
    target_bps: f64,
    band: f64,
    num_ch: usize,
    max_ch: usize,
}

impl SlaeeTuner {
    pub fn new(target_bps: f64, max_ch: usize) -> Self {
        SlaeeTuner {
            target_bps,
            band: 0.05,
            num_ch: 1,
            max_ch: max_ch.max(1),
        }
    }
}

impl ChannelTuner for SlaeeTuner {
    fn name(&self) -> &'static str {
        "SLAEE"
    }
    fn state(&self) -> State {
        State::Static
    }
    fn num_ch(&self) -> usize {
        self.num_ch
    }
    fn on_timeout(&mut self, obs: &Observation) {
        let t = obs.tput_bps();
        if t < (1.0 - self.band) * self.target_bps {
            self.num_ch = (self.num_ch + 1).min(self.max_ch);
        } else if t > (1.0 + self.band) * self.target_bps && self.num_ch > 1 {
            self.num_ch -= 1;
        }
    }
    fn weighted(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_params_by_hand() {
        // 100 kB files, 3000 of them, BDP 4.5 MB, 1 MiB buffer, maxCC 32:
        // fill = round(45) = 45 → cc = 32, pp = 45; p = max(min(ceil(4.29), ceil(0.095)), 1) = 1
        let h = AlanHeuristic::best_params(100e3, 3000, 4_500_000, 1 << 20, 32);
        assert_eq!(
            h,
            AlanHeuristic {
                cc: 32,
                p: 1,
                pp: 45
            }
        );
        // 222 MB files: fill = round(0.02) = 0 → cc = max(0,2) = 2, pp = 1; p = min(5, 212) = 5
        let h = AlanHeuristic::best_params(222e6, 128, 4_500_000, 1 << 20, 32);
        assert_eq!(h, AlanHeuristic { cc: 2, p: 5, pp: 1 });
        // one file caps cc at 1
        assert_eq!(
            AlanHeuristic::best_params(1e3, 1, 4_500_000, 1 << 20, 32).cc,
            1
        );
    }

    #[test]
    fn slaee_climbs_one_channel_at_a_time() {
        let mut t = SlaeeTuner::new(1000.0, 8);
        let o = |b: f64| Observation {
            dt_s: 1.0,
            bytes: (b / 8.0) as u64,
            ..Default::default()
        };
        t.on_timeout(&o(200.0));
        t.on_timeout(&o(400.0));
        assert_eq!(t.num_ch(), 3);
        t.on_timeout(&o(1000.0));
        assert_eq!(t.num_ch(), 3);
        t.on_timeout(&o(1400.0));
        assert_eq!(t.num_ch(), 2);
    }
}
