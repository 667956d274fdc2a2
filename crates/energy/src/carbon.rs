//! CO₂-equivalent emissions of an energy figure: joules × the carbon intensity of the
//! electricity (grams of CO₂e per kWh), as CodeCarbon and Alumet report them.
//!
//! The intensity is given (`--carbon-intensity G_PER_KWH`) or looked up by country
//! (`--region ISO3`) in a table shipped with wattio (`data/carbon-intensity.tsv`: Our World in
//! Data's yearly figures, from Ember and the Energy Institute, CC BY 4.0, as compiled in
//! CodeCarbon's `global_energy_mix.json`, MIT). A yearly national average is an estimate of
//! what a kWh emitted where and when the work ran; the label says which figure was used.

use serde::{Deserialize, Serialize};

/// The shipped table: `ISO3 \t g/kWh \t year \t country` lines after `#` comments.
const TABLE: &str = include_str!("../data/carbon-intensity.tsv");

/// Where a carbon intensity comes from.
const TABLE_SOURCE: &str = "Our World in Data via CodeCarbon";

/// Grams of CO₂e per kWh of electricity, with where the figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarbonIntensity {
    pub g_per_kwh: f64,
    /// `given (--carbon-intensity)` or `FRA 2023, Our World in Data (…) via CodeCarbon's …`.
    pub source: String,
}

/// Why an intensity cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CarbonError {
    #[error(
        "--carbon-intensity must be a number of grams of CO2e per kWh between 0 and 5000 (got {0})"
    )]
    BadIntensity(String),
    #[error("--region {code}: not in wattio's table of carbon intensities{}: give the country's ISO 3166-1 alpha-3 code (FRA, USA, DEU, IND, …) or the figure itself with --carbon-intensity", suggest(.suggestions))]
    UnknownRegion {
        code: String,
        /// Codes of countries whose code or name starts like the one given.
        suggestions: Vec<String>,
    },
}

impl CarbonIntensity {
    /// An intensity the user gives, in g CO₂e per kWh.
    pub fn given(text: &str) -> Result<CarbonIntensity, CarbonError> {
        match text.trim().parse::<f64>() {
            Ok(g) if g.is_finite() && (0.0..=5000.0).contains(&g) => Ok(CarbonIntensity {
                g_per_kwh: g,
                source: "given (--carbon-intensity)".into(),
            }),
            _ => Err(CarbonError::BadIntensity(text.into())),
        }
    }

    /// The shipped table's figure for a country (ISO 3166-1 alpha-3, any case).
    pub fn for_region(code: &str) -> Result<CarbonIntensity, CarbonError> {
        let wanted = code.trim().to_ascii_uppercase();
        regions()
            .find(|r| r.code == wanted)
            .map(|r| CarbonIntensity {
                g_per_kwh: r.g_per_kwh,
                source: format!("{} {}, {TABLE_SOURCE}", r.code, r.year),
            })
            .ok_or_else(|| CarbonError::UnknownRegion {
                code: code.into(),
                suggestions: regions()
                    .filter(|r| {
                        !wanted.is_empty()
                            && (r.code.starts_with(&wanted)
                                || r.country.to_ascii_uppercase().starts_with(&wanted))
                    })
                    .map(|r| format!("{} ({})", r.code, r.country))
                    .take(5)
                    .collect(),
            })
    }

    /// Grams of CO₂e of `joules` of electricity.
    pub fn co2e_g(&self, joules: f64) -> f64 {
        joules / 3.6e6 * self.g_per_kwh
    }

    /// `56.0 g CO2e/kWh (FRA 2023, Our World in Data via CodeCarbon)`, the label shown beside
    /// a CO₂e figure.
    pub fn label(&self) -> String {
        format!("{:.1} g CO2e/kWh ({})", self.g_per_kwh, self.source)
    }
}

/// One energy figure of a result and the place its CO₂e goes.
pub struct Co2eSlot<'a> {
    pub joules: f64,
    pub grams: &'a mut f64,
}

