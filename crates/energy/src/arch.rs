//! The CPU's microarchitecture, and the Cloud Carbon Footprint (CCF) coefficients for it: the
//! `ccf-linear(arch=…)` model, the default on VMs whose CPU name hides the part.

use crate::cpu::{self, CpuId, Vendor};
use crate::model_params::ModelParams;
use crate::root::SysRoot;
use std::sync::OnceLock;

/// Where the coefficients come from, for notes and docs.
pub(crate) const CCF_TABLE: &str = "ccf-coefficients output/coefficients-aws-use.csv, Apache-2.0, in crates/energy/data/ of the wattio repository";

/// Rows of the table that are not used, and why.
///
/// The EPYC 5th Gen row (3.68 W idle, 8.96 W busy per thread, four times EPYC 4th Gen) is not a
/// Zen 5 figure: ccf-coefficients' `data/amd-epyc-gen5.csv` ends in 49 blank lines, each of
/// which becomes a pattern matching every SPECpower result, so the row averages 1039 of the
/// 1088 results of every CPU since 2007.
pub(crate) const UNUSABLE_ROWS: &[(&str, &str)] = &[(
    "EPYC 5th Gen",
    "CCF's EPYC 5th Gen row averages 1039 of the 1088 SPECpower results of every CPU, not Zen 5 servers (blank lines in its CPU list match everything)",
)];

static CSV: &str = include_str!("../data/ccf_coefficients_aws_use.csv");

/// A microarchitecture and how it was recognised.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Microarch {
    /// As CCF's table names it where the table has it (`EPYC 4th Gen`, `Ice Lake`), else the
    /// vendor's code name (`Tiger Lake`).
    pub name: &'static str,
    /// How it was recognised, for `probe`'s note.
    pub evidence: String,
}

/// `(architecture, min W, max W per vCPU)` rows of the vendored table, as written there.
pub(crate) fn ccf_table() -> &'static [(String, f64, f64)] {
    static TABLE: OnceLock<Vec<(String, f64, f64)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        CSV.lines()
            .skip(1)
            .filter_map(|line| {
                // `index,Architecture,Min Watts,Max Watts,GB/Chip`
                let f: Vec<&str> = line.split(',').map(str::trim).collect();
                let arch = f.get(1)?.to_string();
                let (min, max): (f64, f64) = (f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?);
                let sane = |w: f64| w.is_finite() && w >= 0.0;
                (sane(min) && sane(max) && max >= min).then_some((arch, min, max))
            })
            .collect()
    })
}

/// CCF's `(min, max)` watts per vCPU for `arch`, or one line saying why there are none.
pub(crate) fn ccf_coefficients(arch: &str) -> Result<(f64, f64), String> {
    if let Some((_, why)) = UNUSABLE_ROWS.iter().find(|(a, _)| *a == arch) {
        return Err(format!("{why}, so it is not used"));
    }
    ccf_table()
        .iter()
        .find(|(a, _, _)| a == arch)
        .map(|&(_, min, max)| (min, max))
        .ok_or_else(|| format!("CCF's table has no coefficients for {arch}"))
}

/// Model (or stepping) numbers and the microarchitecture they name.
type NumbersArch = (&'static [u32], &'static str);

/// Intel family 6 models with one microarchitecture (Linux `intel-family.h`).
const INTEL_FAMILY_6: &[NumbersArch] = &[
    (&[0x2A, 0x2D], "Sandy Bridge"),
    (&[0x3A, 0x3E], "Ivy Bridge"),
    (&[0x3C, 0x3F, 0x45, 0x46], "Haswell"),
    (&[0x3D, 0x47, 0x4F, 0x56], "Broadwell"),
    (&[0x4E, 0x5E], "Skylake"),
    (&[0xA5, 0xA6], "Comet Lake"),
    (&[0x6A, 0x6C, 0x7D, 0x7E, 0x9D], "Ice Lake"),
    (&[0xA7], "Rocket Lake"),
    (&[0x8C, 0x8D], "Tiger Lake"),
    (&[0x8F], "Sapphire Rapids"),
    (&[0xCF], "Emerald Rapids"),
    (&[0xAD, 0xAE], "Granite Rapids"),
    (&[0x97, 0x9A], "Alder Lake"),
    (&[0xB7, 0xBA, 0xBF], "Raptor Lake"),
    (&[0xAA, 0xAC], "Meteor Lake"),
    (&[0xAF], "Sierra Forest"),
    (&[0x86], "Tremont"),
];

