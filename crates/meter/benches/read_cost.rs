//! Cost of one read of every counter, per mechanism's read path (criterion).
//!
//! perf reads the real `power` PMU event when the kernel lets it be opened (its count may be
//! dead in a VM, but the syscall path is the real one); powercap and MSR read fixture files
//! (the same `pread` path as sysfs / `/dev/cpu/N/msr`, minus the kernel's RAPL read); the model
//! reads the real `/proc/stat`.
//!
//! perf and eBPF also read a stand-in for RAPL that counts on any machine: a fixture `power` PMU
//! whose event is the kernel's software `cpu-clock` counter
//! ([`fixture::FixtureTree::standin_power_pmu`]), so both paths run for real here. For eBPF this
//! is the user-space half of a read (drain the ring buffer, take the newest counts) with the
//! kernel timer at 1000 Hz; the program's own time per tick is in `benches/pacing.rs`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use wattio_energy::MsrSource;
use wattio_energy::{discover_power_pmu, PerfSource};
use wattio_energy::{discover_powercap, PowercapSource};
use wattio_energy::{Mechanism, ModelParams, ModelSource, Source, SourceChoice, SysRoot};
use wattio_fixture as fixture;

fn bench_source(c: &mut Criterion, name: &str, mut src: Box<dyn Source>) {
    let mut raw = vec![0u64; src.counters().len()];
    let n = raw.len();
    c.bench_function(&format!("read/{name} ({n} counters)"), |b| {
        b.iter(|| {
            src.read_raw(&mut raw).unwrap();
            black_box(&raw);
        })
    });
}

fn reads(c: &mut Criterion) {
    let real = SysRoot::new("/");
    if let Ok(pmu) = discover_power_pmu(&real) {
        match PerfSource::open(&real, &pmu, None) {
            Ok(s) => bench_source(c, "perf (real power PMU)", Box::new(s)),
            Err(e) => eprintln!("perf skipped: {e}"),
        }
    }
    let standin = tempfile::tempdir().unwrap();
    fixture::FixtureTree::new(standin.path())
        .unwrap()
        .standin_power_pmu("0", &[("energy-pkg", 1e-9)])
        .unwrap();
    let standin = SysRoot::new(standin.path());
    for (name, m) in [
        ("perf (stand-in cpu-clock PMU)", Mechanism::Perf),
        (
            "ebpf (stand-in cpu-clock PMU, user-space half)",
            Mechanism::Ebpf,
        ),
    ] {
        match wattio_energy::open_source(
            &standin,
            SourceChoice::Only(m),
            None,
            ModelParams::default(),
        ) {
            Ok((mut s, _)) => {
                s.set_rate_hz(1000.0).unwrap();
                bench_source(c, name, s)
            }
            Err(e) => eprintln!("{name} skipped: {e}"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    fixture::intel_laptop(dir.path()).unwrap();
    let root = SysRoot::new(dir.path());
    let zones = discover_powercap(&root).unwrap().zones;
    let pkg_only: Vec<_> = zones
        .iter()
        .filter(|z| z.name == "package-0")
        .cloned()
        .collect();
    bench_source(
        c,
        "powercap (fixture files)",
        Box::new(PowercapSource::open(&pkg_only).unwrap()),
    );
    bench_source(
        c,
        "msr (sparse fixture file)",
        Box::new(MsrSource::open(&root).unwrap()),
    );
    bench_source(
        c,
        "model (/proc/stat)",
        Box::new(ModelSource::open(&real, ModelParams::default()).unwrap()),
    );
}

criterion_group!(benches, reads);
criterion_main!(benches);
