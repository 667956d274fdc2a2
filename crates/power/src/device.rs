//! Devices, their power modes, I/O cost models and transition costs.

use serde::Serialize;

/// Index of a mode in its device's mode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ModeId(pub usize);

/// What kind of I/O path a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DeviceKind {
    /// Local storage (disk, SSD).
    Storage,
    /// Network interface.
    Network,
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum IoOp {
    /// Read (for a network device: download).
    Read,
    /// Write (for a network device: upload).
    Write,
}

/// Linear cost model of an I/O operation in one mode: `time = latency + bytes / bandwidth`,
/// with the device drawing `*_power_w` while the operation runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IoModel {
    /// Fixed per-operation time (seek, round trips, beacon waits), seconds.
    pub latency_s: f64,
    /// Read (download) bandwidth, bytes per second.
    pub read_bytes_per_s: f64,
    /// Write (upload) bandwidth, bytes per second.
    pub write_bytes_per_s: f64,
    /// Device power while reading, watts.
    pub read_power_w: f64,
    /// Device power while writing, watts.
    pub write_power_w: f64,
}

impl IoModel {
    /// Time to move `bytes` with `op`, seconds.
    pub fn time_s(&self, op: IoOp, bytes: u64) -> f64 {
        let bw = match op {
            IoOp::Read => self.read_bytes_per_s,
            IoOp::Write => self.write_bytes_per_s,
        };
        self.latency_s + bytes as f64 / bw
    }

    /// Device power while performing `op`, watts.
    pub fn power_w(&self, op: IoOp) -> f64 {
        match op {
            IoOp::Read => self.read_power_w,
            IoOp::Write => self.write_power_w,
        }
    }
}

/// Static description of one power mode (what `QueryModeInfo` returns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeInfo {
    /// Mode name, e.g. `standby`.
    pub name: String,
    /// Power drawn while idle in this mode, watts.
    pub power_w: f64,
    /// Whether the device can read in this mode without a transition.
    pub can_read: bool,
    /// Whether the device can write in this mode without a transition.
    pub can_write: bool,
    /// Cost model of I/O in this mode; present when the mode can read or write.
    pub io: Option<IoModel>,
}

impl ModeInfo {
    /// Whether `op` can run in this mode without a transition.
    pub fn can(&self, op: IoOp) -> bool {
        match op {
            IoOp::Read => self.can_read,
            IoOp::Write => self.can_write,
        }
    }
}

/// Cost of one mode transition (what `QueryTransitionCost` returns).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TransitionCost {
    /// Duration of the transition, seconds; the device serves no I/O meanwhile.
    pub time_s: f64,
    /// Energy the device spends on the transition, joules.
    pub energy_j: f64,
}

/// Everything a driver discloses in `RegisterDevice`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSpec {
    /// Device name, e.g. `Hitachi 1 GB microdrive`.
    pub name: String,
    /// Storage or network.
    pub kind: DeviceKind,
    /// Mode table; `ModeId(i)` is `modes[i]`.
    pub modes: Vec<ModeInfo>,
    /// Known transitions `(from, to, cost)`.
    pub transitions: Vec<(ModeId, ModeId, TransitionCost)>,
}

/// A spec that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl DeviceSpec {
    /// Check the invariants the power manager and STPM rely on.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.modes.is_empty() {
            return Err(SpecError(format!("device `{}` has no modes", self.name)));
        }
        for m in &self.modes {
            if !(m.power_w.is_finite() && m.power_w >= 0.0) {
                return Err(SpecError(format!(
                    "mode `{}`: power_w must be a finite number ≥ 0",
                    m.name
                )));
            }
            if (m.can_read || m.can_write) && m.io.is_none() {
                return Err(SpecError(format!(
                    "mode `{}` can do I/O but has no I/O model",
                    m.name
                )));
            }
            if let Some(io) = &m.io {
                for (f, v, pos) in [
                    ("latency_s", io.latency_s, false),
                    ("read_bytes_per_s", io.read_bytes_per_s, true),
                    ("write_bytes_per_s", io.write_bytes_per_s, true),
                    ("read_power_w", io.read_power_w, false),
                    ("write_power_w", io.write_power_w, false),
                ] {
                    if !v.is_finite() || v < 0.0 || (pos && v == 0.0) {
                        return Err(SpecError(format!(
                            "mode `{}`: {f} must be a finite number {}",
                            m.name,
                            if pos { "> 0" } else { "≥ 0" }
                        )));
                    }
                }
            }
        }
        let mut names: Vec<&str> = self.modes.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(SpecError(format!(
                "device `{}` has two modes with the same name",
                self.name
            )));
        }
        if !self.modes.iter().any(|m| m.can_read) {
            return Err(SpecError(format!(
                "device `{}` has no mode that can read",
                self.name
            )));
        }
        for (f, t, c) in &self.transitions {
            if f.0 >= self.modes.len() || t.0 >= self.modes.len() || f == t {
                return Err(SpecError(format!(
                    "device `{}`: transition between unknown or equal modes",
                    self.name
                )));
            }
            if !(c.time_s.is_finite()
                && c.time_s >= 0.0
                && c.energy_j.is_finite()
                && c.energy_j >= 0.0)
            {
                return Err(SpecError(format!(
                    "transition {} → {}: time_s and energy_j must be finite numbers ≥ 0",
                    self.modes[f.0].name, self.modes[t.0].name
                )));
            }
        }
        let high = self.high_mode();
        for (i, m) in self.modes.iter().enumerate() {
            let id = ModeId(i);
            if id != high && self.transition(id, high).is_none() {
                return Err(SpecError(format!(
                    "mode `{}` has no transition to the high-power mode `{}` (add one)",
                    m.name, self.modes[high.0].name
                )));
            }
        }
        Ok(())
    }

    /// The highest-power mode that can read: the mode with the best performance.
    pub fn high_mode(&self) -> ModeId {
        let mut best: Option<usize> = None;
        for (i, m) in self.modes.iter().enumerate() {
            if m.can_read && best.is_none_or(|b| m.power_w > self.modes[b].power_w) {
                best = Some(i);
            }
        }
        ModeId(best.unwrap_or(0))
    }

    /// The lowest-power mode that can still read without a transition (e.g. 802.11 PSM).
    pub fn low_readable_mode(&self) -> ModeId {
        let mut best: Option<usize> = None;
        for (i, m) in self.modes.iter().enumerate() {
            if m.can_read && best.is_none_or(|b| m.power_w < self.modes[b].power_w) {
                best = Some(i);
            }
        }
        ModeId(best.unwrap_or(0))
    }

    /// The cost of going directly from `from` to `to`, if the device supports it.
    pub fn transition(&self, from: ModeId, to: ModeId) -> Option<TransitionCost> {
        self.transitions
            .iter()
            .find(|(f, t, _)| *f == from && *t == to)
            .map(|(_, _, c)| *c)
    }

    /// The mode with this name.
    pub fn mode_by_name(&self, name: &str) -> Option<ModeId> {
        self.modes.iter().position(|m| m.name == name).map(ModeId)
    }

    /// Mode info by id (panics never: out-of-range ids give `None`).
    pub fn mode(&self, id: ModeId) -> Option<&ModeInfo> {
        self.modes.get(id.0)
    }
}