/// Intel family 6 models shared by several microarchitectures, told apart by stepping:
/// `(model, [(steppings, microarchitecture)])`.
const INTEL_BY_STEPPING: &[(u32, &[NumbersArch])] = &[
    (
        0x55,
        &[
            (&[3, 4], "Skylake"),
            (&[6, 7], "Cascade Lake"),
            (&[10, 11], "Cooper Lake"),
        ],
    ),
    (
        0x8E,
        &[
            (&[9], "Kaby Lake"),
            (&[10], "Coffee Lake"),
            (&[11, 12], "Whiskey Lake"),
        ],
    ),
    (
        0x9E,
        &[(&[9], "Kaby Lake"), (&[10, 11, 12, 13], "Coffee Lake")],
    ),
];

/// An AMD family's model ranges of one Zen generation (Linux `amd.c`, `bsp_init_amd`).
struct ZenGeneration {
    family: u32,
    models: &'static [(u32, u32)],
    zen: &'static str,
    /// What CCF's table calls the EPYC parts of this generation.
    ccf: &'static str,
}

const AMD_ZEN: &[ZenGeneration] = &[
    ZenGeneration {
        family: 0x17,
        models: &[(0x00, 0x2F), (0x50, 0x5F)],
        zen: "Zen",
        ccf: "EPYC 1st Gen",
    },
    ZenGeneration {
        family: 0x17,
        models: &[(0x30, 0x4F), (0x60, 0x7F), (0x90, 0x91), (0xA0, 0xAF)],
        zen: "Zen 2",
        ccf: "EPYC 2nd Gen",
    },
    ZenGeneration {
        family: 0x19,
        models: &[(0x00, 0x0F), (0x20, 0x5F)],
        zen: "Zen 3",
        ccf: "EPYC 3rd Gen",
    },
    ZenGeneration {
        family: 0x19,
        models: &[(0x10, 0x1F), (0x60, 0xAF)],
        zen: "Zen 4",
        ccf: "EPYC 4th Gen",
    },
    ZenGeneration {
        family: 0x1A,
        models: &[(0x00, 0x2F), (0x40, 0x4F), (0x60, 0x7F)],
        zen: "Zen 5",
        ccf: "EPYC 5th Gen",
    },
];

/// The microarchitecture CPUID's family, model and stepping name, or one line saying why not.
pub(crate) fn from_cpuid(id: &CpuId, stepping: Option<u32>) -> Result<Microarch, String> {
    let (family, model) = (id.family, id.model);
    match id.vendor {
        Vendor::Intel if family == 6 => {
            let intel = |name: &'static str, source: &str| Microarch {
                name,
                evidence: format!("Intel family 6 model {model:#x} is {name} ({source})"),
            };
            if let Some((_, name)) = INTEL_FAMILY_6.iter().find(|(m, _)| m.contains(&model)) {
                return Ok(intel(name, "Linux arch/x86/include/asm/intel-family.h"));
            }
            let Some((_, by_stepping)) = INTEL_BY_STEPPING.iter().find(|(m, _)| *m == model)
            else {
                return Err(format!(
                    "Intel family 6 model {model:#x} is not in wattio's microarchitecture table"
                ));
            };
            let all: Vec<&str> = by_stepping.iter().map(|(_, n)| *n).collect();
            let found = stepping.and_then(|s| by_stepping.iter().find(|(st, _)| st.contains(&s)));
            match (found, stepping) {
                (Some((_, name)), Some(s)) => Ok(Microarch {
                    name,
                    evidence: format!(
                        "Intel family 6 model {model:#x} stepping {s} is {name} (Intel's microcode release notes; Linux intel-family.h)"
                    ),
                }),
                (_, Some(s)) => Err(format!(
                    "Intel family 6 model {model:#x} is {} by stepping, and stepping {s} is none wattio knows",
                    all.join(", ")
                )),
                (_, None) => Err(format!(
                    "Intel family 6 model {model:#x} is {} by stepping, and /proc/cpuinfo lists no stepping",
                    all.join(", ")
                )),
            }
        }
        Vendor::Amd => AMD_ZEN
            .iter()
            .find(|g| {
                g.family == family && g.models.iter().any(|&(lo, hi)| (lo..=hi).contains(&model))
            })
            .map(|g| Microarch {
                name: g.ccf,
                evidence: format!(
                    "AMD family {family:#x} model {model:#x} is {} (Linux arch/x86/kernel/cpu/amd.c), the core of CCF's {}",
                    g.zen, g.ccf
                ),
            })
            .ok_or_else(|| {
                format!("AMD family {family:#x} model {model:#x} is no Zen generation wattio knows")
            }),
        _ => Err(format!(
            "family {family:#x} model {model:#x} of this vendor is not in wattio's microarchitecture table"
        )),
    }
}

