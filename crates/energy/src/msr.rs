//! RAPL through model-specific registers (`/dev/cpu/N/msr`).

use crate::cpu::{self, CpuId, Vendor};
use crate::error::EnergyError;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::wrap::wrapping_delta;
use crate::Source;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const INTEL_POWER_UNIT: u64 = 0x606;
pub const INTEL_PKG_ENERGY: u64 = 0x611;
pub const INTEL_PP0_ENERGY: u64 = 0x639;
pub const INTEL_PP1_ENERGY: u64 = 0x641;
pub const INTEL_DRAM_ENERGY: u64 = 0x619;
pub const INTEL_PLATFORM_ENERGY: u64 = 0x64D;
pub const AMD_POWER_UNIT: u64 = 0xC001_0299;
pub const AMD_CORE_ENERGY: u64 = 0xC001_029A;
pub const AMD_PKG_ENERGY: u64 = 0xC001_029B;

/// The fix printed when an MSR device cannot be opened.
pub(crate) const PERMISSION_FIX: &str = "reading MSRs needs root or CAP_SYS_RAWIO: run as root, or `sudo setcap cap_sys_rawio=ep $(command -v wattio)` and make /dev/cpu/*/msr readable";
/// The fix printed when the MSR device does not exist.
pub(crate) const MISSING_FIX: &str = "load the msr kernel module: `sudo modprobe msr`";

/// Intel models whose psys counter uses a fixed 1 J unit (kernel `RAPL_UNIT_QUIRK_INTEL_SPR`).
pub(crate) const INTEL_PSYS_FIXED_1J_MODELS: &[(u32, &str)] =
    &[(0x8F, "Sapphire Rapids-X"), (0xCF, "Emerald Rapids-X")];

/// Intel Atom models whose energy unit is `2^ESU` µJ instead of `2^-ESU` J (turbostat, likwid).
pub(crate) const INTEL_SILVERMONT_MODELS: &[(u32, &str)] = &[
    (0x37, "Atom Silvermont (Bay Trail)"),
    (0x4D, "Atom Silvermont-D (Avoton)"),
];

/// Energy-status-unit exponent from a unit register value (bits 12:8).
pub fn msr_esu(unit_register: u64) -> u32 {
    ((unit_register >> 8) & 0x1F) as u32
}

/// Joules per raw step for `domain` on processor `id`, given the unit register's value.
pub(crate) fn energy_unit_j(id: &CpuId, domain: Domain, unit_register: u64) -> f64 {
    let e = msr_esu(unit_register);
    if id.vendor == Vendor::Intel && id.family == 6 {
        if INTEL_SILVERMONT_MODELS.iter().any(|(m, _)| *m == id.model) {
            return 2f64.powi(e as i32) * 1e-6;
        }
        if domain == Domain::Dram && cpu::has_intel_dram_unit_quirk(id) {
            return 2f64.powi(-(cpu::INTEL_DRAM_FIXED_ESU as i32));
        }
        if domain == Domain::Psys
            && INTEL_PSYS_FIXED_1J_MODELS
                .iter()
                .any(|(m, _)| *m == id.model)
        {
            return 1.0;
        }
    }
    2f64.powi(-(e as i32))
}

/// An open `/dev/cpu/N/msr`, or a regular file standing in for it.
///
/// The device returns register `r` for an 8-byte `pread` at offset `r`. Adjacent registers
/// (AMD's 0xC0010299/9A/9B) would overlap in a flat file, so a regular-file stand-in keeps
/// register `r` at offset `8·r` (a sparse file); the read path is otherwise the same.
pub(crate) struct MsrFile {
    file: File,
    stride: u64,
}

impl MsrFile {
    /// Wraps an open device or stand-in file.
    pub fn new(file: File) -> std::io::Result<Self> {
        use std::os::unix::fs::FileTypeExt;
        let stride = if file.metadata()?.file_type().is_char_device() {
            1
        } else {
            8
        };
        Ok(MsrFile { file, stride })
    }

