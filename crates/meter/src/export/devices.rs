//! The disks' and NICs' estimated energy as counters: each device step's interval (the
//! exporter's tick, at most one step a second, [`DEVICE_STEP_MIN`]) added to one series per
//! bound (`bound="lower"|"central"|"upper"`), every series labelled `estimated="true"` and with
//! its model. The central series of a device starts at its first step with a central estimate
//! and ends (is no longer written) at the first later step without one: a sum missing a window
//! would understate the energy, and a series started again from 0 would read as a reset.
//! A disk's split between cgroups or processes is bounded as the attribution families are: at
//! most `max_series` series, the rest in `cgroup="other"` / `comm="other"` ([`ShareSeries`]).

use crate::disks::DeviceIntervals;
use crate::exposition::{Labels, MetricFamily, MetricKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};
use wattio_devices::{DiskEnergyRow, EnergyInterval, NicEnergyRow, CGROUP_SHARE_LABEL};

/// The shortest device step: reading every process's `io` or every cgroup's `io.stat` at a
/// fast exporter tick would cost more than the figures are worth.
pub(crate) const DEVICE_STEP_MIN: Duration = Duration::from_secs(1);

/// Steps a quiet share series may go without bytes before another may take its place.
const SHARE_EVICT_AFTER: u32 = 30;

/// Lower, central and upper joules of one series since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct BoundTotals {
    pub lower_j: f64,
    /// From the first step with a central estimate; `None` before it and after a step without.
    pub central_j: Option<f64>,
    /// A step lacked a central estimate after the central series had started.
    central_ended: bool,
    pub upper_j: f64,
}

impl BoundTotals {
    /// Adds one step's interval (a negative figure, which no model gives, counts as 0).
    pub fn add(&mut self, i: &EnergyInterval) {
        self.lower_j += i.lower_j.max(0.0);
        self.upper_j += i.upper_j.max(0.0);
        if self.central_ended {
            return;
        }
        match i.central_j {
            Some(c) => *self.central_j.get_or_insert(0.0) += c.max(0.0),
            None if self.central_j.is_some() => {
                self.central_j = None;
                self.central_ended = true;
            }
            None => {}
        }
    }

    /// One sample per bound this series has, each with `base` and its `bound` label.
    fn samples<'a>(&self, base: &Labels<'a>, model: &'a str) -> Vec<(Labels<'a>, f64)> {
        let bounds = [
            ("lower", Some(self.lower_j)),
            ("central", self.central_j),
            ("upper", Some(self.upper_j)),
        ];
        bounds
            .into_iter()
            .filter_map(|(bound, j)| {
                let mut l = base.clone();
                l.extend([
                    ("bound", Cow::Borrowed(bound)),
                    ("estimated", Cow::Borrowed("true")),
                    ("model", Cow::Borrowed(model)),
                ]);
                j.map(|j| (l, j))
            })
            .collect()
    }
}

/// Who a share series belongs to: a cgroup, a process, or the rest past the limit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum ShareOwner {
    Cgroup(String),
    Process {
        comm: String,
        pid: u32,
    },
    /// The shares without a series of their own, by the cgroup rule or the process rule.
    Other {
        cgroups: bool,
    },
}

impl ShareOwner {
    fn pairs(&self) -> Labels<'_> {
        match self {
            ShareOwner::Cgroup(c) => vec![("cgroup", Cow::from(c))],
            ShareOwner::Process { comm, pid } => vec![
                ("comm", Cow::from(comm)),
                ("pid", Cow::Owned(pid.to_string())),
            ],
            ShareOwner::Other { cgroups: true } => vec![("cgroup", Cow::Borrowed("other"))],
            ShareOwner::Other { cgroups: false } => {
                vec![("comm", Cow::Borrowed("other")), ("pid", Cow::Borrowed(""))]
            }
        }
    }
}

/// (device, owner, model) of a share series.
type ShareKey = (String, ShareOwner, String);

/// The disks' split series, at most `max` of them with an owner of their own (over all disks):
/// a new owner takes a free place at its first step (that step's energy going to `other`, so a
/// `rate()` sees the series start at 0), one quiet for [`SHARE_EVICT_AFTER`] steps gives its
/// place to a waiting one, its joules moving to `other` so no energy leaves the family.
struct ShareSeries {
    max: usize,
    totals: BTreeMap<ShareKey, BoundTotals>,
    quiet: BTreeMap<ShareKey, u32>,
}

