//! NVML through its real loading and calling code, against the stand-in library built from
//! `crates/nvidia-stub` (two GPUs, a counter at a known rate, a GPU without the energy counter,
//! the library missing, `nvmlInit` refused).
//!
//! The stand-in is configured through the process environment and NVML is process-global, so
//! the tests take turns (`LOCK`).

use std::ffi::OsStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wattio_energy::{discover_powercap, PowercapSource};
use wattio_energy::{open_with_gpus, CombinedSource};
use wattio_energy::{probe_nvml, GpuCounter, NvmlSource};
use wattio_energy::{
    Accumulator, CounterDelta, Domain, EnergyError, Mechanism, Source, SourceChoice, SysRoot,
};

static LOCK: Mutex<()> = Mutex::new(());

/// Holds the lock with the stand-in configured as `gpus` (and `init`, when given).
fn stub(gpus: &str, init: Option<&str>) -> std::sync::MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("WATTIO_NVML_STUB", gpus);
    std::env::remove_var("WATTIO_NVML_STUB_FILE");
    match init {
        Some(v) => std::env::set_var("WATTIO_NVML_STUB_INIT", v),
        None => std::env::remove_var("WATTIO_NVML_STUB_INIT"),
    }
    g
}

fn lib() -> std::path::PathBuf {
    nvidia_stub::built_library()
}

/// Joules per counter between two reads `gap` apart, and the seconds between the reads.
fn joules_over(src: &mut dyn Source, gap: Duration) -> (Vec<f64>, f64) {
    let n = src.counters().len();
    let mut acc = Accumulator::new(src.counters());
    let mut raw = vec![0; n];
    let zero = CounterDelta {
        joules: 0.0,
        wrapped: false,
    };
    let mut out = vec![zero; n];
    src.read_raw(&mut raw).unwrap();
    acc.update(&raw, &mut out).unwrap();
    let t = Instant::now();
    std::thread::sleep(gap);
    src.read_raw(&mut raw).unwrap();
    let dt = t.elapsed().as_secs_f64();
    acc.update(&raw, &mut out).unwrap();
    (out.iter().map(|d| d.joules).collect(), dt)
}

#[test]
fn two_gpus_with_energy_counters_moving_at_a_known_rate() {
    let _g = stub(
        "name=Stub H100,uuid=GPU-11111111-aaaa,energy_w=150,energy_mj=5000000|name=Stub A100,uuid=GPU-22222222-bbbb,energy_w=40",
        None,
    );
    let mut src = NvmlSource::open(lib().as_os_str()).unwrap();
    let gpus = src.gpus().to_vec();
    assert_eq!(gpus.len(), 2);
    assert_eq!(
        (gpus[0].index, gpus[0].name.as_str(), gpus[0].uuid.as_str()),
        (0, "Stub H100", "GPU-11111111-aaaa")
    );
    assert_eq!(gpus[1].name, "Stub A100");
    assert!(gpus.iter().all(|g| g.counter == GpuCounter::EnergyCounter));
    assert!(gpus.iter().all(|g| g.label == "measured (nvml)"));
    let specs = src.counters().to_vec();
    assert_eq!(
        specs
            .iter()
            .map(|c| (c.socket, c.domain))
            .collect::<Vec<_>>(),
        vec![(0, Domain::Gpu), (1, Domain::Gpu)]
    );
    assert_eq!(specs[0].unit_j, 1e-3);
    assert!(specs[0]
        .origin
        .contains("nvmlDeviceGetTotalEnergyConsumption"));
    assert!(specs[1].origin.contains("GPU-22222222-bbbb"));
    for i in 0..2 {
        let p = src.counter_provenance(i);
        assert_eq!(p.mechanism, Mechanism::Nvml);
        assert!(!p.estimated);
    }
    let (j, dt) = joules_over(&mut src, Duration::from_millis(300));
    // The stand-in's counters grow with wall time; our two reads bracket the interval to within
    // scheduling noise, so allow 20 ms of it.
    assert!(
        (j[0] - 150.0 * dt).abs() <= 150.0 * 0.02,
        "{j:?} over {dt} s"
    );
    assert!((j[1] - 40.0 * dt).abs() <= 40.0 * 0.02, "{j:?} over {dt} s");
}