    /// Reads one 64-bit register.
    pub fn read(&self, register: u64) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, register * self.stride)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_clone(&self) -> std::io::Result<Self> {
        Ok(MsrFile {
            file: self.file.try_clone()?,
            stride: self.stride,
        })
    }
}

/// Offset of `register` in a regular file standing in for `/dev/cpu/N/msr` (see [`MsrFile`]).
pub fn msr_stand_in_offset(register: u64) -> u64 {
    register * 8
}

fn read_msr(file: &MsrFile, register: u64) -> std::io::Result<u64> {
    file.read(register)
}

fn open_msr(root: &SysRoot, cpu: u32) -> Result<(PathBuf, MsrFile), EnergyError> {
    let path = root.path(format!("/dev/cpu/{cpu}/msr"));
    match File::open(&path).and_then(MsrFile::new) {
        Ok(f) => Ok((path, f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(EnergyError::from_io(&path, e, MISSING_FIX))
        }
        Err(e) => Err(EnergyError::from_io(&path, e, PERMISSION_FIX)),
    }
}

/// One counter: the files it is read from (one for a package counter, one per core for AMD core
/// energy) and the running state needed to fold per-core counters into one.
struct MsrCounter {
    register: u64,
    files: Vec<(PathBuf, MsrFile)>,
    /// For multi-file counters: previous 32-bit values and the folded 64-bit sum.
    prev: Vec<u64>,
    folded: u64,
}

/// Reads RAPL MSRs.
///
/// RAPL through model-specific registers (`/dev/cpu/N/msr`).
///
/// Registers are read with `pread` at the register's address on the first CPU of each package
/// (a sparse regular file stands in for the device in tests). Energy counters are the low 32 bits
/// of the register; the energy unit is `2^-ESU` J with ESU in bits 12:8 of the unit register, except
/// where a quirk table below says otherwise.
///
/// | Register | Intel | AMD (family 17h+, Hygon) |
/// |---|---|---|
/// | unit | 0x606 | 0xC0010299 |
/// | package | 0x611 | 0xC001029B |
/// | core | 0x639 (PP0, per package) | 0xC001029A (per core, summed here) |
/// | uncore | 0x641 (PP1) | — |
/// | dram | 0x619 | — |
/// | psys | 0x64D (once per machine) | — |
///
/// Source: Intel SDM vol. 4, AMD PPR for family 17h/19h, Linux `arch/x86/events/rapl.c`
/// (`RAPL_MSR_MASK`, `rapl_check_hw_unit`) and `drivers/powercap/intel_rapl_common.c`.
pub struct MsrSource {
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    counters: Vec<MsrCounter>,
    /// Registers skipped at open time and why (for `probe`).
    pub notes: Vec<String>,
}

const MASK32: u64 = 0xFFFF_FFFF;

/// One CPU per physical core of a package, for AMD's per-core counters (SMT siblings share one).
fn one_cpu_per_core(root: &SysRoot, cpus: &[u32]) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for &c in cpus {
        let p = root.path(format!("/sys/devices/system/cpu/cpu{c}/topology/core_id"));
        let core = fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok());
        match core {
            Some(id) if seen.contains(&id) => {}
            Some(id) => {
                seen.push(id);
                out.push(c);
            }
            None => out.push(c),
        }
    }
    out
}

