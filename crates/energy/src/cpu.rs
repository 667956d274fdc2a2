//! Processor identity and topology, read from `/proc/cpuinfo` and `/sys/devices/system/cpu`.

use crate::error::EnergyError;
use crate::root::SysRoot;
use std::collections::BTreeMap;
use std::fs;

/// The CPU vendor, as far as RAPL register layouts are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    /// AMD and Hygon share the RAPL MSR layout (family 17h and later).
    Amd,
    Other,
}

/// Vendor, family and model of the first processor in `/proc/cpuinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: Vendor,
    pub family: u32,
    pub model: u32,
    pub model_name: String,
}

/// Reads the first processor's identity from `/proc/cpuinfo`.
pub fn cpu_id(root: &SysRoot) -> Result<CpuId, EnergyError> {
    let path = root.path("/proc/cpuinfo");
    let text = fs::read_to_string(&path)
        .map_err(|e| EnergyError::from_io(&path, e, "is /proc mounted?"))?;
    parse_cpuinfo(&text).ok_or_else(|| EnergyError::Malformed {
        path,
        content: text.lines().next().unwrap_or("").to_string(),
        expected: "vendor_id, cpu family and model lines".into(),
        fix: "check WATTIO_ROOT points at a real or complete fixture tree".into(),
    })
}

/// The `key: value` lines of the first processor block of `/proc/cpuinfo`, keys trimmed.
fn first_processor(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut seen_fields = false;
    text.lines()
        .take_while(move |line| {
            // A blank line after the first fields ends the first processor block.
            let end = line.trim().is_empty() && seen_fields;
            seen_fields |= line.contains(':');
            !end
        })
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
}

fn parse_cpuinfo(text: &str) -> Option<CpuId> {
    let mut vendor = None;
    let mut family = None;
    let mut model = None;
    let mut model_name = String::new();
    for (key, value) in first_processor(text) {
        match key {
            "vendor_id" => {
                vendor = Some(match value {
                    "GenuineIntel" => Vendor::Intel,
                    "AuthenticAMD" | "HygonGenuine" => Vendor::Amd,
                    _ => Vendor::Other,
                })
            }
            "cpu family" => family = value.parse().ok(),
            "model" => model = value.parse().ok(),
            "model name" => model_name = value.to_string(),
            _ => {}
        }
    }
    Some(CpuId {
        vendor: vendor?,
        family: family?,
        model: model?,
        model_name,
    })
}

/// The first processor's CPUID stepping from `/proc/cpuinfo`, where it is listed.
///
/// It tells apart processors that share a model number (Intel family 6 model 0x55 is Skylake-SP,
/// Cascade Lake or Cooper Lake by stepping).
pub(crate) fn stepping(root: &SysRoot) -> Option<u32> {
    let text = fs::read_to_string(root.path("/proc/cpuinfo")).ok()?;
    parse_stepping(&text)
}