#[test]
fn a_gpu_without_the_energy_counter_falls_back_to_integrated_power_labelled_so() {
    let _g = stub(
        "name=Stub V100,energy_w=100|name=Stub P100,uuid=GPU-old,energy=unsupported,power_mw=70000",
        None,
    );
    let mut src = NvmlSource::open(lib().as_os_str()).unwrap();
    let g = src.gpus()[1].clone();
    assert_eq!(g.counter, GpuCounter::PowerIntegrated);
    assert_eq!(g.label, "measured (nvml power, integrated)");
    assert!(
        g.note
            .as_deref()
            .unwrap()
            .contains("NVML_ERROR_NOT_SUPPORTED"),
        "{g:?}"
    );
    assert_eq!(src.gpus()[0].counter, GpuCounter::EnergyCounter);
    let p = src.counter_provenance(1).clone();
    assert_eq!(p.label(), "measured (nvml power, integrated)");
    assert!(!p.estimated, "integrated power is measured, not estimated");
    assert_eq!(src.counter_provenance(0).label(), "measured (nvml)");
    assert!(src.counters()[1].origin.contains("nvmlDeviceGetPowerUsage"));
    let (j, dt) = joules_over(&mut src, Duration::from_millis(300));
    // 70 W constant: the trapezoid integral between the two reads is exact up to the clock.
    assert!(
        (j[1] - 70.0 * dt).abs() <= 70.0 * 0.005,
        "{j:?} over {dt} s"
    );
}

#[test]
fn a_missing_library_makes_nvml_unusable_with_the_fix_and_never_fails_the_probe() {
    let _g = stub("name=x,energy_w=1", None);
    let p = probe_nvml(OsStr::new("/nonexistent/libnvidia-ml.so.1"));
    assert!(!p.usable);
    assert!(p.gpus.is_empty());
    assert!(p.reason.starts_with("library not found"), "{}", p.reason);
    let fix = p.fix.unwrap();
    assert!(fix.contains("install the NVIDIA driver"), "{fix}");
    assert!(fix.contains("WATTIO_NVML_LIB"), "{fix}");
    // The whole error is one line naming the problem and the fix.
    let e = NvmlSource::open(OsStr::new("/nonexistent/libnvidia-ml.so.1")).unwrap_err();
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(
        msg.starts_with("nvml is not usable: library not found"),
        "{msg}"
    );
}

#[test]
fn nvml_init_without_permission_is_one_line_with_the_fix() {
    let _g = stub("name=x,energy_w=1", Some("no_permission"));
    let e = NvmlSource::open(lib().as_os_str()).unwrap_err();
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(msg.contains("NVML_ERROR_NO_PERMISSION"), "{msg}");
    assert!(msg.contains("/dev/nvidia"), "{msg}");
    let p = probe_nvml(lib().as_os_str());
    assert!(!p.usable && p.reason.contains("NO_PERMISSION"), "{p:?}");
}

#[test]
fn a_counter_reset_by_a_driver_reload_is_an_error_not_2_to_the_64_millijoules() {
    let _g = stub("", None);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "name=Stub A10,energy_mj=9000000").unwrap();
    std::env::set_var("WATTIO_NVML_STUB_FILE", file.path());
    let mut src = NvmlSource::open(lib().as_os_str()).unwrap();
    let mut acc = Accumulator::new(src.counters());
    let zero = CounterDelta {
        joules: 0.0,
        wrapped: false,
    };
    let (mut raw, mut out) = ([0u64], [zero]);
    let mut step = |mj: u64| {
        std::fs::write(file.path(), format!("name=Stub A10,energy_mj={mj}")).unwrap();
        src.read_raw(&mut raw).unwrap();
        acc.update(&raw, &mut out).map(|_| out[0].joules)
    };
    assert_eq!(step(9_000_000).unwrap(), 0.0, "the first reading primes");
    assert!((step(9_250_000).unwrap() - 250.0).abs() < 1e-9);
    // The driver was reloaded: the counter starts again from about zero.
    let e = step(1_000).unwrap_err();
    assert!(e.to_string().contains("went back"), "{e}");
    assert!(
        (step(3_000).unwrap() - 2.0).abs() < 1e-9,
        "measured again after the reset"
    );
    // 250 J before the reload, 2 J after, nothing for the reset itself.
    assert!(
        (acc.totals_j()[0] - 252.0).abs() < 1e-9,
        "{:?}",
        acc.totals_j()
    );
    std::env::remove_var("WATTIO_NVML_STUB_FILE");
}

#[test]
fn no_gpu_at_all_is_unusable_not_an_empty_source() {
    let _g = stub("", None);
    let e = NvmlSource::open(lib().as_os_str()).unwrap_err();
    assert!(e.to_string().contains("NVML lists no GPU"), "{e}");
}

/// A real CPU source: powercap on the two-socket fixture tree.
fn powercap_fixture() -> (tempfile::TempDir, Box<dyn Source>) {
    let dir = tempfile::tempdir().unwrap();
    wattio_fixture::build("intel-server", dir.path()).unwrap();
    let root = SysRoot::new(dir.path());
    let d = discover_powercap(&root).unwrap();
    (dir, Box::new(PowercapSource::open(&d.zones).unwrap()))
}

