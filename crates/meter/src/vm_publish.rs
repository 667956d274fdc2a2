//! `wattio vm publish`: on a host, each running VM's attributed energy as a counter its guest
//! can read ([`wattio_energy::HostSource`] describes the tree and why it is shaped so).
//!
//! Every interval the attribution layer gives each VM its CPU-time share of the host's energy
//! ([`crate::LiveAttribution`], `--by vm`); the publisher adds it to that VM's counter, kept in
//! whole microjoules, and writes `energy_uj` (the counter modulo `max_energy_range_uj + 1`, as
//! RAPL's powercap files wrap), then `wattio-host.json` with a heartbeat. Each file is written to a
//! temporary name and renamed over the old one, so a guest never reads half a number. The
//! counter's total is kept in `.wattio-state` beside them: a publisher that restarts goes on
//! from it, so the guest's counter never goes back.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use wattio_energy::attribution::{Interval, HOST_ENTRY};
use wattio_energy::{HostInfo, Provenance, HOST_INFO, HOST_ZONE};

/// The counter's wrap when none is asked for: 2^38 µJ, about 275 kJ, the order of a real RAPL
/// package counter's range, so guests exercise their wrap handling as they would on RAPL.
pub const DEFAULT_MAX_ENERGY_RANGE_UJ: u64 = 1 << 38;

const STATE: &str = ".wattio-state";

/// The per-VM counters under one directory.
pub struct VmPublisher {
    dir: PathBuf,
    host: Provenance,
    interval_s: f64,
    max_range_uj: u64,
    heartbeat: u64,
    /// Per VM name: the total in µJ, and the fraction of a µJ not yet counted.
    vms: BTreeMap<String, (u64, f64)>,
}

