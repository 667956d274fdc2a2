//! The meters beside the CPU on fixture trees: hwmon channels of every kind and scope, read
//! live through the polling thread, and the registry's refusals.

use std::time::{Duration, Instant};
use wattio_energy::{open_beside, Domain, Source, SysRoot};
use wattio_fixture::FixtureTree;

/// A tree with a driver of every class, laid out as its kernel documentation describes: an ACPI
/// power meter (power average over 1 s, and an instantaneous power that must not be read
/// beside it), an INA3221 with two enabled rails and a disabled one (bus voltage in mV and
/// current in mA, no power attribute), an amdgpu (power only, labelled PPT), an xe GPU (card and
/// package energy counters, labelled), amd_energy (a core and a socket counter: the socket
/// alone is read) and a driver wattio does not know with an energy counter (and a power channel
/// that must not be read beside it).
/// An hwmon device: its number, its driver's name and its attributes.
type Device = (u32, &'static str, &'static [(&'static str, &'static str)]);

fn hwmon_tree(dir: &std::path::Path) -> FixtureTree {
    let t = FixtureTree::new(dir).unwrap();
    let devices: [Device; 7] = [
        (
            2,
            "power_meter",
            &[
                ("power1_average", "120000000"),
                ("power1_average_interval", "1000"),
                ("power1_input", "999000000"),
            ],
        ),
        (
            0,
            "ina3221",
            &[
                ("in1_input", "5000"),
                ("curr1_input", "500"),
                ("in1_label", "VDD_IN"),
                ("in2_input", "1000"),
                ("curr2_input", "500"),
                ("in3_input", "3300"),
                ("curr3_input", "100"),
                ("in3_enable", "0"),
            ],
        ),
        (
            3,
            "amdgpu",
            &[
                ("power1_average", "150000000"),
                ("power1_input", "155000000"),
                ("power1_label", "PPT"),
            ],
        ),
        (
            4,
            "xe",
            &[
                ("energy1_input", "4264967296"),
                ("energy1_label", "card"),
                ("energy2_input", "1000000"),
                ("energy2_label", "pkg"),
            ],
        ),
        (
            5,
            "amd_energy",
            &[
                ("energy1_input", "1000"),
                ("energy1_label", "Ecore000"),
                ("energy2_input", "2000"),
                ("energy2_label", "Esocket0"),
            ],
        ),
        (
            10,
            "some_new_board",
            &[("energy1_input", "1000000"), ("power1_input", "77000000")],
        ),
        (1, "coretemp", &[("temp1_input", "40000")]),
    ];
    for (n, name, attributes) in devices {
        let attributes: Vec<(&str, String)> = attributes
            .iter()
            .map(|(a, v)| (*a, v.to_string()))
            .collect();
        t.hwmon(n, name, &attributes).unwrap();
    }
    t
}

fn names(src: &dyn Source) -> Vec<String> {
    (0..src.counters().len())
        .map(|i| {
            format!(
                "{} = {}",
                src.counters()[i].name(),
                src.counter_provenance(i).label()
            )
        })
        .collect()
}

#[test]
fn every_channel_is_found_with_its_scope_kind_and_driver() {
    let dir = tempfile::tempdir().unwrap();
    hwmon_tree(dir.path());
    let (sources, _) = open_beside(&SysRoot::new(dir.path()), None).unwrap();
    // What `probe` says of each channel.
    let (_, notes) = wattio_energy::HwmonMeter::open(&SysRoot::new(dir.path())).unwrap();
    assert_eq!(sources.len(), 1, "hwmon only: no BMC here");
    assert_eq!(
        names(sources[0].as_ref()),
        [
            "device 0 = measured (hwmon ina3221 in1_input × curr1_input, rail VDD_IN, integrated)",
            "device 1 = measured (hwmon ina3221 in2_input × curr2_input, rail, integrated)",
            "platform 0 = measured (hwmon power_meter power1_average)",
            "gpu 0 = measured (hwmon amdgpu power1_average, gpu PPT)",
            "gpu 1 = measured (hwmon xe energy1_input, gpu card)",
            "device 2 = measured (hwmon xe energy2_input, gpu pkg)",
            "device 3 = measured (hwmon amd_energy energy2_input, cpu Esocket0)",
            "device 4 = measured (hwmon some_new_board energy1_input, other)",
        ]
    );
    let notes = notes.join("\n");
    for expected in [
        "hwmon4 (xe, gpu) energy1_input \"card\" → gpu 1: µJ counter of a 32-bit register",
        "hwmon2 (power_meter, platform) power1_average → platform 0: µW averaged over 1000 ms",
        "hwmon0 (ina3221, rail) in1_input \"VDD_IN\" → device 0: mV × mA",
        "hwmon10 (some_new_board, other) energy1_input → device 4: µJ counter, wrap limit not given",
    ] {
        assert!(notes.contains(expected), "{expected} in {notes}");
    }
    // --domains platform keeps the platform meter alone; device alone keeps the rest.
    let (only, _) = open_beside(&SysRoot::new(dir.path()), Some(&[Domain::Platform])).unwrap();
    assert_eq!(only[0].counters().len(), 1);
    assert_eq!(only[0].counters()[0].domain, Domain::Platform);
    let (none, _) = open_beside(&SysRoot::new(dir.path()), Some(&[Domain::Package])).unwrap();
    assert!(none.is_empty(), "CPU domains open no beside meter");
}

