//! The whole machine beside its parts: what a platform meter (a BMC, the ACPI power meter, RAPL
//! psys) reads over a window, and the rest that RAPL and the GPU meters do not see.
//!
//! `rest_j = platform_j − (package + DRAM) − GPUs` covers fans, disks, NICs, memory outside
//! the DRAM domain and the power supply's loss. It is given only when it is sound:
//!
//! 1. the parts are measured: a model's estimate of the CPU (a VM's per-vCPU model above all)
//!    subtracted from a whole-machine meter would count twice or not at all;
//! 2. the window lasts at least five times the platform meter's averaging period plus its
//!    delay: a shorter one is mostly the meter's averaging and lateness;
//! 3. it carries an uncertainty (the meter's resolution over the window, and what its readings
//!    could not say about the window's ends), and a negative rest beyond that uncertainty is a
//!    disagreement between the meters, reported as such, never hidden or clamped.
//!
//! Otherwise the platform figure is given alone with the reason.

use crate::meter::{AlignedReport, DomainEnergy, EnergyReport};
pub use crate::platform_timing::{PlatformTiming, WINDOW_PERIODS};
use serde::{Deserialize, Serialize};
use wattio_energy::{Domain, Mechanism};

/// One platform meter over the window, and the rest where it is sound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlatformFigure {
    /// `platform 0`, `socket 0 psys`.
    pub meter: String,
    /// How its figure was measured, e.g. `measured (ipmi dcmi, 1 s average)`.
    pub label: String,
    pub platform_j: f64,
    /// The meter's averaging period and the age of its newest reading when it arrived.
    pub averaging_s: f64,
    pub delay_s: f64,
    /// `platform_j` − the parts: what RAPL and the GPU meters do not see.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rest_j: Option<f64>,
    /// ± joules around `rest_j`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rest_uncertainty_j: Option<f64>,
    /// The meters disagree: the platform meter reads less than its parts, beyond the
    /// uncertainty.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub disagreement: bool,
    /// Why there is no rest, or what the disagreement is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

/// The machine's platform meters over one window, beside its measured parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineView {
    /// The window's length.
    pub duration_s: f64,
    /// Package + DRAM + GPUs: the parts subtracted from each platform meter.
    pub parts_j: f64,
    pub platforms: Vec<PlatformFigure>,
}

impl MachineView {
    /// The view of `report`, whose platform and psys entries have the timings `timing` gives;
    /// `None` when it has no platform meter.
    pub fn of(
        report: &EnergyReport,
        timing: impl Fn(&DomainEnergy) -> PlatformTiming,
    ) -> Option<MachineView> {
        let parts_j = report.total_j + report.gpu_j.unwrap_or(0.0);
        let refusal = parts_refusal(report);
        let platforms: Vec<PlatformFigure> = report
            .domains
            .iter()
            .filter(|d| matches!(d.domain, Domain::Platform | Domain::Psys))
            .map(|d| {
                let meter = if d.domain == Domain::Psys {
                    format!("socket {} psys", d.socket)
                } else {
                    format!("platform {}", d.socket)
                };
                let label = d.label.clone().unwrap_or_else(|| report.provenance.label());
                figure(
                    meter,
                    label,
                    d.energy_j,
                    (parts_j, report.duration_s),
                    timing(d),
                    refusal.clone(),
                )
            })
            .collect();
        (!platforms.is_empty()).then_some(MachineView {
            duration_s: report.duration_s,
            parts_j,
            platforms,
        })
    }
}

/// A source's counters as a recording reads them: each counter's provenance, and the timing of
/// those that answer late, by scope and number, taken from the source before it records.
#[derive(Debug, Clone)]
pub struct RecordedCounters {
    pub counters: Vec<wattio_energy::CounterSpec>,
    pub provenance: wattio_energy::Provenance,
    pub provenances: Vec<wattio_energy::Provenance>,
    pub late: Vec<((Domain, u32), wattio_energy::LateTiming)>,
}

impl RecordedCounters {
    /// What `source` says of its counters now.
    pub fn of(source: &dyn wattio_energy::Source) -> RecordedCounters {
        let counters = source.counters().to_vec();
        RecordedCounters {
            provenance: source.provenance().clone(),
            provenances: (0..counters.len())
                .map(|i| source.counter_provenance(i).clone())
                .collect(),
            late: (0..counters.len())
                .filter_map(|i| {
                    Some((
                        (counters[i].domain, counters[i].socket),
                        source.late_timing(i)?,
                    ))
                })
                .collect(),
            counters,
        }
    }

