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
//! it), makes the reading fail with the reason rather than report a flat or jumping counter.

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
    /// The heartbeat last seen, and since when it has not moved.
    heartbeat: (u64, Instant),
    last_check: Instant,
    stale_after: Duration,
}

impl HostSource {
    /// Opens the tree under `root` ([`host_dir`]). Fails with the reason and the fix when there
    /// is none, when it is malformed, or when its publisher has stopped.
    pub fn open(root: &SysRoot) -> Result<HostSource, EnergyError> {
        let dir = host_dir(root);
        let info = read_host_info(&dir)?;
        if !info.running {
            return Err(unusable(
                format!(
                    "the host's publisher for VM {} has stopped (its last write says so)",
                    info.vm
                ),
                "start `wattio vm publish` on the host again; until then the estimate is all there is",
            ));
        }
        // Three missed writes, and at least 5 s: a busy host may write late.
        let stale_after =
            Duration::from_secs_f64((3.0 * info.interval_s.clamp(0.001, 3600.0)).max(5.0));
        // A publisher killed without a word leaves `running: true`: the file's age says it.
        if let Some(age) = std::fs::metadata(dir.join(HOST_INFO))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        {
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
        Ok(HostSource {
            specs,
            counter,
            provenance: info.guest_provenance(),
            dir,
            heartbeat: (info.heartbeat, now),
            last_check: now,
            stale_after,
        })
    }

    /// Checks, at most once a second, that the publisher is still writing.
    fn check_alive(&mut self) -> Result<(), EnergyError> {
        if self.last_check.elapsed() < Duration::from_secs(1) {
            return Ok(());
        }
        self.last_check = Instant::now();
        let info = read_host_info(&self.dir)?;
        if !info.running {
            return Err(unusable(
                format!("the host's publisher for VM {} stopped", info.vm),
                "start `wattio vm publish` on the host again",
            ));
        }
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
        out[0] = read_uj(&self.counter)?;
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path, info: &HostInfo, uj: u64, max: u64) {
        let z = dir.join(HOST_ZONE);
        std::fs::create_dir_all(&z).unwrap();
        std::fs::write(z.join("name"), "package-0\n").unwrap();
        std::fs::write(z.join("energy_uj"), format!("{uj}\n")).unwrap();
        std::fs::write(z.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
        std::fs::write(dir.join(HOST_INFO), serde_json::to_string(info).unwrap()).unwrap();
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
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run/wattio-host");
        tree(&dir, &info(true), 5_000_000, 1 << 40);
        let mut s = HostSource::open(&SysRoot::new(d.path())).unwrap();
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
        let e = HostSource::open(&SysRoot::new(d.path()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no energy shared by the host") && e.contains("wattio vm publish"),
            "{e}"
        );
        let dir = d.path().join("run/wattio-host");
        tree(&dir, &info(false), 1, 1 << 40);
        let e = HostSource::open(&SysRoot::new(d.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("publisher for VM web-1 has stopped"), "{e}");
        std::fs::write(dir.join(HOST_INFO), "garbage").unwrap();
        let e = HostSource::open(&SysRoot::new(d.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a wattio host file"), "{e}");
        tree(&dir, &info(true), 1, 1 << 40);
        std::fs::write(dir.join(HOST_ZONE).join("energy_uj"), "lots\n").unwrap();
        assert!(HostSource::open(&SysRoot::new(d.path())).is_err());
    }

    #[test]
    fn a_share_nobody_updates_is_refused_at_open() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run/wattio-host");
        tree(&dir, &info(true), 1, 1 << 40);
        // Left by a publisher killed a minute ago, still saying it runs.
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(dir.join(HOST_INFO))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let e = HostSource::open(&SysRoot::new(d.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("last updated this VM's energy 60 s ago"), "{e}");
    }

    #[test]
    fn a_heartbeat_that_stops_fails_the_reading() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run/wattio-host");
        tree(&dir, &info(true), 1, 1 << 40);
        let mut s = HostSource::open(&SysRoot::new(d.path())).unwrap();
        s.stale_after = Duration::from_millis(0);
        s.last_check = Instant::now() - Duration::from_secs(2);
        s.heartbeat.1 = Instant::now() - Duration::from_secs(10);
        let e = s.read_raw(&mut [0]).unwrap_err().to_string();
        assert!(e.contains("heartbeat 7 unchanged"), "{e}");
        // A moving heartbeat is fine.
        let mut next = info(true);
        next.heartbeat = 8;
        tree(&dir, &next, 2, 1 << 40);
        s.last_check = Instant::now() - Duration::from_secs(2);
        let mut raw = [0];
        s.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [2]);
    }
}