#[test]
fn cpu_and_gpu_counters_read_together_keep_their_own_provenance() {
    let _g = stub(
        "name=Stub L4,energy_w=72|energy=unsupported,power_mw=30000",
        None,
    );
    let (_dir, cpu) = powercap_fixture();
    let n_cpu = cpu.counters().len();
    let gpu = Box::new(NvmlSource::open(lib().as_os_str()).unwrap());
    let mut both = CombinedSource::new(Some(cpu), Some(gpu)).unwrap();
    assert_eq!(both.counters().len(), n_cpu + 2);
    assert_eq!(both.provenance().mechanism, Mechanism::Powercap);
    assert_eq!(both.counter_provenance(0).label(), "measured (powercap)");
    assert_eq!(both.counter_provenance(n_cpu).label(), "measured (nvml)");
    assert_eq!(
        both.counter_provenance(n_cpu + 1).label(),
        "measured (nvml power, integrated)"
    );
    let (j, dt) = joules_over(&mut both, Duration::from_millis(200));
    assert!(
        j[..n_cpu].iter().all(|&x| x == 0.0),
        "fixture counters stand still"
    );
    assert!((j[n_cpu] - 72.0 * dt).abs() <= 72.0 * 0.02, "{j:?}");
    assert!((j[n_cpu + 1] - 30.0 * dt).abs() <= 30.0 * 0.01, "{j:?}");
}

#[test]
fn domains_decide_which_sources_open() {
    let _g = stub("name=Stub L4,energy_w=72", None);
    let lib = lib();
    let asked = std::cell::RefCell::new(Vec::new());
    let open_cpu = |d: Option<&[Domain]>| {
        asked.borrow_mut().push(d.map(|d| d.to_vec()));
        let (dir, s) = powercap_fixture();
        std::mem::forget(dir); // the fixture's files stay open; the tree may go at exit
        Ok::<_, EnergyError>((s, vec![]))
    };
    // No --domains: the CPU source as before plus the GPUs.
    let (s, _) = open_with_gpus(SourceChoice::Auto, None, lib.as_os_str(), open_cpu).unwrap();
    assert_eq!(
        s.counters()
            .iter()
            .filter(|c| c.domain == Domain::Gpu)
            .count(),
        1
    );
    assert_eq!(s.provenance().mechanism, Mechanism::Powercap);
    // --domains gpu: no CPU source at all.
    let (s, _) = open_with_gpus(
        SourceChoice::Auto,
        Some(&[Domain::Gpu]),
        lib.as_os_str(),
        |_| -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
            panic!("no CPU source wanted")
        },
    )
    .unwrap();
    assert!(s.counters().iter().all(|c| c.domain == Domain::Gpu));
    assert_eq!(s.provenance().mechanism, Mechanism::Nvml);
    // --domains package,gpu: the CPU source gets package only.
    let (s, _) = open_with_gpus(
        SourceChoice::Auto,
        Some(&[Domain::Package, Domain::Gpu]),
        lib.as_os_str(),
        open_cpu,
    )
    .unwrap();
    assert!(s.counters().iter().any(|c| c.domain == Domain::Gpu));
    assert_eq!(asked.borrow().last().unwrap(), &Some(vec![Domain::Package]));
    // --domains package: NVML is not loaded (a missing library changes nothing).
    let missing = OsStr::new("/nonexistent/libnvidia-ml.so.1");
    let (s, _) = open_with_gpus(
        SourceChoice::Auto,
        Some(&[Domain::Package]),
        missing,
        open_cpu,
    )
    .unwrap();
    assert!(s.counters().iter().all(|c| c.domain != Domain::Gpu));
    // No --domains and no NVML: exactly the CPU source.
    let (s, _) = open_with_gpus(SourceChoice::Auto, None, missing, open_cpu).unwrap();
    assert!(s.counters().iter().all(|c| c.domain != Domain::Gpu));
    // GPUs asked for but NVML missing: the error says why and the fix.
    let e = open_with_gpus(SourceChoice::Auto, Some(&[Domain::Gpu]), missing, open_cpu)
        .err()
        .unwrap();
    assert!(e.to_string().contains("WATTIO_NVML_LIB"), "{e}");
    // --source nvml: GPUs alone; with CPU domains it is refused with the fix.
    let (s, _) = open_with_gpus(
        SourceChoice::Only(Mechanism::Nvml),
        None,
        lib.as_os_str(),
        open_cpu,
    )
    .unwrap();
    assert_eq!(s.provenance().mechanism, Mechanism::Nvml);
    let e = open_with_gpus(
        SourceChoice::Only(Mechanism::Nvml),
        Some(&[Domain::Package]),
        lib.as_os_str(),
        open_cpu,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("add gpu to --domains"), "{e}");
}