impl ShareSeries {
    fn add(&mut self, rows: &[DiskEnergyRow]) {
        let mut seen = HashSet::new();
        for row in rows {
            let Some(split) = &row.split else { continue };
            let device = &row.energy.device;
            let cgroups = split.label.ends_with(CGROUP_SHARE_LABEL);
            let other: ShareKey = (
                device.clone(),
                ShareOwner::Other { cgroups },
                split.label.clone(),
            );
            self.totals.entry(other.clone()).or_default();
            for s in &split.shares {
                let owner = match s.pid {
                    Some(pid) => ShareOwner::Process {
                        comm: s.who.clone(),
                        pid,
                    },
                    None => ShareOwner::Cgroup(s.who.clone()),
                };
                let key = (device.clone(), owner, split.label.clone());
                seen.insert(key.clone());
                if self.totals.contains_key(&key) {
                    self.totals.entry(key).or_default().add(&s.energy);
                    continue;
                }
                if self.quiet.len() >= self.max {
                    self.evict_one(&seen);
                }
                self.totals.entry(other.clone()).or_default().add(&s.energy);
                if self.quiet.len() < self.max {
                    self.totals.insert(key.clone(), BoundTotals::default());
                    self.quiet.insert(key, 0);
                }
            }
        }
        for (k, q) in self.quiet.iter_mut() {
            *q = if seen.contains(k) { 0 } else { *q + 1 };
        }
    }

    /// Gives the place of the quietest series quiet long enough (not one seen this step) to
    /// its `other` series.
    fn evict_one(&mut self, seen: &HashSet<ShareKey>) {
        let victim = self
            .quiet
            .iter()
            .filter(|(k, q)| **q >= SHARE_EVICT_AFTER && !seen.contains(*k))
            .max_by_key(|(_, q)| **q)
            .map(|(k, _)| k.clone());
        let Some(k) = victim else { return };
        self.quiet.remove(&k);
        let Some(gone) = self.totals.remove(&k) else {
            return;
        };
        let cgroups = matches!(k.1, ShareOwner::Cgroup(_));
        let other = self
            .totals
            .entry((k.0, ShareOwner::Other { cgroups }, k.2))
            .or_default();
        other.lower_j += gone.lower_j;
        other.upper_j += gone.upper_j;
        // The central sums of two series cover different windows: other's stays its own.
    }
}

/// The disks' and NICs' counters since the exporter started.
pub(crate) struct DeviceCounters {
    intervals: DeviceIntervals,
    last_step: Option<Instant>,
    /// Per (device, dev, kind, model).
    disks: BTreeMap<(String, String, String, String), BoundTotals>,
    busy_s: BTreeMap<String, f64>,
    shares: ShareSeries,
    /// Per (interface, driver, speed_mbps, model).
    nics: BTreeMap<(String, String, String, String), BoundTotals>,
}

impl DeviceCounters {
    /// Counters over `intervals` (opened now: the first step covers the time from here), at
    /// most `max_series` split series.
    pub fn new(intervals: DeviceIntervals, max_series: usize) -> DeviceCounters {
        DeviceCounters {
            intervals,
            last_step: None,
            disks: BTreeMap::new(),
            busy_s: BTreeMap::new(),
            shares: ShareSeries {
                max: max_series,
                totals: BTreeMap::new(),
                quiet: BTreeMap::new(),
            },
            nics: BTreeMap::new(),
        }
    }

    /// Steps the devices when [`DEVICE_STEP_MIN`] has passed since the last step (the first
    /// tick always steps).
    pub fn tick(&mut self) {
        if self
            .last_step
            .is_some_and(|t| t.elapsed() < DEVICE_STEP_MIN)
        {
            return;
        }
        self.last_step = Some(Instant::now());
        let (disks, nics) = self.intervals.step();
        self.add(&disks, &nics);
    }