/// Code names that hypervisors' CPU models carry (`Intel Xeon Processor (Icelake)`,
/// `AMD EPYC-Milan Processor`), compared with letters and digits only, lowercase.
const NAME_CODENAMES: &[(&str, &str)] = &[
    ("sapphirerapids", "Sapphire Rapids"),
    ("emeraldrapids", "Emerald Rapids"),
    ("graniterapids", "Granite Rapids"),
    ("icelake", "Ice Lake"),
    ("cascadelake", "Cascade Lake"),
    ("cooperlake", "Cooper Lake"),
    ("skylake", "Skylake"),
    ("broadwell", "Broadwell"),
    ("haswell", "Haswell"),
    ("ivybridge", "Ivy Bridge"),
    ("sandybridge", "Sandy Bridge"),
    ("epycrome", "EPYC 2nd Gen"),
    ("epycmilan", "EPYC 3rd Gen"),
    ("epycgenoa", "EPYC 4th Gen"),
    ("epycturin", "EPYC 5th Gen"),
];

const EPYC_GENERATIONS: [&str; 5] = [
    "EPYC 1st Gen",
    "EPYC 2nd Gen",
    "EPYC 3rd Gen",
    "EPYC 4th Gen",
    "EPYC 5th Gen",
];

/// Xeon Scalable generations 1 to 5 by the second digit of the model number; 3rd-generation
/// parts ending in `H`/`HL` are Cooper Lake (Xeon Platinum 8380H), the others Ice Lake.
const XEON_SCALABLE_GENERATIONS: [&str; 5] = [
    "Skylake",
    "Cascade Lake",
    "Ice Lake",
    "Sapphire Rapids",
    "Emerald Rapids",
];

/// The four-character model number after `word` in `name` (`EPYC 7B13` → `7B13`), with the
/// rest of that token (`8259CL` → `8259`, `CL`).
fn model_number_after<'a>(name: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let mut words = name.split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case(word))?;
    let token = words.next()?;
    let number = token.get(..4)?;
    number
        .chars()
        .all(|c| c.is_ascii_alphanumeric())
        .then(|| (number, &token[4..]))
}

/// The digit at `i` of a model number, if it is one in 1..=5.
fn generation_digit(number: &str, i: usize) -> Option<usize> {
    let d = number.chars().nth(i)?.to_digit(10)? as usize;
    (1..=5).contains(&d).then_some(d)
}

/// The microarchitecture a `model name` states, if it states one.
pub(crate) fn from_name(model_name: &str) -> Option<Microarch> {
    let squashed: String = model_name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if let Some((_, name)) = NAME_CODENAMES.iter().find(|(k, _)| squashed.contains(k)) {
        return Some(Microarch {
            name,
            evidence: format!("the name '{model_name}' says {name}"),
        });
    }
    if let Some((number, _)) = model_number_after(model_name, "EPYC") {
        let digit_first = number.starts_with(|c: char| c.is_ascii_digit());
        if let Some(g) = generation_digit(number, 3).filter(|_| digit_first) {
            let name = EPYC_GENERATIONS[g - 1];
            return Some(Microarch {
                name,
                evidence: format!(
                    "the EPYC model number {number} in '{model_name}' ends in {g}: {name}"
                ),
            });
        }
    }
    for tier in ["Platinum", "Gold", "Silver", "Bronze"] {
        let Some((number, suffix)) = model_number_after(model_name, tier) else {
            continue;
        };
        if !number.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Some(g) = generation_digit(number, 1) {
            let name = if g == 3 && suffix.starts_with('H') {
                "Cooper Lake"
            } else {
                XEON_SCALABLE_GENERATIONS[g - 1]
            };
            return Some(Microarch {
                name,
                evidence: format!(
                    "the Xeon Scalable model number {number}{suffix} in '{model_name}' is generation {g}: {name}"
                ),
            });
        }
    }
    None
}

