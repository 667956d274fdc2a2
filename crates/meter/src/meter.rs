//! An open energy source shared between a background poller and snapshot takers.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wattio_energy::{
    max_safe_period, open_source, Accumulator, CounterDelta, CounterSpec, Domain, EnergyError,
    ModelParams, Provenance, Source, SourceChoice, SysRoot, UpdatePeriod,
};

/// What to open.
#[derive(Debug, Clone)]
pub struct MeterConfig {
    pub root: SysRoot,
    pub choice: SourceChoice,
    /// Only these domains (all when `None`).
    pub domains: Option<Vec<Domain>>,
    /// The model used where no counter is (the machine's default: [`wattio_energy::model_for_machine`]).
    pub model: ModelParams,
    /// Platform meters named by `--platform` (a BMC over Redfish), read beside the CPU.
    pub platforms: Vec<wattio_energy::PlatformUrl>,
}

impl Default for MeterConfig {
    fn default() -> Self {
        let root = SysRoot::from_env();
        let model = wattio_energy::model_for_machine(&root);
        MeterConfig {
            root,
            choice: SourceChoice::Auto,
            domains: None,
            model,
            platforms: Vec::new(),
        }
    }
}

impl MeterConfig {
    /// Opens the configured CPU source together with NVML's GPUs and the meters read beside
    /// them ([`wattio_energy::open_all`]: GPUs when `domains` asks for `gpu`, or, with
    /// no `domains`, whenever NVML is usable, the library from `WATTIO_NVML_LIB`; platform
    /// meters and devices likewise); also returns why mechanisms were passed over.
    pub fn open_with_gpus(&self) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
        wattio_energy::open_all(
            self.choice,
            self.domains.as_deref(),
            &self.platforms,
            &wattio_energy::nvml_lib_from_env(),
            &self.root,
            |cpu_domains| {
                let mut cpu = self.clone();
                cpu.domains = cpu_domains.map(<[Domain]>::to_vec);
                cpu.open_source()
            },
        )
    }

    /// Opens the configured CPU source alone; also returns why mechanisms were passed over (auto).
    pub fn open_source(&self) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
        open_source(
            &self.root,
            self.choice,
            self.domains.as_deref(),
            self.model.clone(),
        )
    }
}

/// Cumulative joules per counter at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    /// CLOCK_MONOTONIC nanoseconds when it was taken, the clock late meters date readings by.
    pub mono_ns: u64,
    /// Seconds since the Unix epoch when the snapshot was taken.
    pub unix_s: f64,
    pub totals_j: Vec<f64>,
    /// Counter errors seen since the previous snapshot (e.g. a decrease of a counter whose wrap
    /// limit is unknown: that interval got no energy).
    pub read_errors: Vec<String>,
}

/// Energy of one counter over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainEnergy {
    pub socket: u32,
    pub domain: Domain,
    pub energy_j: f64,
    /// How this figure was obtained, when not as the report's `mechanism` says: GPUs (socket =
    /// GPU index) read through NVML, `measured (nvml)` or `measured (nvml power, integrated)`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub label: Option<String>,
}

/// Energy over a window, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    pub duration_s: f64,
    /// Where `total_j` comes from; written as the `mechanism`, `estimated` and `model` fields.
    #[serde(flatten)]
    pub provenance: Provenance,
    pub domains: Vec<DomainEnergy>,
    /// Packages plus DRAM (core and uncore are inside package; psys is apart).
    pub total_j: f64,
    /// The platform domain, when present (it overlaps everything else).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub psys_j: Option<f64>,
    /// The GPUs read through NVML, all of them, when present: beside `total_j`, never in it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_j: Option<f64>,
    /// How `gpu_j` was obtained: `measured (nvml)`, `measured (nvml power, integrated)`, or both
    /// joined by `; ` when GPUs are read both ways.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_label: Option<String>,
    /// Counter errors during the window; the energy of the intervals they hit is missing.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub read_errors: Vec<String>,
}

impl EnergyReport {
    /// Builds a report from per-counter joules, every counter of `provenance`.
    pub fn from_counters(
        specs: &[CounterSpec],
        joules: &[f64],
        duration_s: f64,
        provenance: &Provenance,
    ) -> Self {
        let each = vec![provenance.clone(); specs.len()];
        Self::from_labelled_counters(specs, joules, duration_s, provenance, &each)
    }

