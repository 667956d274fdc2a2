//! The meters beside the CPU on fixture trees: hwmon channels of every kind and scope, read
//! live through the polling thread, and the registry's refusals.

use std::time::{Duration, Instant};
use wattio_energy::{open_beside, Domain, Source, SysRoot};
use wattio_fixture::FixtureTree;

/// A tree with an ACPI power meter (power average over 500 ms), an INA3221 with two rails
/// (instantaneous power) and a driver wattio does not know with an energy counter (and a power
/// channel that must not be read beside it).
fn hwmon_tree(dir: &std::path::Path) -> FixtureTree {
    let t = FixtureTree::new(dir).unwrap();
    t.hwmon(
        2,
        "power_meter",
        &[
            ("power1_average", "120000000".into()),
            ("power1_average_interval", "500".into()),
            ("power1_input", "999000000".into()),
        ],
    )
    .unwrap();
    t.hwmon(
        0,
        "ina3221",
        &[
            ("power1_input", "2500000".into()),
            ("power2_input", "500000".into()),
        ],
    )
    .unwrap();
    t.hwmon(
        10,
        "some_new_board",
        &[
            ("energy1_input", "1000000".into()),
            ("power1_input", "77000000".into()),
        ],
    )
    .unwrap();
    t.hwmon(1, "coretemp", &[("temp1_input", "40000".into())])
        .unwrap();
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
    assert_eq!(sources.len(), 1, "hwmon only: no BMC here");
    assert_eq!(
        names(sources[0].as_ref()),
        [
            "device 0 = measured (hwmon ina3221 power1_input, integrated)",
            "device 1 = measured (hwmon ina3221 power2_input, integrated)",
            "platform 0 = measured (hwmon power_meter power1_average)",
            "device 2 = measured (hwmon some_new_board energy1_input)",
        ]
    );
    // --domains platform keeps the platform meter alone; device alone keeps the rest.
    let (only, _) = open_beside(&SysRoot::new(dir.path()), Some(&[Domain::Platform])).unwrap();
    assert_eq!(only[0].counters().len(), 1);
    assert_eq!(only[0].counters()[0].domain, Domain::Platform);
    let (none, _) = open_beside(&SysRoot::new(dir.path()), Some(&[Domain::Package])).unwrap();
    assert!(none.is_empty(), "CPU domains open no beside meter");
}

#[test]
fn live_channels_integrate_to_their_known_power() {
    let dir = tempfile::tempdir().unwrap();
    let t = hwmon_tree(dir.path());
    let (mut sources, _) = open_beside(&SysRoot::new(dir.path()), None).unwrap();
    let src = &mut sources[0];
    // The unknown board's counter advances at 40 W (µJ, rewritten every 5 ms) while reading.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let stop = stop.clone();
        // Rewritten in place, one fixed-width pwrite, as the reader keeps the file open.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(t.path("/sys/class/hwmon/hwmon10/energy1_input"))
            .unwrap();
        std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            let start = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let uj = 1_000_000 + (40.0 * start.elapsed().as_secs_f64() * 1e6) as u64;
                file.write_all_at(format!("{uj:015}\n").as_bytes(), 0)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut a = vec![0u64; 4];
    let mut b = vec![0u64; 4];
    std::thread::sleep(Duration::from_millis(300));
    src.read_raw(&mut a).unwrap();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    src.read_raw(&mut b).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ticker.join().unwrap();
    let joules: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| (b - a) as f64 * 1e-6)
        .collect();
    // Each channel is polled every 100 ms (the shortest period among them): a window's figure
    // is off by at most one poll at each end.
    let within = |j: f64, watts: f64, slack_s: f64| {
        assert!(
            (j - watts * secs).abs() <= watts * slack_s,
            "{j} J over {secs} s, expected {watts} W: {joules:?}"
        );
    };
    within(joules[0], 2.5, 0.21);
    within(joules[1], 0.5, 0.21);
    within(joules[2], 120.0, 0.21);
    within(joules[3], 40.0, 0.21);
    assert!(src.take_counter_errors().is_empty());
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