/// This CPU's microarchitecture with CCF coefficients, `(microarchitecture, min W, max W)`, or
/// one line saying why there is none.
pub(crate) fn identify(id: &CpuId, stepping: Option<u32>) -> Result<(Microarch, f64, f64), String> {
    let by_cpuid = from_cpuid(id, stepping);
    let by_name = from_name(&id.model_name);
    let cpuid_says = match &by_cpuid {
        Ok(arch) => match ccf_coefficients(arch.name) {
            Ok((min, max)) => {
                let mut arch = arch.clone();
                if let Some(other) = by_name.filter(|n| n.name != arch.name) {
                    arch.evidence.push_str(&format!(
                        "; {}, but family and model take precedence",
                        other.evidence
                    ));
                }
                return Ok((arch, min, max));
            }
            Err(why) => format!("{}, and {why}", arch.evidence),
        },
        Err(why) => why.clone(),
    };
    match by_name {
        Some(mut arch) => match ccf_coefficients(arch.name) {
            Ok((min, max)) => {
                arch.evidence = format!("{} ({cpuid_says})", arch.evidence);
                Ok((arch, min, max))
            }
            Err(why) => Err(format!("{cpuid_says}; {}, and {why}", arch.evidence)),
        },
        None => Err(cpuid_says),
    }
}

/// The ccf-linear model with `arch`'s coefficients (named with them, to 3 decimals).
pub(crate) fn ccf_arch_model(arch: &str, min_w: f64, max_w: f64) -> ModelParams {
    ModelParams {
        name: format!("ccf-linear(arch={arch},min={min_w:.3}W,max={max_w:.3}W per vCPU)"),
        points: vec![(0.0, min_w), (1.0, max_w)],
        notes: Vec::new(),
    }
}

