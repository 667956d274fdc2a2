//! Live attribution over a [`Meter`]: `wattio top`, the per-entry rows of `record --by` and the
//! per-process / per-cgroup series of `export`. The formula and the CPU-time readers are in
//! [`wattio_energy::attribution`]; this module adds the meter's energy, the labels, a terminal
//! table and a cardinality guard.

use crate::attributed::AttributedInterval;
use crate::meter::{Meter, Snapshot};
use std::collections::HashMap;
use std::io;
use wattio_energy::attribution::Key;
use wattio_energy::attribution::{Attributor, By, Entry, IdlePolicy};
use wattio_energy::{CounterSpec, Domain, Provenance, SysRoot};
use wattio_progress::Sink;

/// Attribution that follows a meter: each [`LiveAttribution::step`] takes a snapshot and
/// attributes the energy since the previous one.
pub struct LiveAttribution {
    attributor: Attributor,
    last: Snapshot,
    provenance: Provenance,
    /// Who used each GPU, where the meter reads GPUs and NVML answers.
    gpu_processes: Option<wattio_energy::GpuProcessReader>,
    /// Why GPU energy is not split between processes although GPUs are read.
    pub gpu_note: Option<String>,
    /// Names containers and pods (`--by container`, `--by pod`).
    namer: crate::workloads::Namer,
    /// Joules since start, all entries and idle together, and idle alone.
    pub total_j: f64,
    pub idle_total_j: f64,
    /// GPU joules since start, all of it and the part no process explains.
    pub gpu_total_j: f64,
    pub gpu_idle_total_j: f64,
    /// The whole machine since start ([`SinceStart`]).
    since_start: SinceStart,
}

/// The snapshot a live view started from, and each platform meter's power over its first
/// interval: its figure since start lags by its averaging and delay at both ends, which cancel
/// where its power held; what they may leave is that lag times the change of its power.
struct SinceStart {
    start: Snapshot,
    first_w: Option<Vec<((Domain, u32), f64)>>,
}

impl SinceStart {
    /// The machine since start, up to `now`; `interval` is the step's own report.
    fn view(
        &mut self,
        meter: &Meter,
        now: &Snapshot,
        interval: &crate::EnergyReport,
    ) -> Option<crate::MachineView> {
        let platform_w = |r: &crate::EnergyReport| -> Vec<((Domain, u32), f64)> {
            r.domains
                .iter()
                .filter(|d| matches!(d.domain, Domain::Platform | Domain::Psys))
                .map(|d| ((d.domain, d.socket), d.energy_j / r.duration_s.max(1e-9)))
                .collect()
        };
        let first = self
            .first_w
            .get_or_insert_with(|| platform_w(interval))
            .clone();
        let last = platform_w(interval);
        let since = meter.between(&self.start, now);
        let late = meter.late_timings();
        crate::MachineView::of(&since, |d| {
            let key = (d.domain, d.socket);
            let Some((_, t)) = late.iter().find(|(k, _)| *k == key) else {
                return crate::PlatformTiming::INSTANT;
            };
            let power = |v: &[((Domain, u32), f64)]| v.iter().find(|(k, _)| *k == key).map(|p| p.1);
            let change_w = match (power(&first), power(&last)) {
                (Some(a), Some(b)) => (b - a).abs(),
                _ => 0.0,
            };
            crate::PlatformTiming::of(t, crate::PlatformTiming::lag_s(t) * change_w)
        })
    }
}