impl MsrSource {
    /// Opens the RAPL registers of every package. Registers that cannot be read or read zero
    /// (absent domains) are skipped and listed in `notes`.
    pub fn open(root: &SysRoot) -> Result<Self, EnergyError> {
        let id = cpu::cpu_id(root)?;
        let (unit_reg, domains) = register_layout(&id)?;
        let packages = cpu::packages(root)?;
        let mut specs = Vec::new();
        let mut counters = Vec::new();
        let mut notes = Vec::new();
        for (&socket, cpus) in &packages {
            let first = cpus[0];
            let (path, file) = open_msr(root, first)?;
            let unit = read_msr(&file, unit_reg)
                .map_err(|e| EnergyError::from_io(&path, e, PERMISSION_FIX))?;
            let package = PackageMsr {
                root,
                id: &id,
                socket,
                cpus,
                path: &path,
                file: &file,
                unit,
            };
            for &(domain, register) in &domains {
                if domain == Domain::Psys && socket != *packages.keys().next().unwrap() {
                    continue; // one platform counter per machine
                }
                if let Some((spec, counter)) = package.counter(domain, register, &mut notes)? {
                    specs.push(spec);
                    counters.push(counter);
                }
            }
        }
        if specs.is_empty() {
            return Err(EnergyError::Unusable {
                mechanism: Mechanism::Msr,
                reason: "no RAPL energy register could be read".into(),
                fix: "check that this CPU supports RAPL (not exposed in most VMs)".into(),
            });
        }
        Ok(MsrSource {
            provenance: Provenance::measured(Mechanism::Msr),
            specs,
            counters,
            notes,
        })
    }
}

/// The unit register and the energy register of each domain, for this CPU's vendor.
fn register_layout(id: &CpuId) -> Result<(u64, Vec<(Domain, u64)>), EnergyError> {
    match id.vendor {
        Vendor::Intel => Ok((
            INTEL_POWER_UNIT,
            vec![
                (Domain::Package, INTEL_PKG_ENERGY),
                (Domain::Core, INTEL_PP0_ENERGY),
                (Domain::Uncore, INTEL_PP1_ENERGY),
                (Domain::Dram, INTEL_DRAM_ENERGY),
                (Domain::Psys, INTEL_PLATFORM_ENERGY),
            ],
        )),
        Vendor::Amd if id.family >= 0x17 => Ok((
            AMD_POWER_UNIT,
            vec![
                (Domain::Package, AMD_PKG_ENERGY),
                (Domain::Core, AMD_CORE_ENERGY),
            ],
        )),
        _ => Err(EnergyError::Unusable {
            mechanism: Mechanism::Msr,
            reason: format!(
                "no RAPL MSR layout known for '{}' (family {:#x})",
                id.model_name, id.family
            ),
            fix: "use --source perf or powercap".into(),
        }),
    }
}

/// One package's registers, read through the MSR file of its first CPU.
struct PackageMsr<'a> {
    root: &'a SysRoot,
    id: &'a CpuId,
    socket: u32,
    cpus: &'a [u32],
    path: &'a Path,
    file: &'a MsrFile,
    /// The raw power-unit register.
    unit: u64,
}

impl PackageMsr<'_> {
    /// The counter of `domain` at `register`: one CPU's register, or on AMD the core domain
    /// summed over one CPU per core. `None`, with a note, when a register cannot be read or
    /// reads 0 everywhere (the domain is absent).
    fn counter(
        &self,
        domain: Domain,
        register: u64,
        notes: &mut Vec<String>,
    ) -> Result<Option<(CounterSpec, MsrCounter)>, EnergyError> {
        let first = self.cpus[0];
        let per_core = self.id.vendor == Vendor::Amd && domain == Domain::Core;
        let cpus_for = if per_core {
            one_cpu_per_core(self.root, self.cpus)
        } else {
            vec![first]
        };
        let mut files = Vec::new();
        let mut values = Vec::new();
        for c in cpus_for {
            let (p, f) = if c == first {
                (
                    self.path.to_path_buf(),
                    self.file
                        .try_clone()
                        .map_err(|e| EnergyError::from_io(self.path, e, PERMISSION_FIX))?,
                )
            } else {
                open_msr(self.root, c)?
            };
            match read_msr(&f, register) {
                Ok(v) => values.push(v & MASK32),
                Err(e) => {
                    notes.push(format!(
                        "{} at {register:#x} ({domain}): not readable ({e}), skipped",
                        p.display()
                    ));
                    return Ok(None);
                }
            }
            files.push((p, f));
        }
        if values.is_empty() {
            return Ok(None);
        }
        let socket = self.socket;
        if values.iter().all(|&v| v == 0) {
            notes.push(format!(
                "{domain} of socket {socket} ({register:#x}) reads 0: domain absent, skipped"
            ));
            return Ok(None);
        }
        let multi = files.len() > 1;
        let spec = CounterSpec {
            socket,
            domain,
            unit_j: energy_unit_j(self.id, domain, self.unit),
            // Folded per-core sums are 64-bit and never wrap in practice.
            wrap: Wrap::AtMax(if multi { u64::MAX } else { MASK32 }),
            origin: format!(
                "{} msr {register:#x}{}",
                self.path.display(),
                if multi {
                    format!(" (summed over {} cores)", files.len())
                } else {
                    String::new()
                }
            ),
        };
        let counter = MsrCounter {
            register,
            files,
            prev: values,
            folded: 0,
        };
        Ok(Some((spec, counter)))
    }
}

