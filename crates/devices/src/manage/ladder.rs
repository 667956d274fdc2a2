//! A real device as the Ghosts power manager sees it: its modes are settings of its kernel
//! knobs, with powers and transition costs from the device's own figures where it has them.
//!
//! - NVMe with figures: mode 0 is APST off (tolerance 0, the drive stays in its operational
//!   state); each deeper mode is the tolerance that admits one more of the drive's
//!   non-operational states (their entry + exit latency), its power the least of the admitted
//!   states' (what APST may reach while the drive idles), entering it costs the deepest
//!   admitted state's entry latency and leaving it its exit latency, at the operational power.
//! - Without figures (SATA link policy, runtime PM, NVMe with no descriptors): a generic ladder
//!   of two levels, performance and `med_power_with_dipm` / `auto` (the kernel's own mobile
//!   default policy), whose trade is unknown; powers are unknown, so it is driven by an idle
//!   timeout rather than by STPM's break-even times.

use wattio_power::{DeviceKind, DeviceSpec, IoModel, ModeId, ModeInfo, TransitionCost};

use super::knob::{DeviceKnob, KnobKind};
use crate::figures::{PowerFigures, PowerState};

/// The link policy of the generic low level: the kernel's default for mobile chipsets
/// (`CONFIG_SATA_MOBILE_LPM_POLICY`, drivers/ata/Kconfig), DIPM added to medium power.
const GENERIC_LINK_POLICY: &str = "med_power_with_dipm";

/// One mode of a managed device: the value each of its knobs takes.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobMode {
    /// Its name (`apst-off`, `apst≤5100us`, `low-power (generic)`).
    pub name: String,
    /// The value of each knob, in the order of [`KnobLadder::knobs`].
    pub values: Vec<String>,
    /// The device's idle power in this mode, by its own figures; `None` without figures.
    pub power_w: Option<f64>,
    /// Time to leave this mode for mode 0, µs, by its own figures; `None` without figures.
    pub wake_latency_us: Option<u64>,
    /// Time to enter it from mode 0, µs, by its own figures; `None` without figures.
    pub entry_latency_us: Option<u64>,
}

/// A device's knobs and the modes they make.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobLadder {
    /// The device (`nvme0n1`, `sda`).
    pub device: String,
    /// Its knobs.
    pub knobs: Vec<DeviceKnob>,
    /// Its modes, mode 0 the performance one, deeper modes after.
    pub modes: Vec<KnobMode>,
    /// The label of the figures the powers come from; `None` for a generic ladder.
    pub figures_label: Option<String>,
}

/// The power a state draws idle: its idle power where reported, else its maximum.
fn idle_power(s: &PowerState) -> f64 {
    s.idle_w.unwrap_or(s.max_w)
}

/// The APST tolerances that admit each deeper set of non-operational states, with the states
/// each admits.
fn tolerance_levels(figures: &PowerFigures) -> Vec<(u64, Vec<&PowerState>)> {
    let mut totals: Vec<u64> = figures
        .states
        .iter()
        .filter(|s| s.non_operational)
        .map(|s| s.entry_latency_us.saturating_add(s.exit_latency_us))
        .collect();
    totals.sort_unstable();
    totals.dedup();
    totals
        .into_iter()
        .filter(|t| *t > 0)
        .map(|t| {
            let admitted = figures
                .states
                .iter()
                .filter(|s| {
                    s.non_operational && s.entry_latency_us.saturating_add(s.exit_latency_us) <= t
                })
                .collect();
            (t, admitted)
        })
        .collect()
}