fn parse_stepping(text: &str) -> Option<u32> {
    first_processor(text)
        .find(|(k, _)| *k == "stepping")
        .and_then(|(_, v)| v.parse().ok())
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub(crate) fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// Online CPUs grouped by physical package: package id → CPUs, in ascending order.
pub(crate) fn packages(root: &SysRoot) -> Result<BTreeMap<u32, Vec<u32>>, EnergyError> {
    let online_path = root.path("/sys/devices/system/cpu/online");
    let online = fs::read_to_string(&online_path)
        .map_err(|e| EnergyError::from_io(&online_path, e, "is /sys mounted?"))?;
    let cpus = parse_cpu_list(&online).ok_or_else(|| EnergyError::Malformed {
        path: online_path.clone(),
        content: online.trim().to_string(),
        expected: "a CPU list such as 0-3,8".into(),
        fix: "check WATTIO_ROOT".into(),
    })?;
    let mut map: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for cpu in cpus {
        let p = root.path(format!(
            "/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"
        ));
        // A missing topology file means a single-package machine (some VMs, old kernels).
        let pkg = match fs::read_to_string(&p) {
            Ok(s) => s
                .trim()
                .parse::<i64>()
                .map_err(|_| EnergyError::Malformed {
                    path: p.clone(),
                    content: s.trim().to_string(),
                    expected: "a package number".into(),
                    fix: "check WATTIO_ROOT".into(),
                })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(EnergyError::from_io(&p, e, "is /sys mounted?")),
        };
        // -1 is what the kernel reports when it does not know: treat as package 0.
        map.entry(pkg.max(0) as u32).or_default().push(cpu);
    }
    Ok(map)
}

/// Number of online CPUs.
pub fn online_cpu_count(root: &SysRoot) -> Result<usize, EnergyError> {
    Ok(packages(root)?.values().map(Vec::len).sum())
}

/// Where the Intel DRAM domain uses a fixed 2^-16 J (15.3 µJ) energy unit instead of the one in
/// `MSR_RAPL_POWER_UNIT`.
///
/// Source: Linux `arch/x86/events/rapl.c` (`RAPL_UNIT_QUIRK_INTEL_HSW` in `rapl_model_match`)
/// and `drivers/powercap/intel_rapl_common.c` (`rapl_defaults_hsw_server`), Intel Xeon E5 v3
/// datasheet vol. 2 (330784-001); Sapphire and Emerald Rapids use the standard unit since kernel
/// commit 4c081324df56 ("powercap: intel_rapl: Use standard Energy Unit for SPR Dram RAPL domain").
pub(crate) const INTEL_DRAM_FIXED_UNIT_MODELS: &[(u32, &str)] = &[
    (0x3F, "Haswell-X (Xeon E5/E7 v3)"),
    (0x4F, "Broadwell-X (Xeon E5/E7 v4)"),
    (0x56, "Broadwell-D (Xeon D-1500)"),
    (0x55, "Skylake-X / Cascade Lake / Cooper Lake"),
    (0x6A, "Ice Lake-X (Xeon 3rd gen)"),
    (0x6C, "Ice Lake-D"),
    (0x57, "Xeon Phi Knights Landing"),
    (0x85, "Xeon Phi Knights Mill"),
];

/// The fixed DRAM unit exponent (2^-16 J) of [`INTEL_DRAM_FIXED_UNIT_MODELS`].
pub(crate) const INTEL_DRAM_FIXED_ESU: u32 = 16;

/// Whether `id` is a processor whose DRAM counter uses the fixed 2^-16 J unit.
pub(crate) fn has_intel_dram_unit_quirk(id: &CpuId) -> bool {
    id.vendor == Vendor::Intel
        && id.family == 6
        && INTEL_DRAM_FIXED_UNIT_MODELS
            .iter()
            .any(|(m, _)| *m == id.model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn cpuinfo_first_block() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7713\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";
        let id = parse_cpuinfo(text).unwrap();
        assert_eq!(id.vendor, Vendor::Amd);
        assert_eq!((id.family, id.model), (25, 1));
        assert_eq!(id.model_name, "AMD EPYC 7713");
        assert!(parse_cpuinfo("garbage").is_none());
        // The stepping is the first block's; a block without one has none.
        assert_eq!(
            parse_stepping("model\t\t: 85\nstepping\t: 7\n\nstepping\t: 4\n"),
            Some(7)
        );
        assert_eq!(parse_stepping(text), None);
        assert_eq!(parse_stepping("stepping\t: unknown\n"), None);
    }

    #[test]
    fn dram_quirk_covers_servers_not_sapphire_rapids() {
        let mk = |model| CpuId {
            vendor: Vendor::Intel,
            family: 6,
            model,
            model_name: String::new(),
        };
        assert!(has_intel_dram_unit_quirk(&mk(0x55))); // Skylake-X
        assert!(has_intel_dram_unit_quirk(&mk(0x3F))); // Haswell-X
        assert!(!has_intel_dram_unit_quirk(&mk(0x8F))); // Sapphire Rapids
        assert!(!has_intel_dram_unit_quirk(&mk(0x8C))); // Tiger Lake laptop
    }
}
