//! `--source host`: inside a virtual machine, the energy the host measured and attributed to it.
//!
//! No VM exposes RAPL, so inside one wattio can only estimate, while the host can measure and
//! knows which VM used its CPUs. `wattio vm publish` on the host keeps, for each running VM, a
//! monotonic counter of the energy the attribution layer gives that VM (its CPU-time share of
//! the host's packages and DRAM), in a powercap-shaped tree, one directory per VM:
//!
//! ```text
//! DIR/VM/intel-rapl:0/name                  package-0
//! DIR/VM/intel-rapl:0/energy_uj             µJ attributed to VM, wrapping at …
//! DIR/VM/intel-rapl:0/max_energy_range_uj
//! DIR/VM/wattio-host.json                   the host's mechanism, the VM's name, a heartbeat
//! ```
//!
//! The host shares `DIR/VM` with that guest (virtiofs or 9p, read-only), which mounts it at
//! `/run/wattio-host` (or where `WATTIO_HOST_ENERGY` says). This mechanism reads it there, under
//! `WATTIO_ROOT` like every other path: the counter as a powercap zone (same file format, same
//! wrap), the provenance from `wattio-host.json`, so that every figure says *measured on the host
//! (MECHANISM), attributed to this VM (cpu-time share)*. A tree whose publisher stopped, or a
//! heartbeat that stops moving (the host's wattio ended, or the VM migrated to a host without
//! it), makes the reading fail with the reason rather than report a flat or jumping counter. A
//! publisher that restarts within that time (the three missed writes below) is no failure: it
//! goes on from its saved total. A counter that goes back further than a wrap explains (the
//! publisher lost its total, or another VM's share was mounted) fails every later reading: the
//! figures up to it stand, none after it.

use crate::error::EnergyError;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::{Source, SysRoot};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the guest looks for the tree when `WATTIO_HOST_ENERGY` does not say.
pub const DEFAULT_HOST_DIR: &str = "/run/wattio-host";
/// The environment variable naming the mount point of the host's tree.
pub const HOST_DIR_ENV: &str = "WATTIO_HOST_ENERGY";
/// The zone the counter is written as.
pub const HOST_ZONE: &str = "intel-rapl:0";
/// The file beside it that says where the energy comes from.
pub const HOST_INFO: &str = "wattio-host.json";
/// The most a VM is assumed to draw: the publisher keeps its counter's range wide enough that
/// such a VM wraps it at most a quarter of the way per write, and the guest takes a decrease for
/// a wrap only where this power over the time since its last read explains it.
pub const MAX_VM_POWER_W: f64 = 2000.0;

/// What the host says about the counter it publishes for one VM (`wattio-host.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The VM's name on the host.
    pub vm: String,
    /// The host's own provenance: mechanism, estimated, model.
    pub host: Provenance,
    /// How often the publisher writes.
    pub interval_s: f64,
    /// Incremented at every write: a heartbeat that stops moving means the publisher stopped.
    pub heartbeat: u64,
    /// False once the publisher has ended cleanly.
    pub running: bool,
    /// E.g. `wattio 0.1.0`.
    pub publisher: String,
}

impl HostInfo {
    /// The provenance of the guest's figures: the host's mechanism, attributed to this VM.
    pub fn guest_provenance(&self) -> Provenance {
        let how = match (&self.host.model, self.host.estimated) {
            (Some(m), true) => format!("{m} on the host"),
            _ => format!("{} on the host", self.host.mechanism),
        };
        Provenance {
            mechanism: Mechanism::Host,
            estimated: self.host.estimated,
            model: Some(format!("{how}, attributed to this VM (cpu-time share)")),
        }
    }
}

/// The mount point of the host's tree, under `root`.
pub fn host_dir(root: &SysRoot) -> PathBuf {
    let dir = std::env::var(HOST_DIR_ENV)
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| DEFAULT_HOST_DIR.into());
    root.path(dir)
}

