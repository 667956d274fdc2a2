//! The `tdp-curve` model: the machine's CPU, its TDP from a public dataset, and a published
//! load → power curve.

use crate::cpu;
use crate::model_params::ModelParams;
use crate::root::SysRoot;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The Teads curve: (load fraction, power / TDP).
pub(crate) const TEADS_CURVE: [(f64, f64); 4] =
    [(0.0, 0.12), (0.10, 0.32), (0.50, 0.75), (1.0, 1.02)];

/// Where the TDP figures come from, for notes and docs.
pub(crate) const DATASET: &str =
    "CodeCarbon 3.3.2 cpu_power.csv (MIT; crates/energy/data/cpu_tdp.csv in the wattio repository)";

static CSV: &str = include_str!("../data/cpu_tdp.csv");

/// A processor name reduced to its identifying tokens, lowercase, single-spaced.
pub(crate) fn normalise(name: &str) -> String {
    let mut s = name.to_string();
    for mark in ["(R)", "(r)", "(TM)", "(tm)", "®", "™"] {
        s = s.replace(mark, " ");
    }
    if let Some(i) = s.find('@') {
        s.truncate(i);
    }
    // Zero-width and control characters (some dataset rows carry them) count as spaces.
    let s: String = s
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_control() || ('\u{200b}'..='\u{200d}').contains(&c) || c == '\u{feff}' {
                ' '
            } else {
                c
            }
        })
        .collect();
    let s = match s.find(" with ") {
        Some(i) if s[i..].contains("graphics") => s[..i].to_string(),
        _ => s,
    };
    let tokens: Vec<&str> = s.split_whitespace().collect();
    let mut out: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let digits = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit());
        let ordinal = ["st", "nd", "rd", "th"]
            .iter()
            .any(|suffix| t.strip_suffix(suffix).is_some_and(digits));
        if ordinal && tokens.get(i + 1) == Some(&"gen") {
            i += 2;
            continue;
        }
        let n_core = t.strip_suffix("-core").is_some_and(digits);
        if !(n_core || t == "cpu" || t == "processor") {
            out.push(t);
        }
        i += 1;
    }
    out.join(" ")
}

/// Normalised name → (name as the dataset spells it, TDP in watts).
fn table() -> &'static HashMap<String, (String, f64)> {
    static TABLE: OnceLock<HashMap<String, (String, f64)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        for line in CSV.lines().skip(1) {
            // A name may be quoted (it then holds commas); the TDP is the last field.
            let Some((name, tdp)) = line.rsplit_once(',') else {
                continue;
            };
            let name = name.trim().trim_matches('"');
            let Ok(tdp) = tdp.trim().parse::<f64>() else {
                continue;
            };
            if tdp.is_finite() && tdp > 0.0 {
                m.entry(normalise(name))
                    .or_insert_with(|| (name.to_string(), tdp));
            }
        }
        m
    })
}

/// The dataset's name and TDP (W) for a `model name` from `/proc/cpuinfo`, if it is listed.
pub(crate) fn lookup_tdp(model_name: &str) -> Option<(String, f64)> {
    let key = normalise(model_name);
    if key.is_empty() {
        return None;
    }
    table().get(&key).cloned()
}

/// The tdp-curve model for `tdp_w` spread over `threads` threads, on a machine with `vcpus`.
pub(crate) fn tdp_curve(cpu_name: &str, tdp_w: f64, threads: usize, vcpus: usize) -> ModelParams {
    let per_thread = tdp_w / threads.max(1) as f64;
    ModelParams {
        name: format!("tdp-curve(cpu={cpu_name},tdp={tdp_w}W,threads={threads},vcpus={vcpus})"),
        points: TEADS_CURVE
            .iter()
            .map(|&(u, r)| (u, per_thread * r))
            .collect(),
        notes: Vec::new(),
    }
}

/// Hardware threads per package when the processor's name says: an AMD EPYC name carries its
/// core count (`AMD EPYC 7713 64-Core Processor`) and every EPYC part runs two threads per core
/// (SMT; AMD's EPYC product specifications list threads = 2 × cores for all of them).
pub(crate) fn threads_from_name(model_name: &str) -> Option<usize> {
    if !model_name.contains("EPYC") {
        return None;
    }
    let core = model_name.split_whitespace().find_map(|w| {
        w.strip_suffix("-Core")
            .and_then(|n| n.parse::<usize>().ok())
    })?;
    (core > 0).then_some(2 * core)
}