impl KnobLadder {
    /// The ladder of `device` with these knobs and, where it has them, its figures. `None`
    /// without a knob.
    pub fn build(
        device: &str,
        knobs: Vec<DeviceKnob>,
        figures: Option<&PowerFigures>,
    ) -> Option<KnobLadder> {
        if knobs.is_empty() {
            return None;
        }
        let performance: Vec<String> = knobs
            .iter()
            .map(|k| k.kind.performance_value().to_string())
            .collect();
        let low_value = |k: &DeviceKnob, nvme: Option<u64>| match k.kind {
            KnobKind::NvmeLatencyTolerance => nvme.map(|t| t.to_string()),
            KnobKind::SataLinkPolicy => Some(GENERIC_LINK_POLICY.to_string()),
            KnobKind::RuntimePmControl => Some("auto".to_string()),
        };
        let operational = figures.and_then(|f| f.states.iter().find(|s| !s.non_operational));
        let levels = figures.map(tolerance_levels).unwrap_or_default();
        let has_nvme = knobs
            .iter()
            .any(|k| k.kind == KnobKind::NvmeLatencyTolerance);
        let mut modes = Vec::new();
        if let (true, Some(op), false) = (has_nvme, operational, levels.is_empty()) {
            modes.push(KnobMode {
                name: "apst-off".into(),
                values: performance,
                power_w: Some(idle_power(op)),
                wake_latency_us: Some(0),
                entry_latency_us: Some(0),
            });
            for (t, admitted) in levels {
                modes.push(KnobMode {
                    name: format!("apst≤{t}us"),
                    values: knobs
                        .iter()
                        .map(|k| low_value(k, Some(t)))
                        .collect::<Option<_>>()?,
                    power_w: admitted.iter().map(|s| idle_power(s)).reduce(f64::min),
                    wake_latency_us: admitted.iter().map(|s| s.exit_latency_us).max(),
                    entry_latency_us: admitted.iter().map(|s| s.entry_latency_us).max(),
                });
            }
            return Some(KnobLadder {
                device: device.to_string(),
                knobs,
                modes,
                figures_label: figures.map(|f| f.source.label()),
            });
        }
        // Generic: an NVMe tolerance cannot be chosen without the drive's latencies.
        let knobs: Vec<DeviceKnob> = knobs
            .into_iter()
            .filter(|k| k.kind != KnobKind::NvmeLatencyTolerance)
            .collect();
        if knobs.is_empty() {
            return None;
        }
        let generic = |name: &str, values: Vec<String>| KnobMode {
            name: name.to_string(),
            values,
            power_w: None,
            wake_latency_us: None,
            entry_latency_us: None,
        };
        let high = knobs.iter().map(|k| k.kind.performance_value().to_string());
        let low = knobs.iter().filter_map(|k| low_value(k, None));
        Some(KnobLadder {
            device: device.to_string(),
            modes: vec![
                generic("performance", high.collect()),
                generic("low-power (generic)", low.collect()),
            ],
            knobs,
            figures_label: None,
        })
    }

    /// Whether the modes have the device's own powers and latencies.
    pub fn has_figures(&self) -> bool {
        self.figures_label.is_some()
    }

    /// What moving from `from` to `to` trades by the device's figures: watts saved (negative
    /// when going up) and wake latency added, ms. `None` without figures.
    pub fn trade(&self, from: ModeId, to: ModeId) -> Option<(f64, f64)> {
        let (a, b) = (self.modes.get(from.0)?, self.modes.get(to.0)?);
        let saved = a.power_w? - b.power_w?;
        let added = b.wake_latency_us? as f64 / 1000.0 - a.wake_latency_us? as f64 / 1000.0;
        Some((saved, added))
    }