    /// Adds one step's rows.
    fn add(&mut self, disks: &[DiskEnergyRow], nics: &[NicEnergyRow]) {
        for row in disks {
            let e = &row.energy;
            let busy = self.busy_s.entry(e.device.clone()).or_insert(0.0);
            *busy += e.busy_s.unwrap_or(0.0).max(0.0);
            if let (Some(i), Some(model)) = (&e.interval, &e.label) {
                let key = (
                    e.device.clone(),
                    e.dev.clone(),
                    e.kind.clone(),
                    model.clone(),
                );
                self.disks.entry(key).or_default().add(i);
            }
        }
        self.shares.add(disks);
        for n in nics {
            if let (Some(i), Some(model)) = (&n.interval, &n.label) {
                let key = (
                    n.interface.clone(),
                    n.driver.clone().unwrap_or_default(),
                    n.speed_mbps.map(|s| s.to_string()).unwrap_or_default(),
                    model.clone(),
                );
                self.nics.entry(key).or_default().add(i);
            }
        }
    }

    /// The families: the disks' energy and busy time, their split, the NICs' energy (each
    /// only where it has a series).
    pub fn families(&self) -> Vec<MetricFamily<'_>> {
        let mut families = Vec::new();
        let mut push = |name: &'static str, help: &'static str, unit, samples: Vec<_>| {
            if !samples.is_empty() {
                families.push(MetricFamily {
                    kind: MetricKind::Counter,
                    name: name.into(),
                    help: help.into(),
                    unit: Some(unit),
                    samples,
                });
            }
        };
        let disks = self
            .disks
            .iter()
            .flat_map(|((device, dev, kind, model), t)| {
                let base = vec![
                    ("device", Cow::from(device)),
                    ("dev", Cow::from(dev)),
                    ("kind", Cow::from(kind)),
                ];
                t.samples(&base, model)
            })
            .collect();
        push("wattio_disk_energy_joules", DISK_HELP, "joules", disks);
        let busy = self
            .busy_s
            .iter()
            .map(|(d, s)| (vec![("device", Cow::from(d))], *s))
            .collect();
        push("wattio_disk_busy_seconds", BUSY_HELP, "seconds", busy);
        let shares = self
            .shares
            .totals
            .iter()
            .flat_map(|((device, owner, model), t)| {
                let mut base = vec![("device", Cow::from(device))];
                base.extend(owner.pairs());
                t.samples(&base, model)
            })
            .collect();
        push(
            "wattio_disk_attributed_energy_joules",
            SHARE_HELP,
            "joules",
            shares,
        );
        let nics = self
            .nics
            .iter()
            .flat_map(|((interface, driver, speed, model), t)| {
                let base = vec![
                    ("interface", Cow::from(interface)),
                    ("driver", Cow::from(driver)),
                    ("speed_mbps", Cow::from(speed)),
                ];
                t.samples(&base, model)
            })
            .collect();
        push("wattio_nic_energy_joules", NIC_HELP, "joules", nics);
        families
    }
}

const DISK_HELP: &str = "Estimated energy of a disk since the exporter started, from the power figures it reports of itself (NVMe power states) or a shipped profile: bound=\"lower\" (idle power over the time in each state), \"upper\" (maximum power), \"central\" (active power over the busy time, only where the device reports it; see the model label); a virtual disk has none";
const BUSY_HELP: &str =
    "Seconds a disk had I/O in flight (io_ticks of /sys/block/*/stat) since the exporter started";