/// `WATTIO_HOST_THREADS`: the host's hardware threads per package, for VMs.
pub(crate) fn host_threads_from_env() -> Result<Option<usize>, String> {
    match std::env::var("WATTIO_HOST_THREADS") {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "WATTIO_HOST_THREADS={v:?} is not a positive number of threads per package; unset it or give e.g. 64"
            )),
        },
        Err(_) => Ok(None),
    }
}

/// The tdp-curve model for this machine, or one line saying why there is none
/// (`WATTIO_HOST_THREADS` read from the environment).
pub(crate) fn tdp_curve_for_machine(root: &SysRoot) -> Result<ModelParams, String> {
    tdp_curve_for_machine_with(root, host_threads_from_env()?)
}

/// As [`tdp_curve_for_machine`], with the host's threads per package given (VMs).
pub(crate) fn tdp_curve_for_machine_with(
    root: &SysRoot,
    host_threads: Option<usize>,
) -> Result<ModelParams, String> {
    let id = cpu::cpu_id(root)
        .map_err(|e| format!("the CPU cannot be identified ({e}), so its TDP is unknown"))?;
    let (dataset_name, tdp) = lookup_tdp(&id.model_name).ok_or_else(|| {
        format!(
            "CPU '{}' is not in the TDP dataset ({DATASET})",
            id.model_name
        )
    })?;
    let packages =
        cpu::packages(root).map_err(|e| format!("the CPU topology cannot be read ({e})"))?;
    let vcpus: usize = packages.values().map(Vec::len).sum();
    let (threads, from) = if let Some(n) = host_threads {
        (n, "WATTIO_HOST_THREADS")
    } else if !crate::machine::virtualised(root) {
        (
            packages.values().map(Vec::len).max().unwrap_or(0),
            "/sys, not virtualised",
        )
    } else if let Some(n) = threads_from_name(&id.model_name) {
        (n, "the processor's name: EPYC, 2 threads per core")
    } else {
        return Err(format!(
            "CPU '{}' is in the TDP dataset ({tdp} W) but this machine is a VM (cpuinfo flag `hypervisor`): the physical CPU's thread count is not visible, its name does not say it and the dataset has none (set WATTIO_HOST_THREADS to the host's threads per package)",
            id.model_name
        ));
    };
    if threads == 0 {
        return Err("no online CPU is listed, so TDP cannot be divided among threads".into());
    }
    let mut m = tdp_curve(&dataset_name, tdp, threads, vcpus);
    m.notes.push(format!(
        "tdp-curve: '{}' is '{dataset_name}' in {DATASET}, TDP {tdp} W over {threads} threads per package (from {from}); watts = TDP/threads × 0.12, 0.32, 0.75, 1.02 at 0, 10, 50, 100 % load (Teads curve, Boavizta's default)",
        id.model_name
    ));
    Ok(m)
}

/// The meter's default model: tdp-curve when this machine's CPU and thread count are known,
/// else ccf-linear with the CPU's microarchitecture coefficients ([`crate::ModelChoice::CcfArch`]), else
/// ccf-linear with CCF's averages; the notes say which and why.
///
/// `WATTIO_DEFAULT_MODEL=ccf-linear` makes the default the CCF average whatever the CPU (the test
/// suite sets it, so figures it checks do not depend on the machine it runs on).
///
/// The `tdp-curve` model: the machine's CPU, its TDP from a public dataset, and a published
/// load → power curve.
///
/// * **TDP:** `/proc/cpuinfo`'s `model name` is looked up in `data/cpu_tdp.csv`, CodeCarbon's
///   `cpu_power.csv` (PyPI `codecarbon` 3.3.2, MIT; see `data/README.md`), after both names are
///   normalised the same way (`normalise`: `(R)`, `(TM)`, `CPU`, `Processor`, `NN-Core`,
///   `Nth Gen`, the clock after `@` and `with … Graphics` removed, case and spaces folded). Only an
///   exact match of the normalised names counts: a near match could be a different part with a
///   different TDP.
/// * **Curve:** power / TDP = 0.12 at 0 % load, 0.32 at 10 %, 0.75 at 50 %, 1.02 at 100 %, the
///   curve Teads published for CPU power relative to TDP ("Building an AWS EC2 Carbon Emissions
///   Dataset", Teads Engineering, 2021) and that Boavizta uses as its default CPU consumption profile
///   (`boaviztapi` 2.5.0, `boaviztapi/models/consumption_profile/consumption_profile.py`,
///   `CPUConsumptionProfileModel._TDP_RATIOS`), interpolated linearly.
/// * **Scale:** watts per vCPU = TDP / threads of the physical package × ratio. The threads come
///   from the machine: the online CPUs of each package in `/sys/devices/system/cpu`, which is
///   the physical count only when the machine is not virtualised. In a VM (`hypervisor` in
///   `/proc/cpuinfo`'s flags) the host's thread count is not visible and the dataset has none;
///   it is then taken from the name where the name says it (AMD EPYC names carry `NN-Core`, and
///   every EPYC runs two threads per core), or from `WATTIO_HOST_THREADS` (threads per package
///   of the host, which the cloud provider's instance documentation gives); otherwise the
///   default falls back to `ccf-linear` (with the CPU's microarchitecture coefficients where
///   [`crate::ModelChoice::CcfArch`] knows them, else CCF's averages) and says so rather than guess.
pub fn model_for_machine(root: &SysRoot) -> ModelParams {
    if std::env::var("WATTIO_DEFAULT_MODEL").as_deref() == Ok("ccf-linear") {
        let mut m = ModelParams::default();
        m.notes
            .push("the default model is ccf-linear because WATTIO_DEFAULT_MODEL=ccf-linear".into());
        return m;
    }
    model_for_machine_with(root, host_threads_from_env())
}