/// A result whose energy figures carry their CO₂e (`top`'s interval and its entries, a
/// `measure` run, a benchmark): it names each figure and its slot once, and [`Co2e::apply`],
/// the one CO₂e transform, fills them all.
pub trait Co2eFigures {
    /// Makes room for the CO₂e of each energy figure (keeping `intensity` where the result
    /// records it) and hands every figure with its slot to `each`, which fills it before it
    /// returns (what the result derives from its CO₂e, as a benchmark's statistics, is taken
    /// after); a figure the result does not have gets no slot and no CO₂e.
    fn co2e_slots(&mut self, intensity: &CarbonIntensity, each: &mut dyn FnMut(Co2eSlot<'_>));
}

/// Hands `each` the slot of a figure the result may not have: `grams` stays `None` without it.
pub fn optional_co2e_slot(
    joules: Option<f64>,
    grams: &mut Option<f64>,
    each: &mut dyn FnMut(Co2eSlot<'_>),
) {
    *grams = None;
    if let Some(joules) = joules {
        each(Co2eSlot {
            joules,
            grams: grams.insert(0.0),
        });
    }
}

/// The CO₂e transform: energy figures as grams of CO₂e at one carbon intensity (joules ÷ 3.6e6
/// × g/kWh). It is built once from `--carbon-intensity` or `--region`, and every output takes
/// its CO₂e from it: `record`'s closing lines ([`Co2e::text`]), the exporter's
/// `…_co2e_grams` families ([`Co2e::grams`]) and `top`'s and `measure`'s results
/// ([`Co2e::apply`]). An estimate of the emissions wherever it is used: a yearly average
/// intensity, and wherever the energy is a model's, an estimate of an estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Co2e {
    intensity: CarbonIntensity,
}

impl Co2e {
    pub fn new(intensity: CarbonIntensity) -> Co2e {
        Co2e { intensity }
    }

    /// The intensity the figures are computed at.
    pub fn intensity(&self) -> &CarbonIntensity {
        &self.intensity
    }

    /// Grams of CO₂e of `joules`.
    pub fn grams(&self, joules: f64) -> f64 {
        self.intensity.co2e_g(joules)
    }

    /// Grams of CO₂e of `joules` in the unit that suits them ([`format_co2e`]).
    pub fn text(&self, joules: f64) -> String {
        format_co2e(self.grams(joules))
    }

    /// The intensity's label, shown beside every CO₂e figure.
    pub fn label(&self) -> String {
        self.intensity.label()
    }

    /// Fills in the CO₂e of every energy figure of `result`.
    pub fn apply<R: Co2eFigures + ?Sized>(&self, result: &mut R) {
        result.co2e_slots(&self.intensity, &mut |slot| {
            *slot.grams = self.grams(slot.joules)
        });
    }
}

fn suggest(codes: &[String]) -> String {
    if codes.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", codes.join(", "))
    }
}

/// Grams of CO₂e in the unit that suits them: `12.3 µg`, `4.56 mg`, `7.89 g`, `1.23 kg`.
pub fn format_co2e(grams: f64) -> String {
    let (scale, unit) = match grams.abs() {
        g if g >= 1000.0 => (1e-3, "kg"),
        g if g >= 1.0 => (1.0, "g"),
        g if g >= 1e-3 => (1e3, "mg"),
        _ => (1e6, "µg"),
    };
    format!("{:.3} {unit}", grams * scale)
}

/// One country of the shipped table.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub code: String,
    pub g_per_kwh: f64,
    pub year: u32,
    pub country: String,
}

