//! Every mechanism against fixture trees of real machine layouts.

use wattio_energy::MsrSource;
use wattio_energy::{
    discover, open_source, Accumulator, CounterDelta, Domain, Mechanism, ModelParams, Source,
    SourceChoice, SysRoot, Wrap,
};
use wattio_energy::{discover_powercap, PowercapSource};
use wattio_fixture::{self as fixture, FixtureTree, MAX_UJ_DRAM_QUIRK, MAX_UJ_ESU14};

fn tree(
    f: fn(&std::path::Path) -> std::io::Result<FixtureTree>,
) -> (tempfile::TempDir, FixtureTree, SysRoot) {
    let dir = tempfile::tempdir().unwrap();
    let t = f(dir.path()).unwrap();
    let root = SysRoot::new(dir.path());
    (dir, t, root)
}

/// A source with its accumulator: `read()` reads once and leaves the deltas in `out`.
struct Reader<S: Source> {
    src: S,
    acc: Accumulator,
    raw: Vec<u64>,
    out: Vec<CounterDelta>,
}

impl<S: Source> Reader<S> {
    fn new(src: S) -> Self {
        let n = src.counters().len();
        let acc = Accumulator::new(src.counters());
        let zero = CounterDelta {
            joules: 0.0,
            wrapped: false,
        };
        Reader {
            src,
            acc,
            raw: vec![0; n],
            out: vec![zero; n],
        }
    }

    fn read(&mut self) -> Result<(), wattio_energy::EnergyError> {
        self.src.read_raw(&mut self.raw)?;
        self.acc.update(&self.raw, &mut self.out)
    }
}

fn pairs(src: &dyn Source) -> Vec<(u32, Domain)> {
    src.counters()
        .iter()
        .map(|c| (c.socket, c.domain))
        .collect()
}

#[test]
fn powercap_two_socket_server_names_zones_by_name_not_number() {
    let (_d, _t, root) = tree(fixture::intel_two_socket_server);
    let disc = discover_powercap(&root).unwrap();
    let mut got: Vec<_> = disc
        .zones
        .iter()
        .map(|z| (z.id.as_str(), z.socket, z.domain))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("intel-rapl:0", 0, Domain::Package),
            ("intel-rapl:0:0", 0, Domain::Dram),
            ("intel-rapl:1", 1, Domain::Package),
            ("intel-rapl:1:0", 1, Domain::Dram),
        ]
    );
    let src = PowercapSource::open(&disc.zones).unwrap();
    let dram = src
        .counters()
        .iter()
        .find(|c| c.domain == Domain::Dram)
        .unwrap();
    assert_eq!(dram.wrap, Wrap::AtMax(MAX_UJ_DRAM_QUIRK));
    assert_eq!(dram.unit_j, 1e-6);
}

#[test]
fn powercap_laptop_psys_is_not_package_1_and_mmio_duplicate_is_skipped() {
    let (_d, _t, root) = tree(fixture::intel_laptop);
    let disc = discover_powercap(&root).unwrap();
    let src = PowercapSource::open(&disc.zones).unwrap();
    let mut p = pairs(&src);
    p.sort();
    assert_eq!(
        p,
        vec![
            (0, Domain::Package),
            (0, Domain::Core),
            (0, Domain::Uncore),
            (0, Domain::Dram),
            (0, Domain::Psys)
        ]
    );
    assert!(
        disc.notes
            .iter()
            .any(|n| n.contains("intel-rapl-mmio:0") && n.contains("already read")),
        "{:?}",
        disc.notes
    );
}

#[test]
fn powercap_wraps_are_corrected_with_max_energy_range() {
    let (_d, t, root) = tree(fixture::intel_two_socket_server);
    let disc = discover_powercap(&root).unwrap();
    let src = PowercapSource::open(&disc.zones).unwrap();
    let idx = src
        .counters()
        .iter()
        .position(|c| c.socket == 1 && c.domain == Domain::Package)
        .unwrap();
    let mut r = Reader::new(src);
    t.set_energy_uj("intel-rapl:1", MAX_UJ_ESU14 - 2_000_000)
        .unwrap();
    r.read().unwrap();
    t.set_energy_uj("intel-rapl:1", 3_000_000).unwrap();
    r.read().unwrap();
    // 2 J up to the limit, 1 µJ for the step to zero, 3 J after it.
    assert!(
        (r.out[idx].joules - 5.000001).abs() < 1e-9,
        "{}",
        r.out[idx].joules
    );
    assert!(r.out[idx].wrapped);
}