/// As [`for_machine`], with `WATTIO_HOST_THREADS` already read.
pub(crate) fn model_for_machine_with(
    root: &SysRoot,
    host_threads: Result<Option<usize>, String>,
) -> ModelParams {
    let no_tdp_curve = match host_threads.and_then(|h| tdp_curve_for_machine_with(root, h)) {
        Ok(m) => return m,
        Err(why) => why,
    };
    const CALIBRATE: &str = "`wattio calibrate` on a machine of this type with RAPL, then --model FILE, gives a measured curve";
    match crate::arch::ccf_arch_for_machine(root) {
        Ok(mut m) => {
            m.notes.push(format!(
                "tdp-curve was not used: {no_tdp_curve}; {CALIBRATE}"
            ));
            m
        }
        Err(no_arch) => {
            let mut m = ModelParams::default();
            m.notes.push(format!(
                "the default model fell back to ccf-linear with CCF's averages: {no_tdp_curve}; and no microarchitecture coefficients: {no_arch}; {CALIBRATE}"
            ));
            m
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_fixture as fixture;

    #[test]
    fn names_normalise() {
        assert_eq!(
            normalise("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"),
            "intel xeon gold 6130"
        );
        assert_eq!(
            normalise("AMD EPYC 7713 64-Core Processor"),
            "amd epyc 7713"
        );
        assert_eq!(
            normalise("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz"),
            "intel core i7-1185g7"
        );
        assert_eq!(
            normalise("AMD Ryzen 7 5800U with Radeon Graphics"),
            "amd ryzen 7 5800u"
        );
    }

    #[test]
    fn fixture_cpus_are_found() {
        type Build = fn(&std::path::Path) -> std::io::Result<fixture::FixtureTree>;
        let cases: [(Build, &str, f64); 3] = [
            (
                fixture::intel_two_socket_server,
                "Intel Xeon Gold 6130",
                125.0,
            ),
            (fixture::amd_epyc, "AMD EPYC 7713", 225.0),
            (fixture::intel_laptop, "Intel Core i7-1185G7", 28.0),
        ];
        for (build, name, tdp) in cases {
            let dir = tempfile::tempdir().unwrap();
            build(dir.path()).unwrap();
            let id = cpu::cpu_id(&SysRoot::new(dir.path())).unwrap();
            assert_eq!(
                lookup_tdp(&id.model_name),
                Some((name.to_string(), tdp)),
                "{}",
                id.model_name
            );
        }
    }

    #[test]
    fn real_names_and_misses() {
        let hit = |n: &str| lookup_tdp(n).map(|x| x.1);
        assert_eq!(
            hit("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"),
            Some(210.0)
        );
        assert_eq!(
            hit("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz"),
            Some(145.0)
        );
        assert_eq!(hit("AMD Ryzen 9 5950X 16-Core Processor"), Some(105.0));
        // What this project's cloud VM reports: no model number, so no TDP.
        assert_eq!(hit("AMD EPYC"), None);
        assert_eq!(hit("QEMU Virtual CPU version 2.5+"), None);
        assert_eq!(hit(""), None);
    }

    #[test]
    fn the_machine_model_scales_tdp_by_threads() {
        let dir = tempfile::tempdir().unwrap();
        fixture::intel_two_socket_server(dir.path()).unwrap();
        let m = model_for_machine_with(&SysRoot::new(dir.path()), Ok(None));
        m.validate().unwrap();
        assert_eq!(
            m.name(),
            "tdp-curve(cpu=Intel Xeon Gold 6130,tdp=125W,threads=4,vcpus=8)"
        );
        // 125 W over 4 threads = 31.25 W per vCPU × 0.12 idle, × 1.02 busy.
        assert!((m.min_w_per_cpu() - 3.75).abs() < 1e-12);
        assert!((m.max_w_per_cpu() - 31.875).abs() < 1e-12);
        assert!((m.watts_per_cpu(0.5) - 23.4375).abs() < 1e-12);
        // A socket's 4 vCPUs fully busy for 1 s: 1.02 × TDP.
        assert!((m.energy_j(4, 1.0, 4.0) - 127.5).abs() < 1e-9);
    }

    #[test]
    fn vms_and_unknown_cpus_fall_back_to_ccf_linear_and_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let t = fixture::amd_epyc(dir.path()).unwrap();
        let root = SysRoot::new(dir.path());
        let info = std::fs::read_to_string(t.path("/proc/cpuinfo")).unwrap();
        let as_vm =
            |info: &str| info.replace("model name", "flags\t\t: fpu hypervisor avx2\nmodel name");
        // A VM whose EPYC name carries its core count: 64 cores, 128 threads.
        assert!(info.contains("64-Core"), "{info}");
        t.write("/proc/cpuinfo", &as_vm(&info)).unwrap();
        let m = model_for_machine_with(&root, Ok(None));
        assert!(m.name().starts_with("tdp-curve("), "{}", m.name());
        assert!(m.name().contains("threads=128"), "{}", m.name());
        assert!(m.notes[0].contains("2 threads per core"), "{:?}", m.notes);
        // A VM whose name does not say: ccf-linear with the microarchitecture's coefficients
        // (Zen 3, EPYC 3rd Gen), unless the user gives the host's threads.
        t.write(
            "/proc/cpuinfo",
            &as_vm(&info.replace(" 64-Core Processor", " Processor")),
        )
        .unwrap();
        let m = model_for_machine_with(&root, Ok(None));
        assert_eq!(
            m.points,
            vec![(0.0, 0.45562453497023814), (1.0, 1.957333519345238)]
        );
        assert!(
            m.name().starts_with("ccf-linear(arch=EPYC 3rd Gen,"),
            "{}",
            m.name()
        );
        assert!(m.notes[0].contains("is Zen 3"), "{:?}", m.notes);
        assert!(
            m.notes[1].starts_with("tdp-curve was not used")
                && m.notes[1].contains("VM")
                && m.notes[1].contains("225")
                && m.notes[1].contains("WATTIO_HOST_THREADS"),
            "{:?}",
            m.notes
        );
        assert!(tdp_curve_for_machine_with(&root, None).is_err());
        let m = model_for_machine_with(&root, Ok(Some(96)));
        assert!(m.name().contains("threads=96"), "{}", m.name());
        // A bad WATTIO_HOST_THREADS is said, not ignored.
        let m = model_for_machine_with(&root, Err("WATTIO_HOST_THREADS=\"x\" is not …".into()));
        assert!(m.notes[1].contains("WATTIO_HOST_THREADS"), "{:?}", m.notes);
        // This project's VM: no name, but family 0x19 model 0x11 is Zen 4.
        t.cpuinfo("AuthenticAMD", 0x19, 0x11, "AMD EPYC", 2)
            .unwrap();
        let m = model_for_machine_with(&root, Ok(None));
        assert_eq!(
            m.name(),
            "ccf-linear(arch=EPYC 4th Gen,min=0.739W,max=2.282W per vCPU)"
        );
        assert!(m.notes[1].contains("'AMD EPYC' is not in the TDP dataset"));
        // A CPU known to neither: CCF's averages, and both reasons.
        t.cpuinfo("GenuineIntel", 6, 6, "QEMU Virtual CPU version 2.5+", 2)
            .unwrap();
        let m = model_for_machine_with(&root, Ok(None));
        assert_eq!(
            m,
            ModelParams {
                notes: m.notes.clone(),
                ..ModelParams::default()
            }
        );
        assert!(
            m.notes[0].contains("is not in the TDP dataset")
                && m.notes[0].contains("model 0x6 is not in wattio's microarchitecture table"),
            "{:?}",
            m.notes
        );
        assert_eq!(
            threads_from_name("AMD EPYC 7B13 64-Core Processor"),
            Some(128)
        );
        assert_eq!(threads_from_name("AMD EPYC 7R13 Processor"), None);
        assert_eq!(
            threads_from_name("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"),
            None
        );
    }

    #[test]
    fn this_machine_resolves_to_some_valid_model() {
        let m = model_for_machine_with(&SysRoot::new("/"), Ok(None));
        m.validate().unwrap();
        assert!(
            m.name().starts_with("tdp-curve(") || m.name().starts_with("ccf-linear("),
            "{}",
            m.name()
        );
        assert!(!m.notes.is_empty());
    }
}