    /// The device as the power manager sees it. Without figures every power is 0 (unknown)
    /// and transitions take no time: such a device is driven by a timeout, not by STPM.
    pub fn spec(&self) -> DeviceSpec {
        let high_w = self.modes[0].power_w.unwrap_or(0.0);
        let modes = self
            .modes
            .iter()
            .enumerate()
            .map(|(i, m)| ModeInfo {
                name: m.name.clone(),
                power_w: m.power_w.unwrap_or(0.0),
                can_read: i == 0,
                can_write: i == 0,
                // Live I/O is timed by the device itself; the model is never used to time it.
                io: (i == 0).then_some(IoModel {
                    latency_s: 0.0,
                    read_bytes_per_s: f64::MAX,
                    write_bytes_per_s: f64::MAX,
                    read_power_w: high_w,
                    write_power_w: high_w,
                }),
            })
            .collect();
        let cost = |us: Option<u64>| {
            let time_s = us.unwrap_or(0) as f64 / 1e6;
            TransitionCost {
                time_s,
                energy_j: high_w * time_s,
            }
        };
        let mut transitions = Vec::new();
        for (i, m) in self.modes.iter().enumerate().skip(1) {
            transitions.push((ModeId(0), ModeId(i), cost(m.entry_latency_us)));
            transitions.push((ModeId(i), ModeId(0), cost(m.wake_latency_us)));
            for j in i + 1..self.modes.len() {
                transitions.push((ModeId(i), ModeId(j), cost(self.modes[j].entry_latency_us)));
            }
        }
        DeviceSpec {
            name: self.device.clone(),
            kind: DeviceKind::Storage,
            modes,
            transitions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::FiguresSource;
    use std::path::PathBuf;

    fn state(id: u8, max_w: f64, idle_w: Option<f64>, nops: bool, en: u64, ex: u64) -> PowerState {
        PowerState {
            id,
            name: format!("ps{id}"),
            max_w,
            idle_w,
            active_w: None,
            non_operational: nops,
            entry_latency_us: en,
            exit_latency_us: ex,
        }
    }

    /// A drive with three operational and two non-operational states (hand-built figures).
    fn five_states() -> PowerFigures {
        PowerFigures {
            states: vec![
                state(0, 8.0, Some(4.0), false, 0, 0),
                state(1, 6.0, None, false, 0, 0),
                state(2, 4.5, None, false, 0, 0),
                state(3, 0.05, None, true, 1000, 4000),
                state(4, 0.005, None, true, 5000, 40000),
            ],
            source: FiguresSource::NvmeDescriptors,
        }
    }

    fn knob(kind: KnobKind, path: &str) -> DeviceKnob {
        DeviceKnob {
            kind,
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn nvme_modes_are_the_tolerances_admitting_each_deeper_state() {
        let knobs = vec![
            knob(KnobKind::NvmeLatencyTolerance, "/t"),
            knob(KnobKind::RuntimePmControl, "/c"),
        ];
        let l = KnobLadder::build("nvme0n1", knobs, Some(&five_states())).unwrap();
        let names: Vec<&str> = l.modes.iter().map(|m| m.name.as_str()).collect();
        // PS3: 1000 + 4000 = 5000 µs; PS4: 5000 + 40000 = 45000 µs.
        assert_eq!(names, ["apst-off", "apst≤5000us", "apst≤45000us"]);
        assert_eq!(l.modes[0].values, ["0", "on"]);
        assert_eq!(l.modes[1].values, ["5000", "auto"]);
        assert_eq!(l.modes[2].values, ["45000", "auto"]);
        // Powers: PS0 idle 4 W; PS3 0.05 W; PS3 and PS4 admitted, the least 0.005 W.
        assert_eq!(l.modes[0].power_w, Some(4.0));
        assert_eq!(l.modes[1].power_w, Some(0.05));
        assert_eq!(l.modes[2].power_w, Some(0.005));
        // apst-off → apst≤45000us saves 4 − 0.005 = 3.995 W and adds the 40 ms exit latency.
        let (w, ms) = l.trade(ModeId(0), ModeId(2)).unwrap();
        assert!((w - 3.995).abs() < 1e-12 && (ms - 40.0).abs() < 1e-12);
        let spec = l.spec();
        spec.validate().unwrap();
        // Up from the deepest: 40 ms at PS0's 4 W = 0.16 J.
        let up = spec.transition(ModeId(2), ModeId(0)).unwrap();
        assert!((up.time_s - 0.04).abs() < 1e-12 && (up.energy_j - 0.16).abs() < 1e-12);
    }

    #[test]
    fn without_figures_the_ladder_is_generic_and_an_nvme_tolerance_is_left_out() {
        let knobs = vec![
            knob(KnobKind::SataLinkPolicy, "/p"),
            knob(KnobKind::RuntimePmControl, "/c"),
        ];
        let l = KnobLadder::build("sda", knobs, None).unwrap();
        assert_eq!(l.modes[0].values, ["max_performance", "on"]);
        assert_eq!(l.modes[1].values, ["med_power_with_dipm", "auto"]);
        assert!(l.trade(ModeId(0), ModeId(1)).is_none());
        l.spec().validate().unwrap();
        let nvme_only = vec![knob(KnobKind::NvmeLatencyTolerance, "/t")];
        assert!(KnobLadder::build("nvme0n1", nvme_only, None).is_none());
    }
}
