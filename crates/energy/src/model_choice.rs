//! Which utilisation model `--model` names ([`ModelChoice`]), resolved on a machine into
//! [`ModelParams`]: the fixed ccf-linear coefficients, the per-architecture table, the TDP
//! curve or a calibrated model file.

use crate::error::EnergyError;
use crate::model_params::ModelParams;
use crate::root::SysRoot;
use std::path::PathBuf;

/// Which model `--model` asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    /// tdp-curve where the CPU and its threads are known, else ccf-linear with the CPU's
    /// microarchitecture coefficients, else the CCF average (each fallback with a note).
    Auto,
    /// The CCF linear model with CCF's averages (coefficients overridable), whatever the CPU.
    CcfLinear,
    /// The CCF linear model with this CPU's microarchitecture coefficients, or an error saying
    /// why there are none.
    ///
    /// The CPU's microarchitecture, and the Cloud Carbon Footprint (CCF) coefficients for it: the
    /// `ccf-linear(arch=…)` model, the default on VMs whose CPU name hides the part.
    ///
    /// Cloud VMs mask the processor's name (`AMD EPYC`, `Intel(R) Xeon(R) CPU @ 2.20GHz`), but the
    /// hypervisor passes CPUID's vendor, family, model and stepping through and `/proc/cpuinfo` shows
    /// them. They are mapped to a microarchitecture, which is looked up in CCF's table of watts per
    /// vCPU at idle and at full load per microarchitecture:
    ///
    /// * **Intel**, family 6: model → microarchitecture as Linux names them in
    ///   `arch/x86/include/asm/intel-family.h` (the same DisplayFamily_DisplayModel values as the
    ///   Intel SDM vol. 4, table 2-1). Model 0x55 is Skylake-SP, Cascade Lake or Cooper Lake by
    ///   stepping, as Intel's microcode release notes list them (`SKX-SP 06-55-03/04`,
    ///   `CLX-SP 06-55-06/07`, `CPX-SP 06-55-0b`,
    ///   <https://github.com/intel/Intel-Linux-Processor-Microcode-Data-Files/blob/main/releasenote.md>);
    ///   models 0x8E and 0x9E are Kaby, Coffee or Whiskey Lake by stepping (intel-family.h's comments).
    /// * **AMD**: family 17h, 19h and 1Ah model ranges → Zen generation, as `bsp_init_amd` in Linux
    ///   `arch/x86/kernel/cpu/amd.c` sets `X86_FEATURE_ZEN…`. Zen 1 to 4 are the cores of the EPYC
    ///   7001, 7002, 7003 and 9004/8004 series, which CCF's table calls EPYC 1st to 4th Gen.
    /// * **The name**, where family and model do not settle it: a hypervisor CPU model named after
    ///   its microarchitecture (QEMU's `Intel Xeon Processor (Icelake)`, `AMD EPYC-Milan Processor`;
    ///   QEMU's `Icelake-Server` reports model 134, Linux's Tremont-D, so its name is the better
    ///   signal), an EPYC model number (its last digit is the generation: 7763 → 3rd, AMD's series
    ///   naming 7003/9004), or a Xeon Scalable one (its second digit is the generation: Gold 6130 →
    ///   1st, Skylake; Platinum 8259CL → 2nd, Cascade Lake;
    ///   <https://www.intel.com/content/www/us/en/processors/processor-numbers.html>). Family and
    ///   model win where both give coefficients.
    ///
    /// The table is `data/ccf_coefficients_aws_use.csv` (its source, licence and a check of every
    /// row against SPECpower are in `data/README.md`). Each row is the mean, over the SPECpower
    /// results of that microarchitecture, of the whole server's wall power at active idle and at
    /// 100 % load divided by its hardware threads — so it is a server's share per vCPU, not a CPU
    /// package's power as RAPL measures it. The EPYC 5th Gen row is not used (see
    /// `UNUSABLE_ROWS` in `arch.rs`).
    CcfArch,
    /// tdp-curve, or an error saying why this machine has none.
    TdpCurve,
    /// A calibrated model file written by `wattio calibrate`.
    File(PathBuf),
}

