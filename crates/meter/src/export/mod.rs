//! Metrics for Prometheus and any OpenMetrics scraper: `wattio_energy_joules_total{socket,domain,mechanism,estimated,model}`
//! (GPUs read through NVML are `domain="gpu"`, `socket` the GPU's index, `mechanism="nvml"`, each
//! series with its own counter's labels),
//! and with attribution on, `wattio_process_energy_joules_total{comm,pid,…}` or
//! `wattio_cgroup_energy_joules_total{cgroup,…}` for at most N entities ([`SeriesGuard`]: the rest
//! in one `other` series), plus `wattio_unattributed_energy_joules_total` (idle/unattributed);
//! the disks' and NICs' estimated energy intervals, one series per bound ([`devices`]).
//!
//! The counters are read and attributed on the exporter's own clock ([`Exporter::sample`], every
//! `--interval`), never by a scrape: every scraper sees the same intervals however many scrape
//! and how often, and a scrape costs only the rendering. The answer is the Prometheus text
//! format 0.0.4, or OpenMetrics 1.0 when the request's `Accept` asks for it
//! ([`crate::exposition`]); beside the energy, the agent's own cost (`process_*`, the sampling
//! clock's lateness: [`agent`]). The server ([`serve`]) is a small blocking HTTP/1.1 responder
//! on std sockets, over TLS and behind basic authentication where a Prometheus `web-config`
//! file asks ([`web_config`]).

mod agent;
mod ahead;
mod devices;
mod serve;
pub mod web_config;

pub use serve::{serve_metrics, ServeOptions};

use crate::attribute::{LiveAttribution, SeriesGuard};
use crate::exposition::{render, ExpositionFormat, Labels, MetricFamily, MetricKind};
use crate::meter::Meter;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattio_energy::attribution::By;
use wattio_energy::attribution::{Entry, Key};

/// Labels of the energy counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct EnergyLabels {
    pub socket: String,
    pub domain: String,
    pub mechanism: String,
    pub estimated: String,
    /// The model and coefficients for estimates; `power, integrated` for GPUs read from
    /// integrated power; empty for other measurements.
    pub model: String,
}

impl EnergyLabels {
    fn pairs(&self) -> Labels<'_> {
        vec![
            ("socket", Cow::from(&self.socket)),
            ("domain", Cow::from(&self.domain)),
            ("mechanism", Cow::from(&self.mechanism)),
            ("estimated", Cow::from(&self.estimated)),
            ("model", Cow::from(&self.model)),
        ]
    }
}

/// Labels of the per-process and per-cgroup series. `comm="other"` / `cgroup="other"` holds the
/// entities past the cardinality limit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EntityLabels {
    pub comm: String,
    pub pid: String,
    pub cgroup: String,
    /// By VM: the VM's name (`vm="other"` past the limit); empty otherwise and then left out.
    pub vm: String,
    /// By container or pod: its ids and names under Kepler's label names, in place of `comm`
    /// and `pid` ([`workload_labels`]).
    pub workload: Vec<(&'static str, String)>,
    pub mechanism: String,
    pub estimated: String,
    /// `attributed (cpu-time share)` with the total's provenance.
    pub attribution: String,
}

/// The labels of a container's or pod's series (`entry` `None`: the `other` series), in
/// Kepler's names where a Kepler dashboard looks for them (`container_id`, `container_name`,
/// `container_namespace`, `pod_name`); empty by process, cgroup or VM.
fn workload_labels(by: By, entry: Option<&Entry>) -> Vec<(&'static str, String)> {
    let names = entry.and_then(|e| e.names.clone()).unwrap_or_default();
    let text = |v: Option<String>| v.unwrap_or_default();
    let name = entry.map_or("other".to_string(), crate::workloads::display_name);
    match by {
        By::Container => vec![
            (
                "container_id",
                text(entry.map_or(Some("other".into()), |e| e.container_id.clone())),
            ),
            ("container_name", name),
            ("image", text(names.image)),
            ("pod_name", text(names.pod_name)),
            ("container_namespace", text(names.container_namespace)),
        ],
        By::Pod => vec![
            (
                "pod_uid",
                text(entry.map_or(Some("other".into()), |e| e.pod_uid.clone())),
            ),
            (
                "pod_name",
                match entry {
                    Some(e) if e.pod_uid.is_some() => text(names.pod_name),
                    _ => name,
                },
            ),
            ("container_namespace", text(names.container_namespace)),
        ],
        _ => Vec::new(),
    }
}

