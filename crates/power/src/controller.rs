//! A live disk STPM controller: drives a registered storage device through its idle ladder and
//! back up, on any [`crate::clock::Clock`], and reports every mode it enters to the [`PowerManager`] (so
//! callbacks such as the cache manager's write-queue flush fire).
//!
//! The simulator replays the same policies on virtual time; this is the piece an application
//! uses on real time. Moving a real device is delegated to an actuator (e.g. a function running
//! `hdparm -y` or writing `power/control`); the default actuator does nothing, which is right for
//! a device whose firmware follows the reported mode by itself or for tests.

use crate::device::{DeviceSpec, ModeId};
use crate::ghost::{GhostAccumulator, GhostDevice, GhostHint, GhostPolicy};
use crate::manager::{DeviceHandle, PmError, PowerManager};
use crate::stpm::{self, DiskPolicy, Ladder};
use std::sync::{Arc, Mutex};

/// Moves the real device to a mode; `Err` is reported by the controller's methods.
pub type Actuator = Box<dyn Fn(ModeId) -> Result<(), String> + Send + Sync>;

struct State {
    policy: DiskPolicy,
    ladder: Ladder,
    rung: usize,
    idle_since: f64,
    low_since: f64,
    /// Transition under way: target and completion time.
    moving: Option<(ModeId, f64)>,
    ghost: Option<GhostAccumulator>,
}

/// Errors of the controller.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The power manager refused.
    #[error(transparent)]
    Power(#[from] PmError),
    /// The actuator failed to move the device.
    #[error("cannot move the device to mode #{mode}: {msg}")]
    Actuator {
        /// Target mode.
        mode: usize,
        /// Actuator message.
        msg: String,
    },
}

/// Disk STPM controller (thread-safe; call `poll` from a timer or before each decision).
pub struct DiskController {
    pm: Arc<PowerManager>,
    dev: DeviceHandle,
    spec: DeviceSpec,
    actuator: Actuator,
    state: Mutex<State>,
}

impl DiskController {
    /// Control `dev` with `policy`. `DiskPolicy::Stpm` uses the manager's global knob and base
    /// power (re-read at every idle period). `ghost` enables ghost hints with that rule.
    pub fn new(
        pm: Arc<PowerManager>,
        dev: DeviceHandle,
        policy: DiskPolicy,
        ghost: Option<GhostPolicy>,
    ) -> Result<Self, PmError> {
        let spec = pm.spec(dev)?;
        let now = pm.clock().now();
        let gap = stpm::deepest_mode(&spec)
            .map(|m| stpm::stpm_break_even(&spec, m, pm.base_power_w(), pm.knob() as f64))
            .unwrap_or(10.0)
            .clamp(1.0, 60.0);
        let mut st = State {
            policy,
            ladder: Vec::new(),
            rung: 0,
            idle_since: now,
            low_since: now,
            moving: None,
            ghost: ghost.map(|g| GhostAccumulator::new(g, gap)),
        };
        st.ladder = Self::ladder_of(&pm, &spec, &st.policy);
        Ok(Self {
            pm,
            dev,
            spec,
            actuator: Box::new(|_| Ok(())),
            state: Mutex::new(st),
        })
    }

    /// Use `f` to move the real device.
    pub fn with_actuator(mut self, f: Actuator) -> Self {
        self.actuator = f;
        self
    }