fn unusable(reason: String, fix: &str) -> EnergyError {
    EnergyError::Unusable {
        mechanism: Mechanism::Host,
        reason,
        fix: fix.into(),
    }
}

const SHARE_FIX: &str = "on the host, run `wattio vm publish --dir DIR` and share DIR/<this VM> with the guest (virtiofs or 9p), mounted at /run/wattio-host or where WATTIO_HOST_ENERGY says; docs/meter.md, \"Energy inside VMs\"";

/// Reads `wattio-host.json` in `dir`.
pub fn read_host_info(dir: &Path) -> Result<HostInfo, EnergyError> {
    let path = dir.join(HOST_INFO);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        unusable(
            format!("no energy shared by the host: {}: {e}", path.display()),
            SHARE_FIX,
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        unusable(
            format!("{} is not a wattio host file ({e})", path.display()),
            "the share holds something else: check what is mounted there, or that host and guest run the same wattio",
        )
    })
}

/// The guest's view of the host's counter, as a [`Source`].
///
/// The counter file is opened afresh at every read: the publisher replaces it whole (a new file
/// renamed over the old, so that no read sees half a number), which a file kept open would not
/// see.
#[derive(Debug)]
pub struct HostSource {
    specs: Vec<CounterSpec>,
    counter: PathBuf,
    provenance: Provenance,
    dir: PathBuf,
    /// The VM the share was opened for.
    vm: String,
    /// The heartbeat last seen, and since when it has not moved.
    heartbeat: (u64, Instant),
    /// Since when the publisher has said it stopped (it may be restarting).
    stopped_since: Option<Instant>,
    last_check: Instant,
    stale_after: Duration,
    /// The publisher's time between writes.
    interval: Duration,
    /// The last value read, and when.
    last: Option<(u64, Instant)>,
    /// Why the counter can no longer be trusted, once it cannot.
    broken: Option<(String, &'static str)>,
}

impl HostSource {
    /// Opens the tree under `root` ([`host_dir`]). Fails with the reason and the fix when there
    /// is none, when it is malformed, or when its publisher has stopped.
    pub fn open(root: &SysRoot) -> Result<HostSource, EnergyError> {
        let dir = host_dir(root);
        let mut info = read_host_info(&dir)?;
        let mut stale_after = stale_allowance(&info);
        // A publisher that stopped within the allowance may be restarting: wait for it, as a
        // running reader does.
        let mut age = info_age(&dir);
        // At most 5 s, however long the publisher's interval: probes and `auto` open this too.
        let give_up = Instant::now()
            + stale_after
                .min(Duration::from_secs(5))
                .saturating_sub(age.unwrap_or_default());
        while !info.running {
            if Instant::now() >= give_up {
                return Err(unusable(
                    format!(
                        "the host's publisher for VM {} has stopped (its last write says so)",
                        info.vm
                    ),
                    "start `wattio vm publish` on the host again; until then the estimate is all there is",
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
            info = read_host_info(&dir)?;
            stale_after = stale_allowance(&info);
            age = info_age(&dir);
        }
        // A publisher killed without a word leaves `running: true`: the file's age says it.
        if let Some(age) = age {
            if age > stale_after {
                return Err(unusable(
                    format!(
                        "the host last updated this VM's energy {:.0} s ago (VM {}): its publisher is not running, or this VM moved to a host without it",
                        age.as_secs_f64(),
                        info.vm
                    ),
                    "start `wattio vm publish` on this VM's host (or check the guest's clock); until then the estimate is all there is",
                ));
            }
        }
        let zone_dir = dir.join(HOST_ZONE);
        let max = read_max(&zone_dir);
        let counter = zone_dir.join("energy_uj");
        let specs = vec![CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: 1e-6,
            wrap: max.map_or(Wrap::Unknown, Wrap::AtMax),
            origin: format!("{}, the host's share for VM {}", counter.display(), info.vm),
        }];
        read_uj(&counter)?;
        let now = Instant::now();
        // The heartbeat was last seen to move when the file was written (as far as the two
        // clocks agree).
        let beat_at = age
            .and_then(|a| now.checked_sub(a.min(stale_after)))
            .unwrap_or(now);
        Ok(HostSource {
            specs,
            counter,
            provenance: info.guest_provenance(),
            dir,
            vm: info.vm,
            heartbeat: (info.heartbeat, beat_at),
            stopped_since: None,
            last_check: now,
            stale_after,
            interval: Duration::from_secs_f64(info.interval_s.clamp(0.001, 3600.0)),
            last: None,
            broken: None,
        })
    }

    /// Checks, at most once a second while all is well and at every read once it is not, that
    /// the publisher is still writing: a reading right after a failed check must not succeed
    /// on the flat counter.
    fn check_alive(&mut self) -> Result<(), EnergyError> {
        if self.last_check.elapsed() < Duration::from_secs(1) {
            return Ok(());
        }
        self.check_alive_now()?;
        self.last_check = Instant::now();
        Ok(())
    }

    fn check_alive_now(&mut self) -> Result<(), EnergyError> {
        let info = read_host_info(&self.dir)?;
        if info.vm != self.vm {
            self.broken = Some((
                format!(
                    "the share now holds VM {}'s energy, not VM {}'s (another VM's directory was mounted here)",
                    info.vm, self.vm
                ),
                "mount this VM's own directory of the host's share, then start the measurement again",
            ));
        }
        if !info.running {
            // A restart writes `running: false`, then the new publisher goes on from its saved
            // total: only a stop that lasts is a failure.
            let since = *self.stopped_since.get_or_insert_with(Instant::now);
            if since.elapsed() > self.stale_after {
                return Err(unusable(
                    format!(
                        "the host's publisher for VM {} stopped {:.0} s ago",
                        info.vm,
                        since.elapsed().as_secs_f64()
                    ),
                    "start `wattio vm publish` on the host again, or use --source model",
                ));
            }
            return Ok(());
        }
        if self.stopped_since.take().is_some() {
            // A new publisher: its heartbeat counts from now, whatever its value.
            self.heartbeat = (info.heartbeat, Instant::now());
        }
        // A publisher restarted with another --interval: its timing from now on.
        self.stale_after = stale_allowance(&info);
        self.interval = Duration::from_secs_f64(info.interval_s.clamp(0.001, 3600.0));
        // The wrap the counter was opened with must still hold, or a decrease would be read as a
        // wrap that never happened.
        if let Wrap::AtMax(m) = self.specs[0].wrap {
            if read_max(self.counter.parent().unwrap_or(Path::new("/"))) != Some(m) {
                return Err(unusable(
                    format!(
                        "the host changed this VM's counter range (max_energy_range_uj was {m})"
                    ),
                    "start the measurement again",
                ));
            }
        }
        if info.heartbeat != self.heartbeat.0 {
            self.heartbeat = (info.heartbeat, Instant::now());
        } else if self.heartbeat.1.elapsed() > self.stale_after {
            return Err(unusable(
                format!(
                    "the host stopped updating this VM's energy: heartbeat {} unchanged for {:.0} s (the host's wattio ended, or the VM moved to a host without it)",
                    info.heartbeat,
                    self.heartbeat.1.elapsed().as_secs_f64()
                ),
                "start `wattio vm publish` on this VM's host, or use --source model",
            ));
        }
        Ok(())
    }
}

impl Source for HostSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        self.check_alive()?;
        if let Some((reason, fix)) = &self.broken {
            return Err(unusable(reason.clone(), fix));
        }
        let raw = read_uj(&self.counter)?;
        self.check_continuity(raw)?;
        out[0] = raw;
        Ok(())
    }
}

impl HostSource {
    /// The counter may only grow by energy a VM could have drawn since the last read (and one
    /// write of the publisher before it), a wrap included: a decrease that no wrap explains, or
    /// a leap, means the counter is no longer the one this measurement started with (its
    /// publisher lost its saved total, a state file was restored, another share was mounted).
    fn check_continuity(&mut self, raw: u64) -> Result<(), EnergyError> {
        let now = Instant::now();
        if let Some((prev, at)) = self.last {
            let plausible_uj =
                MAX_VM_POWER_W * 1e6 * (now.duration_since(at) + self.interval).as_secs_f64() + 1e6;
            let grew_uj = match (raw >= prev, self.specs[0].wrap) {
                (true, _) => (raw - prev) as f64,
                (false, Wrap::AtMax(max)) => (max - prev.min(max)) as f64 + raw as f64 + 1.0,
                (false, Wrap::Unknown | Wrap::LikelyAt(_)) => f64::INFINITY,
            };
            if grew_uj > plausible_uj {
                let how = if raw < prev { "went back" } else { "leapt" };
                let reason = format!(
                    "the host's counter for VM {} {how} from {prev} to {raw} µJ, more than any VM draws in the time (its publisher lost or restored its saved total, or the share changed)",
                    self.vm
                );
                self.broken = Some((reason.clone(), "start the measurement again"));
                return Err(unusable(reason, "start the measurement again"));
            }
        }
        self.last = Some((raw, now));
        Ok(())
    }
}

/// How long a publisher may go without writing before its guests give up: three missed writes,
/// and at least 5 s (a busy host may write late, and a restarting publisher needs a moment).
fn stale_allowance(info: &HostInfo) -> Duration {
    Duration::from_secs_f64((3.0 * info.interval_s.clamp(0.001, 3600.0)).max(5.0))
}

/// How long ago `wattio-host.json` was written, by this machine's clock (`None` where it is in
/// the future).
fn info_age(dir: &Path) -> Option<Duration> {
    std::fs::metadata(dir.join(HOST_INFO))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
}

/// The zone's `max_energy_range_uj`, if readable and positive.
fn read_max(zone_dir: &Path) -> Option<u64> {
    std::fs::read_to_string(zone_dir.join("max_energy_range_uj"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&m| m > 0)
}

/// The decimal microjoules of the counter file at `path`.
fn read_uj(path: &Path) -> Result<u64, EnergyError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| unusable(format!("{}: {e}", path.display()), SHARE_FIX))?;
    crate::powercap::parse_uj(text.as_bytes()).ok_or_else(|| EnergyError::Malformed {
        path: path.to_path_buf(),
        content: text.trim().chars().take(40).collect(),
        expected: "a decimal number of microjoules".into(),
        fix: "the host's share holds something else: check what is mounted there".into(),
    })
}