    /// The machine over a recording of `energy_j` per counter in `duration_s`. The running
    /// counters of late meters lag by their averaging and delay at both ends: with nothing
    /// known of how their power moved, that lag times their mean power is added to the
    /// uncertainty.
    pub fn machine_view(&self, energy_j: &[f64], duration_s: f64) -> Option<MachineView> {
        let report = EnergyReport::from_labelled_counters(
            &self.counters,
            energy_j,
            duration_s,
            &self.provenance,
            &self.provenances,
        );
        MachineView::of(&report, |d| {
            let Some((_, t)) = self.late.iter().find(|(k, _)| *k == (d.domain, d.socket)) else {
                return PlatformTiming::INSTANT;
            };
            let mean_w = d.energy_j / duration_s.max(1e-9);
            PlatformTiming::of(t, PlatformTiming::lag_s(t) * mean_w)
        })
    }
}

impl MachineView {
    /// One line per platform meter in watts over the window, named `over` (`since start`,
    /// `over the recording`): its power and the rest, or why there is no rest.
    pub fn watt_lines(&self, over: &str) -> Vec<String> {
        let w = |j: f64| j / self.duration_s.max(1e-9);
        self.platforms
            .iter()
            .map(|p| {
                let head = format!(
                    "machine {} {over} {:.1} W, {}",
                    p.meter,
                    w(p.platform_j),
                    p.label
                );
                match (p.rest_j, p.rest_uncertainty_j) {
                    (Some(rest), Some(u)) => format!(
                        "{head}: rest {:.1} ± {:.1} W, what RAPL and the GPUs do not see{}",
                        w(rest),
                        w(u),
                        p.note
                            .as_deref()
                            .map(|n| format!("; {n}"))
                            .unwrap_or_default()
                    ),
                    _ => format!("{head}: {}", p.note.as_deref().unwrap_or("no rest")),
                }
            })
            .collect()
    }
}

impl AlignedReport {
    /// The whole-machine view of the report, where it has a platform meter.
    pub fn machine_view(&self) -> Option<MachineView> {
        MachineView::of(&self.report, |d| {
            self.timings
                .iter()
                .find(|(k, _)| *k == (d.domain, d.socket))
                .map_or(crate::machine_view::PlatformTiming::INSTANT, |(_, t)| *t)
        })
    }
}

/// Why the parts cannot be subtracted from a whole-machine meter, if they cannot.
fn parts_refusal(report: &EnergyReport) -> Option<String> {
    if report.provenance.estimated {
        return Some(format!(
            "no rest: the CPU figure is a model's estimate ({}), and subtracting an estimate from a whole-machine meter counts parts twice or not at all (on a VM, a per-vCPU model against the server's meter)",
            report.provenance.label()
        ));
    }
    if report.provenance.mechanism == Mechanism::Host {
        return Some("no rest: the CPU figure is this VM's share of its host's, not this machine's package and DRAM".into());
    }
    None
}