    /// Builds a report from per-counter joules with each counter's own provenance
    /// (`counter_provenance[i]`, e.g. CPU counters from RAPL or the model and GPUs from NVML);
    /// `provenance` is the CPU total's.
    pub fn from_labelled_counters(
        specs: &[CounterSpec],
        joules: &[f64],
        duration_s: f64,
        provenance: &Provenance,
        counter_provenance: &[Provenance],
    ) -> Self {
        let mut domains: Vec<DomainEnergy> = Vec::new();
        let mut gpu_labels: Vec<String> = Vec::new();
        for (i, (s, &j)) in specs.iter().zip(joules).enumerate() {
            let own = counter_provenance.get(i).unwrap_or(provenance);
            let label = (own != provenance || s.domain == Domain::Gpu).then(|| own.label());
            if s.domain == Domain::Gpu && !gpu_labels.contains(&own.label()) {
                gpu_labels.push(own.label());
            }
            // Multi-die packages read as several counters of one socket: add them up.
            match domains
                .iter_mut()
                .find(|d| d.socket == s.socket && d.domain == s.domain)
            {
                Some(d) => d.energy_j += j,
                None => domains.push(DomainEnergy {
                    socket: s.socket,
                    domain: s.domain,
                    energy_j: j,
                    label,
                }),
            }
        }
        // CPU domains (and GPUs) by socket, then the meters beside them (platform, devices).
        domains.sort_by_key(|d| {
            let beside = matches!(d.domain, Domain::Platform | Domain::Device);
            (beside, d.socket, d.domain)
        });
        // `+ 0.0`: an empty sum is -0.0 (GPUs alone, no CPU domain), printed as "-0.000".
        let total_j = domains
            .iter()
            .filter(|d| d.domain.counts_in_total())
            .map(|d| d.energy_j)
            .sum::<f64>()
            + 0.0;
        let psys: Vec<f64> = domains
            .iter()
            .filter(|d| d.domain == Domain::Psys)
            .map(|d| d.energy_j)
            .collect();
        let gpu_j = domains.iter().any(|d| d.domain == Domain::Gpu).then(|| {
            domains
                .iter()
                .filter(|d| d.domain == Domain::Gpu)
                .map(|d| d.energy_j)
                .sum()
        });
        EnergyReport {
            duration_s,
            provenance: provenance.clone(),
            domains,
            total_j,
            psys_j: if psys.is_empty() {
                None
            } else {
                Some(psys.iter().sum())
            },
            gpu_j,
            gpu_label: (!gpu_labels.is_empty()).then(|| gpu_labels.join("; ")),
            read_errors: Vec::new(),
        }
    }

    /// Mean GPU power over the window (`gpu_j` / duration), when GPUs were read.
    pub fn gpu_mean_power_w(&self) -> Option<f64> {
        self.gpu_j.map(|j| {
            if self.duration_s > 0.0 {
                j / self.duration_s
            } else {
                0.0
            }
        })
    }

    /// Mean power over the window (total / duration), 0 for an empty window.
    pub fn mean_power_w(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.total_j / self.duration_s
        } else {
            0.0
        }
    }

    /// `measured (perf)` or `estimated (model: ...)`.
    pub fn provenance_label(&self) -> String {
        self.provenance.label()
    }
}

struct State {
    source: Box<dyn Source>,
    acc: Accumulator,
    raw: Vec<u64>,
    deltas: Vec<CounterDelta>,
    /// Errors seen by the background poller, reported on the next snapshot.
    errors: Vec<String>,
}

impl State {
    /// Reads the source. A failed read is an error; a counter the accumulator cannot correct is
    /// recorded in `errors` and the other counters still advance.
    fn poll(&mut self) -> Result<(), EnergyError> {
        self.source.read_raw(&mut self.raw)?;
        self.errors.extend(self.source.take_counter_errors());
        if let Err(e) = self.acc.update(&self.raw, &mut self.deltas) {
            self.errors.push(e.to_string());
        }
        Ok(())
    }
}

/// The meter's source read through its accumulator, as a [`Source`] (to watch its counters
/// without losing a wrap).
struct Polled<'a>(&'a mut State);

impl Source for Polled<'_> {
    fn provenance(&self) -> &Provenance {
        self.0.source.provenance()
    }
    fn counters(&self) -> &[CounterSpec] {
        self.0.source.counters()
    }
    fn counter_provenance(&self, i: usize) -> &Provenance {
        self.0.source.counter_provenance(i)
    }
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        if let Err(e) = self.0.poll() {
            self.0.errors.push(e.to_string());
            return Err(e);
        }
        out.copy_from_slice(&self.0.raw);
        Ok(())
    }
}

