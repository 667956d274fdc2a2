//! The model flags and `wattio calibrate` end to end:
//! `--model auto|ccf-linear|ccf-arch|tdp-curve|FILE`, the ccf-linear coefficients, bad model
//! files, and calibrate's refusal without RAPL.

use std::path::Path;
use std::process::{Command, Output};
use wattio_energy::{ModelFile, MODEL_FILE_FORMAT};
use wattio_fixture::{self as fixture, FixtureTree};

const BIN: &str = env!("CARGO_BIN_EXE_wattio");

fn wattio(root: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    // These tests check the default model itself (make test pins it for the other suites).
    c.env_remove("WATTIO_DEFAULT_MODEL")
        .env_remove("WATTIO_HOST_THREADS");
    match root {
        Some(r) => c.env("WATTIO_ROOT", r),
        None => c.env_remove("WATTIO_ROOT"),
    };
    c.output().expect("run wattio")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fixture machine with two vCPUs in one package whose `/proc/cpuinfo` says `name` with
/// this vendor, family and model (no stepping line).
fn two_vcpu_machine(vendor: &str, family: u32, model: u32, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let t = FixtureTree::new(dir.path()).unwrap();
    t.cpuinfo(vendor, family, model, name, 2).unwrap();
    t.topology(&[(0, 0, 0), (1, 0, 1)]).unwrap();
    dir
}

/// The `model` column of the rows `record --source model` writes for 0.2 s.
fn recorded_model(root: Option<&Path>, extra: &[&str]) -> Result<String, String> {
    let mut args = vec!["record", "--source", "model", "--duration", "0.2"];
    args.extend_from_slice(extra);
    let o = wattio(root, &args);
    if !o.status.success() {
        return Err(text(&o.stderr));
    }
    let out = text(&o.stdout);
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert!(!rows.is_empty(), "{out}");
    assert!(rows.iter().all(|r| &r[5] == "true"), "{out}");
    Ok(rows[0][6].to_string())
}

#[test]
fn the_default_model_knows_a_fixture_cpu_and_probe_says_so() {
    let dir = tempfile::tempdir().unwrap();
    fixture::intel_two_socket_server(dir.path()).unwrap();
    let m = recorded_model(Some(dir.path()), &[]).unwrap();
    assert_eq!(
        m,
        "tdp-curve(cpu=Intel Xeon Gold 6130,tdp=125W,threads=4,vcpus=8)"
    );
    assert_eq!(
        recorded_model(Some(dir.path()), &["--model", "tdp-curve"]).unwrap(),
        m
    );
    // ccf-linear stays selectable, with its coefficients.
    assert_eq!(
        recorded_model(Some(dir.path()), &["--model", "ccf-linear"]).unwrap(),
        "ccf-linear(min=0.74W,max=3.5W per vCPU)"
    );
    assert_eq!(
        recorded_model(
            Some(dir.path()),
            &["--model-min-w", "1", "--model-max-w", "5"]
        )
        .unwrap(),
        "ccf-linear(min=1W,max=5W per vCPU)"
    );
    let o = wattio(Some(dir.path()), &["probe"]);
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "note: tdp-curve: 'Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz' is 'Intel Xeon Gold 6130'"
        ),
        "{out}"
    );
}