impl EntityLabels {
    fn pairs(&self) -> Labels<'_> {
        let mut pairs = match self.workload.is_empty() {
            true => vec![
                ("comm", Cow::from(&self.comm)),
                ("pid", Cow::from(&self.pid)),
                ("cgroup", Cow::from(&self.cgroup)),
            ],
            false => {
                let mut p: Labels<'_> = self
                    .workload
                    .iter()
                    .map(|(k, v)| (*k, Cow::from(v)))
                    .collect();
                p.push(("cgroup", Cow::from(&self.cgroup)));
                p
            }
        };
        if !self.vm.is_empty() {
            pairs.push(("vm", Cow::from(&self.vm)));
        }
        pairs.extend([
            ("mechanism", Cow::from(&self.mechanism)),
            ("estimated", Cow::from(&self.estimated)),
            ("attribution", Cow::from(&self.attribution)),
        ]);
        pairs
    }
}

struct AttributionState {
    live: LiveAttribution,
    by: By,
    /// CPU energy per entity.
    cpu: EntitySeriesSet,
    /// GPU energy per entity, created at the first interval with GPUs in it.
    gpu: Option<EntitySeriesSet>,
    /// Of the CPU energy, the part for the kernel's I/O work done for each entity, created at
    /// the first interval the kernel I/O program reported.
    kernel_io: Option<EntitySeriesSet>,
    /// CPU-seconds of kernel I/O work no owner was found for.
    kernel_io_unowned_cpu_s: f64,
    unattributed_j: f64,
    gpu_unattributed_j: f64,
}

/// Bounded per-entity counter series of one kind of energy ([`SeriesGuard`]).
struct EntitySeriesSet {
    by: By,
    guard: SeriesGuard,
    series: HashMap<Key, EntityLabels>,
    other: EntityLabels,
    /// Joules per entity series since it started (sorted, so scrapes list them in one order).
    entities_j: BTreeMap<EntityLabels, f64>,
    dropped_j: f64,
}

impl EntitySeriesSet {
    fn new(by: By, other: EntityLabels, max_series: usize) -> Self {
        EntitySeriesSet {
            by,
            guard: SeriesGuard::new(max_series),
            series: HashMap::new(),
            entities_j: BTreeMap::from([(other.clone(), 0.0)]),
            other,
            dropped_j: 0.0,
        }
    }

    /// Adds an interval's `entries` (their `energy_j`); `alive` says whether an entity without
    /// energy this interval still exists.
    fn add(&mut self, entries: &[Entry], alive: impl Fn(&Key) -> bool) {
        let up = self.guard.update(entries, alive);
        // Drop first: a new process may take the labels of one that just ended (same pid and
        // command after pid reuse); its series must start afresh, not inherit the old one.
        for k in &up.dropped {
            if let Some(labels) = self.series.remove(k) {
                self.entities_j.remove(&labels);
            }
        }
        self.dropped_j += up.dropped_j;
        let base = self.other.clone();
        for s in &up.series {
            let fresh = || EntityLabels {
                comm: s.comm.clone().unwrap_or_default(),
                pid: s.pid.map(|p| p.to_string()).unwrap_or_default(),
                cgroup: s.cgroup.clone().unwrap_or_default(),
                vm: s.vm.clone().unwrap_or_default(),
                workload: workload_labels(self.by, entries.iter().find(|e| e.key == s.key)),
                ..base.clone()
            };
            let labels = self.series.entry(s.key.clone()).or_insert_with(fresh);
            // A container's or pod's names may come after its first interval (the pod watch
            // answers later): its series then carries them from here on, its joules with it.
            if !labels.workload.is_empty() {
                let now = fresh();
                if now != *labels && entries.iter().any(|e| e.key == s.key) {
                    let j = self.entities_j.remove(labels).unwrap_or(0.0);
                    self.entities_j.insert(now.clone(), j);
                    *labels = now;
                }
            }
            *self.entities_j.entry(labels.clone()).or_insert(0.0) += s.delta_j;
        }
        *self.entities_j.entry(self.other.clone()).or_insert(0.0) += up.other_j;
    }

