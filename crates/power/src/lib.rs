//! wattio-power: the device power manager of "Ghosts in the Machine" (Anand, Nightingale, Flinn,
//! MobiSys 2004) — devices with power modes and transition costs, one global performance/energy
//! knob, self-tuning power management (STPM) and ghost hints.
//!
//! - [`manager::PowerManager`]: the Figure 5 interface (register, notify, query, callbacks).
//! - [`profile::Profile`]: device profiles as TOML data files (built-ins embedded).
//! - [`eq`]: equations (1)–(4).
//! - [`stpm`]: disk ladders (STPM and spin-down baselines) and the network run predictor.
//! - [`ghost`]: ghost hints and the device-side policies (the paper's, and ours).
//! - [`controller`]: a live disk STPM controller on any clock (ladder, wake-up, ghost hints).
//! - [`clock`]: real and virtual clocks.

pub mod clock;
pub mod controller;
pub mod device;
pub mod eq;
pub mod ghost;
pub mod manager;
pub mod profile;
pub mod stpm;

pub use clock::{Clock, RealClock, VirtualClock};
pub use controller::{ControlError, DiskController};
pub use device::{DeviceKind, DeviceSpec, IoModel, IoOp, ModeId, ModeInfo, TransitionCost};
pub use ghost::{GhostAccumulator, GhostDevice, GhostHint, GhostPolicy};
pub use manager::{DeviceHandle, PmError, PowerManager, Residency};
pub use profile::{Profile, ProfileError};
pub use stpm::{DiskPolicy, NetDecision, NetStpm, RunHistogram, Transfer};