/// Every country of the shipped table, in code order.
pub fn regions() -> impl Iterator<Item = Region> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some(Region {
                code: f.next()?.to_string(),
                g_per_kwh: f.next()?.parse().ok()?,
                year: f.next()?.parse().ok()?,
                country: f.next()?.to_string(),
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_shipped_table_parses() {
        let data_lines = TABLE
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count();
        let parsed: Vec<Region> = regions().collect();
        assert_eq!(parsed.len(), data_lines);
        assert!(parsed.len() > 200);
        for r in &parsed {
            assert_eq!(r.code.len(), 3, "{r:?}");
            assert!((0.0..=2000.0).contains(&r.g_per_kwh), "{r:?}");
            assert!((2000..=2030).contains(&r.year), "{r:?}");
        }
    }

    #[test]
    fn the_transform_fills_every_figure_a_result_names_and_no_other() {
        // A result with two figures, one of them absent, and where it keeps the intensity.
        struct Result {
            total_j: f64,
            gpu_j: Option<f64>,
            co2e_g: f64,
            gpu_co2e_g: Option<f64>,
            intensity: Option<CarbonIntensity>,
        }
        impl Co2eFigures for Result {
            fn co2e_slots(&mut self, i: &CarbonIntensity, each: &mut dyn FnMut(Co2eSlot<'_>)) {
                self.intensity = Some(i.clone());
                each(Co2eSlot {
                    joules: self.total_j,
                    grams: &mut self.co2e_g,
                });
                optional_co2e_slot(self.gpu_j, &mut self.gpu_co2e_g, each);
            }
        }
        let co2e = Co2e::new(CarbonIntensity::given("360").unwrap());
        let mut r = Result {
            total_j: 36_000.0,
            gpu_j: None,
            co2e_g: -1.0,
            // Stale from an earlier intensity: a figure the result no longer has keeps none.
            gpu_co2e_g: Some(9.0),
            intensity: None,
        };
        co2e.apply(&mut r);
        // 36 kJ = 0.01 kWh, at 360 g/kWh: 3.6 g.
        assert!((r.co2e_g - 3.6).abs() < 1e-12, "{}", r.co2e_g);
        assert_eq!(r.gpu_co2e_g, None);
        assert_eq!(r.intensity.as_ref(), Some(co2e.intensity()));
        r.gpu_j = Some(3.6e6);
        co2e.apply(&mut r);
        assert_eq!(r.gpu_co2e_g, Some(360.0));
        assert_eq!(co2e.text(3.6e6), "360.000 g");
    }

    #[test]
    fn a_kwh_emits_the_intensity_and_the_label_names_the_figure() {
        let c = CarbonIntensity::given("400").unwrap();
        assert!((c.co2e_g(3.6e6) - 400.0).abs() < 1e-9);
        assert!((c.co2e_g(36.0) - 0.004).abs() < 1e-12);
        assert_eq!(c.label(), "400.0 g CO2e/kWh (given (--carbon-intensity))");
        let fra = CarbonIntensity::for_region("fra").unwrap();
        let row = regions().find(|r| r.code == "FRA").unwrap();
        assert_eq!(fra.g_per_kwh, row.g_per_kwh);
        assert_eq!(
            fra.source,
            format!("FRA {}, Our World in Data via CodeCarbon", row.year)
        );
        assert_eq!(format_co2e(0.0000123), "12.300 µg");
        assert_eq!(format_co2e(0.0456), "45.600 mg");
        assert_eq!(format_co2e(7.891), "7.891 g");
        assert_eq!(format_co2e(1234.0), "1.234 kg");
    }

    #[test]
    fn bad_figures_and_unknown_regions_are_refused_with_the_fix() {
        for bad in ["", "-1", "nan", "1e9", "lots"] {
            assert!(CarbonIntensity::given(bad).is_err(), "{bad}");
        }
        let e = CarbonIntensity::for_region("FR").unwrap_err().to_string();
        assert!(
            e.contains("ISO 3166-1 alpha-3") && e.contains("--carbon-intensity"),
            "{e}"
        );
        assert!(e.contains("did you mean FRA (France)"), "{e}");
        let e = CarbonIntensity::for_region("germany")
            .unwrap_err()
            .to_string();
        assert!(e.contains("DEU (Germany)"), "{e}");
    }
}
