//! Calibrated model files: the curve `wattio calibrate` measured against RAPL, as JSON, read
//! back by `--model FILE` on machines of the same type.
//!
//! ```json
//! {"format":"wattio-model/1","cpu":"AMD EPYC 7713 64-Core Processor","vcpus":4,
//!  "measured_with":"powercap","points":[[0.0,1.5],[0.25,3.1],[1.0,6.0]],
//!  "fit":{"levels":[…],"holdout_mean_abs_error_pct":2.1,"holdout_max_abs_error_pct":4.0}}
//! ```
//!
//! `points` are `(utilisation, watts per vCPU)` like [`ModelParams::points`]; `fit` records what
//! the calibration measured and how well the curve predicted levels it was not fitted on.

use crate::error::EnergyError;
use crate::model_params::ModelParams;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The format tag of version 1.
pub const MODEL_FILE_FORMAT: &str = "wattio-model/1";

/// One load level of a calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelResult {
    /// The load asked of every CPU (0…1).
    pub load: f64,
    /// The utilisation `/proc/stat` measured over the level (0…1).
    pub utilisation: f64,
    /// Package watts per vCPU that RAPL measured.
    pub watts_per_vcpu: f64,
    /// What the curve fitted without this level predicts for it (interior levels only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout_predicted_w: Option<f64>,
    /// `(predicted − measured) / measured`, in percent (interior levels only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout_error_pct: Option<f64>,
}

/// What a calibration measured and how good its curve is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    pub levels: Vec<LevelResult>,
    /// Mean |error| of held-out levels, percent (None with fewer than three levels).
    pub holdout_mean_abs_error_pct: Option<f64>,
    /// Largest |error| of held-out levels, percent.
    pub holdout_max_abs_error_pct: Option<f64>,
    /// Seconds per level.
    pub seconds_per_level: f64,
    /// What drove the load (`spin`, `stress-ng`, or a test's driver).
    pub driver: String,
}

/// A calibrated model file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFile {
    pub format: String,
    /// `/proc/cpuinfo`'s model name where it was calibrated.
    pub cpu: String,
    /// Online CPUs where it was calibrated.
    pub vcpus: usize,
    /// The RAPL mechanism it was measured with.
    pub measured_with: String,
    /// `(utilisation, watts per vCPU)`.
    pub points: Vec<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitSummary>,
}

impl ModelFile {
    /// The model this file describes, named after it (`file` is how the name refers to it).
    pub fn params(&self, file: &str) -> ModelParams {
        ModelParams {
            name: format!(
                "calibrated(cpu={},vcpus={},against={},file={file})",
                self.cpu, self.vcpus, self.measured_with
            ),
            points: self.points.clone(),
            notes: vec![format!(
                "calibrated model from {file}: measured with {} on '{}' ({} vCPUs){}",
                self.measured_with,
                self.cpu,
                self.vcpus,
                match self.fit.as_ref().and_then(|f| f.holdout_mean_abs_error_pct) {
                    Some(e) => format!(", held-out error {e:.1} % mean"),
                    None => String::new(),
                }
            )],
        }
    }

    /// The file as pretty JSON.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Reads and checks a model file; every failure is one line naming the problem and the fix.
pub fn load_model_file(path: &Path) -> Result<ModelParams, EnergyError> {
    let shown = path.display();
    let bad = |problem: String| {
        EnergyError::Invalid(format!(
            "model file {shown}: {problem}; write one with `wattio calibrate -o FILE` on a machine with RAPL"
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it ({e})")))?;
    let file: ModelFile =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a wattio model file ({e})")))?;
    if file.format != MODEL_FILE_FORMAT {
        return Err(bad(format!(
            "format '{}' is not {MODEL_FILE_FORMAT}",
            file.format.replace('\n', " ")
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.to_string());
    let params = file.params(&name);
    params.validate().map_err(|e| bad(e.to_string()))?;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ModelFile {
        ModelFile {
            format: MODEL_FILE_FORMAT.into(),
            cpu: "AMD EPYC 7713 64-Core Processor".into(),
            vcpus: 4,
            measured_with: "powercap".into(),
            points: vec![(0.0, 1.5), (0.25, 3.1), (1.0, 6.0)],
            fit: Some(FitSummary {
                levels: vec![LevelResult {
                    load: 0.25,
                    utilisation: 0.26,
                    watts_per_vcpu: 3.1,
                    holdout_predicted_w: Some(3.0),
                    holdout_error_pct: Some(-3.2),
                }],
                holdout_mean_abs_error_pct: Some(3.2),
                holdout_max_abs_error_pct: Some(3.2),
                seconds_per_level: 10.0,
                driver: "spin".into(),
            }),
        }
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        std::fs::write(&p, sample().to_json()).unwrap();
        let m = load_model_file(&p).unwrap();
        assert_eq!(m.points, sample().points);
        assert_eq!(
            m.name(),
            "calibrated(cpu=AMD EPYC 7713 64-Core Processor,vcpus=4,against=powercap,file=m.json)"
        );
        assert!(m.notes[0].contains("3.2 %"));
        let back: ModelFile = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn bad_files_are_one_line_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        let check = |content: Option<&str>, needle: &str| {
            match content {
                Some(c) => std::fs::write(&p, c).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
            let e = load_model_file(&p).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
            assert!(e.contains("wattio calibrate"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        };
        check(None, "cannot read it");
        check(Some("{not json"), "not a wattio model file");
        check(Some("{\"format\":\"wattio-model/1\"}"), "missing field");
        let mut f = sample();
        f.format = "other/9".into();
        check(Some(&f.to_json()), "format 'other/9'");
        let mut f = sample();
        f.points = vec![(0.0, 3.0), (1.0, 1.0)];
        check(Some(&f.to_json()), "must not fall");
        let mut f = sample();
        f.points = vec![(0.1, 3.0), (1.0, 4.0)];
        check(Some(&f.to_json()), "utilisation 0");
    }
}