impl VmPublisher {
    /// Publishes under `dir` (created if needed) the energy measured with `host`'s provenance,
    /// every `interval_s`.
    pub fn new(
        dir: &Path,
        host: Provenance,
        interval_s: f64,
        max_range_uj: u64,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create {}: {e}; give a writable --dir",
                    dir.display()
                ),
            )
        })?;
        Ok(VmPublisher {
            dir: dir.to_path_buf(),
            host,
            interval_s,
            // `total % (max + 1)` must not overflow.
            max_range_uj: max_range_uj.clamp(1, u64::MAX - 1),
            heartbeat: 0,
            vms: BTreeMap::new(),
        })
    }

    /// The directory of VM `name`: its name with `%`, `/`, NUL and a leading `.` percent-encoded,
    /// so that no two names share a directory and none leaves `dir`.
    pub fn vm_dir(&self, name: &str) -> PathBuf {
        let mut safe = String::with_capacity(name.len());
        for (i, c) in name.chars().enumerate() {
            match c {
                '%' => safe.push_str("%25"),
                '/' => safe.push_str("%2F"),
                '\0' => safe.push_str("%00"),
                '.' if i == 0 => safe.push_str("%2E"),
                c => safe.push(c),
            }
        }
        if safe.is_empty() {
            safe.push('%');
        }
        self.dir.join(safe)
    }

    /// Adds an interval's shares (`--by vm` entries; the host's own is not a VM) and writes
    /// every known VM's files. `Err` only when nothing could be written.
    pub fn publish(&mut self, interval: &Interval) -> io::Result<Vec<String>> {
        self.heartbeat += 1;
        let mut problems = Vec::new();
        for e in &interval.entries {
            let Some(vm) = e.vm.as_deref().filter(|v| *v != HOST_ENTRY) else {
                continue;
            };
            if !self.vms.contains_key(vm) {
                match self.load_state(vm) {
                    Ok(total) => {
                        self.vms.insert(vm.to_string(), (total, 0.0));
                    }
                    // Not published at all rather than published wrong.
                    Err(e) => {
                        problems.push(e.to_string());
                        continue;
                    }
                }
            }
            let (total, frac) = self.vms.get_mut(vm).expect("just inserted");
            let uj = e.energy_j.max(0.0) * 1e6 + *frac;
            *total = total.saturating_add(uj.floor() as u64);
            *frac = uj.fract();
        }
        let names: Vec<String> = self.vms.keys().cloned().collect();
        for vm in names {
            if let Err(e) = self.write_vm(&vm, true) {
                problems.push(format!("{vm}: {e}"));
            }
        }
        if !problems.is_empty() && self.vms.is_empty() {
            return Err(io::Error::other(problems.join("; ")));
        }
        Ok(problems)
    }

    /// Says to every guest that the publisher has stopped (a clean end).
    pub fn stop(&mut self) {
        let names: Vec<String> = self.vms.keys().cloned().collect();
        for vm in names {
            let _ = self.write_vm(&vm, false);
        }
    }

    /// VM `vm`'s counter total in µJ.
    pub fn total_uj(&self, vm: &str) -> Option<u64> {
        self.vms.get(vm).map(|v| v.0)
    }

    /// The saved total of VM `vm` (0 for a VM never published here). A state that exists but
    /// cannot be read, or was saved with another wrap, is an error: starting again from 0, or
    /// wrapping elsewhere, would make the guest's counter go back or jump.
    fn load_state(&self, vm: &str) -> io::Result<u64> {
        let path = self.vm_dir(vm).join(STATE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "{}: {e}; the counter of VM {vm} cannot go on from its saved total",
                        path.display()
                    ),
                ))
            }
        };
        let mut it = text.split_whitespace();
        let total = it.next().and_then(|t| t.parse::<u64>().ok());
        let max = it.next().and_then(|t| t.parse::<u64>().ok());
        match (total, max) {
            (Some(t), Some(m)) if m == self.max_range_uj => Ok(t),
            (Some(_), Some(m)) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "VM {vm} was published with --max-energy-range-uj {m}, not {}: its guest would see a jump; use {m}, or remove {} to start its counter again (its guests then restart their measurements)",
                    self.max_range_uj,
                    path.display()
                ),
            )),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a wattio state file ({text:?}); remove it to start VM {vm}'s counter again", path.display()),
            )),
        }
    }

    fn write_vm(&self, vm: &str, running: bool) -> io::Result<()> {
        let dir = self.vm_dir(vm);
        let zone = dir.join(HOST_ZONE);
        std::fs::create_dir_all(&zone)?;
        let total = self.vms.get(vm).map_or(0, |v| v.0);
        // The state first, synced: a crash after it never makes the counter go back.
        write_atomic(
            &dir.join(STATE),
            &format!("{total} {}\n", self.max_range_uj),
        )?;
        write_atomic(&zone.join("name"), "package-0\n")?;
        write_atomic(
            &zone.join("max_energy_range_uj"),
            &format!("{}\n", self.max_range_uj),
        )?;
        write_atomic(
            &zone.join("energy_uj"),
            &format!("{}\n", total % (self.max_range_uj + 1)),
        )?;
        let info = HostInfo {
            vm: vm.to_string(),
            host: self.host.clone(),
            interval_s: self.interval_s,
            heartbeat: self.heartbeat,
            running,
            publisher: format!("wattio {}", env!("CARGO_PKG_VERSION")),
        };
        write_atomic(
            &dir.join(HOST_INFO),
            &serde_json::to_string(&info).map_err(io::Error::other)?,
        )
    }
}

