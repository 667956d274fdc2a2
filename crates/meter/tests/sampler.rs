//! The sampling loop and the meter against in-memory counters whose truth is known.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattio_energy::{CounterSpec, Domain, EnergyError, Mechanism, Provenance, Source, Wrap};
use wattio_meter::{run_sampler, Meter, Sample, SampleSink, SamplerConfig};
use wattio_progress::Cancel;

/// A counter that gains `watts` joules per second of real time, in raw steps of `unit` joules,
/// wrapping at `max`. It also tallies the wrap-free truth at each read.
struct TimedSource {
    specs: Vec<CounterSpec>,
    provenance: Provenance,
    start: Instant,
    watts: Vec<f64>,
    /// Raw value at the first read, per counter.
    first: Vec<f64>,
    /// Joules gained between the first and the latest read, per counter (no wrap involved).
    truth: Arc<Mutex<Vec<f64>>>,
}

impl TimedSource {
    fn new(counters: &[(Domain, f64, u64)]) -> (Self, Arc<Mutex<Vec<f64>>>) {
        let truth = Arc::new(Mutex::new(vec![0.0; counters.len()]));
        let specs = counters
            .iter()
            .map(|&(domain, _, max)| CounterSpec {
                socket: 0,
                domain,
                unit_j: 1.0,
                wrap: Wrap::AtMax(max),
                origin: "timed".into(),
            })
            .collect();
        (
            TimedSource {
                specs,
                provenance: Provenance::measured(Mechanism::Powercap),
                start: Instant::now(),
                watts: counters.iter().map(|c| c.1).collect(),
                first: Vec::new(),
                truth: Arc::clone(&truth),
            },
            truth,
        )
    }
}

impl Source for TimedSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }
    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        let t = self.start.elapsed().as_secs_f64();
        let mut truth = self.truth.lock().unwrap();
        for (i, o) in out.iter_mut().enumerate() {
            let raw = (t * self.watts[i]).floor() as u64;
            if self.first.len() <= i {
                self.first.push(raw as f64); // the priming read
            }
            truth[i] = raw as f64 - self.first[i];
            let Wrap::AtMax(max) = self.specs[i].wrap else {
                unreachable!()
            };
            *o = if max == u64::MAX {
                raw
            } else {
                raw % (max + 1)
            };
        }
        Ok(())
    }
}

/// Collects samples; stalls `stall` on the first one, like a disk that stops answering.
#[derive(Default)]
struct Collect {
    samples: Vec<Sample>,
    stall: Duration,
}

impl SampleSink for Collect {
    fn consume(&mut self, s: &Sample) -> std::io::Result<()> {
        if self.samples.is_empty() {
            std::thread::sleep(self.stall);
        }
        self.samples.push(s.clone());
        Ok(())
    }
}

fn sum(samples: &[Sample], i: usize) -> f64 {
    samples.iter().map(|s| s.joules[i]).sum()
}

#[test]
fn a_slow_writer_coalesces_rows_but_loses_no_energy() {
    let (src, truth) = TimedSource::new(&[(Domain::Package, 50_000.0, u64::MAX)]);
    let cfg = SamplerConfig {
        freq_hz: 1000.0,
        duration: Some(Duration::from_millis(1000)),
        queue_capacity: 100,
        ..SamplerConfig::default()
    };
    let sink = Collect {
        stall: Duration::from_millis(1200),
        ..Collect::default()
    };
    let (stats, sink) = run_sampler(Box::new(src), &cfg, &Cancel::new().unwrap(), sink).unwrap();
    assert!(
        stats.coalesced > 0,
        "the writer was slow enough to fill the queue: {}",
        stats.summary()
    );
    assert_eq!(stats.samples as usize, sink.samples.len());
    // Everything between the priming read and the last read is in the rows.
    let recorded = sum(&sink.samples, 0);
    assert_eq!(recorded, truth.lock().unwrap()[0]);
    // ~1 s at 50 kJ/s: no gap swallowed energy.
    assert!(recorded > 45_000.0, "{recorded}");
}

#[test]
fn rows_slower_than_the_wrap_period_are_read_several_times() {
    // 1000 J/s on a counter that wraps every 1001 J: one read per 2 s row would lose energy;
    // the wrap-safe period (1001 J / 500 W / 4 = 0.5 s) forces 4 reads per row.
    let (src, truth) = TimedSource::new(&[(Domain::Package, 1000.0, 1000)]);
    let cfg = SamplerConfig {
        freq_hz: 0.5,
        duration: Some(Duration::from_secs(2)),
        ..SamplerConfig::default()
    };
    let (stats, sink) = run_sampler(
        Box::new(src),
        &cfg,
        &Cancel::new().unwrap(),
        Collect::default(),
    )
    .unwrap();
    assert_eq!(sink.samples.len(), 1, "{}", stats.summary());
    let recorded = sum(&sink.samples, 0);
    let elapsed_truth = truth.lock().unwrap()[0];
    assert_eq!(
        recorded, elapsed_truth,
        "recorded {recorded} J, truth {elapsed_truth} J"
    );
    assert!(recorded > 1900.0, "{recorded}");
    assert!(stats.wraps >= 1);
}

#[test]
fn the_cancel_flag_ends_the_run_with_a_final_row() {
    let (src, truth) = TimedSource::new(&[(Domain::Package, 1000.0, u64::MAX)]);
    let cancel = Arc::new(Cancel::new().unwrap());
    let c2 = Arc::clone(&cancel);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        c2.set();
    });
    let cfg = SamplerConfig {
        freq_hz: 0.2,
        duration: None,
        ..SamplerConfig::default()
    };
    let t0 = Instant::now();
    let (_, sink) = run_sampler(Box::new(src), &cfg, &cancel, Collect::default()).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "stopped promptly despite 5 s ticks"
    );
    assert_eq!(sink.samples.len(), 1, "the final row");
    let recorded = sum(&sink.samples, 0);
    assert_eq!(truth.lock().unwrap()[0], recorded);
}

#[test]
fn bad_frequencies_are_refused() {
    for f in [0.0, -1.0, 5000.0, f64::NAN] {
        let (src, _) = TimedSource::new(&[(Domain::Package, 1.0, u64::MAX)]);
        let cfg = SamplerConfig {
            freq_hz: f,
            ..SamplerConfig::default()
        };
        let err = run_sampler(
            Box::new(src),
            &cfg,
            &Cancel::new().unwrap(),
            Collect::default(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("--freq"), "{err}");
    }
}

#[test]
fn meter_reports_package_plus_dram_and_psys_apart() {
    let (src, _) = TimedSource::new(&[
        (Domain::Package, 10_000.0, u64::MAX),
        (Domain::Dram, 1_000.0, u64::MAX),
        (Domain::Psys, 50_000.0, u64::MAX),
    ]);
    let meter = Meter::from_source(Box::new(src), vec![], Some(Duration::from_millis(10))).unwrap();
    let a = meter.snapshot().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let b = meter.snapshot().unwrap();
    let r = meter.between(&a, &b);
    let get = |d: Domain| r.domains.iter().find(|x| x.domain == d).unwrap().energy_j;
    assert_eq!(r.total_j, get(Domain::Package) + get(Domain::Dram));
    assert_eq!(r.psys_j, Some(get(Domain::Psys)));
    assert!(r.duration_s >= 0.2);
    // ~10 kJ/s over ≥ 0.2 s
    assert!(get(Domain::Package) >= 1_900.0, "{}", get(Domain::Package));
    assert!(!r.provenance.estimated);
    assert_eq!(r.provenance_label(), "measured (powercap)");
}