impl Source for MsrSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        for (i, c) in self.counters.iter_mut().enumerate() {
            if c.files.len() == 1 {
                let (path, f) = &c.files[0];
                out[i] = read_msr(f, c.register)
                    .map_err(|e| EnergyError::from_io(path, e, PERMISSION_FIX))?
                    & MASK32;
            } else {
                // Per-core counters wrap independently: correct each, then fold into one sum.
                for (k, (path, f)) in c.files.iter().enumerate() {
                    let v = read_msr(f, c.register)
                        .map_err(|e| EnergyError::from_io(path, e, PERMISSION_FIX))?
                        & MASK32;
                    let d = wrapping_delta(c.prev[k], v, MASK32).unwrap_or(0);
                    c.folded = c.folded.wrapping_add(d);
                    c.prev[k] = v;
                }
                out[i] = c.folded;
            }
        }
        Ok(())
    }
}

/// RAPL's model-specific registers.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    match crate::msr::MsrSource::open(req.root) {
        Ok(s) => {
            let notes = s.notes.clone();
            (
                crate::opening::check_alive(Box::new(s))
                    .and_then(|s| crate::opening::filter(s, req.domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intel(model: u32) -> CpuId {
        CpuId {
            vendor: Vendor::Intel,
            family: 6,
            model,
            model_name: String::new(),
        }
    }

    #[test]
    fn unit_register_fields() {
        // 0x000a1003: ESU 0x10 = 16 (AMD Zen, Sandy Bridge): bits 12:8 of MSR_RAPL_POWER_UNIT, Intel SDM vol. 4 / AMD PPR.
        assert_eq!(msr_esu(0x000a_1003), 16);
        assert_eq!(msr_esu(0x000a_0e03), 14);
    }

    #[test]
    fn quirk_units() {
        let unit = 0x000a_0e03; // ESU 14
        assert_eq!(
            energy_unit_j(&intel(0x55), Domain::Package, unit),
            2f64.powi(-14)
        );
        assert_eq!(
            energy_unit_j(&intel(0x55), Domain::Dram, unit),
            2f64.powi(-16)
        );
        assert_eq!(
            energy_unit_j(&intel(0x8F), Domain::Dram, unit),
            2f64.powi(-14)
        );
        assert_eq!(energy_unit_j(&intel(0x8F), Domain::Psys, unit), 1.0);
        assert_eq!(
            energy_unit_j(&intel(0x37), Domain::Package, 0x0000_0500),
            32e-6
        );
        let amd = CpuId {
            vendor: Vendor::Amd,
            family: 0x19,
            model: 1,
            model_name: String::new(),
        };
        assert_eq!(
            energy_unit_j(&amd, Domain::Package, 0x000a_1003),
            2f64.powi(-16)
        );
    }
}