impl LiveAttribution {
    /// Starts now. `n_cpus` online CPUs (the capacity of a window is n_cpus × its seconds).
    pub fn start(
        meter: &Meter,
        root: SysRoot,
        by: By,
        policy: IdlePolicy,
        n_cpus: usize,
    ) -> io::Result<Self> {
        let attributor = Attributor::new(root, by, policy, n_cpus)?;
        let gpu_indices = meter.nvml_gpus();
        let (gpu_processes, gpu_note) = if gpu_indices.is_empty() {
            (None, None)
        } else {
            match wattio_energy::GpuProcessReader::open(
                &wattio_energy::nvml_lib_from_env(),
                &gpu_indices,
            ) {
                Ok(r) => (Some(r), None),
                Err(e) => (
                    None,
                    Some(format!("GPU energy is not split between processes: {e}")),
                ),
            }
        };
        let last = meter.snapshot().map_err(io::Error::other)?;
        Ok(LiveAttribution {
            attributor,
            since_start: SinceStart {
                start: last.clone(),
                first_w: None,
            },
            last,
            provenance: meter.provenance().clone(),
            gpu_processes,
            gpu_note,
            namer: crate::workloads::Namer::open(by),
            total_j: 0.0,
            idle_total_j: 0.0,
            gpu_total_j: 0.0,
            gpu_idle_total_j: 0.0,
        })
    }

    /// Whether the process or cgroup `key` was present at the last step.
    pub fn is_alive(&self, key: &Key) -> bool {
        self.attributor.is_alive(key)
    }

    /// Why containers or pods are not named by their owners (said once at the start), or why
    /// the names stopped coming.
    pub fn naming_note(&self) -> Option<String> {
        self.namer.note.clone().or_else(|| self.namer.trouble())
    }

    /// Why the kernel's I/O work is not charged to its owners, where it was wanted.
    pub fn kernel_io_off(&self) -> Option<&str> {
        self.attributor.kernel_io_off()
    }

    /// The meter's cumulative joules per counter when this attribution last stepped (or
    /// started): counters reported from here on add up with the attributed figures.
    pub fn last_totals_j(&self) -> &[f64] {
        &self.last.totals_j
    }

    /// Attributes the energy since the previous step.
    pub fn step(&mut self, meter: &Meter) -> io::Result<AttributedInterval> {
        let now = meter.snapshot().map_err(io::Error::other)?;
        self.step_to(meter, now)
    }

    /// Attributes the energy up to `now`, a snapshot of `meter` just taken. When the CPU times
    /// cannot be read, nothing advances: the next step covers this interval too, so no energy
    /// is lost from the attributed figures.
    pub fn step_to(&mut self, meter: &Meter, now: Snapshot) -> io::Result<AttributedInterval> {
        let r = meter.between(&self.last, &now);
        let mut i = self.attributor.step(r.total_j, r.duration_s)?;
        if let Some(reader) = &mut self.gpu_processes {
            let gpus: Vec<_> = reader
                .read()
                .into_iter()
                .map(|u| {
                    let d = r
                        .domains
                        .iter()
                        .find(|d| d.domain == wattio_energy::Domain::Gpu && d.socket == u.index);
                    let j = d.map_or(0.0, |d| d.energy_j);
                    let label = d
                        .and_then(|d| d.label.clone())
                        .unwrap_or_else(|| "measured (nvml)".into());
                    (u, j, label)
                })
                .collect();
            self.attributor.attribute_gpus(&mut i, &gpus);
            self.gpu_total_j += i.gpus.iter().map(|g| g.energy_j).sum::<f64>();
            self.gpu_idle_total_j += i.gpus.iter().map(|g| g.idle_j).sum::<f64>();
        }
        self.namer.name(&mut i.entries);
        let machine = self.since_start.view(meter, &now, &r);
        self.last = now;
        self.total_j += i.total_j;
        self.idle_total_j += i.idle_j;
        let mut a = AttributedInterval::new(
            i,
            self.attributor.by(),
            self.attributor.policy(),
            &self.provenance,
        );
        a.machine = machine;
        // The meters beside the CPU, and the GPUs NVML does not read (hwmon's): NVML's have
        // their own lines.
        let nvml_gpus = meter.nvml_gpus();
        a.beside = r
            .domains
            .into_iter()
            .filter(|d| match d.domain {
                Domain::Platform | Domain::Device => true,
                Domain::Gpu => !nvml_gpus.contains(&d.socket),
                _ => false,
            })
            .collect();
        Ok(a)
    }
}

