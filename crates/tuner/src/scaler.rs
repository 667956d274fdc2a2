//! Algorithm 3, threshold-based CPU frequency and core scaling, reconstructed from §III-C (the
//! listing is missing from the paper's text).
//!
//! Every timeout the load (our CPU time / (active cores × interval)) is compared with two
//! thresholds. Above `max_load` (default 0.80, ours) the scaler adds capacity: one more core,
//! or — with all cores on — one frequency step up. Below `min_load` (default 0.40, ours) it
//! removes capacity: one frequency step down, or — at the lowest step — one core fewer (never
//! below one). Cores first on the way up because network stacks spread over cores well, and
//! frequency first on the way down because dynamic power falls faster with f than with the
//! core count; [`ScalerOrder`] flips the order.

use serde::Serialize;

/// Which knob moves first when adding capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScalerOrder {
    CoresFirst,
    FrequencyFirst,
}

/// The threshold scaler's state.
#[derive(Debug, Clone, Serialize)]
pub struct CpuScaler {
    pub min_load: f64,
    pub max_load: f64,
    pub order: ScalerOrder,
    cores: usize,
    max_cores: usize,
    freq_idx: usize,
    n_freqs: usize,
}

impl CpuScaler {
    /// A scaler starting at `cores` and frequency index `freq_idx` (of `n_freqs` steps).
    pub fn new(cores: usize, max_cores: usize, freq_idx: usize, n_freqs: usize) -> Self {
        let max_cores = max_cores.max(1);
        let n_freqs = n_freqs.max(1);
        CpuScaler {
            min_load: 0.40,
            max_load: 0.80,
            order: ScalerOrder::CoresFirst,
            cores: cores.clamp(1, max_cores),
            max_cores,
            freq_idx: freq_idx.min(n_freqs - 1),
            n_freqs,
        }
    }

    pub fn cores(&self) -> usize {
        self.cores
    }

    pub fn freq_idx(&self) -> usize {
        self.freq_idx
    }

    /// One timeout with the measured load (0..1 per active core).
    pub fn step(&mut self, load: f64) {
        let top = self.n_freqs - 1;
        if load > self.max_load {
            let more_cores = self.cores < self.max_cores;
            let more_freq = self.freq_idx < top;
            match (self.order, more_cores, more_freq) {
                (ScalerOrder::CoresFirst, true, _) | (ScalerOrder::FrequencyFirst, true, false) => {
                    self.cores += 1
                }
                (_, _, true) => self.freq_idx += 1,
                _ => {}
            }
        } else if load < self.min_load {
            if self.freq_idx > 0 {
                self.freq_idx -= 1;
            } else if self.cores > 1 {
                self.cores -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_cores_then_frequency_down_frequency_then_cores() {
        let mut s = CpuScaler::new(1, 2, 0, 3);
        s.step(0.9);
        assert_eq!((s.cores(), s.freq_idx()), (2, 0));
        s.step(0.9);
        assert_eq!((s.cores(), s.freq_idx()), (2, 1));
        s.step(0.9);
        s.step(0.9);
        assert_eq!((s.cores(), s.freq_idx()), (2, 2), "saturates");
        s.step(0.6);
        assert_eq!((s.cores(), s.freq_idx()), (2, 2), "inside the band: hold");
        s.step(0.1);
        s.step(0.1);
        assert_eq!((s.cores(), s.freq_idx()), (2, 0));
        s.step(0.1);
        s.step(0.1);
        assert_eq!((s.cores(), s.freq_idx()), (1, 0), "never below one core");
    }

    #[test]
    fn frequency_first_order() {
        let mut s = CpuScaler::new(1, 2, 0, 2);
        s.order = ScalerOrder::FrequencyFirst;
        s.step(0.95);
        assert_eq!((s.cores(), s.freq_idx()), (1, 1));
        s.step(0.95);
        assert_eq!((s.cores(), s.freq_idx()), (2, 1));
    }
}