/// Rewrites `path` every millisecond with a counter in µJ advancing at `watts` from `start_uj`,
/// wrapping at `wrap` (one fixed-width pwrite, as the reader keeps the file open), until `stop`.
fn tick(
    path: std::path::PathBuf,
    start_uj: u64,
    watts: f64,
    wrap: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        let start = Instant::now();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let uj = (start_uj + (watts * start.elapsed().as_secs_f64() * 1e6) as u64) % wrap;
            file.write_all_at(format!("{uj:015}\n").as_bytes(), 0)
                .unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

#[test]
fn live_channels_integrate_to_their_known_power_through_a_32_bit_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let t = hwmon_tree(dir.path());
    let (mut sources, _) = open_beside(&SysRoot::new(dir.path()), None).unwrap();
    let src = &mut sources[0];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The xe card counter starts 30 J below 2^32 µJ at 60 W: it wraps 0.5 s in. The unknown
    // board's counter runs at 40 W without a wrap.
    let hwmon = |n: u32, attr: &str| t.path(&format!("/sys/class/hwmon/hwmon{n}/{attr}"));
    let tickers = [
        tick(
            hwmon(4, "energy1_input"),
            (1 << 32) - 30_000_000,
            60.0,
            1 << 32,
            stop.clone(),
        ),
        tick(
            hwmon(10, "energy1_input"),
            1_000_000,
            40.0,
            u64::MAX,
            stop.clone(),
        ),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let t0 = wattio_energy::mono_ns();
    // 6 s: a ticker held up 30 ms at either end (a loaded machine) still leaves 0.5 %.
    std::thread::sleep(Duration::from_secs(6));
    let t1 = wattio_energy::mono_ns();
    // The window's end is known once a poll measured after it has arrived.
    let deadline = Instant::now() + Duration::from_secs(2);
    let n = src.counters().len();
    let joules: Vec<f64> = (0..n)
        .map(|i| loop {
            if let Some((j, _)) = src.energy_between(i, t0, t1) {
                break j;
            }
            assert!(Instant::now() < deadline, "no reading of the window's end");
            std::thread::sleep(Duration::from_millis(20));
        })
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for ticker in tickers {
        ticker.join().unwrap();
    }
    let secs = (t1 - t0) as f64 / 1e9;
    // Placed where they were measured, readings give the window's energy within 0.5 %.
    let within = |i: usize, watts: f64| {
        let expected = watts * secs;
        assert!(
            (joules[i] - expected).abs() <= expected * 0.005,
            "{}: {} J over {secs} s, expected {watts} W: {joules:?}",
            src.counters()[i].name(),
            joules[i]
        );
    };
    within(0, 2.5);
    within(1, 0.5);
    within(2, 120.0);
    within(3, 150.0);
    within(4, 60.0);
    within(7, 40.0);
    assert_eq!(
        (joules[5], joules[6]),
        (0.0, 0.0),
        "still counters stay still"
    );
    assert!(src.take_counter_errors().is_empty());
    let timing = src.late_timing(2).unwrap();
    assert_eq!(timing.averaging, Duration::from_millis(1000));
}

#[test]
fn malformed_or_missing_channels_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let t = FixtureTree::new(dir.path()).unwrap();
    let root = SysRoot::new(dir.path());
    let e = open_beside(&root, Some(&[Domain::Platform]))
        .err()
        .expect("no meter here")
        .to_string();
    assert!(
        e.contains("--domains asks for platform but no meter of it can be read here")
            && e.contains("hwmon:")
            && e.contains("ipmi:"),
        "{e}"
    );
    t.hwmon(0, "power_meter", &[("power1_average", "lots".into())])
        .unwrap();
    let (sources, passed_over) = open_beside(&root, None).unwrap();
    assert!(sources.is_empty());
    assert!(
        passed_over
            .iter()
            .any(|p| p.contains("malformed content \"lots\"") && p.contains("power1_average")),
        "{passed_over:?}"
    );
}