/// Keeps the number of per-entry series bounded (Prometheus, record rows): at most `max`
/// entities have a series of their own; the energy of the others goes to one `other` figure.
///
/// A series is a monotone counter from 0: it is created at 0 (the interval that earned it its
/// place still goes to `other`, so `rate()` sees the series start), grows with its entity, and
/// is dropped when the entity is gone, or when it has had no energy for `evict_after` intervals
/// while other entities wait for a place. The energy of a dropped series is added to
/// `dropped_j`, so series + `other` + dropped add up to everything attributed.
pub struct SeriesGuard {
    max: usize,
    evict_after: u32,
    slots: HashMap<Key, Slot>,
    other_j: f64,
    dropped_j: f64,
}

struct Slot {
    total_j: f64,
    quiet: u32,
}

/// One process's or cgroup's energy series of a [`SeriesGuard`] after an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct EntitySeries {
    pub key: Key,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    /// By VM: the VM's name.
    pub vm: Option<String>,
    /// Joules since the series started.
    pub total_j: f64,
    /// Joules in this interval (0 for a series created in it).
    pub delta_j: f64,
    pub cpu_s: f64,
}

/// What an interval did to the series.
#[derive(Debug, Clone, Default)]
pub struct SeriesUpdate {
    /// Series that exist after the interval and had an entry in it (new ones at 0).
    pub series: Vec<EntitySeries>,
    /// Entities whose series was dropped in this interval.
    pub dropped: Vec<Key>,
    /// Joules of the interval that went to `other`.
    pub other_j: f64,
    /// Joules of the series dropped in this interval.
    pub dropped_j: f64,
}

impl SeriesGuard {
    pub fn new(max: usize) -> Self {
        SeriesGuard {
            max,
            evict_after: 30,
            slots: HashMap::new(),
            other_j: 0.0,
            dropped_j: 0.0,
        }
    }

    /// Joules of the entities without a series, since start.
    pub fn other_total_j(&self) -> f64 {
        self.other_j
    }

    /// Joules of series dropped since start.
    pub fn dropped_total_j(&self) -> f64 {
        self.dropped_j
    }

    /// Takes an interval's entries (sorted by energy, most first); `alive` says whether an
    /// entity without an entry in this interval still exists.
    pub fn update(&mut self, entries: &[Entry], alive: impl Fn(&Key) -> bool) -> SeriesUpdate {
        let mut up = SeriesUpdate::default();
        let present: std::collections::HashSet<&Key> = entries.iter().map(|e| &e.key).collect();
        let drop_slot = |slots: &mut HashMap<Key, Slot>, k: &Key, up: &mut SeriesUpdate| {
            if let Some(slot) = slots.remove(k) {
                up.dropped_j += slot.total_j;
                up.dropped.push(k.clone());
            }
        };
        let gone: Vec<Key> = self
            .slots
            .keys()
            .filter(|k| !present.contains(k) && !alive(k))
            .cloned()
            .collect();
        for k in &gone {
            drop_slot(&mut self.slots, k, &mut up);
        }
        for (k, slot) in self.slots.iter_mut() {
            slot.quiet = if present.contains(k) {
                0
            } else {
                slot.quiet + 1
            };
        }
        let waiting: Vec<&Entry> = entries
            .iter()
            .filter(|e| !self.slots.contains_key(&e.key) && e.energy_j > 0.0)
            .collect();
        let free = self.max.saturating_sub(self.slots.len());
        if waiting.len() > free {
            let mut quiet: Vec<(u32, Key)> = self
                .slots
                .iter()
                .filter(|(_, s)| s.quiet >= self.evict_after)
                .map(|(k, s)| (s.quiet, k.clone()))
                .collect();
            quiet.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for (_, k) in quiet.into_iter().take(waiting.len() - free) {
                drop_slot(&mut self.slots, &k, &mut up);
            }
        }
        let mut created = std::collections::HashSet::new();
        for e in waiting {
            if self.slots.len() >= self.max {
                break;
            }
            self.slots.insert(
                e.key.clone(),
                Slot {
                    total_j: 0.0,
                    quiet: 0,
                },
            );
            created.insert(e.key.clone());
        }
        for e in entries {
            let new = created.contains(&e.key);
            match self.slots.get_mut(&e.key) {
                Some(slot) => {
                    let delta = if new { 0.0 } else { e.energy_j };
                    if new {
                        up.other_j += e.energy_j;
                    }
                    slot.total_j += delta;
                    up.series.push(EntitySeries {
                        key: e.key.clone(),
                        pid: e.pid,
                        comm: e.comm.clone(),
                        cgroup: e.cgroup.clone(),
                        vm: e.vm.clone(),
                        total_j: slot.total_j,
                        delta_j: delta,
                        cpu_s: e.cpu_s,
                    });
                }
                None => up.other_j += e.energy_j,
            }
        }
        self.other_j += up.other_j;
        self.dropped_j += up.dropped_j;
        up
    }

