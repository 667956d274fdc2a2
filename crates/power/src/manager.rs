//! The power manager: the Ghosts Figure 5 interface in idiomatic Rust.
//!
//! | Figure 5              | here                                   |
//! |-----------------------|----------------------------------------|
//! | `RegisterDevice`      | [`PowerManager::register_device`]      |
//! | `Notify`              | [`PowerManager::notify`]               |
//! | `DeregisterDevice`    | [`PowerManager::deregister_device`]    |
//! | `QueryNumModes`       | [`PowerManager::num_modes`]            |
//! | `QueryModeInfo`       | [`PowerManager::mode_info`]            |
//! | `QueryTransitionCost` | [`PowerManager::transition_cost`]      |
//! | `QueryCurrentMode`    | [`PowerManager::current_mode`]         |
//! | `RegisterCallback`    | [`PowerManager::register_callback`], [`PowerManager::wait_for_mode`] |
//!
//! It also holds the global knob and the platform base power, and keeps per-device mode
//! residency so energy can be reported per device (as PowerTOP and tlp-stat do). A driver that
//! also reports when a transition starts ([`PowerManager::notify_transition`]; the controllers
//! do) gets the transition's time and energy accounted as its own state, as the
//! [`crate::DeviceMachine`] accounts them; see [`Residency`].
//!
//! Beyond Figure 5, a controller driving a device (the [`crate::DiskController`],
//! [`crate::NetController`]) can tell the manager when the device could serve an I/O issued
//! now ([`PowerManager::readiness`]): `QueryCurrentMode` alone does not show a transition under
//! way or I/O queued ahead, and the cache's choice of source (eq. 4) needs both.

use crate::clock::Clock;
use crate::device::{DeviceSpec, IoOp, ModeId, ModeInfo, TransitionCost};
use crate::machine::{Readiness, Step};
use crate::residency::{move_cost, ModeLedger, Residency};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use wattio_progress::Sink;

/// Opaque handle returned by `register_device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceHandle(u64);

/// Identifies a registered callback so it can be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackId(u64);

/// What a mode callback is told (outside the manager's lock): the device entered the mode it
/// was registered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeEntered {
    pub device: DeviceHandle,
    pub mode: ModeId,
}

/// Answers [`PowerManager::readiness`] for a device at a time, for an operation; `None` when it
/// cannot (its controller is gone), and the manager then answers from the current mode.
pub type ReadinessFn = Arc<dyn Fn(f64, IoOp) -> Option<Readiness> + Send + Sync>;

/// Errors of the power manager interface.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PmError {
    /// The handle is not (or no longer) registered.
    #[error("unknown device handle (register the device first)")]
    UnknownDevice,
    /// The mode index is out of range for the device.
    #[error("device `{device}` has no mode #{mode} (it has {count})")]
    UnknownMode {
        /// Device name.
        device: String,
        /// Mode index asked for.
        mode: usize,
        /// Number of modes.
        count: usize,
    },
    /// The spec failed validation.
    #[error("invalid device spec: {0}")]
    InvalidSpec(String),
    /// Knob outside 0..=100.
    #[error("knob {0} is out of range (use 0..=100)")]
    BadKnob(u32),
}

/// `UnknownMode` unless `mode` is one of the device's modes.
fn check_mode(spec: &DeviceSpec, mode: ModeId) -> Result<(), PmError> {
    if mode.0 >= spec.modes.len() {
        return Err(PmError::UnknownMode {
            device: spec.name.clone(),
            mode: mode.0,
            count: spec.modes.len(),
        });
    }
    Ok(())
}

struct Dev {
    spec: DeviceSpec,
    /// The current mode, a transition under way, and their time and energy.
    ledger: ModeLedger,
    readiness: Option<ReadinessFn>,
}

struct Inner {
    devices: HashMap<u64, Dev>,
    callbacks: Vec<(CallbackId, DeviceHandle, ModeId, Sink<ModeEntered>)>,
    next_id: u64,
    knob: u8,
}

/// Thread-safe registry of devices, their modes and the global knob.
pub struct PowerManager {
    inner: Mutex<Inner>,
    changed: Condvar,
    clock: Arc<dyn Clock>,
    base_power_w: f64,
}

impl std::fmt::Debug for PowerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PowerManager")
            .field("base_power_w", &self.base_power_w)
            .finish_non_exhaustive()
    }
}