/// In a guest, the share its host published.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    (
        crate::host::HostSource::open(req.root)
            .map(|s| Box::new(s) as Box<dyn crate::Source>)
            .and_then(|s| crate::opening::filter(s, req.domains)),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary root and, under it, where the guest looks for the share.
    fn share() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run/wattio-host");
        (d, dir)
    }

    fn open(root: &tempfile::TempDir) -> Result<HostSource, EnergyError> {
        HostSource::open(&SysRoot::new(root.path()))
    }

    /// Rewrites the counter `energy_uj` to `text`.
    fn set_uj(dir: &Path, text: &str) {
        std::fs::write(dir.join(HOST_ZONE).join("energy_uj"), text).unwrap();
    }

    /// Makes the next reading check the publisher again (checks run at most once a second).
    fn due(s: &mut HostSource) {
        s.last_check = Instant::now() - Duration::from_secs(2);
    }

    fn tree(dir: &Path, info: &HostInfo, uj: u64, max: u64) {
        let z = dir.join(HOST_ZONE);
        std::fs::create_dir_all(&z).unwrap();
        std::fs::write(z.join("name"), "package-0\n").unwrap();
        std::fs::write(z.join("energy_uj"), format!("{uj}\n")).unwrap();
        std::fs::write(z.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
        // Renamed into place, as the publisher does: `open` may be polling it meanwhile.
        let tmp = dir.join("info.tmp");
        std::fs::write(&tmp, serde_json::to_string(info).unwrap()).unwrap();
        std::fs::rename(&tmp, dir.join(HOST_INFO)).unwrap();
    }

    /// Makes `wattio-host.json` in `dir` look written `secs` ago.
    fn age(dir: &Path, secs: u64) {
        std::fs::File::options()
            .write(true)
            .open(dir.join(HOST_INFO))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    fn info(running: bool) -> HostInfo {
        HostInfo {
            vm: "web-1".into(),
            host: Provenance::measured(Mechanism::Powercap),
            interval_s: 1.0,
            heartbeat: 7,
            running,
            publisher: "wattio test".into(),
        }
    }

    #[test]
    fn the_guest_reads_the_hosts_counter_with_its_provenance() {
        let (d, dir) = share();
        tree(&dir, &info(true), 5_000_000, 1 << 40);
        let mut s = open(&d).unwrap();
        assert_eq!(
            s.provenance().label(),
            "measured (host powercap on the host, attributed to this VM (cpu-time share))"
        );
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [5_000_000]);
        assert_eq!(s.counters()[0].wrap, crate::types::Wrap::AtMax(1 << 40));
        // An estimating host says so.
        let mut est = info(true);
        est.host = Provenance::estimated("ccf-linear(min=1W,max=4W per vCPU)");
        assert_eq!(
            est.guest_provenance().label(),
            "estimated (host: ccf-linear(min=1W,max=4W per vCPU) on the host, attributed to this VM (cpu-time share))"
        );
    }

    #[test]
    fn no_share_a_stopped_publisher_or_garbage_say_why() {
        let d = tempfile::tempdir().unwrap();
        let e = open(&d).unwrap_err().to_string();
        assert!(
            e.contains("no energy shared by the host") && e.contains("wattio vm publish"),
            "{e}"
        );
        let dir = d.path().join("run/wattio-host");
        tree(&dir, &info(false), 1, 1 << 40);
        age(&dir, 60);
        let e = open(&d).unwrap_err().to_string();
        assert!(e.contains("publisher for VM web-1 has stopped"), "{e}");
        std::fs::write(dir.join(HOST_INFO), "garbage").unwrap();
        let e = open(&d).unwrap_err().to_string();
        assert!(e.contains("is not a wattio host file"), "{e}");
        tree(&dir, &info(true), 1, 1 << 40);
        set_uj(&dir, "lots\n");
        assert!(open(&d).is_err());
    }

    #[test]
    fn a_share_nobody_updates_is_refused_at_open() {
        let (d, dir) = share();
        tree(&dir, &info(true), 1, 1 << 40);
        // Left by a publisher killed a minute ago, still saying it runs.
        age(&dir, 60);
        let e = open(&d).unwrap_err().to_string();
        assert!(e.contains("last updated this VM's energy 60 s ago"), "{e}");
    }

    #[test]
    fn a_heartbeat_that_stops_fails_the_reading() {
        let (d, dir) = share();
        tree(&dir, &info(true), 1, 1 << 40);
        let mut s = open(&d).unwrap();
        s.stale_after = Duration::from_millis(0);
        due(&mut s);
        s.heartbeat.1 = Instant::now() - Duration::from_secs(10);
        let e = s.read_raw(&mut [0]).unwrap_err().to_string();
        assert!(e.contains("heartbeat 7 unchanged"), "{e}");
        // The next reading, however soon, checks again.
        assert!(s.read_raw(&mut [0]).is_err());
        // A moving heartbeat is fine.
        let mut next = info(true);
        next.heartbeat = 8;
        tree(&dir, &next, 2, 1 << 40);
        due(&mut s);
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [2]);
    }

    #[test]
    fn a_publisher_restarting_is_waited_for_and_one_that_stays_stopped_is_not() {
        let (d, dir) = share();
        tree(&dir, &info(true), 1_000, 1 << 40);
        let mut s = open(&d).unwrap();
        // SIGTERM: the old publisher's last write says it stopped.
        tree(&dir, &info(false), 1_500, 1 << 40);
        due(&mut s);
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [1_500]);
        // The new one goes on from the saved total, its heartbeat starting again.
        let mut again = info(true);
        again.heartbeat = 1;
        tree(&dir, &again, 1_700, 1 << 40);
        due(&mut s);
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [1_700]);
        assert!(s.stopped_since.is_none());
        // One that stays stopped past the heartbeat's allowance fails the reading.
        tree(&dir, &info(false), 1_700, 1 << 40);
        due(&mut s);
        s.read_raw(&mut raw).unwrap();
        s.stopped_since = Some(Instant::now() - s.stale_after - Duration::from_secs(1));
        due(&mut s);
        let e = s.read_raw(&mut raw).unwrap_err().to_string();
        assert!(e.contains("publisher for VM web-1 stopped 6 s ago"), "{e}");
    }

    #[test]
    fn opening_while_the_publisher_restarts_waits_for_it() {
        let (d, dir) = share();
        // Stopped 4 s ago: within the 5 s a restart is given.
        tree(&dir, &info(false), 1_000, 1 << 40);
        age(&dir, 4);
        let writer = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                tree(&dir, &info(true), 1_200, 1 << 40);
            })
        };
        let started = Instant::now();
        let mut s = open(&d).unwrap();
        writer.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [1_200]);
        // One that does not come back is refused once the allowance is spent (1 s left here).
        tree(&dir, &info(false), 1_200, 1 << 40);
        age(&dir, 4);
        let started = Instant::now();
        let e = open(&d).unwrap_err().to_string();
        assert!(e.contains("has stopped"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_wrap_is_read_through_and_a_counter_that_went_back_fails_for_good() {
        let (d, dir) = share();
        let max = 4_000_000_000_000;
        tree(&dir, &info(true), max - 5_000_000, max);
        let mut s = open(&d).unwrap();
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        // 10 J later, across the wrap: a decrease that 10 J explains.
        set_uj(&dir, "4999999\n");
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [4_999_999]);
        // Back from 5 J to 2 J: a wrap would be 4 MJ in a moment, more than any VM draws.
        set_uj(&dir, "2000000\n");
        let e = s.read_raw(&mut raw).unwrap_err().to_string();
        assert!(
            e.contains("went back from 4999999 to 2000000 µJ, more than any VM draws"),
            "{e}"
        );
        // Even once it has grown past where it was: the figures after a reset are not this
        // counter's.
        set_uj(&dir, "9000000\n");
        assert!(s.read_raw(&mut raw).is_err());
    }

    #[test]
    fn a_counter_that_leaps_forward_fails_for_good() {
        let (d, dir) = share();
        tree(&dir, &info(true), 1_000_000, 1 << 40);
        let mut s = open(&d).unwrap();
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        // 1 MJ in a moment: another VM's counter, or a restored state.
        set_uj(&dir, "1000001000000\n");
        let e = s.read_raw(&mut raw).unwrap_err().to_string();
        assert!(e.contains("leapt from 1000000 to 1000001000000 µJ"), "{e}");
        set_uj(&dir, "1000100\n");
        assert!(s.read_raw(&mut raw).is_err());
    }

    #[test]
    fn another_vms_share_mounted_mid_run_fails_the_reading() {
        let (d, dir) = share();
        tree(&dir, &info(true), 1_000, 1 << 40);
        let mut s = open(&d).unwrap();
        let mut other = info(true);
        other.vm = "db-2".into();
        tree(&dir, &other, 9_000, 1 << 40);
        due(&mut s);
        let e = s.read_raw(&mut [0]).unwrap_err().to_string();
        assert!(e.contains("holds VM db-2's energy, not VM web-1's"), "{e}");
    }
}