/// An open energy source with a background poller.
///
/// The poller reads every counter at least every `poll_period` (by default the shortest
/// [`max_safe_period`] of the counters, capped at one second), so a long window between two
/// snapshots never hides more than one wrap.
pub struct Meter {
    state: Arc<Mutex<State>>,
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    /// Each counter's provenance (GPUs read through NVML beside a CPU mechanism).
    provenances: Vec<Provenance>,
    passed_over: Vec<String>,
    model: Option<ModelParams>,
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
}

impl Meter {
    /// Opens the source described by `cfg` and starts the background poller.
    pub fn open(cfg: &MeterConfig) -> Result<Meter, EnergyError> {
        let (source, passed_over) = cfg.open_with_gpus()?;
        let mut meter = Meter::from_source(source, passed_over, None)?;
        if meter.provenance.mechanism == wattio_energy::Mechanism::Model {
            meter.model = Some(cfg.model.clone());
        }
        Ok(meter)
    }

    /// Wraps an already-open source (tests, benchmarks). `poll_period` defaults as above.
    pub fn from_source(
        source: Box<dyn Source>,
        passed_over: Vec<String>,
        poll_period: Option<Duration>,
    ) -> Result<Meter, EnergyError> {
        let specs = source.counters().to_vec();
        let provenance = source.provenance().clone();
        let n = specs.len();
        let provenances = (0..n)
            .map(|i| source.counter_provenance(i).clone())
            .collect();
        let mut state = State {
            acc: Accumulator::new(&specs),
            source,
            raw: vec![0; n],
            deltas: vec![
                CounterDelta {
                    joules: 0.0,
                    wrapped: false
                };
                n
            ],
            errors: vec![],
        };
        state.poll()?; // prime
        let period = poll_period.unwrap_or_else(|| default_poll_period(&specs));
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("wattio-meter-poll".into())
                .spawn(move || {
                    // Parked until the next poll (Drop unparks it to stop): one wake-up per
                    // period, not a sleep loop that wakes a long-running `export` or `top`
                    // dozens of times a second.
                    let mut next = Instant::now() + period;
                    while !stop.load(Ordering::Relaxed) {
                        let now = Instant::now();
                        if now < next {
                            std::thread::park_timeout(next - now);
                            continue;
                        }
                        next += period;
                        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(e) = s.poll() {
                            s.errors.push(e.to_string());
                        }
                        // Keep the list bounded if nobody takes snapshots.
                        if s.errors.len() > 100 {
                            s.errors.drain(..50);
                        }
                    }
                })
                .expect("spawning a thread only fails when the process is out of resources")
        };
        Ok(Meter {
            state,
            provenance,
            specs,
            provenances,
            passed_over,
            model: None,
            stop,
            poller: Some(poller),
        })
    }

    /// Where this meter's figures come from.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The counters it reads.
    pub fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// Where counter `i`'s figures come from (NVML for GPUs, the CPU mechanism otherwise).
    pub fn counter_provenance(&self, i: usize) -> &Provenance {
        self.provenances.get(i).unwrap_or(&self.provenance)
    }

    /// The model's coefficients when this meter estimates (mechanism `model`).
    pub fn model_params(&self) -> Option<ModelParams> {
        self.model.clone()
    }

    /// With `--source auto`: one line per mechanism passed over, saying why.
    pub fn passed_over(&self) -> &[String] {
        &self.passed_over
    }

    /// Reads every counter now and returns the cumulative joules since the meter opened, with
    /// the counter errors seen since the previous snapshot. Fails only when the source cannot be
    /// read at all.
    pub fn snapshot(&self) -> Result<Snapshot, EnergyError> {
        self.snapshot_taking_errors(true)
    }

    /// A snapshot inside a window another reader owns (a region of a measured command): the
    /// read errors since the last snapshot stay for that reader's, not handed to this one.
    pub fn snapshot_inside(&self) -> Result<Snapshot, EnergyError> {
        self.snapshot_taking_errors(false)
    }

    fn snapshot_taking_errors(&self, take: bool) -> Result<Snapshot, EnergyError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.poll()?;
        Ok(Snapshot {
            at: Instant::now(),
            mono_ns: wattio_energy::mono_ns(),
            unix_s: unix_now(),
            totals_j: s.acc.totals_j().to_vec(),
            read_errors: if take {
                std::mem::take(&mut s.errors)
            } else {
                Vec::new()
            },
        })
    }

    /// How often each counter changes, watched for up to `budget` (see
    /// [`wattio_energy::watch_update_periods`]); `None` for estimates and integrated power.
    /// The poller waits meanwhile; every reading still goes through the accumulator, so no wrap
    /// is missed.
    pub fn update_periods(&self, budget: Duration) -> Vec<Option<UpdatePeriod>> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = s.source.counters().len();
        let on = (0..n)
            .map(|i| wattio_energy::is_hardware_counter(s.source.as_ref(), i))
            .collect();
        let mut polled = Polled(&mut s);
        let mut sources: Vec<(&mut dyn Source, Vec<bool>)> = vec![(&mut polled, on)];
        wattio_energy::watch_update_periods(&mut sources, budget)
            .pop()
            .unwrap_or_default()
    }

    /// One warning per hardware counter that a window of `window_s` seconds spans fewer than
    /// three updates of: its figure is then mostly the counter's steps. Watches the counters
    /// for up to 300 ms to learn their periods.
    pub fn short_window_warnings(&self, window_s: f64) -> Vec<String> {
        let periods = self.update_periods(Duration::from_millis(300));
        self.specs
            .iter()
            .zip(periods)
            .filter_map(|(c, p)| {
                let p = p?;
                let period_ms = p.at_least_ms()?;
                let how_often = match p.period_ms {
                    Some(ms) => format!("it changes every {ms:.1} ms here"),
                    None => format!("it changed once in {:.0} ms here", p.watched_ms),
                };
                (window_s * 1e3 < 3.0 * period_ms).then(|| {
                    format!(
                        "a run lasted {:.0} ms, under three updates of the {} counter ({how_often}): that figure is mostly the counter's steps; measure a longer run (repeat the work inside it)",
                        window_s * 1e3,
                        c.name(),
                    )
                })
            })
            .collect()
    }

    /// The numbers of the GPUs read through NVML: the only ones NVML can say who used (a GPU
    /// read through hwmon has a number of its own, past NVML's).
    pub fn nvml_gpus(&self) -> Vec<u32> {
        self.specs
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                c.domain == Domain::Gpu
                    && self.counter_provenance(*i).mechanism == wattio_energy::Mechanism::Nvml
            })
            .map(|(_, c)| c.socket)
            .collect()
    }

    /// The averaging, delay and resolution of each counter of a meter that answers late, by
    /// scope and number.
    pub fn late_timings(&self) -> Vec<((Domain, u32), wattio_energy::LateTiming)> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.specs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some(((c.domain, c.socket), s.source.late_timing(i)?)))
            .collect()
    }

    /// The energy between two snapshots of this meter, each counter of a meter that answers
    /// late ([`Source::energy_between`]) taken over the snapshots' window as its readings were
    /// measured, once it has them: waits up to twice its averaging and delay plus 2 s (at most
    /// `most`) for the readings of the window's end. Returns the report and the timings of its
    /// late counters, by scope and number, for the whole-machine view.
    pub fn between_aligned(&self, a: &Snapshot, b: &Snapshot, most: Duration) -> AlignedReport {
        let mut joules = window_joules(a, b);
        let late: Vec<(usize, wattio_energy::LateTiming)> = {
            let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            (0..self.specs.len())
                .filter_map(|i| Some((i, s.source.late_timing(i)?)))
                .collect()
        };
        let window = b.at.saturating_duration_since(a.at);
        // A meter whose window rule fails for this run gives no rest anyway: it is waited for
        // only where that takes 15 s at most (a BMC averaging over a minute would hold a short
        // run for two minutes; one answering 5 s late over 1 s averages, for 14 s at most).
        let wait_for =
            |t: &wattio_energy::LateTiming| 2 * (t.averaging + t.delay) + Duration::from_secs(2);
        let worth_waiting = |t: &wattio_energy::LateTiming| {
            crate::platform_timing::WINDOW_PERIODS * t.averaging.as_secs_f64()
                + t.delay.as_secs_f64()
                <= window.as_secs_f64()
                || wait_for(t) <= Duration::from_secs(15)
        };
        let wait = late
            .iter()
            .filter(|(_, t)| worth_waiting(t))
            .map(|(_, t)| wait_for(t))
            .max()
            .unwrap_or_default()
            .min(most);
        let deadline = Instant::now() + wait;
        let mut timings = Vec::new();
        let mut notes = Vec::new();
        for (i, t) in late {
            let aligned = loop {
                let got = {
                    let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    s.source.energy_between(i, a.mono_ns, b.mono_ns)
                };
                if got.is_some() || !worth_waiting(&t) || Instant::now() >= deadline {
                    break got;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let lag_s = crate::platform_timing::PlatformTiming::lag_s(&t);
            let edge_uncertainty_j = match aligned {
                Some((j, u)) => {
                    joules[i] = j;
                    u
                }
                None => {
                    if worth_waiting(&t) {
                        notes.push(format!(
                            "{}: no reading of the window's end within {:.0} s; its figure runs to its newest reading",
                            self.specs[i].name(),
                            wait.as_secs_f64()
                        ));
                    }
                    // Not placed: its running counter lags by its averaging and delay.
                    lag_s * joules[i] / window.as_secs_f64().max(1e-9)
                }
            };
            let timing = crate::platform_timing::PlatformTiming::of(&t, edge_uncertainty_j);
            timings.push(((self.specs[i].domain, self.specs[i].socket), timing));
        }
        let mut report = self.report_of(&joules, a, b);
        report.read_errors.extend(notes);
        AlignedReport { report, timings }
    }

    /// The energy between two snapshots of this meter.
    pub fn between(&self, a: &Snapshot, b: &Snapshot) -> EnergyReport {
        self.report_of(&window_joules(a, b), a, b)
    }

    fn report_of(&self, joules: &[f64], a: &Snapshot, b: &Snapshot) -> EnergyReport {
        let dur = b.at.saturating_duration_since(a.at).as_secs_f64();
        let mut r = EnergyReport::from_labelled_counters(
            &self.specs,
            joules,
            dur,
            &self.provenance,
            &self.provenances,
        );
        r.read_errors = b.read_errors.clone();
        r
    }
}

/// Each counter's joules between two snapshots.
fn window_joules(a: &Snapshot, b: &Snapshot) -> Vec<f64> {
    a.totals_j
        .iter()
        .zip(&b.totals_j)
        .map(|(x, y)| (y - x).max(0.0))
        .collect()
}

/// A window's report with its late counters aligned ([`Meter::between_aligned`]).
#[derive(Debug, Clone)]
pub struct AlignedReport {
    pub report: EnergyReport,
    /// The timings of the late counters, by scope and number.
    pub timings: Vec<((Domain, u32), crate::platform_timing::PlatformTiming)>,
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.poller.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// The background poll period for `specs`: the shortest safe period, at most one second.
pub(crate) fn default_poll_period(specs: &[CounterSpec]) -> Duration {
    let s = specs
        .iter()
        .map(max_safe_period)
        .fold(1.0f64, f64::min)
        .max(0.001);
    Duration::from_secs_f64(s)
}

/// Seconds since the Unix epoch, with sub-microsecond resolution.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::{Mechanism, Wrap};

    fn spec(socket: u32, domain: Domain) -> CounterSpec {
        CounterSpec {
            socket,
            domain,
            unit_j: 1.0,
            wrap: Wrap::AtMax(u64::MAX),
            origin: String::new(),
        }
    }

    #[test]
    fn gpus_are_reported_beside_the_cpu_total_with_their_own_labels() {
        let specs = [
            spec(0, Domain::Package),
            spec(0, Domain::Dram),
            spec(0, Domain::Gpu),
            spec(1, Domain::Gpu),
        ];
        let cpu = Provenance {
            mechanism: Mechanism::Model,
            estimated: true,
            model: Some("a model".into()),
        };
        let provs = [
            cpu.clone(),
            cpu.clone(),
            Provenance::measured(Mechanism::Nvml),
            Provenance::integrated_power(Mechanism::Nvml),
        ];
        let r = EnergyReport::from_labelled_counters(
            &specs,
            &[10.0, 2.0, 30.0, 6.0],
            2.0,
            &cpu,
            &provs,
        );
        assert_eq!(r.total_j, 12.0, "GPUs stay out of package + dram");
        assert_eq!(r.gpu_j, Some(36.0));
        assert_eq!(r.gpu_mean_power_w(), Some(18.0));
        assert_eq!(
            r.gpu_label.as_deref(),
            Some("measured (nvml); measured (nvml power, integrated)")
        );
        assert!(r.provenance.estimated && r.provenance.mechanism == Mechanism::Model);
        assert_eq!(
            r.domains[0].label, None,
            "CPU rows carry the report's label"
        );
        assert_eq!(
            r.domains[3].label.as_deref(),
            Some("measured (nvml power, integrated)")
        );
        // A report without GPUs has no GPU fields, in JSON either.
        let r = EnergyReport::from_counters(&specs[..2], &[1.0, 1.0], 1.0, &cpu);
        assert_eq!((r.gpu_j, r.gpu_label.clone()), (None, None));
        let v = serde_json::to_value(&r).unwrap();
        assert!(v.get("gpu_j").is_none() && v["domains"][0].get("label").is_none());
    }
}