    fn samples(&self) -> Vec<(Labels<'_>, f64)> {
        self.entities_j
            .iter()
            .map(|(l, &j)| (l.pairs(), j))
            .collect()
    }
}

/// What the counters have added up to, changed by one sample at a time.
struct Totals {
    /// The meter's totals at the previous sample.
    last_j: Vec<f64>,
    /// Joules per energy series since the exporter started.
    energy_j: Vec<f64>,
    read_errors: u64,
    attribution: Option<AttributionState>,
}

/// How the sampling clock has kept time: what `/healthz` and the agent's metrics report. Kept
/// apart from the totals, whose lock a sample holds: a sample that hangs (a driver that does
/// not answer) must not hang the health check that reports it.
#[derive(Default, Clone, Copy)]
struct SampleClock {
    samples: u64,
    /// The sum of how late each sample began after its tick.
    lateness_s: f64,
    /// When the last sample ended, and whether its counter read succeeded.
    last: Option<(Instant, bool)>,
}

/// The metrics fed by a [`Meter`].
pub struct Exporter {
    meter: Meter,
    labels: Vec<EnergyLabels>,
    /// One scrape at a time: snapshots are applied in the order they were taken.
    totals: Mutex<Totals>,
    /// With `--carbon-intensity` or `--region`: the CO₂e series beside the energy ones.
    co2e: Option<wattio_energy::Co2e>,
    /// The per-entity series limit of `--by` (each of CPU and GPU).
    max_series: usize,
    /// When the exporter was made: the agent's start, for `process_start_time_seconds`.
    started: Instant,
    clock: Mutex<SampleClock>,
    /// With [`Exporter::with_devices`]: the disks' and NICs' counters, stepped on the clock.
    devices: Option<Mutex<devices::DeviceCounters>>,
    /// The next scrape's body, when the clock rendered it ahead.
    ahead: ahead::RenderedAhead,
}

const ENERGY_HELP: &str = "Energy consumed since the exporter started, per socket and domain; estimated=\"true\" marks model estimates (see the model label)";
const PLATFORM_HELP: &str = "Energy of the whole machine since the exporter started, as a platform meter read it (the ACPI power meter, a BMC, RAPL psys; one series per meter, see the mechanism and model labels): it contains every wattio_energy_joules_total domain, never add it to them; its rate less package, DRAM and GPUs over windows of at least five of its averaging periods is what they do not see";

/// Whether a series of `domain` belongs to the whole-machine family.
fn is_platform(domain: &str) -> bool {
    domain == wattio_energy::Domain::Platform.as_str()
        || domain == wattio_energy::Domain::Psys.as_str()
}

