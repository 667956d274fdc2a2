//! wattio-power: the device power manager of "Ghosts in the Machine" (Anand, Nightingale, Flinn,
//! MobiSys 2004) — devices with power modes and transition costs, one global performance/energy
//! knob, self-tuning power management (STPM) and ghost hints.
//!
//! - [`manager::PowerManager`]: the Figure 5 interface (register, notify, query, callbacks).
//! - [`profile::Profile`]: device profiles as TOML data files (built-ins embedded).
//! - [`eq`]: equations (1)–(4).
//! - [`stpm`]: disk ladders (STPM and spin-down baselines) and the network run predictor.
//! - [`ghost`]: ghost hints and the device-side policies (the paper's, and ours).
//! - [`machine`]: the clock-free power-mode state machine of one device (ladder, transitions,
//!   wake-ups, I/O timing, energy integration).
//! - [`controller`]: [`DiskController`] (STPM or a baseline, ghost hints) and [`NetController`]
//!   (the STPM network module or a fixed policy): a machine on a clock, reporting to the power
//!   manager. Live applications run them on a [`RealClock`]; the simulator on a
//!   [`VirtualClock`].
//! - [`clock`]: real and virtual clocks.

pub mod clock;
pub mod controller;
pub mod device;
pub mod eq;
pub mod ghost;
pub mod machine;
pub mod manager;
pub mod profile;
pub mod stpm;

pub use clock::{Clock, RealClock, VirtualClock};
pub use controller::{ControlError, DeviceCounters, DiskController, ModeActuator, NetController};
pub use device::{DeviceKind, DeviceSpec, IoModel, IoOp, ModeId, ModeInfo, TransitionCost};
pub use ghost::{GhostAccumulator, GhostDevice, GhostHint, GhostPolicy};
pub use machine::{DeviceMachine, Readiness, Step};
pub use manager::{DeviceHandle, PmError, PowerManager, ReadinessFn, Residency};
pub use profile::{Profile, ProfileError};
pub use stpm::{DiskPolicy, NetDecision, NetPolicy, NetStpm, RunHistogram, Transfer};