impl PowerManager {
    /// A manager for a platform whose other components draw `base_power_w`.
    pub fn new(clock: Arc<dyn Clock>, base_power_w: f64, knob: u8) -> Result<Self, PmError> {
        if knob > 100 {
            return Err(PmError::BadKnob(knob as u32));
        }
        Ok(Self {
            inner: Mutex::new(Inner {
                devices: HashMap::new(),
                callbacks: Vec::new(),
                next_id: 1,
                knob,
            }),
            changed: Condvar::new(),
            clock,
            base_power_w,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking callback cannot poison us (callbacks run unlocked), but be robust anyway.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The clock this manager uses.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Platform base power, watts.
    pub fn base_power_w(&self) -> f64 {
        self.base_power_w
    }

    /// The global performance/energy knob (0 = energy, 100 = performance).
    pub fn knob(&self) -> u8 {
        self.lock().knob
    }

    /// Set the global knob.
    pub fn set_knob(&self, knob: u8) -> Result<(), PmError> {
        if knob > 100 {
            return Err(PmError::BadKnob(knob as u32));
        }
        self.lock().knob = knob;
        Ok(())
    }

    /// `RegisterDevice`: disclose a device's modes and transition costs; it starts in `initial`.
    pub fn register_device(
        &self,
        spec: DeviceSpec,
        initial: ModeId,
    ) -> Result<DeviceHandle, PmError> {
        spec.validate().map_err(|e| PmError::InvalidSpec(e.0))?;
        check_mode(&spec, initial)?;
        let now = self.clock.now();
        let mut g = self.lock();
        let id = g.next_id;
        g.next_id += 1;
        g.devices.insert(
            id,
            Dev {
                ledger: ModeLedger::new(&spec, initial, now),
                spec,
                readiness: None,
            },
        );
        Ok(DeviceHandle(id))
    }

    /// `DeregisterDevice`. Its callbacks are dropped too.
    pub fn deregister_device(&self, h: DeviceHandle) -> Result<(), PmError> {
        let mut g = self.lock();
        g.devices.remove(&h.0).ok_or(PmError::UnknownDevice)?;
        g.callbacks.retain(|(_, d, _, _)| *d != h);
        drop(g);
        self.changed.notify_all();
        Ok(())
    }

    /// `Notify`: the driver reports that the device is now in `mode`. Fires callbacks for that
    /// mode after releasing the lock, and wakes `wait_for_mode` callers. Without a
    /// [`Self::notify_transition`] before it, the change is accounted as taking no time.
    pub fn notify(&self, h: DeviceHandle, mode: ModeId) -> Result<(), PmError> {
        self.entered(h, mode, self.clock.now())
    }

    /// Beyond Figure 5: the driver reports that the device started a transition to `to` now.
    /// Until the [`Self::notify`] of its arrival the device is in the transition, drawing the
    /// transition's energy over its time (from the transition table) instead of a mode's idle
    /// power.
    pub fn notify_transition(&self, h: DeviceHandle, to: ModeId) -> Result<(), PmError> {
        self.started(h, to, self.clock.now())
    }

    /// Account a step a controller's machine took, at the time it took it (controllers deliver
    /// steps after the fact).
    pub(crate) fn notify_step(&self, h: DeviceHandle, step: Step) -> Result<(), PmError> {
        match step {
            Step::Started { at, to, .. } => self.started(h, to, at),
            Step::Entered { at, mode, .. } => self.entered(h, mode, at),
        }
    }

    fn started(&self, h: DeviceHandle, to: ModeId, at: f64) -> Result<(), PmError> {
        let mut g = self.lock();
        let d = g.devices.get_mut(&h.0).ok_or(PmError::UnknownDevice)?;
        check_mode(&d.spec, to)?;
        let cost = move_cost(&d.spec, d.ledger.mode(), to);
        d.ledger.start(&d.spec, at, to, cost);
        Ok(())
    }

    fn entered(&self, h: DeviceHandle, mode: ModeId, at: f64) -> Result<(), PmError> {
        let to_call: Vec<Sink<ModeEntered>> = {
            let mut g = self.lock();
            let d = g.devices.get_mut(&h.0).ok_or(PmError::UnknownDevice)?;
            check_mode(&d.spec, mode)?;
            d.ledger.enter(&d.spec, at, mode);
            g.callbacks
                .iter()
                .filter(|(_, d, m, _)| *d == h && *m == mode)
                .map(|(_, _, _, f)| f.clone())
                .collect()
        };
        self.changed.notify_all();
        for f in to_call {
            f.tell(&ModeEntered { device: h, mode });
        }
        Ok(())
    }

    /// `QueryNumModes`.
    pub fn num_modes(&self, h: DeviceHandle) -> Result<usize, PmError> {
        Ok(self
            .lock()
            .devices
            .get(&h.0)
            .ok_or(PmError::UnknownDevice)?
            .spec
            .modes
            .len())
    }

    /// `QueryModeInfo`: power, read/write capability and I/O cost model of a mode.
    pub fn mode_info(&self, h: DeviceHandle, mode: ModeId) -> Result<ModeInfo, PmError> {
        let g = self.lock();
        let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
        check_mode(&d.spec, mode)?;
        Ok(d.spec.modes[mode.0].clone())
    }

    /// `QueryTransitionCost`: `None` when the device has no direct transition between the modes.
    pub fn transition_cost(
        &self,
        h: DeviceHandle,
        from: ModeId,
        to: ModeId,
    ) -> Result<Option<TransitionCost>, PmError> {
        let g = self.lock();
        let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
        check_mode(&d.spec, from)?;
        check_mode(&d.spec, to)?;
        Ok(d.spec.transition(from, to))
    }

    /// `QueryCurrentMode`.
    pub fn current_mode(&self, h: DeviceHandle) -> Result<ModeId, PmError> {
        Ok(self
            .lock()
            .devices
            .get(&h.0)
            .ok_or(PmError::UnknownDevice)?
            .ledger
            .mode())
    }

    /// Let `f` answer [`Self::readiness`] for the device (a controller driving it does this).
    pub fn set_readiness(&self, h: DeviceHandle, f: ReadinessFn) -> Result<(), PmError> {
        self.lock()
            .devices
            .get_mut(&h.0)
            .ok_or(PmError::UnknownDevice)?
            .readiness = Some(f);
        Ok(())
    }

    /// When and from which mode the device could serve `op` issued now. Without a controller
    /// (or with one that cannot answer): at once, from the current mode.
    pub fn readiness(&self, h: DeviceHandle, op: IoOp) -> Result<Readiness, PmError> {
        let (current, f) = {
            let g = self.lock();
            let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
            (d.ledger.mode(), d.readiness.clone())
        };
        // Asked outside our lock: the controller takes its own.
        let now = self.clock.now();
        Ok(f.and_then(|f| f(now, op)).unwrap_or(Readiness {
            mode: current,
            io_mode: current,
            wait_s: 0.0,
        }))
    }

    /// The full spec of a registered device.
    pub fn spec(&self, h: DeviceHandle) -> Result<DeviceSpec, PmError> {
        Ok(self
            .lock()
            .devices
            .get(&h.0)
            .ok_or(PmError::UnknownDevice)?
            .spec
            .clone())
    }

    /// `RegisterCallback` (non-blocking form): call `f` every time the device enters `mode`.
    pub fn register_callback(
        &self,
        h: DeviceHandle,
        mode: ModeId,
        f: Sink<ModeEntered>,
    ) -> Result<CallbackId, PmError> {
        let mut g = self.lock();
        let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
        check_mode(&d.spec, mode)?;
        let id = CallbackId(g.next_id);
        g.next_id += 1;
        g.callbacks.push((id, h, mode, f));
        Ok(id)
    }

    /// Remove a callback; returns whether it existed.
    pub fn remove_callback(&self, id: CallbackId) -> bool {
        let mut g = self.lock();
        let n = g.callbacks.len();
        g.callbacks.retain(|(c, _, _, _)| *c != id);
        g.callbacks.len() != n
    }

    /// `RegisterCallback` (blocking form of the paper): block until the device is in `mode`, or
    /// `timeout` passes. Returns whether the mode was reached.
    pub fn wait_for_mode(
        &self,
        h: DeviceHandle,
        mode: ModeId,
        timeout: Duration,
    ) -> Result<bool, PmError> {
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.lock();
        loop {
            let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
            if d.ledger.mode() == mode {
                return Ok(true);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            g = self
                .changed
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Time in each mode and in transitions, and the energy they account for, of a device up
    /// to now.
    pub fn residency(&self, h: DeviceHandle) -> Result<Residency, PmError> {
        let now = self.clock.now();
        let g = self.lock();
        let d = g.devices.get(&h.0).ok_or(PmError::UnknownDevice)?;
        Ok(d.ledger.residency(&d.spec, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use crate::profile::Profile;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn setup() -> (Arc<VirtualClock>, PowerManager, DeviceHandle, DeviceSpec) {
        let clock = Arc::new(VirtualClock::new());
        let p = Profile::builtin("paper-2004").unwrap();
        let pm = PowerManager::new(clock.clone(), p.base_power_w, 50).unwrap();
        let hi = p.storage.high_mode();
        let h = pm.register_device(p.storage.clone(), hi).unwrap();
        (clock, pm, h, p.storage)
    }

    #[test]
    fn queries_return_the_registered_data() {
        let (_c, pm, h, spec) = setup();
        assert_eq!(pm.num_modes(h).unwrap(), 3);
        let sb = spec.mode_by_name("standby").unwrap();
        assert_eq!(pm.mode_info(h, sb).unwrap().power_w, 0.08);
        assert!(!pm.mode_info(h, sb).unwrap().can_read);
        let pi = spec.high_mode();
        assert_eq!(pm.transition_cost(h, sb, pi).unwrap().unwrap().time_s, 0.82);
        assert_eq!(pm.current_mode(h).unwrap(), pi);
        assert!(matches!(
            pm.mode_info(h, ModeId(7)),
            Err(PmError::UnknownMode { .. })
        ));
    }

    #[test]
    fn residency_and_energy_by_hand() {
        let (c, pm, h, spec) = setup();
        let sb = spec.mode_by_name("standby").unwrap();
        let pi = spec.high_mode();
        c.advance_to(10.0); // 10 s performance idle: 7.6 J
        pm.notify(h, sb).unwrap(); // + 0.3 J transition
        c.advance_to(30.0); // 20 s standby: 1.6 J
        pm.notify(h, pi).unwrap(); // + 0.9 J
        c.advance_to(31.0); // 1 s performance idle: 0.76 J
        let r = pm.residency(h).unwrap();
        assert_eq!(r.transitions, 2);
        assert_eq!(
            r.transition_seconds, 0.0,
            "arrivals only: no time in transitions"
        );
        assert!((r.seconds[pi.0] - 11.0).abs() < 1e-12);
        assert!((r.seconds[sb.0] - 20.0).abs() < 1e-12);
        // 7.6 + 0.3 + 1.6 + 0.9 + 0.76 = 11.16 J
        assert!((r.energy_j - 11.16).abs() < 1e-9, "{}", r.energy_j);
    }

    #[test]
    fn a_transition_is_its_own_state_drawing_its_own_energy() {
        // paper-2004 microdrive: performance idle 0.76 W, standby 0.08 W; to standby 0.32 s and
        // 0.3 J, back up 0.82 s and 0.9 J.
        let (c, pm, h, spec) = setup();
        let sb = spec.mode_by_name("standby").unwrap();
        let pi = spec.high_mode();
        c.advance_to(10.0); // 10 s performance idle: 7.6 J
        pm.notify_transition(h, sb).unwrap();
        c.advance_to(10.32); // the spin-down: 0.32 s, 0.3 J (not 0.76 W × 0.32 s on top)
        pm.notify(h, sb).unwrap();
        c.advance_to(30.0); // 19.68 s standby: 1.5744 J
        pm.notify_transition(h, pi).unwrap();
        c.advance_to(30.41); // half the spin-up: 0.41 s, 0.45 J so far
        let mid = pm.residency(h).unwrap();
        assert_eq!(pm.current_mode(h).unwrap(), sb, "still leaving standby");
        assert_eq!(mid.transitions, 1);
        assert!((mid.transition_seconds - 0.73).abs() < 1e-9, "{mid:?}");
        assert!((mid.seconds[sb.0] - 19.68).abs() < 1e-9, "{mid:?}");
        // 0.3 + 0.45 = 0.75 J of transitions; 7.6 + 1.5744 + 0.75 = 9.9244 J.
        assert!((mid.transition_energy_j - 0.75).abs() < 1e-9, "{mid:?}");
        assert!((mid.energy_j - 9.9244).abs() < 1e-9, "{mid:?}");
        c.advance_to(30.82);
        pm.notify(h, pi).unwrap();
        c.advance_to(31.0); // 0.18 s performance idle: 0.1368 J
        let r = pm.residency(h).unwrap();
        assert_eq!(r.transitions, 2);
        assert!((r.seconds[pi.0] - 10.18).abs() < 1e-9, "{r:?}");
        assert!((r.seconds[sb.0] - 19.68).abs() < 1e-9, "{r:?}");
        assert!((r.transition_seconds - 1.14).abs() < 1e-9, "{r:?}");
        assert!((r.transition_energy_j - 1.2).abs() < 1e-9, "{r:?}");
        // 7.6 + 0.3 + 1.5744 + 0.9 + 0.1368 = 10.5112 J
        assert!((r.energy_j - 10.5112).abs() < 1e-9, "{}", r.energy_j);
    }

    #[test]
    fn callbacks_fire_on_entry_only_for_their_mode() {
        let (_c, pm, h, spec) = setup();
        let sb = spec.mode_by_name("standby").unwrap();
        let pi = spec.high_mode();
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let id = pm
            .register_callback(
                h,
                pi,
                Sink::new(move |_: &ModeEntered| {
                    n2.fetch_add(1, Ordering::SeqCst);
                }),
            )
            .unwrap();
        pm.notify(h, sb).unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 0);
        pm.notify(h, pi).unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(pm.remove_callback(id));
        pm.notify(h, sb).unwrap();
        pm.notify(h, pi).unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn callback_may_query_the_manager_without_deadlock() {
        let (_c, pm, h, spec) = setup();
        let pm = Arc::new(pm);
        let sb = spec.mode_by_name("standby").unwrap();
        let seen = Arc::new(Mutex::new(None));
        let (pm2, seen2) = (pm.clone(), seen.clone());
        pm.register_callback(
            h,
            sb,
            Sink::new(move |e: &ModeEntered| {
                *seen2.lock().unwrap() = Some(pm2.current_mode(e.device).unwrap());
            }),
        )
        .unwrap();
        pm.notify(h, sb).unwrap();
        assert_eq!(*seen.lock().unwrap(), Some(sb));
    }

    #[test]
    fn wait_for_mode_wakes_on_notify_from_another_thread() {
        let (_c, pm, h, spec) = setup();
        let pm = Arc::new(pm);
        let sb = spec.mode_by_name("standby").unwrap();
        let pm2 = pm.clone();
        let t =
            std::thread::spawn(move || pm2.wait_for_mode(h, sb, Duration::from_secs(10)).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        pm.notify(h, sb).unwrap();
        assert!(t.join().unwrap());
        // Already there: returns at once. Not reached: times out with false.
        assert!(pm.wait_for_mode(h, sb, Duration::from_millis(1)).unwrap());
        assert!(!pm
            .wait_for_mode(h, spec.high_mode(), Duration::from_millis(5))
            .unwrap());
    }

    #[test]
    fn deregistered_devices_are_unknown() {
        let (_c, pm, h, _) = setup();
        pm.deregister_device(h).unwrap();
        assert_eq!(pm.current_mode(h), Err(PmError::UnknownDevice));
        assert_eq!(pm.deregister_device(h), Err(PmError::UnknownDevice));
    }

    #[test]
    fn knob_is_validated() {
        let (_c, pm, _, _) = setup();
        assert!(pm.set_knob(101).is_err());
        pm.set_knob(99).unwrap();
        assert_eq!(pm.knob(), 99);
    }

    #[test]
    fn concurrent_notifies_and_queries() {
        let (_c, pm, h, spec) = setup();
        let pm = Arc::new(pm);
        let modes: Vec<ModeId> = (0..spec.modes.len()).map(ModeId).collect();
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let pm = pm.clone();
                let modes = modes.clone();
                std::thread::spawn(move || {
                    for j in 0..500 {
                        pm.notify(h, modes[(i + j) % modes.len()]).unwrap();
                        let m = pm.current_mode(h).unwrap();
                        assert!(m.0 < modes.len());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(pm.residency(h).unwrap().seconds.len(), 3);
    }
}