impl Exporter {
    /// The metrics of `meter`'s counters.
    pub fn new(meter: Meter) -> Self {
        let labels: Vec<EnergyLabels> = meter
            .counters()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let p = meter.counter_provenance(i);
                EnergyLabels {
                    socket: c.socket.to_string(),
                    domain: c.domain.to_string(),
                    mechanism: p.mechanism.to_string(),
                    estimated: p.estimated.to_string(),
                    model: p.model.clone().unwrap_or_default(),
                }
            })
            .collect();
        let n = labels.len();
        Exporter {
            meter,
            labels,
            totals: Mutex::new(Totals {
                last_j: vec![0.0; n],
                energy_j: vec![0.0; n],
                read_errors: 0,
                attribution: None,
            }),
            clock: Mutex::new(SampleClock::default()),
            ahead: ahead::RenderedAhead::default(),
            co2e: None,
            max_series: 0,
            started: Instant::now(),
            devices: None,
        }
    }

    /// Adds a `…_co2e_grams_total` family beside each energy family: the CO₂e of each of its
    /// series, by `co2e`.
    pub fn with_co2e(mut self, co2e: wattio_energy::Co2e) -> Self {
        self.co2e = Some(co2e);
        self
    }

    /// Adds per-process or per-cgroup series (`wattio export --by`), at most `max_series` of
    /// them plus `other`. `live` must follow this exporter's meter.
    pub fn with_attribution(mut self, live: LiveAttribution, by: By, max_series: usize) -> Self {
        let p = self.meter.provenance().clone();
        let other = EntityLabels {
            comm: if by == By::Process {
                "other".into()
            } else {
                String::new()
            },
            pid: String::new(),
            cgroup: if by == By::Cgroup {
                "other".into()
            } else {
                String::new()
            },
            vm: if by == By::Vm {
                "other".into()
            } else {
                String::new()
            },
            workload: workload_labels(by, None),
            mechanism: p.mechanism.to_string(),
            estimated: p.estimated.to_string(),
            attribution: wattio_energy::attribution::attributed_label(&p.label()),
        };
        {
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            // Count the energy counters from the same instant as the attribution.
            t.last_j = live.last_totals_j().to_vec();
            t.attribution = Some(AttributionState {
                live,
                by,
                cpu: EntitySeriesSet::new(by, other, max_series),
                gpu: None,
                kernel_io: None,
                kernel_io_unowned_cpu_s: 0.0,
                unattributed_j: 0.0,
                gpu_unattributed_j: 0.0,
            });
        }
        self.max_series = max_series;
        self
    }

    /// Adds the disks' and NICs' estimated energy (`wattio_disk_energy_joules_total`,
    /// `wattio_disk_busy_seconds_total`, `wattio_disk_attributed_energy_joules_total`,
    /// `wattio_nic_energy_joules_total`), stepped on the sampling clock at most once a second;
    /// at most `max_series` split series.
    pub fn with_devices(mut self, intervals: crate::DeviceIntervals, max_series: usize) -> Self {
        self.devices = Some(Mutex::new(devices::DeviceCounters::new(
            intervals, max_series,
        )));
        self
    }

    /// Attributes the interval up to `snap`; `false` when the CPU times could not be read (the
    /// next sample attributes both intervals).
    fn attribute(&self, st: &mut AttributionState, snap: crate::meter::Snapshot) -> bool {
        let a = match st.live.step_to(&self.meter, snap) {
            Ok(a) => a,
            Err(_) => return false,
        };
        let interval = a.interval;
        st.unattributed_j += interval.idle_j;
        // An entity with no CPU time this interval may still be alive: keep its series unless
        // it is gone from /proc (process) or from the hierarchy (cgroup); the tracker knows.
        let live = &st.live;
        st.cpu.add(&interval.entries, |k| live.is_alive(k));
        if let Some(k) = &interval.kernel_io {
            st.kernel_io_unowned_cpu_s += k.unowned_cpu_s.values().sum::<f64>();
            let kio: Vec<Entry> = interval
                .entries
                .iter()
                .filter(|e| e.kernel_io_j > 0.0)
                .map(|e| Entry {
                    energy_j: e.kernel_io_j,
                    ..e.clone()
                })
                .collect();
            let (cpu, max, by) = (&st.cpu, self.max_series, st.by);
            st.kernel_io
                .get_or_insert_with(|| {
                    let total = self.meter.provenance().label();
                    EntitySeriesSet::new(
                        by,
                        EntityLabels {
                            attribution: format!("{total}, {}", k.label),
                            ..cpu.other.clone()
                        },
                        max,
                    )
                })
                .add(&kio, |k| live.is_alive(k));
        }
        if !interval.gpus.is_empty() {
            st.gpu_unattributed_j += interval.gpus.iter().map(|g| g.idle_j).sum::<f64>();
            // The GPU series: the entries' GPU joules in place of their CPU joules.
            let gpu_entries: Vec<Entry> = interval
                .entries
                .iter()
                .filter_map(|e| {
                    e.gpu_energy_j.map(|j| Entry {
                        energy_j: j,
                        ..e.clone()
                    })
                })
                .collect();
            // The series are made at the first interval in which a GPU's energy was split (its
            // label names how); until then all of it is unattributed.
            let mut labels: Vec<&str> = interval
                .gpus
                .iter()
                .filter(|g| g.basis.is_some())
                .map(|g| g.label.as_str())
                .collect();
            labels.dedup();
            if st.gpu.is_none() && !labels.is_empty() {
                st.gpu = Some(EntitySeriesSet::new(
                    st.by,
                    EntityLabels {
                        mechanism: "nvml".into(),
                        estimated: "false".into(),
                        attribution: labels.join("; "),
                        ..st.cpu.other.clone()
                    },
                    self.max_series,
                ));
            }
            if let Some(set) = &mut st.gpu {
                set.add(&gpu_entries, |k| live.is_alive(k));
            } else {
                st.gpu_unattributed_j += gpu_entries.iter().map(|e| e.energy_j).sum::<f64>();
            }
        }
        true
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, SampleClock> {
        self.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the counters and attributes the interval since the last sample; `late` is how long
    /// after its tick the sample began. Returns whether the counters could be read.
    pub fn sample(&self, late: Duration) -> bool {
        let mut guard = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let t = &mut *guard;
        let ok = match self.meter.snapshot() {
            Ok(snap) => {
                for (i, (last, total)) in t.last_j.iter_mut().zip(&mut t.energy_j).enumerate() {
                    *total += (snap.totals_j[i] - *last).max(0.0);
                    *last = snap.totals_j[i];
                }
                if let Some(st) = &mut t.attribution {
                    if !self.attribute(st, snap) {
                        t.read_errors += 1;
                    }
                }
                true
            }
            Err(_) => {
                t.read_errors += 1;
                false
            }
        };
        drop(guard);
        if let Some(d) = &self.devices {
            d.lock().unwrap_or_else(|p| p.into_inner()).tick();
        }
        let mut c = self.clock();
        c.samples += 1;
        c.lateness_s += late.as_secs_f64();
        c.last = Some((Instant::now(), ok));
        ok
    }

    /// A scrape's body: the metrics as of the last sample in `format` (see [`Exporter::render`]),
    /// rendered ahead by the clock when it expected this scrape (see
    /// [`Exporter::render_ahead`]).
    pub fn scrape(&self, format: ExpositionFormat, interval: Duration) -> Arc<String> {
        let sample = self.clock().samples;
        match self.ahead.scraped(Instant::now(), format, sample) {
            Some(body) => body,
            None => Arc::new(self.render(format, interval)),
        }
    }

    /// Run by the sampling clock just after a sample: renders the next scrape's body now when
    /// that scrape is expected before the next sample, so that it need not wait.
    pub fn render_ahead(&self, interval: Duration) {
        if let Some(format) = self.ahead.wanted(Instant::now(), interval) {
            // the clock is the only sampler: no sample can come between this count and the body
            let sample = self.clock().samples;
            self.ahead
                .store(sample, format, self.render(format, interval));
        }
    }

    /// Renders the metrics as of the last sample in `format`, with the agent's own (`interval`:
    /// the sampling clock's period).
    pub fn render(&self, format: ExpositionFormat, interval: Duration) -> String {
        let c = *self.clock();
        let t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let d = self
            .devices
            .as_ref()
            .map(|d| d.lock().unwrap_or_else(|p| p.into_inner()));
        let mut families = self.families(&t, d.as_deref());
        families.extend(agent::families(
            self.started,
            interval,
            c.samples,
            c.lateness_s,
        ));
        render(&families, format)
    }

    /// Why the exporter is not healthy, if it is not: no sample within three periods of the
    /// clock (`interval`) plus a second, or a last sample whose counters could not be read.
    pub fn unhealthy(&self, interval: Duration) -> Option<String> {
        let last = self.clock().last;
        let limit = interval * 3 + Duration::from_secs(1);
        match last {
            None if self.started.elapsed() > limit => Some(format!(
                "no sample in the {:.1} s since the exporter started",
                self.started.elapsed().as_secs_f64()
            )),
            None => None,
            Some((at, _)) if at.elapsed() > limit => Some(format!(
                "the last sample was {:.1} s ago, the clock's period is {:.1} s: the sampler is stuck",
                at.elapsed().as_secs_f64(),
                interval.as_secs_f64()
            )),
            Some((_, false)) => Some("the last sample could not read the counters".into()),
            Some(_) => None,
        }
    }

    fn families<'a>(
        &'a self,
        t: &'a Totals,
        devices: Option<&'a devices::DeviceCounters>,
    ) -> Vec<MetricFamily<'a>> {
        let mut families = vec![
            MetricFamily {
                kind: MetricKind::Counter,
                name: "wattio_energy_joules".into(),
                help: ENERGY_HELP.into(),
                unit: Some("joules"),
                samples: self
                    .labels
                    .iter()
                    .zip(&t.energy_j)
                    .filter(|(l, _)| !is_platform(&l.domain))
                    .map(|(l, &j)| (l.pairs(), j))
                    .collect(),
            },
            MetricFamily {
                kind: MetricKind::Counter,
                name: "wattio_read_errors".into(),
                help: "Counter or CPU-time reads that failed during a sample".into(),
                unit: None,
                samples: vec![(vec![], t.read_errors as f64)],
            },
        ];
        // Only where a platform meter is read: no empty family on other machines.
        let platform: Vec<_> = self
            .labels
            .iter()
            .zip(&t.energy_j)
            .filter(|(l, _)| is_platform(&l.domain))
            .map(|(l, &j)| (l.pairs(), j))
            .collect();
        if !platform.is_empty() {
            families.insert(
                1,
                MetricFamily {
                    kind: MetricKind::Counter,
                    name: "wattio_platform_energy_joules".into(),
                    help: PLATFORM_HELP.into(),
                    unit: Some("joules"),
                    samples: platform,
                },
            );
        }
        if let Some(st) = &t.attribution {
            families.extend(attribution_families(st));
        }
        if let Some(d) = devices {
            families.extend(d.families());
        }
        if let Some(co2e) = &self.co2e {
            let twins: Vec<MetricFamily> = families
                .iter()
                .filter(|f| f.unit == Some("joules"))
                .map(|f| co2e_twin(f, co2e))
                .collect();
            families.extend(twins);
        }
        families
    }
}

