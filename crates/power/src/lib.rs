//! wattio-power: the device power manager of "Ghosts in the Machine" (Anand, Nightingale, Flinn,
//! MobiSys 2004) — devices with power modes and transition costs, one global performance/energy
//! knob, self-tuning power management (STPM) and ghost hints.
//!
//! - [`PowerManager`]: the Figure 5 interface (register, notify, query, callbacks), with
//!   [`DeviceHandle`], [`CallbackId`], [`ModeEntered`], [`Residency`] and [`PmError`].
//! - [`Profile`]: device profiles as TOML data files (built-ins embedded; the schema is on
//!   [`Profile`]), describing each device as a [`DeviceSpec`] of [`ModeInfo`]s and
//!   [`TransitionCost`]s.
//! - Equation (4), [`weighted_cost_eq4`], the cost every choice is ranked by; the round-trip
//!   threshold of equation (3), [`round_trip_threshold`].
//! - [`DiskPolicy`]: disk ladders (STPM and spin-down baselines); [`NetPolicy`] and [`NetStpm`]:
//!   the network run predictor.
//! - [`GhostHint`], [`GhostPolicy`], [`GhostAccumulator`]: ghost hints and the device-side
//!   policies (the paper's, and ours).
//! - [`DeviceMachine`]: the clock-free power-mode state machine of one device (ladder,
//!   transitions, wake-ups, I/O timing, energy integration).
//! - [`DiskController`] (STPM or a baseline, ghost hints) and [`NetController`] (the STPM network
//!   module or a fixed policy): a machine on a clock, reporting to the power manager. Live
//!   applications run them on a [`RealClock`]; the simulator on a [`VirtualClock`].

mod clock;
mod controller;
mod device;
mod eq;
mod ghost;
mod machine;
mod manager;
mod profile;
mod residency;
mod stpm;

pub use clock::{Clock, RealClock, VirtualClock};
pub use controller::{ControlError, DeviceCounters, DiskController, ModeActuator, NetController};
pub use device::{
    DeviceKind, DeviceSpec, IoModel, IoOp, ModeId, ModeInfo, SpecError, TransitionCost,
};
pub use eq::weighted_cost_eq4;
pub use ghost::{GhostAccumulator, GhostDevice, GhostHint, GhostPolicy};
pub use machine::{DeviceMachine, Readiness, Step};
pub use manager::{CallbackId, DeviceHandle, ModeEntered, PmError, PowerManager, ReadinessFn};
pub use profile::{Profile, ProfileError};
pub use residency::Residency;
pub use stpm::{
    deepest_mode, round_trip_threshold, DiskPolicy, Ladder, NetDecision, NetPolicy, NetStpm,
    RunHistogram, Transfer,
};