/// The ccf-linear model with this machine's microarchitecture coefficients, or one line saying
/// why there is none.
pub(crate) fn ccf_arch_for_machine(root: &SysRoot) -> Result<ModelParams, String> {
    let id = cpu::cpu_id(root).map_err(|e| {
        format!("the CPU cannot be identified ({e}), so its microarchitecture is unknown")
    })?;
    let (arch, min, max) = identify(&id, cpu::stepping(root))?;
    let mut m = ccf_arch_model(arch.name, min, max);
    m.notes.push(format!(
        "ccf-linear with Cloud Carbon Footprint's {} coefficients, {min:.4} W idle and {max:.4} W busy per vCPU (SPECpower servers' wall power per hardware thread; table: {CCF_TABLE}): {}",
        arch.name, arch.evidence
    ));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_fixture::{self as fixture, FixtureTree};

    /// One `/proc/cpuinfo` processor block as a VM shows it (the `hypervisor` flag set).
    fn vm_cpuinfo(vendor: &str, family: u32, model: u32, stepping: u32, name: &str) -> String {
        format!(
            "processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {name}\nstepping\t: {stepping}\nflags\t\t: fpu msr hypervisor avx2\n\nprocessor\t: 1\nvendor_id\t: {vendor}\n"
        )
    }

    /// The model for a fixture machine whose cpuinfo is `cpuinfo`.
    fn model_for(cpuinfo: &str) -> Result<ModelParams, String> {
        let dir = tempfile::tempdir().unwrap();
        let t = FixtureTree::new(dir.path()).unwrap();
        t.write("/proc/cpuinfo", cpuinfo).unwrap();
        t.topology(&[(0, 0, 0), (1, 0, 1)]).unwrap();
        ccf_arch_for_machine(&SysRoot::new(dir.path()))
    }

    #[test]
    fn the_vendored_table_parses_whole() {
        let t = ccf_table();
        assert_eq!(t.len(), 20, "{t:?}");
        // First and last rows as the file has them.
        assert_eq!(
            t[0],
            ("Broadwell".into(), 0.7128342245989305, 3.685327540106952)
        );
        assert_eq!(
            t[19],
            ("Skylake".into(), 0.6129888539040325, 4.104170352960531)
        );
        let e = ccf_coefficients("EPYC 5th Gen").unwrap_err();
        assert!(e.contains("1039 of the 1088"), "{e}");
        let e = ccf_coefficients("Tiger Lake").unwrap_err();
        assert!(e.contains("no coefficients for Tiger Lake"), "{e}");
    }

    #[test]
    fn this_projects_vm_masked_epyc_is_genoa() {
        // What this project's VM shows: the name says nothing, family 25 model 17 is Zen 4.
        let m = model_for(&vm_cpuinfo("AuthenticAMD", 25, 17, 1, "AMD EPYC")).unwrap();
        assert_eq!(
            m.points,
            vec![(0.0, 0.7391482469512195), (1.0, 2.282155106707317)]
        );
        assert_eq!(
            m.name(),
            "ccf-linear(arch=EPYC 4th Gen,min=0.739W,max=2.282W per vCPU)"
        );
        assert!(
            m.notes[0].contains("AMD family 0x19 model 0x11 is Zen 4"),
            "{:?}",
            m.notes
        );
        m.validate().unwrap();
        // 2 vCPUs, 10 s, one busy: 0.7391…·2·10 + (2.2821…−0.7391…)·10
        let e = m.energy_j(2, 10.0, 10.0);
        let by_hand = 0.7391482469512195 * 20.0 + (2.282155106707317 - 0.7391482469512195) * 10.0;
        assert!((e - by_hand).abs() < 1e-12, "{e} {by_hand}");
    }

    #[test]
    fn masked_intel_names_are_recognised_by_family_and_model() {
        // A KVM guest with the Icelake-Server name and a real Ice Lake-SP model number.
        let m = model_for(&vm_cpuinfo(
            "GenuineIntel",
            6,
            106,
            6,
            "Intel Xeon Processor (Icelake)",
        ))
        .unwrap();
        assert_eq!(
            m.points,
            vec![(0.0, 0.766796875), (1.0, 3.7582031249999996)]
        );
        assert!(
            m.name().starts_with("ccf-linear(arch=Ice Lake,"),
            "{}",
            m.name()
        );
        // GCP's masked names: Cascade Lake (stepping 7), Skylake (stepping 3), Broadwell.
        let gcp = "Intel(R) Xeon(R) CPU @ 2.20GHz";
        let cases = [
            (
                85,
                7,
                "Cascade Lake",
                (0.6902978319127387, 4.063193520161689),
            ),
            (85, 3, "Skylake", (0.6129888539040325, 4.104170352960531)),
            (79, 0, "Broadwell", (0.7128342245989305, 3.685327540106952)),
        ];
        for (model, stepping, arch, (min, max)) in cases {
            let m = model_for(&vm_cpuinfo("GenuineIntel", 6, model, stepping, gcp)).unwrap();
            assert_eq!(m.points, vec![(0.0, min), (1.0, max)], "{model} {stepping}");
            assert!(m.name().contains(&format!("arch={arch},")), "{}", m.name());
        }
    }

    #[test]
    fn the_name_decides_where_family_and_model_do_not() {
        // QEMU's Icelake-Server reports model 134 (Linux: Tremont-D): the name says Ice Lake.
        let m = model_for(&vm_cpuinfo(
            "GenuineIntel",
            6,
            134,
            0,
            "Intel Xeon Processor (Icelake)",
        ))
        .unwrap();
        assert_eq!(
            m.points,
            vec![(0.0, 0.766796875), (1.0, 3.7582031249999996)]
        );
        assert!(m.notes[0].contains("Tremont"), "{:?}", m.notes);
        // Model 0x55 with a stepping wattio does not know: the Xeon Scalable number decides.
        let m = model_for(&vm_cpuinfo(
            "GenuineIntel",
            6,
            85,
            5,
            "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz",
        ))
        .unwrap();
        assert!(m.name().contains("arch=Cascade Lake,"), "{}", m.name());
        // Neither says: one line with both reasons.
        let e = model_for(&vm_cpuinfo(
            "GenuineIntel",
            6,
            85,
            5,
            "Intel(R) Xeon(R) CPU @ 2.20GHz",
        ))
        .unwrap_err();
        assert!(e.contains("stepping 5 is none wattio knows"), "{e}");
        let e = model_for(&vm_cpuinfo(
            "GenuineIntel",
            6,
            6,
            3,
            "QEMU Virtual CPU version 2.5+",
        ))
        .unwrap_err();
        assert!(e.contains("model 0x6 is not in"), "{e}");
        // A Zen 5 part is recognised, and the broken row refused with the reason.
        let e = model_for(&vm_cpuinfo("AuthenticAMD", 26, 2, 1, "AMD EPYC 9R45")).unwrap_err();
        assert!(e.contains("Zen 5") && e.contains("not used"), "{e}");
    }

    #[test]
    fn names_state_microarchitectures() {
        let arch = |n: &str| from_name(n).map(|a| a.name);
        assert_eq!(
            arch("AMD EPYC 7763 64-Core Processor"),
            Some("EPYC 3rd Gen")
        );
        assert_eq!(arch("AMD EPYC 7R32"), Some("EPYC 2nd Gen"));
        assert_eq!(arch("AMD EPYC 9B14"), Some("EPYC 4th Gen"));
        assert_eq!(arch("AMD EPYC 7571"), Some("EPYC 1st Gen"));
        assert_eq!(arch("AMD EPYC-Milan Processor"), Some("EPYC 3rd Gen"));
        assert_eq!(arch("AMD EPYC-Rome Processor"), Some("EPYC 2nd Gen"));
        assert_eq!(arch("AMD EPYC"), None);
        assert_eq!(
            arch("Intel Xeon Processor (Cascadelake)"),
            Some("Cascade Lake")
        );
        assert_eq!(
            arch("Intel Xeon Processor (SapphireRapids)"),
            Some("Sapphire Rapids")
        );
        assert_eq!(
            arch("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"),
            Some("Skylake")
        );
        assert_eq!(
            arch("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"),
            Some("Ice Lake")
        );
        assert_eq!(
            arch("Intel(R) Xeon(R) Platinum 8488C"),
            Some("Sapphire Rapids")
        );
        assert_eq!(
            arch("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz"),
            Some("Cooper Lake")
        );
        assert_eq!(arch("Intel(R) Xeon(R) CPU @ 2.20GHz"), None);
        assert_eq!(arch("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz"), None);
        assert_eq!(arch(""), None);
    }

    #[test]
    fn fixture_machines() {
        type Build = fn(&std::path::Path) -> std::io::Result<fixture::FixtureTree>;
        /// `Ok((microarchitecture, min, max))`, or a piece of the reason there is none.
        type Want = Result<(&'static str, f64, f64), &'static str>;
        let cases: [(Build, Want); 3] = [
            // Model 0x55 without a stepping line: the Xeon Scalable number says Skylake.
            (
                fixture::intel_two_socket_server,
                Ok(("Skylake", 0.6129888539040325, 4.104170352960531)),
            ),
            (
                fixture::amd_epyc,
                Ok(("EPYC 3rd Gen", 0.45562453497023814, 1.957333519345238)),
            ),
            (
                fixture::intel_laptop,
                Err("is Tiger Lake (Linux arch/x86/include/asm/intel-family.h), and CCF's table has no coefficients for Tiger Lake"),
            ),
        ];
        for (build, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            build(dir.path()).unwrap();
            let got = ccf_arch_for_machine(&SysRoot::new(dir.path()));
            match (got, want) {
                (Ok(m), Ok((arch, min, max))) => {
                    assert_eq!(m.points, vec![(0.0, min), (1.0, max)], "{arch}");
                    assert!(m.name().contains(&format!("arch={arch},")), "{}", m.name());
                }
                (Err(e), Err(needle)) => assert!(e.contains(needle), "{e}"),
                (got, want) => panic!("got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn family_and_model_win_over_a_disagreeing_name() {
        let id = CpuId {
            vendor: Vendor::Amd,
            family: 0x19,
            model: 0x11,
            model_name: "AMD EPYC 7763 64-Core Processor".into(),
        };
        let (arch, min, _) = identify(&id, None).unwrap();
        assert_eq!((arch.name, min), ("EPYC 4th Gen", 0.7391482469512195));
        assert!(
            arch.evidence.contains("take precedence"),
            "{}",
            arch.evidence
        );
    }
}