    fn ladder_of(pm: &PowerManager, spec: &DeviceSpec, policy: &DiskPolicy) -> Ladder {
        match policy {
            DiskPolicy::Stpm { .. } => DiskPolicy::Stpm {
                knob: pm.knob() as f64,
                base_power_w: pm.base_power_w(),
            }
            .ladder(spec),
            p => p.ladder(spec),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(&self, st: &mut State, now: f64, to: ModeId) -> Result<(), ControlError> {
        let cur = self.pm.current_mode(self.dev)?;
        let cost = self
            .spec
            .transition(cur, to)
            .or_else(|| self.spec.transition(self.spec.high_mode(), to));
        (self.actuator)(to).map_err(|msg| ControlError::Actuator { mode: to.0, msg })?;
        st.moving = Some((to, now + cost.map(|c| c.time_s).unwrap_or(0.0)));
        Ok(())
    }

    /// Complete transitions and take ladder steps that are due now. Returns the mode entered
    /// last, if any. The manager is notified of every mode entered.
    pub fn poll(&self) -> Result<Option<ModeId>, ControlError> {
        let now = self.pm.clock().now();
        let mut entered = None;
        loop {
            let mut st = self.lock();
            if let Some((to, end)) = st.moving {
                if end > now {
                    break;
                }
                st.moving = None;
                let high = self.spec.high_mode();
                let from = self.pm.current_mode(self.dev)?;
                if to == high && from != high {
                    let low_s = (end - st.low_since).max(0.0);
                    st.policy.on_wake(&self.spec, from, low_s);
                    st.ladder = Self::ladder_of(&self.pm, &self.spec, &st.policy);
                    st.rung = 0;
                    st.idle_since = end;
                    if let Some(g) = st.ghost.as_mut() {
                        g.reset();
                    }
                } else if from == high {
                    st.low_since = end;
                }
                drop(st);
                // Notify outside our lock: callbacks may call back into the cache or us.
                self.pm.notify(self.dev, to)?;
                entered = Some(to);
                continue;
            }
            let Some(&(tau, m)) = st.ladder.get(st.rung) else {
                break;
            };
            if st.idle_since + tau > now {
                break;
            }
            st.rung += 1;
            let at = st.idle_since + tau;
            if m != self.pm.current_mode(self.dev)? {
                self.start(&mut st, at, m)?;
            }
        }
        Ok(entered)
    }

    /// When the next step is due (transition end or ladder rung), if any.
    pub fn next_deadline(&self) -> Option<f64> {
        let st = self.lock();
        if let Some((_, end)) = st.moving {
            return Some(end);
        }
        st.ladder.get(st.rung).map(|(tau, _)| st.idle_since + tau)
    }

    /// The application is about to do I/O now: start the device towards its high mode if it is
    /// low (returns when it will be ready) and restart the idle timer.
    pub fn on_access(&self) -> Result<f64, ControlError> {
        self.poll()?;
        let now = self.pm.clock().now();
        let high = self.spec.high_mode();
        let mut st = self.lock();
        if let Some(g) = st.ghost.as_mut() {
            g.on_demand(now);
        }
        st.rung = 0;
        st.idle_since = now;
        match st.moving {
            Some((to, end)) if to == high => return Ok(end),
            _ => {}
        }
        if self.pm.current_mode(self.dev)? == high && st.moving.is_none() {
            return Ok(now);
        }
        // A down transition under way finishes first (the drive cannot abort it).
        let start = st.moving.map(|(_, end)| end).unwrap_or(now).max(now);
        if let Some((to, _)) = st.moving.take() {
            drop(st);
            self.pm.notify(self.dev, to)?;
            st = self.lock();
        }
        self.start(&mut st, start, high)?;
        Ok(st.moving.map(|(_, e)| e).unwrap_or(now))
    }

    /// I/O finished now: the idle period starts here.
    pub fn on_io_done(&self) {
        let now = self.pm.clock().now();
        let mut st = self.lock();
        st.idle_since = now;
        st.rung = 0;
        st.ladder = Self::ladder_of(&self.pm, &self.spec, &st.policy);
    }

    /// A ghost hint for this device. Returns whether it started a transition to the high mode.
    pub fn on_ghost(&self, hint: GhostHint) -> Result<bool, ControlError> {
        self.poll()?;
        let high = self.spec.high_mode();
        let cur = self.pm.current_mode(self.dev)?;
        let mut st = self.lock();
        if cur == high || st.moving.is_some() {
            return Ok(false);
        }
        let knob = self.pm.knob() as f64;
        let dev = GhostDevice {
            knob,
            p_hp: self.spec.modes[high.0].power_w,
            p_lp: self.spec.modes[cur.0].power_w,
            threshold: stpm::round_trip_threshold(&self.spec, cur, self.pm.base_power_w(), knob),
        };
        let fire = match st.ghost.as_mut() {
            Some(g) => {
                g.on_demand(hint.t);
                g.on_hint(hint, dev)
            }
            None => false,
        };
        if fire {
            let now = self.pm.clock().now();
            self.start(&mut st, now, high)?;
        }
        Ok(fire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use crate::profile::Profile;

    fn rig(
        knob: u8,
        ghost: Option<GhostPolicy>,
    ) -> (
        Arc<VirtualClock>,
        Arc<PowerManager>,
        DeviceHandle,
        DiskController,
        DeviceSpec,
    ) {
        let clock = Arc::new(VirtualClock::new());
        let p = Profile::builtin("paper-2004").unwrap();
        let pm = Arc::new(PowerManager::new(clock.clone(), p.base_power_w, knob).unwrap());
        let h = pm
            .register_device(p.storage.clone(), p.storage.high_mode())
            .unwrap();
        let c = DiskController::new(
            pm.clone(),
            h,
            DiskPolicy::Stpm {
                knob: 0.0,
                base_power_w: 0.0,
            },
            ghost,
        )
        .unwrap();
        (clock, pm, h, c, p.storage)
    }

    #[test]
    fn ladder_follows_equation_3_on_the_global_knob() {
        let (clock, pm, h, c, s) = rig(50, None);
        let lpi = s.mode_by_name("low-power-idle").unwrap();
        let sb = s.mode_by_name("standby").unwrap();
        // K = 50: LPI at 2.548571 s, entered 0.16 s later; standby at 4.349412 s, +0.32 s.
        assert!((c.next_deadline().unwrap() - 2.548_571_428_6).abs() < 1e-9);
        clock.advance_to(2.5);
        assert_eq!(c.poll().unwrap(), None);
        clock.advance_to(2.6);
        c.poll().unwrap();
        assert!((c.next_deadline().unwrap() - (2.548_571_428_6 + 0.16)).abs() < 1e-9);
        clock.advance_to(2.8);
        assert_eq!(c.poll().unwrap(), Some(lpi));
        assert_eq!(pm.current_mode(h).unwrap(), lpi);
        clock.advance_to(4.349_411_764_7 + 0.32 + 1e-6);
        assert_eq!(c.poll().unwrap(), Some(sb));
        // An access: 0.82 s spin-up from standby.
        clock.advance_to(10.0);
        let ready = c.on_access().unwrap();
        assert!((ready - 10.82).abs() < 1e-9);
        clock.advance_to(10.82);
        assert_eq!(c.poll().unwrap(), Some(s.high_mode()));
        // Knob changed to 99: the next idle period uses the new ladder (LPI at 72.55 s).
        pm.set_knob(99).unwrap();
        c.on_io_done();
        clock.advance_to(20.0);
        c.poll().unwrap();
        assert!(
            (c.next_deadline().unwrap() - (10.82 + 72.548_571_428_6)).abs() < 1e-6,
            "{:?}",
            c.next_deadline()
        );
    }

    #[test]
    fn ghost_hints_spin_the_disk_up() {
        let (clock, pm, h, c, s) = rig(50, Some(GhostPolicy::Paper));
        clock.advance_to(100.0);
        c.poll().unwrap();
        assert_eq!(
            pm.current_mode(h).unwrap(),
            s.mode_by_name("standby").unwrap()
        );
        // §4.4 hints, 0.2 s apart: the fifth passes the 147.88 threshold (see ghost.rs).
        let mut fired = Vec::new();
        for i in 0..5 {
            let t = 100.0 + i as f64 * 0.2;
            clock.advance_to(t);
            fired.push(
                c.on_ghost(GhostHint {
                    t,
                    delta_t_s: 0.16,
                    delta_e_j: 0.58,
                    foreground: true,
                })
                .unwrap(),
            );
        }
        assert_eq!(fired, vec![false, false, false, false, true]);
        clock.advance_to(100.8 + 0.82);
        assert_eq!(c.poll().unwrap(), Some(s.high_mode()));
    }

    #[test]
    fn actuator_failure_is_reported() {
        let (clock, _pm, _h, c, _s) = rig(50, None);
        let c = c.with_actuator(Box::new(|m| Err(format!("hdparm failed for {}", m.0))));
        clock.advance_to(3.0);
        let e = c.poll().unwrap_err().to_string();
        assert!(e.contains("hdparm failed"), "{e}");
    }
}