    /// Whether `key` has a series.
    pub fn has(&self, key: &Key) -> bool {
        self.slots.contains_key(key)
    }
}

/// The per-entry rows `record --by` adds: every `interval`, the interval's energy split over the
/// top `top` entries, `other` and `idle`.
pub struct RecordAttribution {
    attributor: Attributor,
    in_total: Vec<bool>,
    /// Per counter: the GPU index of a GPU counter.
    gpu_index: Vec<Option<u32>>,
    /// Joules of each GPU (by index) since the interval started, and its energy's label.
    gpu_acc: Vec<(u32, f64, String)>,
    gpu_processes: Option<wattio_energy::GpuProcessReader>,
    namer: crate::workloads::Namer,
    interval_ns: u64,
    top: usize,
    acc_j: f64,
    start_ns: Option<u64>,
    warned: bool,
    warnings: Sink<str>,
}

/// One row of `record --by`.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRow {
    /// `process`, `cgroup`, `other` (entries past `--top`), `idle`, or, on kernel I/O rows,
    /// `unowned`.
    pub entity: &'static str,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    /// By container or pod: its ids and names.
    pub workload: Option<crate::workloads::WorkloadCells>,
    pub cpu_s: f64,
    pub energy_j: f64,
    /// What the row is a share of.
    pub part: RowPart,
}

/// What an attribution row is a share of, with the label of its split where it is not the
/// machine's CPU energy.
#[derive(Debug, Clone, PartialEq)]
pub enum RowPart {
    /// The machine's energy (domain `total`), split by CPU time.
    Total,
    /// The GPUs' energy (domain `gpu`, all GPUs together), e.g. `measured (nvml), attributed
    /// (gpu utilisation share)`.
    Gpu(String),
    /// Of a `Total` row's energy, the part for the kernel's I/O work done for the entry (domain
    /// `kernel_io`: already in the `Total` rows, not to be added to them); `cpu_s` is that
    /// work's CPU time. The label is that work's rule (`kernel_io::LABEL`).
    KernelIo(String),
}

impl RecordAttribution {
    /// Attribution rows every `interval` over the counters `specs` (packages + DRAM count).
    pub fn new(
        root: SysRoot,
        by: By,
        policy: IdlePolicy,
        n_cpus: usize,
        specs: &[CounterSpec],
        interval: std::time::Duration,
        top: usize,
    ) -> io::Result<Self> {
        Ok(RecordAttribution {
            attributor: Attributor::new(root, by, policy, n_cpus)?,
            in_total: specs.iter().map(|s| s.domain.counts_in_total()).collect(),
            gpu_index: specs
                .iter()
                .map(|s| (s.domain == wattio_energy::Domain::Gpu).then_some(s.socket))
                .collect(),
            gpu_acc: Vec::new(),
            gpu_processes: None,
            namer: crate::workloads::Namer::open(by),
            interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
            top,
            acc_j: 0.0,
            start_ns: None,
            warned: false,
            warnings: Sink::none(),
        })
    }