#[test]
fn garbage_in_energy_uj_is_a_clear_error() {
    let (_d, t, root) = tree(fixture::intel_laptop);
    t.write(
        "/sys/class/powercap/intel-rapl:0/energy_uj",
        "not a number\n",
    )
    .unwrap();
    let disc = discover_powercap(&root).unwrap();
    let err = PowercapSource::open(&disc.zones)
        .err()
        .expect("garbage must be refused")
        .to_string();
    assert!(err.contains("intel-rapl:0/energy_uj"), "{err}");
    assert!(err.contains("malformed content"), "{err}");
    assert!(err.contains("microjoules"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn missing_max_energy_range_means_unknown_wrap_and_an_error_on_decrease() {
    let (_d, t, root) = tree(fixture::intel_laptop);
    std::fs::remove_file(t.path("/sys/class/powercap/intel-rapl:1/max_energy_range_uj")).unwrap();
    let report = discover(&root, ModelParams::default());
    let pc = report
        .mechanisms
        .iter()
        .find(|m| m.mechanism == Mechanism::Powercap)
        .unwrap();
    assert!(pc.usable);
    assert!(
        pc.notes
            .iter()
            .any(|n| n.contains("intel-rapl:1") && n.contains("max_energy_range_uj")),
        "{:?}",
        pc.notes
    );
    let disc = discover_powercap(&root).unwrap();
    let src = PowercapSource::open(&disc.zones).unwrap();
    let idx = src
        .counters()
        .iter()
        .position(|c| c.domain == Domain::Psys)
        .unwrap();
    assert_eq!(src.counters()[idx].wrap, Wrap::Unknown);
    let mut r = Reader::new(src);
    r.read().unwrap();
    t.set_energy_uj("intel-rapl:1", 5).unwrap();
    let err = r.read().unwrap_err().to_string();
    assert!(err.contains("wrap limit is unknown"), "{err}");
    assert_eq!(r.out[idx].joules, 0.0, "no invented energy");
    assert!(r.acc.totals_j().iter().all(|&j| j >= 0.0));
}

#[test]
fn counters_stuck_at_zero_are_refused_like_a_vm_exposing_dead_events() {
    let (_d, t, root) = tree(fixture::intel_laptop);
    for z in [
        "intel-rapl:0",
        "intel-rapl:0:0",
        "intel-rapl:0:1",
        "intel-rapl:0:2",
        "intel-rapl:1",
    ] {
        t.set_energy_uj(z, 0).unwrap();
    }
    let report = discover(&root, ModelParams::default());
    let pc = report
        .mechanisms
        .iter()
        .find(|m| m.mechanism == Mechanism::Powercap)
        .unwrap();
    assert!(!pc.usable);
    assert!(pc.reason.contains("did not advance"), "{}", pc.reason);
}

#[test]
fn msr_intel_server_uses_the_fixed_dram_unit() {
    let (_d, t, root) = tree(fixture::intel_two_socket_server);
    let src = MsrSource::open(&root).unwrap();
    let mut p = pairs(&src);
    p.sort();
    assert_eq!(
        p,
        vec![
            (0, Domain::Package),
            (0, Domain::Dram),
            (1, Domain::Package),
            (1, Domain::Dram)
        ]
    );
    for c in src.counters() {
        let expected = if c.domain == Domain::Dram {
            2f64.powi(-16)
        } else {
            2f64.powi(-14)
        };
        assert_eq!(c.unit_j, expected, "{:?}", c);
        assert_eq!(c.wrap, Wrap::AtMax(0xFFFF_FFFF));
    }
    // One joule on socket 1's package: 16384 raw steps at ESU 14, through a 32-bit wrap.
    let idx = src
        .counters()
        .iter()
        .position(|c| c.socket == 1 && c.domain == Domain::Package)
        .unwrap();
    let mut r = Reader::new(src);
    t.msr(
        4,
        fixture::INTEL_PKG_ENERGY,
        0xFFFF_FFFF - 16383 + 0xAB_0000_0000,
    )
    .unwrap(); // high bits ignored
    r.read().unwrap();
    t.msr(4, fixture::INTEL_PKG_ENERGY, 16384).unwrap();
    r.read().unwrap();
    // 16384 steps to the wrap plus 16384 after it: 2 J.
    assert!(
        (r.out[idx].joules - 2.0).abs() < 1e-12,
        "{}",
        r.out[idx].joules
    );
}

#[test]
fn msr_sapphire_rapids_dram_uses_the_standard_unit() {
    let (_d, t, root) = tree(fixture::intel_two_socket_server);
    t.cpuinfo(
        "GenuineIntel",
        6,
        0x8F,
        "Intel(R) Xeon(R) Platinum 8480+",
        8,
    )
    .unwrap();
    let src = MsrSource::open(&root).unwrap();
    let dram = src
        .counters()
        .iter()
        .find(|c| c.domain == Domain::Dram)
        .unwrap();
    assert_eq!(dram.unit_j, 2f64.powi(-14));
}

#[test]
fn msr_amd_sums_per_core_counters_once_per_physical_core() {
    let (_d, t, root) = tree(fixture::amd_epyc);
    let src = MsrSource::open(&root).unwrap();
    let core = src
        .counters()
        .iter()
        .position(|c| c.domain == Domain::Core)
        .unwrap();
    assert!(
        src.counters()[core].origin.contains("summed over 2 cores"),
        "{}",
        src.counters()[core].origin
    );
    assert_eq!(src.counters()[core].unit_j, 2f64.powi(-16));
    let mut r = Reader::new(src);
    // Core 1 starts 65536 steps (1 J at ESU 16) below the 32-bit limit.
    t.msr(1, fixture::AMD_CORE_ENERGY, 0xFFFF_FFFF - 65535)
        .unwrap();
    r.read().unwrap();
    let before = r.acc.totals_j()[core];
    // Core 0 gains 1 J; core 1 takes 65536 steps to wrap to 0 and 65536 more: 2 J.
    t.msr(0, fixture::AMD_CORE_ENERGY, 0x0010_0000 + 65536)
        .unwrap();
    t.msr(1, fixture::AMD_CORE_ENERGY, 65536).unwrap();
    r.read().unwrap();
    let gained = r.acc.totals_j()[core] - before;
    assert!((gained - 3.0).abs() < 1e-9, "{gained}");
}

#[test]
fn msr_missing_device_says_to_load_the_module() {
    let (_d, t, root) = tree(fixture::intel_laptop);
    std::fs::remove_dir_all(t.path("/dev/cpu")).unwrap();
    let err = MsrSource::open(&root).err().unwrap().to_string();
    assert!(err.contains("modprobe msr"), "{err}");
}

#[test]
fn perf_fixture_events_are_parsed_and_the_open_failure_is_explained() {
    let (_d, _t, root) = tree(fixture::intel_laptop);
    let pmu = wattio_energy::discover_power_pmu(&root).unwrap();
    let names: Vec<_> = pmu
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.domain, e.code))
        .collect();
    assert_eq!(
        names,
        vec![
            ("energy-cores", Domain::Core, 1),
            ("energy-gpu", Domain::Uncore, 4),
            ("energy-pkg", Domain::Package, 2),
            ("energy-psys", Domain::Psys, 5),
            ("energy-ram", Domain::Dram, 3)
        ]
    );
    assert_eq!(pmu.events[0].scale, 2f64.powi(-32));
    let report = discover(&root, ModelParams::default());
    let perf = report
        .mechanisms
        .iter()
        .find(|m| m.mechanism == Mechanism::Perf)
        .unwrap();
    assert!(!perf.usable);
    assert!(perf.reason.contains("perf_event_open"), "{}", perf.reason);
    assert!(perf.fix.is_some());
}

#[test]
fn auto_skips_unusable_mechanisms_without_failing() {
    let (_d, t, root) = tree(fixture::intel_two_socket_server);
    // Remove the powercap tree: auto must fall through to MSR, not fail.
    std::fs::remove_dir_all(t.path("/sys/class/powercap")).unwrap();
    let (src, passed) =
        open_source(&root, SourceChoice::Auto, None, ModelParams::default()).unwrap();
    assert_eq!(src.provenance().mechanism, Mechanism::Msr);
    assert!(!src.provenance().estimated);
    assert_eq!(passed.len(), 2, "{passed:?}");
    assert!(passed[1].starts_with("powercap:"), "{passed:?}");
    // Only the DRAM domain, when asked.
    let (src, _) = open_source(
        &root,
        SourceChoice::Only(Mechanism::Msr),
        Some(&[Domain::Dram]),
        ModelParams::default(),
    )
    .unwrap();
    assert!(src.counters().iter().all(|c| c.domain == Domain::Dram));
    let err = open_source(
        &root,
        SourceChoice::Only(Mechanism::Msr),
        Some(&[Domain::Psys]),
        ModelParams::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("none of the requested domains"), "{err}");
}

#[test]
fn model_estimates_from_proc_stat_and_labels_itself() {
    let (_d, t, root) = tree(fixture::amd_epyc);
    let params = ModelParams::default();
    let mut src = wattio_energy::ModelSource::open(&root, params.clone()).unwrap();
    assert!(src.provenance().estimated);
    assert_eq!(
        src.provenance().model.as_deref(),
        Some(params.name().as_str())
    );
    let mut raw = [0u64];
    let t0 = std::time::Instant::now();
    src.read_raw(&mut raw).unwrap();
    let start = raw[0];
    // One second of busy time on CPU 0 (100 ticks at USER_HZ 100) appears at once...
    t.proc_stat(&[(0, 100), (1, 0), (2, 0), (3, 0)]).unwrap();
    src.read_raw(&mut raw).unwrap();
    let w1 = t0.elapsed().as_secs_f64();
    let first = (raw[0] - start) as f64 * 1e-9;
    // ...but a window is never given more than 4 vCPUs at full power.
    assert!(
        first <= params.max_w_per_cpu() * 4.0 * w1 + 1e-6,
        "{first} J in {w1} s"
    );
    // Given enough wall time, the whole busy second is attributed.
    std::thread::sleep(std::time::Duration::from_millis(300));
    src.read_raw(&mut raw).unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let joules = (raw[0] - start) as f64 * 1e-9;
    let dynamic = params.max_w_per_cpu() - params.min_w_per_cpu(); // 2.76 J for 1 busy CPU-second
    let static_max = params.min_w_per_cpu() * 4.0 * wall;
    assert!(
        joules >= dynamic - 1e-6 && joules <= dynamic + static_max + 1e-6,
        "{joules}"
    );
}
