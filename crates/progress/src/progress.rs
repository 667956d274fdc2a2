//! What a study tells its caller while it runs, and the time it still needs.

use std::collections::BTreeMap;
use std::time::Duration;

/// How far a study of many runs is. Runners tell a [`Sink<StudyProgress>`](crate::Sink)
/// whenever a run starts or finishes; the binary decides how to show it (a bar on a terminal,
/// nothing in a pipe).
#[derive(Debug, Clone, PartialEq)]
pub struct StudyProgress {
    /// Runs done, those kept from an earlier attempt (`--resume`) included.
    pub done: usize,
    /// Runs in the whole plan.
    pub total: usize,
    /// Of `done`, the runs kept from an earlier attempt.
    pub resumed: usize,
    /// What is running or just ran, in words.
    pub label: String,
    /// Time still needed, from the run times measured so far ([`Eta`]); `None` before any.
    pub eta: Option<Duration>,
}

/// The time a study still needs, from the times its runs actually took.
///
/// Runs are grouped by a key (a workload, a cell): a remaining run is expected to take the
/// mean measured time of its own key, or the mean of every measured run while its key has
/// none yet. No figure is assumed: until one run is measured there is no estimate.
#[derive(Debug, Clone)]
pub struct Eta<K: Ord> {
    per_key: BTreeMap<K, (f64, usize)>,
    sum_s: f64,
    n: usize,
}

impl<K: Ord> Default for Eta<K> {
    fn default() -> Self {
        Eta {
            per_key: BTreeMap::new(),
            sum_s: 0.0,
            n: 0,
        }
    }
}

impl<K: Ord> Eta<K> {
    /// No run measured yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A run of `key` took `seconds` (negative or non-finite times are ignored).
    pub fn record(&mut self, key: K, seconds: f64) {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return;
        }
        let e = self.per_key.entry(key).or_insert((0.0, 0));
        e.0 += seconds;
        e.1 += 1;
        self.sum_s += seconds;
        self.n += 1;
    }

    /// Mean measured seconds of a run of `key` (of any run while `key` has none).
    pub fn mean_s(&self, key: &K) -> Option<f64> {
        match self.per_key.get(key) {
            Some(&(s, n)) if n > 0 => Some(s / n as f64),
            _ if self.n > 0 => Some(self.sum_s / self.n as f64),
            _ => None,
        }
    }

    /// Expected time of the runs still to do, one key per run.
    pub fn remaining<'k>(&self, keys: impl IntoIterator<Item = &'k K>) -> Option<Duration>
    where
        K: 'k,
    {
        if self.n == 0 {
            return None;
        }
        let s: f64 = keys.into_iter().filter_map(|k| self.mean_s(k)).sum();
        Some(Duration::from_secs_f64(s.max(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_uses_each_keys_measured_mean_and_the_overall_mean_for_unseen_keys() {
        let mut e: Eta<&str> = Eta::new();
        assert_eq!(e.remaining([&"a"]), None, "nothing measured, no estimate");
        e.record("a", 1.0);
        e.record("a", 3.0);
        e.record("b", 10.0);
        e.record("b", f64::NAN);
        // a: mean 2 s; b: 10 s; c unseen: mean of all = 14 / 3 s.
        let left = e.remaining([&"a", &"a", &"b", &"c"]).unwrap();
        assert!((left.as_secs_f64() - (2.0 + 2.0 + 10.0 + 14.0 / 3.0)).abs() < 1e-9);
        assert_eq!(e.remaining(std::iter::empty()), Some(Duration::ZERO));
    }
}