    /// Tells the warning of a failed CPU-time read (once per recording) to `warnings`; without
    /// one the warning is dropped and recording goes on the same way.
    pub fn on_warning(mut self, warnings: Sink<str>) -> Self {
        self.warnings = warnings;
        self
    }

    pub fn by(&self) -> By {
        self.attributor.by()
    }

    /// Why containers or pods are not named by their owners, where they are not.
    pub fn naming_note(&self) -> Option<String> {
        self.namer.note.clone()
    }

    /// Adds GPU rows: each GPU's energy split between the processes using it
    /// ([`Attributor::attribute_gpus`]). `labels`: each GPU counter's provenance label by GPU
    /// index. `Err`: this attribution without GPU rows, and why NVML cannot say who used the
    /// GPUs.
    #[allow(clippy::result_large_err)]
    pub fn with_gpus(mut self, labels: &[(u32, String)]) -> Result<Self, (Self, String)> {
        if labels.is_empty() {
            return Ok(self);
        }
        let indices: Vec<u32> = labels.iter().map(|(i, _)| *i).collect();
        let reader = match wattio_energy::GpuProcessReader::open(
            &wattio_energy::nvml_lib_from_env(),
            &indices,
        ) {
            Ok(r) => r,
            Err(e) => {
                return Err((
                    self,
                    format!("GPU energy is not split between processes: {e}"),
                ))
            }
        };
        self.gpu_processes = Some(reader);
        self.gpu_acc = labels.iter().map(|(i, l)| (*i, 0.0, l.clone())).collect();
        Ok(self)
    }

    /// A failed read of CPU times is told once; recording goes on.
    fn warn(&mut self, e: &io::Error) {
        if !self.warned {
            self.warned = true;
            self.warnings.tell(&format!(
                "reading CPU times for --by failed ({e}); that energy is carried to the next interval"
            ));
        }
    }