#[test]
fn a_masked_vm_cpu_gets_its_microarchitecture_coefficients_and_probe_says_why() {
    // What this project's VM shows: the name hides the part, family 0x19 model 0x11 is Zen 4.
    let dir = two_vcpu_machine("AuthenticAMD", 0x19, 0x11, "AMD EPYC");
    let genoa = "ccf-linear(arch=EPYC 4th Gen,min=0.739W,max=2.282W per vCPU)";
    assert_eq!(recorded_model(Some(dir.path()), &[]).unwrap(), genoa);
    assert_eq!(
        recorded_model(Some(dir.path()), &["--model", "ccf-arch"]).unwrap(),
        genoa
    );
    // ccf-linear stays CCF's average, whatever the CPU.
    assert_eq!(
        recorded_model(Some(dir.path()), &["--model", "ccf-linear"]).unwrap(),
        "ccf-linear(min=0.74W,max=3.5W per vCPU)"
    );
    let o = wattio(Some(dir.path()), &["probe"]);
    let out = text(&o.stdout);
    for needle in [
        "note: ccf-linear with Cloud Carbon Footprint's EPYC 4th Gen coefficients, 0.7391 W idle and 2.2822 W busy per vCPU",
        "AMD family 0x19 model 0x11 is Zen 4",
        "note: tdp-curve was not used: CPU 'AMD EPYC' is not in the TDP dataset",
        "figures are estimated (model: ccf-linear(arch=EPYC 4th Gen,",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    // Asking for tdp-curve here is an error, not a silent fallback.
    let e = recorded_model(Some(dir.path()), &["--model", "tdp-curve"]).unwrap_err();
    assert!(e.contains("--model tdp-curve is not available here"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn an_unknown_cpu_falls_back_to_the_ccf_average_and_probe_says_why() {
    let dir = two_vcpu_machine("GenuineIntel", 6, 6, "QEMU Virtual CPU version 2.5+");
    assert_eq!(
        recorded_model(Some(dir.path()), &[]).unwrap(),
        "ccf-linear(min=0.74W,max=3.5W per vCPU)"
    );
    let o = wattio(Some(dir.path()), &["probe"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("note: the default model fell back to ccf-linear with CCF's averages: CPU 'QEMU Virtual CPU version 2.5+' is not in the TDP dataset"),
        "{out}"
    );
    assert!(
        out.contains("model 0x6 is not in wattio's microarchitecture table"),
        "{out}"
    );
    // Asking for the microarchitecture's coefficients here is an error in one line.
    let e = recorded_model(Some(dir.path()), &["--model", "ccf-arch"]).unwrap_err();
    assert!(e.contains("--model ccf-arch is not available here"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn a_model_file_is_used_and_bad_ones_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = ModelFile {
        format: MODEL_FILE_FORMAT.into(),
        cpu: "AMD EPYC 7713 64-Core Processor".into(),
        vcpus: 4,
        measured_with: "powercap".into(),
        points: vec![(0.0, 1.5), (0.5, 4.0), (1.0, 5.0)],
        fit: None,
    };
    let path = dir.path().join("epyc.json");
    std::fs::write(&path, file.to_json()).unwrap();
    let p = path.to_str().unwrap();
    assert_eq!(
        recorded_model(None, &["--model", p]).unwrap(),
        "calibrated(cpu=AMD EPYC 7713 64-Core Processor,vcpus=4,against=powercap,file=epyc.json)"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"format\":\"wattio-model/1\",\"points\":[]}").unwrap();
    let missing = dir.path().join("missing.json");
    for (args, needle) in [
        (
            vec!["--model", bad.to_str().unwrap()],
            "not a wattio model file",
        ),
        (vec!["--model", missing.to_str().unwrap()], "cannot read it"),
        (vec!["--model", p, "--model-min-w", "1"], "ccf-linear only"),
        (
            vec![
                "--model",
                "ccf-linear",
                "--model-min-w",
                "9",
                "--model-max-w",
                "1",
            ],
            "max ≥ min",
        ),
    ] {
        let e = recorded_model(None, &args).unwrap_err();
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(e.starts_with("wattio: error:"), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
}

#[test]
fn calibrate_refuses_without_rapl() {
    let dir = two_vcpu_machine("AuthenticAMD", 0x19, 0x11, "AMD EPYC");
    let out = dir.path().join("m.json");
    let o = wattio(
        Some(dir.path()),
        &["calibrate", "--seconds", "0.1", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.starts_with("wattio: error: calibrate needs a RAPL energy counter"),
        "{e}"
    );
    assert!(e.contains("powercap"), "{e}");
    assert!(!out.exists());
    let o = wattio(
        Some(dir.path()),
        &["calibrate", "--levels", "0,1", "-o", out.to_str().unwrap()],
    );
    assert!(
        text(&o.stderr).contains("three distinct"),
        "{}",
        text(&o.stderr)
    );
}