/// One platform meter's figure under the rules.
fn figure(
    meter: String,
    label: String,
    platform_j: f64,
    (parts_j, duration_s): (f64, f64),
    t: PlatformTiming,
    refusal: Option<String>,
) -> PlatformFigure {
    let mut f = PlatformFigure {
        meter,
        label,
        platform_j,
        averaging_s: t.averaging_s,
        delay_s: t.delay_s,
        rest_j: None,
        rest_uncertainty_j: None,
        disagreement: false,
        note: refusal,
    };
    if f.note.is_some() {
        return f;
    }
    let least_s = WINDOW_PERIODS * t.averaging_s + t.delay_s;
    if duration_s < least_s {
        f.note = Some(format!(
            "no rest: the window ({duration_s:.1} s) is shorter than {WINDOW_PERIODS:.0} × the meter's {:.1} s averaging + its {:.1} s delay ({least_s:.1} s), so its figure is mostly averaging and lateness; a longer window gives one",
            t.averaging_s, t.delay_s
        ));
        return f;
    }
    let rest = platform_j - parts_j;
    let uncertainty = t.resolution_w * duration_s + 2.0 * t.resolution_j + t.edge_uncertainty_j;
    f.rest_j = Some(rest);
    f.rest_uncertainty_j = Some(uncertainty);
    if rest < -uncertainty {
        f.disagreement = true;
        f.note = Some(format!(
            "meters disagree: the platform meter read {:.1} J less than the package, DRAM and GPUs it contains (beyond its ±{uncertainty:.1} J): it may cover less than the whole machine, or one of the meters is off",
            -rest
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::Provenance;

    fn domain(domain: Domain, socket: u32, energy_j: f64, label: Option<&str>) -> DomainEnergy {
        DomainEnergy {
            socket,
            domain,
            energy_j,
            label: label.map(String::from),
        }
    }

    /// RAPL at `cpu_w`, a GPU at `gpu_w` and a platform meter at `platform_w` over `secs`.
    fn report(cpu_w: f64, gpu_w: f64, platform_w: f64, secs: f64) -> EnergyReport {
        let gpu = gpu_w * secs;
        EnergyReport {
            duration_s: secs,
            provenance: Provenance::measured(Mechanism::Powercap),
            domains: vec![
                domain(Domain::Package, 0, cpu_w * secs, None),
                domain(Domain::Gpu, 0, gpu, Some("measured (nvml)")),
                domain(
                    Domain::Platform,
                    0,
                    platform_w * secs,
                    Some("measured (ipmi dcmi, 1 s average)"),
                ),
            ],
            total_j: cpu_w * secs,
            psys_j: None,
            gpu_j: Some(gpu),
            gpu_label: Some("measured (nvml)".into()),
            read_errors: vec![],
        }
    }

    const BMC: PlatformTiming = PlatformTiming {
        averaging_s: 1.0,
        delay_s: 2.0,
        resolution_w: 1.0,
        resolution_j: 0.0,
        edge_uncertainty_j: 0.0,
    };

    #[test]
    fn the_rest_is_the_platform_less_its_parts_with_the_meters_resolution() {
        let v = MachineView::of(&report(40.0, 100.0, 200.0, 10.0), |_| BMC).unwrap();
        let p = &v.platforms[0];
        assert_eq!(v.parts_j, 1400.0);
        assert_eq!(p.rest_j, Some(600.0));
        // Whole watts over 10 s.
        assert_eq!(p.rest_uncertainty_j, Some(10.0));
        assert!(!p.disagreement && p.note.is_none(), "{p:?}");
    }

    #[test]
    fn a_platform_meter_below_its_parts_is_a_disagreement_not_a_hidden_figure() {
        let v = MachineView::of(&report(40.0, 100.0, 120.0, 10.0), |_| BMC).unwrap();
        let p = &v.platforms[0];
        assert_eq!(p.rest_j, Some(-200.0));
        assert!(p.disagreement);
        assert!(
            p.note.as_deref().unwrap().contains("meters disagree"),
            "{p:?}"
        );
        // Within the uncertainty it is a rest near zero, not a disagreement.
        let v = MachineView::of(&report(40.0, 100.0, 139.5, 10.0), |_| BMC).unwrap();
        assert!(!v.platforms[0].disagreement);
    }

    #[test]
    fn a_model_or_a_short_window_gives_the_platform_figure_alone_and_says_why() {
        let mut r = report(40.0, 100.0, 200.0, 10.0);
        r.provenance = Provenance::estimated("ccf-linear");
        let p = &MachineView::of(&r, |_| BMC).unwrap().platforms[0];
        assert_eq!((p.rest_j, p.platform_j), (None, 2000.0));
        assert!(
            p.note.as_deref().unwrap().contains("model's estimate"),
            "{p:?}"
        );
        // 5 × 1 s + 2 s = 7 s at least.
        let p = &MachineView::of(&report(40.0, 100.0, 200.0, 6.9), |_| BMC)
            .unwrap()
            .platforms[0];
        assert_eq!(p.rest_j, None);
        assert!(p.note.as_deref().unwrap().contains("(7.0 s)"), "{p:?}");
        let p = &MachineView::of(&report(40.0, 100.0, 200.0, 7.0), |_| BMC)
            .unwrap()
            .platforms[0];
        assert!(p.rest_j.is_some());
    }

    #[test]
    fn no_platform_meter_no_view() {
        let mut r = report(40.0, 100.0, 200.0, 10.0);
        r.domains.retain(|d| d.domain != Domain::Platform);
        assert!(MachineView::of(&r, |_| BMC).is_none());
    }
}