    /// Takes a sample's joules at `mono_ns`; at the end of an interval returns its rows.
    pub fn sample(
        &mut self,
        mono_ns: u64,
        joules: &[f64],
        last: bool,
    ) -> io::Result<Option<Vec<EntityRow>>> {
        let start = *self.start_ns.get_or_insert(mono_ns);
        self.acc_j += joules
            .iter()
            .zip(&self.in_total)
            .filter(|(_, &t)| t)
            .map(|(j, _)| j)
            .sum::<f64>();
        for (j, index) in joules.iter().zip(&self.gpu_index) {
            if let Some(acc) = index.and_then(|i| self.gpu_acc.iter_mut().find(|g| g.0 == i)) {
                acc.1 += j;
            }
        }
        let elapsed = mono_ns.saturating_sub(start);
        if elapsed < self.interval_ns && !last {
            return Ok(None);
        }
        // The CPU times are read here, on the writer thread, possibly later than the samples
        // were taken: the interval's capacity is the time between two reads of them.
        let mut i = match self.attributor.step_timed(self.acc_j) {
            Ok(i) => i,
            // Nothing advanced: the next interval carries this one's energy and CPU time.
            Err(e) if !last => {
                self.warn(&e);
                return Ok(None);
            }
            // The run ends and the last interval cannot be split: all of it is unattributed.
            Err(e) => {
                self.warn(&e);
                let mut rows = vec![EntityRow::idle(self.acc_j, RowPart::Total)];
                self.acc_j = 0.0;
                if self.gpu_processes.is_some() {
                    let gpu_j: f64 = self
                        .gpu_acc
                        .iter_mut()
                        .map(|g| std::mem::take(&mut g.1))
                        .sum();
                    let label = self.gpu_acc.first().map(|g| g.2.clone());
                    rows.push(EntityRow::idle(
                        gpu_j,
                        RowPart::Gpu(label.unwrap_or_default()),
                    ));
                }
                return Ok(Some(rows));
            }
        };
        self.acc_j = 0.0;
        self.start_ns = Some(mono_ns);
        if let Some(reader) = &mut self.gpu_processes {
            let uses = reader.read();
            let gpus: Vec<_> = uses
                .into_iter()
                .map(|u| {
                    let (j, label) = self
                        .gpu_acc
                        .iter_mut()
                        .find(|g| g.0 == u.index)
                        .map_or((0.0, String::new()), |g| {
                            (std::mem::take(&mut g.1), g.2.clone())
                        });
                    (u, j, label)
                })
                .collect();
            self.attributor.attribute_gpus(&mut i, &gpus);
        }
        self.namer.name(&mut i.entries);
        let entity = self.attributor.by().as_str();
        // CPU rows: entries with CPU time (a process that only used a GPU has none), most CPU
        // energy first.
        let mut by_cpu: Vec<Entry> = i.entries.clone();
        by_cpu.sort_by(|a, b| b.energy_j.total_cmp(&a.energy_j));
        let cpu_of = |e: &Entry| (e.cpu_s > 0.0 || e.gpu_energy_j.is_none()).then_some(e.energy_j);
        let mut rows = entity_rows(entity, &by_cpu, self.top, cpu_of, RowPart::Total);
        rows.push(EntityRow::idle(i.idle_j, RowPart::Total));
        if let Some(k) = &i.kernel_io {
            rows.extend(kernel_io_rows(entity, &by_cpu, self.top, k));
        }
        if !i.gpus.is_empty() {
            // One label for the GPU rows: all GPUs' when they agree, else each GPU's joined.
            let mut labels: Vec<&str> = i.gpus.iter().map(|g| g.label.as_str()).collect();
            labels.dedup();
            let label = labels.join("; ");
            let mut by_gpu: Vec<Entry> = i.entries.clone();
            by_gpu.sort_by(|a, b| {
                b.gpu_energy_j
                    .unwrap_or(0.0)
                    .total_cmp(&a.gpu_energy_j.unwrap_or(0.0))
            });
            rows.extend(entity_rows(
                entity,
                &by_gpu,
                self.top,
                |e| e.gpu_energy_j,
                RowPart::Gpu(label.clone()),
            ));
            rows.push(EntityRow::idle(
                i.gpus.iter().map(|g| g.idle_j).sum(),
                RowPart::Gpu(label),
            ));
        }
        Ok(Some(rows))
    }
}

impl EntityRow {
    /// The rest of an interval that no entry explains (of `part`).
    fn idle(energy_j: f64, part: RowPart) -> Self {
        EntityRow {
            entity: "idle",
            pid: None,
            comm: None,
            cgroup: None,
            workload: None,
            cpu_s: 0.0,
            energy_j,
            part,
        }
    }
}

/// The kernel I/O rows of an interval: for the `top` entries charged the most of it, the part
/// of their energy that was the kernel's I/O work done for them and that work's CPU time; one
/// `other` row for the rest; and, where some of the work had no owner, an `unowned` row with
/// its CPU time (its energy stays in the rows of the tasks that ran it).
fn kernel_io_rows(
    entity: &'static str,
    entries: &[Entry],
    top: usize,
    k: &wattio_energy::attribution::KernelIoSummary,
) -> Vec<EntityRow> {
    let part = RowPart::KernelIo(k.label.to_string());
    let mut charged: Vec<Entry> = entries
        .iter()
        .filter(|e| e.kernel_io_cpu_s > 0.0)
        .map(|e| Entry {
            cpu_s: e.kernel_io_cpu_s,
            ..e.clone()
        })
        .collect();
    charged.sort_by(|a, b| b.kernel_io_j.total_cmp(&a.kernel_io_j));
    let mut rows = entity_rows(entity, &charged, top, |e| Some(e.kernel_io_j), part.clone());
    let unowned: f64 = k.unowned_cpu_s.values().sum();
    if unowned > 0.0 {
        rows.push(EntityRow {
            entity: "unowned",
            cpu_s: unowned,
            energy_j: 0.0,
            ..EntityRow::idle(0.0, part)
        });
    }
    rows
}