/// Writes `text` to a new temporary file beside `path` and renames it over `path`. The
/// temporary file is created exclusively and never through a symbolic link (the publisher runs
/// as root in a directory a guest's share exposes), and synced before the rename.
fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("wattio-tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::attribution::{Entry, Key};
    use wattio_energy::{Mechanism, Source, SysRoot};

    fn interval(shares: &[(&str, f64)]) -> Interval {
        Interval {
            interval_s: 1.0,
            total_j: shares.iter().map(|s| s.1).sum(),
            idle_j: 0.0,
            busy_cpu_s: 0.0,
            unseen_cpu_s: 0.0,
            over_cpu_s: 0.0,
            entries: shares
                .iter()
                .map(|(vm, j)| Entry {
                    vm: Some(vm.to_string()),
                    energy_j: *j,
                    ..Entry::new(Key::Vm(vm.to_string()))
                })
                .collect(),
            gpus: vec![],
            cpu_times: None,
            kernel_io: None,
        }
    }

    /// The guest side of a VM's directory, as the guest mounts it.
    fn guest(dir: &Path) -> wattio_energy::HostSource {
        let root = tempfile::tempdir().unwrap().keep();
        let mount = root.join("run");
        std::fs::create_dir_all(&mount).unwrap();
        std::os::unix::fs::symlink(dir, mount.join("wattio-host")).unwrap();
        wattio_energy::HostSource::open(&SysRoot::new(&root)).unwrap()
    }

    #[test]
    fn counters_grow_by_each_vms_share_and_survive_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let host = Provenance::measured(Mechanism::Powercap);
        let mut p = VmPublisher::new(d.path(), host.clone(), 1.0, 1 << 38).unwrap();
        p.publish(&interval(&[
            ("web-1", 2.5),
            (HOST_ENTRY, 9.0),
            ("db", 0.000_000_4),
        ]))
        .unwrap();
        p.publish(&interval(&[("web-1", 1.25), ("db", 0.000_000_7)]))
            .unwrap();
        assert_eq!(p.total_uj("web-1"), Some(3_750_000));
        // Fractions of a µJ are carried, not lost.
        assert_eq!(p.total_uj("db"), Some(1));
        assert!(!p.vm_dir(HOST_ENTRY).exists());
        let mut g = guest(&p.vm_dir("web-1"));
        let mut raw = [0];
        g.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [3_750_000]);
        assert_eq!(
            g.provenance().label(),
            "measured (host powercap on the host, attributed to this VM (cpu-time share))"
        );
        // A new publisher (the host's wattio restarted) goes on from the saved total.
        drop(p);
        let mut p = VmPublisher::new(d.path(), host, 1.0, 1 << 38).unwrap();
        p.publish(&interval(&[("web-1", 1.0)])).unwrap();
        assert_eq!(p.total_uj("web-1"), Some(4_750_000));
        g.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [4_750_000]);
        // A clean stop says so to the guest.
        p.stop();
        assert!(wattio_energy::HostSource::open(&SysRoot::new(
            tempfile::tempdir().unwrap().path()
        ))
        .is_err());
        let info = wattio_energy::read_host_info(&p.vm_dir("web-1")).unwrap();
        assert!(!info.running);
    }

    #[test]
    fn the_counter_wraps_at_its_range_and_the_guest_undoes_it() {
        let d = tempfile::tempdir().unwrap();
        let mut p = VmPublisher::new(
            d.path(),
            Provenance::measured(Mechanism::Powercap),
            1.0,
            9_999_999,
        )
        .unwrap();
        p.publish(&interval(&[("w", 6.0)])).unwrap();
        let mut g = guest(&p.vm_dir("w"));
        let mut acc = wattio_energy::Accumulator::new(g.counters());
        let mut raw = [0];
        let mut d = [wattio_energy::CounterDelta {
            joules: 0.0,
            wrapped: false,
        }];
        g.read_raw(&mut raw).unwrap();
        acc.update(&raw, &mut d).unwrap();
        // 6 J, then 6 J more: the file goes past 9.999999 J and restarts from 0.
        p.publish(&interval(&[("w", 6.0)])).unwrap();
        g.read_raw(&mut raw).unwrap();
        assert_eq!(raw, [12_000_000 % 10_000_000]);
        acc.update(&raw, &mut d).unwrap();
        assert!((d[0].joules - 6.0).abs() < 1e-9, "{d:?}");
        assert!(d[0].wrapped);
    }

    #[test]
    fn a_restart_with_another_wrap_or_an_unreadable_state_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let host = Provenance::measured(Mechanism::Powercap);
        let mut p = VmPublisher::new(d.path(), host.clone(), 1.0, 1 << 38).unwrap();
        p.publish(&interval(&[("w", 1.0)])).unwrap();
        let mut q = VmPublisher::new(d.path(), host.clone(), 1.0, 1 << 30).unwrap();
        let e = q.publish(&interval(&[("w", 1.0)])).unwrap_err().to_string();
        assert!(
            e.contains("was published with --max-energy-range-uj 274877906944"),
            "{e}"
        );
        std::fs::write(p.vm_dir("w").join(STATE), "").unwrap();
        let mut q = VmPublisher::new(d.path(), host, 1.0, 1 << 38).unwrap();
        let e = q.publish(&interval(&[("w", 1.0)])).unwrap_err().to_string();
        assert!(e.contains("is not a wattio state file"), "{e}");
    }

    #[test]
    fn vm_names_cannot_leave_the_directory() {
        let d = tempfile::tempdir().unwrap();
        let p =
            VmPublisher::new(d.path(), Provenance::measured(Mechanism::Powercap), 1.0, 1).unwrap();
        assert_eq!(p.vm_dir("../etc"), d.path().join("%2E.%2Fetc"));
        assert_eq!(p.vm_dir("a/b"), d.path().join("a%2Fb"));
        // No two names share a directory.
        assert_ne!(p.vm_dir("a/b"), p.vm_dir("a%2Fb"));
        assert_ne!(p.vm_dir(".x"), p.vm_dir("%2Ex"));
        assert_eq!(p.vm_dir("web-1"), d.path().join("web-1"));
    }
}