const SHARE_HELP: &str = "A disk's energy above its idle floor (its upper less its lower bound, or central less lower) attributed to a cgroup by its io.stat bytes on it, or to a process by its /proc/PID/io bytes where io.stat is unavailable (see the model label), since its series started; cgroup=\"other\" or comm=\"other\": the owners past the series limit";
const NIC_HELP: &str = "Estimated energy of a network interface since the exporter started: its idle (bound=\"lower\") and maximum (bound=\"upper\") power at its link speed from a shipped profile with sources (see the model label), over the device steps with the link up at both ends; a physical NIC's, never a virtual interface's";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_sum_each_window_and_never_go_back() {
        let mut t = BoundTotals::default();
        // Three windows of 0.5, 1 and 2 s at idle 1.5 W and max 8 W: 0.75 + 1.5 + 3 = 5.25 J
        // and 4 + 8 + 16 = 28 J.
        let steps = [
            EnergyInterval::new(0.75, None, 4.0),
            EnergyInterval::new(1.5, Some(2.0), 8.0),
            EnergyInterval::new(3.0, Some(5.0), 16.0),
        ];
        let mut last = (0.0, 0.0);
        for s in &steps {
            t.add(s);
            assert!(t.lower_j >= last.0 && t.upper_j >= last.1);
            last = (t.lower_j, t.upper_j);
        }
        assert!((t.lower_j - 5.25).abs() < 1e-12, "{t:?}");
        assert!((t.upper_j - 28.0).abs() < 1e-12, "{t:?}");
        // The central series starts at the first window with an estimate: 2 + 5 J.
        assert_eq!(t.central_j, Some(7.0));
    }

    #[test]
    fn a_window_without_a_central_estimate_ends_the_central_series() {
        let mut t = BoundTotals::default();
        t.add(&EnergyInterval::new(1.0, Some(2.0), 3.0));
        t.add(&EnergyInterval::new(1.0, None, 3.0));
        assert_eq!(t.central_j, None);
        // It does not come back at a lower value: a scraper would read that as a reset.
        t.add(&EnergyInterval::new(1.0, Some(2.0), 3.0));
        assert_eq!(t.central_j, None);
        assert_eq!((t.lower_j, t.upper_j), (3.0, 9.0));
        let labels = t.samples(&vec![("device", Cow::Borrowed("nvme0n1"))], "estimated (x)");
        let bounds: Vec<&str> = labels
            .iter()
            .map(|(l, _)| l.iter().find(|(k, _)| *k == "bound").unwrap().1.as_ref())
            .collect();
        assert_eq!(bounds, ["lower", "upper"]);
    }

    #[test]
    fn a_negative_window_adds_nothing() {
        let mut t = BoundTotals::default();
        t.add(&EnergyInterval::new(2.0, Some(3.0), 4.0));
        t.add(&EnergyInterval::new(-1.0, Some(-1.0), -1.0));
        assert_eq!((t.lower_j, t.central_j, t.upper_j), (2.0, Some(3.0), 4.0));
    }

    /// A step of nvme0n1 whose active part is split between cgroups `(path, upper J)`.
    fn split_row(shares: &[(&str, f64)]) -> DiskEnergyRow {
        let shares: Vec<serde_json::Value> = shares
            .iter()
            .map(|(who, j)| {
                serde_json::json!({"who": who, "bytes": 1, "fraction": 0.5,
                    "energy": {"lower_j": 0.0, "central_j": null, "upper_j": j}})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "device": "nvme0n1", "dev": "259:0", "kind": "NVMe", "window_s": 1.0,
            "read_bytes": 0, "written_bytes": 0, "unknown_s": 0.0,
            "split": {"idle": {"lower_j": 0.0, "central_j": 0.0, "upper_j": 0.0},
                "idle_label": "idle", "shares": shares,
                "label": format!("estimated (x), {CGROUP_SHARE_LABEL}")}
        }))
        .unwrap()
    }

    #[test]
    fn split_series_past_the_limit_go_to_other_and_nothing_is_lost() {
        let mut s = ShareSeries {
            max: 1,
            totals: BTreeMap::new(),
            quiet: BTreeMap::new(),
        };
        // Step 1: /a takes the one place at 0 (its 3 J to other), /b has none (1 J to other).
        s.add(&[split_row(&[("/a", 3.0), ("/b", 1.0)])]);
        // Step 2: /a's 3 J are its own, /b's 1 J still other's.
        s.add(&[split_row(&[("/a", 3.0), ("/b", 1.0)])]);
        let upper = |owner: ShareOwner| {
            s.totals
                .iter()
                .find(|(k, _)| k.1 == owner)
                .map(|(_, t)| t.upper_j)
        };
        assert_eq!(upper(ShareOwner::Cgroup("/a".into())), Some(3.0));
        assert_eq!(upper(ShareOwner::Cgroup("/b".into())), None);
        assert_eq!(upper(ShareOwner::Other { cgroups: true }), Some(5.0));
        let all: f64 = s.totals.values().map(|t| t.upper_j).sum();
        assert_eq!(all, 8.0);
    }
}