/// Rows of the first `top` entries that have a figure (`energy_of`), and one `other` row for
/// the rest when there are more.
fn entity_rows(
    entity: &'static str,
    entries: &[Entry],
    top: usize,
    energy_of: impl Fn(&Entry) -> Option<f64>,
    part: RowPart,
) -> Vec<EntityRow> {
    let with: Vec<(&Entry, f64)> = entries
        .iter()
        .filter_map(|e| energy_of(e).map(|j| (e, j)))
        .collect();
    let mut rows: Vec<EntityRow> = with
        .iter()
        .take(top)
        .map(|(e, j)| EntityRow {
            entity,
            pid: e.pid,
            comm: e.comm.clone(),
            cgroup: e.cgroup.clone(),
            workload: crate::workloads::WorkloadCells::of(e),
            cpu_s: e.cpu_s,
            energy_j: *j,
            part: part.clone(),
        })
        .collect();
    if with.len() > top {
        let rest = &with[top..];
        rows.push(EntityRow {
            entity: "other",
            pid: None,
            comm: None,
            cgroup: None,
            workload: None,
            cpu_s: rest.iter().map(|(e, _)| e.cpu_s).sum(),
            energy_j: rest.iter().map(|(_, j)| j).sum(),
            part,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::render_top;
    use wattio_energy::attribution::ProcKey;

    fn entry(pid: u32, j: f64) -> Entry {
        Entry {
            pid: Some(pid),
            comm: Some(format!("p{pid}")),
            cpu_s: j,
            energy_j: j,
            power_w: j,
            total_energy_j: j,
            ..Entry::new(Key::Process(ProcKey {
                pid,
                start_ticks: 1,
            }))
        }
    }

    #[test]
    fn guard_keeps_series_monotone_and_adding_up() {
        let mut g = SeriesGuard::new(2);
        let all_alive = |_: &Key| true;
        let mut attributed = 0.0;
        let mut add = |es: &[Entry]| -> Vec<Entry> {
            attributed += es.iter().map(|e| e.energy_j).sum::<f64>();
            es.to_vec()
        };
        // New series start at 0: their first interval goes to `other`.
        let up = g.update(
            &add(&[entry(1, 5.0), entry(2, 3.0), entry(3, 1.0)]),
            all_alive,
        );
        assert_eq!(up.series.len(), 2);
        assert!(up.series.iter().all(|s| s.total_j == 0.0));
        assert_eq!(up.other_j, 9.0);
        // pid 3 now uses the most but has no place: its energy stays in `other`.
        let up = g.update(&add(&[entry(3, 9.0), entry(1, 1.0)]), all_alive);
        assert_eq!(up.other_j, 9.0);
        assert_eq!(
            up.series.iter().find(|x| x.pid == Some(1)).unwrap().total_j,
            1.0
        );
        // pid 2 ends: its series is dropped, and its place goes to pid 3 (from 0).
        let alive = |k: &Key| !matches!(k, Key::Process(p) if p.pid == 2);
        let up = g.update(&add(&[entry(3, 2.0)]), alive);
        assert_eq!(up.dropped.len(), 1);
        assert_eq!(up.series[0].pid, Some(3));
        assert_eq!(up.series[0].total_j, 0.0);
        let up = g.update(&add(&[entry(3, 4.0)]), alive);
        assert_eq!(up.series[0].total_j, 4.0);
        // Series + other + dropped = everything attributed.
        let series = 1.0 + 4.0; // pid 1, pid 3
        assert_eq!(series + g.other_total_j() + g.dropped_total_j(), attributed);
    }

    #[test]
    fn a_quiet_series_gives_its_place_to_a_waiting_entity() {
        let mut g = SeriesGuard::new(1);
        g.evict_after = 2;
        let all_alive = |_: &Key| true;
        g.update(&[entry(1, 5.0)], all_alive);
        // One quiet interval: pid 1 keeps its place; the second: it gives it to pid 2.
        let up = g.update(&[entry(2, 1.0)], all_alive);
        assert!(up.dropped.is_empty());
        let up = g.update(&[entry(2, 1.0)], all_alive);
        assert_eq!(up.dropped.len(), 1);
        assert_eq!(up.series[0].pid, Some(2));
    }

    #[test]
    fn top_screen_names_the_label_and_idle() {
        let i = AttributedInterval {
            timestamp: 0.0,
            by: By::Process,
            mechanism: "model".into(),
            estimated: true,
            model: Some("m".into()),
            label: "estimated (model: m), attributed (cpu-time share)".into(),
            idle_policy: IdlePolicy::Apart,
            interval: wattio_energy::attribution::Interval {
                interval_s: 2.0,
                total_j: 10.0,
                idle_j: 4.0,
                busy_cpu_s: 1.0,
                unseen_cpu_s: 0.0,
                over_cpu_s: 0.0,
                entries: vec![entry(7, 4.0), entry(8, 2.0)],
                gpus: vec![],
                cpu_times: None,
                kernel_io: None,
            },
            co2e: None,
            beside: vec![crate::DomainEnergy {
                socket: 1,
                domain: Domain::Platform,
                energy_j: 50.0,
                label: Some("measured (ipmi dcmi, 1 s average)".into()),
            }],
            machine: None,
            disks: Vec::new(),
            nics: Vec::new(),
        };
        let s = render_top(&i, 10.0, 4.0, 1);
        assert!(
            s.contains("platform 1    25.00 W   measured (ipmi dcmi, 1 s average) (beside the total, not in it)"),
            "{s}"
        );
        assert!(s.contains("attributed (cpu-time share)"), "{s}");
        assert!(s.contains("ESTIMATED"), "{s}");
        assert!(s.contains("40.0 %"), "{s}");
        assert!(s.contains("p7") && !s.contains("p8"), "{s}");
        assert!(s.contains("1 more entries"), "{s}");
    }
}

#[cfg(test)]
mod kernel_io_row_tests {
    use super::*;
    use wattio_energy::attribution::{KernelIoSummary, ProcKey};

    fn charged(pid: u32, kio_cpu_s: f64, kio_j: f64) -> Entry {
        Entry {
            pid: Some(pid),
            cpu_s: 1.0,
            energy_j: 10.0,
            kernel_io_cpu_s: kio_cpu_s,
            kernel_io_j: kio_j,
            ..Entry::new(Key::Process(ProcKey {
                pid,
                start_ticks: 1,
            }))
        }
    }

    #[test]
    fn kernel_io_rows_name_the_charged_the_rest_and_the_unowned() {
        let entries = vec![
            charged(1, 0.0, 0.0),
            charged(2, 0.1, 1.0),
            charged(3, 0.3, 3.0),
            charged(4, 0.05, 0.5),
        ];
        let mut k = KernelIoSummary {
            label: "rule",
            ..KernelIoSummary::default()
        };
        k.unowned_cpu_s.insert("writeback", 0.02);
        let rows = kernel_io_rows("process", &entries, 1, &k);
        let seen: Vec<(&str, Option<u32>, f64, f64)> = rows
            .iter()
            .map(|r| (r.entity, r.pid, r.cpu_s, r.energy_j))
            .collect();
        // pid 3 first (most kernel I/O energy); 2 and 4 together; pid 1 was charged nothing.
        assert_eq!(
            seen,
            vec![
                ("process", Some(3), 0.3, 3.0),
                ("other", None, 0.1 + 0.05, 1.5),
                ("unowned", None, 0.02, 0.0),
            ]
        );
        assert!(rows
            .iter()
            .all(|r| r.part == RowPart::KernelIo("rule".into())));
    }
}