/// The families of the attribution: the entries' energy (and their kernel I/O and GPU parts),
/// what was dropped and what no entry explains.
fn attribution_families(st: &AttributionState) -> Vec<MetricFamily<'_>> {
    let mut families = Vec::new();
    let (name, help) = match st.by {
            By::Process => ("wattio_process_energy_joules", "Energy attributed to a process by its CPU-time share since its series started (comm=\"other\": processes past the series limit); see the attribution and estimated labels"),
            By::Cgroup => ("wattio_cgroup_energy_joules", "Energy attributed to a cgroup (its own CPU time, children apart) since its series started (cgroup=\"other\": cgroups past the series limit); see the attribution and estimated labels"),
            By::Container => ("wattio_container_energy_joules", "Energy attributed to a container (the CPU time of its cgroups; container_name=\"(host)\": the cgroups in no container, container_id=\"other\": containers past the series limit), named by its runtime or the Kubernetes API (Kepler's label names), since its series started; see the attribution and estimated labels"),
            By::Pod => ("wattio_pod_energy_joules", "Energy attributed to a Kubernetes pod (the CPU time of its containers' cgroups, kept for a pod that ended in the interval; pod_name=\"(host)\": the cgroups in no pod, pod_uid=\"other\": pods past the series limit), named by the Kubernetes API, since its series started; see the attribution and estimated labels"),
            By::Vm => ("wattio_vm_energy_joules", "Energy attributed to a virtual machine (the CPU time of its QEMU process, vCPU and I/O threads, vhost workers; vm=\"(host)\": the host's own processes, vm=\"other\": VMs past the series limit) since its series started; see the attribution and estimated labels"),
        };
    families.push(MetricFamily {
        kind: MetricKind::Counter,
        name: name.into(),
        help: help.into(),
        unit: Some("joules"),
        samples: st.cpu.samples(),
    });
    if let Some(k) = &st.kernel_io {
        let (name, help) = match st.by {
                By::Process => ("wattio_process_kernel_io_energy_joules", "Of a process's energy, the part for the kernel's I/O work done for it (kworker writeback of the pages it dirtied, completions of its block requests, network softirqs of its sockets), by that work's CPU time, since its series started; already in its energy family, not to be added to it"),
                By::Cgroup => ("wattio_cgroup_kernel_io_energy_joules", "Of a cgroup's energy, the part for the kernel's I/O work done for its processes (writeback, block completions, network softirqs), by that work's CPU time, since its series started; already in its energy family, not to be added to it"),
                By::Container => ("wattio_container_kernel_io_energy_joules", "Of a container's energy, the part for the kernel's I/O work done for its processes (writeback, block completions, network softirqs), by that work's CPU time, since its series started; already in its energy family, not to be added to it"),
                By::Pod => ("wattio_pod_kernel_io_energy_joules", "Of a pod's energy, the part for the kernel's I/O work done for its processes (writeback, block completions, network softirqs), by that work's CPU time, since its series started; already in its energy family, not to be added to it"),
                By::Vm => ("wattio_vm_kernel_io_energy_joules", "Of a VM's energy, the part for the host kernel's I/O work done for its processes (writeback, block completions, network softirqs), by that work's CPU time, since its series started; already in its energy family, not to be added to it"),
            };
        families.push(MetricFamily {
            kind: MetricKind::Counter,
            name: name.into(),
            help: help.into(),
            unit: Some("joules"),
            samples: k.samples(),
        });
        families.push(MetricFamily {
                kind: MetricKind::Counter,
                name: "wattio_kernel_io_unowned_cpu_seconds".into(),
                help: "CPU time of the kernel's I/O work (I/O interrupts, softirqs, writeback) for which no owning process was found, since start".into(),
                unit: Some("seconds"),
                samples: vec![(vec![], st.kernel_io_unowned_cpu_s)],
            });
    }
    families.push(MetricFamily {
            kind: MetricKind::Counter,
            name: "wattio_dropped_series_energy_joules".into(),
            help: "Energy of per-process or per-cgroup series dropped since start (their entity ended, or gave its place to another): series + other + dropped + unattributed add up to the package and DRAM energy".into(),
            unit: Some("joules"),
            samples: vec![(vec![], st.cpu.dropped_j)],
        });
    families.push(MetricFamily {
        kind: MetricKind::Counter,
        name: "wattio_unattributed_energy_joules".into(),
        help: "Energy no process's or cgroup's CPU time explains (idle CPUs, unseen tasks)".into(),
        unit: Some("joules"),
        samples: vec![(vec![], st.unattributed_j)],
    });
    if let Some(g) = &st.gpu {
        let (name, help) = match st.by {
                By::Process => ("wattio_process_gpu_energy_joules", "GPU energy (all GPUs, measured through NVML) attributed to a process by its GPU utilisation share, or its memory share where the GPU reports no utilisation (see the attribution label), since its series started"),
                By::Vm => ("wattio_vm_gpu_energy_joules", "GPU energy (all GPUs, measured through NVML) attributed to the VM of the processes using them (a GPU passed through to a guest is not seen by the host's NVML) by their GPU utilisation share, or memory share (see the attribution label), since its series started"),
                By::Container => ("wattio_container_gpu_energy_joules", "GPU energy (all GPUs, measured through NVML) attributed to the container of the processes using them by their GPU utilisation share, or memory share (see the attribution label), since its series started"),
                By::Pod => ("wattio_pod_gpu_energy_joules", "GPU energy (all GPUs, measured through NVML) attributed to the pod of the processes using them by their GPU utilisation share, or memory share (see the attribution label), since its series started"),
                By::Cgroup => ("wattio_cgroup_gpu_energy_joules", "GPU energy (all GPUs, measured through NVML) attributed to the cgroup of the processes using them by their GPU utilisation share, or memory share (see the attribution label), since its series started"),
            };
        families.push(MetricFamily {
            kind: MetricKind::Counter,
            name: name.into(),
            help: help.into(),
            unit: Some("joules"),
            samples: g.samples(),
        });
        families.push(MetricFamily {
                kind: MetricKind::Counter,
                name: "wattio_gpu_unattributed_energy_joules".into(),
                help: "GPU energy no process's use explains (idle GPUs), plus the GPU series dropped since start".into(),
                unit: Some("joules"),
                samples: vec![(vec![], st.gpu_unattributed_j + g.dropped_j)],
            });
    }
    families
}

/// The CO₂e of an energy family by `co2e`: `…_joules` → `…_co2e_grams`, each sample's grams
/// with the intensity as a label.
fn co2e_twin<'a>(f: &MetricFamily<'a>, co2e: &wattio_energy::Co2e) -> MetricFamily<'a> {
    let label = co2e.label();
    let stem = f.name.strip_suffix("_joules").unwrap_or(&f.name);
    MetricFamily {
        kind: MetricKind::Counter,
        name: format!("{stem}_co2e_grams").into(),
        help: format!(
            "CO2e of {}_total at the carbon intensity its carbon_intensity label names (grams = joules / 3.6e6 x g/kWh); an estimate of the emissions wherever the energy is one",
            f.name
        )
        .into(),
        unit: Some("grams"),
        samples: f
            .samples
            .iter()
            .map(|(pairs, j)| {
                let mut pairs = pairs.clone();
                pairs.push(("carbon_intensity", Cow::Owned(label.clone())));
                (pairs, co2e.grams(*j))
            })
            .collect(),
    }
}