impl std::str::FromStr for ModelChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "" => Err(
                "--model needs a value: auto, ccf-linear, ccf-arch, tdp-curve or a model FILE"
                    .into(),
            ),
            "auto" => Ok(ModelChoice::Auto),
            "ccf-linear" | "ccf" => Ok(ModelChoice::CcfLinear),
            "ccf-arch" => Ok(ModelChoice::CcfArch),
            "tdp-curve" | "tdp" => Ok(ModelChoice::TdpCurve),
            path => Ok(ModelChoice::File(PathBuf::from(path))),
        }
    }
}

impl ModelChoice {
    /// The model this choice names on the machine under `root`. `ccf` overrides the ccf-linear
    /// coefficients (min, max W per vCPU); it makes `Auto` mean ccf-linear.
    pub fn resolve(
        &self,
        root: &SysRoot,
        ccf: Option<(f64, f64)>,
    ) -> Result<ModelParams, EnergyError> {
        let m = match (self, ccf) {
            (ModelChoice::Auto | ModelChoice::CcfLinear, Some((min, max))) => {
                ModelParams::ccf_linear(min, max)
            }
            (ModelChoice::CcfLinear, None) => ModelParams::default(),
            (ModelChoice::Auto, None) => crate::tdp::model_for_machine(root),
            (ModelChoice::TdpCurve | ModelChoice::CcfArch | ModelChoice::File(_), Some(_)) => {
                return Err(EnergyError::Invalid(
                    "--model-min-w and --model-max-w set the coefficients of ccf-linear only: drop them, or use --model ccf-linear".into(),
                ))
            }
            (ModelChoice::TdpCurve, None) => crate::tdp::tdp_curve_for_machine(root).map_err(|why| {
                EnergyError::Invalid(format!(
                    "--model tdp-curve is not available here: {why}; use --model auto (falls back to ccf-linear) or a calibrated --model FILE"
                ))
            })?,
            (ModelChoice::CcfArch, None) => crate::arch::ccf_arch_for_machine(root).map_err(|why| {
                EnergyError::Invalid(format!(
                    "--model ccf-arch is not available here: {why}; use --model ccf-linear (CCF's average) or a calibrated --model FILE"
                ))
            })?,
            (ModelChoice::File(p), None) => crate::model_file::load_model_file(p)?,
        };
        m.validate()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_choices_parse() {
        assert_eq!("auto".parse::<ModelChoice>(), Ok(ModelChoice::Auto));
        assert_eq!(
            "ccf-linear".parse::<ModelChoice>(),
            Ok(ModelChoice::CcfLinear)
        );
        assert_eq!(
            "tdp-curve".parse::<ModelChoice>(),
            Ok(ModelChoice::TdpCurve)
        );
        assert_eq!("ccf-arch".parse::<ModelChoice>(), Ok(ModelChoice::CcfArch));
        assert_eq!(
            "m.json".parse::<ModelChoice>(),
            Ok(ModelChoice::File(PathBuf::from("m.json")))
        );
        assert!("".parse::<ModelChoice>().unwrap_err().contains("FILE"));
        // Coefficients make auto mean ccf-linear; with tdp-curve they are refused.
        let root = SysRoot::new("/nonexistent");
        let m = ModelChoice::Auto.resolve(&root, Some((1.0, 2.0))).unwrap();
        assert_eq!(m, ModelParams::ccf_linear(1.0, 2.0));
        let e = ModelChoice::TdpCurve
            .resolve(&root, Some((1.0, 2.0)))
            .unwrap_err();
        assert!(e.to_string().contains("ccf-linear only"), "{e}");
        let e = ModelChoice::CcfArch
            .resolve(&root, Some((1.0, 2.0)))
            .unwrap_err();
        assert!(e.to_string().contains("ccf-linear only"), "{e}");
        // An unreadable machine has no tdp-curve and no microarchitecture, and auto falls back.
        assert!(ModelChoice::TdpCurve.resolve(&root, None).is_err());
        let e = ModelChoice::CcfArch.resolve(&root, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("--model ccf-arch is not available here"),
            "{e}"
        );
        let m = ModelChoice::Auto.resolve(&root, None).unwrap();
        assert!(m.name().starts_with("ccf-linear(") && !m.notes.is_empty());
    }
}
