//! Axis ticks and the placement of their labels.

use crate::text::text_width;

/// "Nice" tick positions (steps of 1, 2, 2.5 or 5 × 10ⁿ) covering [lo, hi].
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let n = ((end - start) / step).round() as usize;
    let scale = 10f64.powi((1 - step.log10().floor() as i32).max(0));
    (0..=n.min(50))
        .map(|i| {
            // Rounded to the step's decimals so ticks stay round (no 0.30000000000000004).
            let t = start + i as f64 * step;
            let t = (t * scale).round() / scale;
            if t.abs() < step * 1e-9 {
                0.0
            } else {
                t
            }
        })
        .collect()
}

/// Powers of ten from `lo` to `hi` (both powers of ten), for a logarithmic axis.
pub fn decade_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().round() as i32, hi.log10().round() as i32);
    (a..=b).map(|e| 10f64.powi(e)).collect()
}

/// Angle of rotated tick labels (degrees, counter-clockwise, anchored at their end).
pub const ROTATION_DEG: f64 = 40.0;

/// One tick label as drawn below the x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct TickLabel {
    /// Centre (unrotated) or anchor (rotated, text ends here) of the label.
    pub x: f64,
    pub text: String,
}

/// How a row of x tick labels is drawn so that none overlaps another.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelRow {
    /// The labels drawn (a subset of the ticks when they had to be thinned).
    pub labels: Vec<TickLabel>,
    /// Rotated by [`ROTATION_DEG`]; otherwise horizontal and centred on the tick.
    pub rotated: bool,
    /// Vertical space the row needs below the axis, in pixels.
    pub height: f64,
}

/// Lays out labels for ticks at the (increasing) positions `xs`: horizontal when they fit,
/// rotated when they do not, and thinned to every k-th label when even rotated labels would
/// touch. Widths come from [`text_width`].
pub fn layout_labels(ticks: &[(f64, String)], font_px: f64) -> LabelRow {
    let gap = 0.3 * font_px;
    let fits_flat = ticks.windows(2).all(|w| {
        let (a, b) = (&w[0], &w[1]);
        b.0 - a.0 >= (text_width(&a.1, font_px) + text_width(&b.1, font_px)) / 2.0 + gap
    });
    if fits_flat {
        return LabelRow {
            labels: ticks
                .iter()
                .map(|(x, t)| TickLabel {
                    x: *x,
                    text: t.clone(),
                })
                .collect(),
            rotated: false,
            height: font_px * 1.6,
        };
    }
    // Rotated labels are parallel lines: neighbours at horizontal distance d are d·sin(θ)
    // apart perpendicular to the text, which must exceed one line of text.
    let sin = ROTATION_DEG.to_radians().sin();
    let min_step = ticks
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(f64::INFINITY, f64::min);
    let every = if min_step.is_finite() && min_step > 0.0 {
        ((font_px * 1.15) / (min_step * sin)).ceil().max(1.0) as usize
    } else {
        1
    };
    let labels: Vec<TickLabel> = ticks
        .iter()
        .step_by(every)
        .map(|(x, t)| TickLabel {
            x: *x,
            text: t.clone(),
        })
        .collect();
    let longest = labels
        .iter()
        .map(|l| text_width(&l.text, font_px))
        .fold(0.0, f64::max);
    LabelRow {
        labels,
        rotated: true,
        height: longest * sin + font_px * (1.0 + ROTATION_DEG.to_radians().cos()),
    }
}

impl LabelRow {
    /// The same row moved right by `dx` (layouts are computed relative to the plot's left edge).
    pub fn shifted(mut self, dx: f64) -> LabelRow {
        for l in &mut self.labels {
            l.x += dx;
        }
        self
    }

    /// Whether two labels of the row overlap, judged by the same width estimates.
    pub fn overlaps(&self, font_px: f64) -> bool {
        self.labels.windows(2).any(|w| {
            let d = w[1].x - w[0].x;
            if self.rotated {
                d * ROTATION_DEG.to_radians().sin() < font_px
            } else {
                d < (text_width(&w[0].text, font_px) + text_width(&w[1].text, font_px)) / 2.0
            }
        })
    }

    /// SVG text elements of the row; `y` is the axis line.
    pub fn svg(&self, y: f64, font_px: f64) -> String {
        let mut out = String::new();
        for l in &self.labels {
            let text = crate::text::esc(&l.text);
            if self.rotated {
                let ty = y + font_px * 1.2;
                out.push_str(&format!(
                    r#"<text x="{x:.1}" y="{ty:.1}" text-anchor="end" font-size="{font_px}" transform="rotate(-{ROTATION_DEG} {x:.1} {ty:.1})">{text}</text>"#,
                    x = l.x + font_px * 0.3,
                ));
            } else {
                out.push_str(&format!(
                    r#"<text x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="{font_px}">{text}</text>"#,
                    x = l.x,
                    ty = y + font_px * 1.3,
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.13, 0.87, 4);
        assert!(t[0] <= 0.13 && *t.last().unwrap() >= 0.87);
        assert_eq!(ticks(0.0, 0.3, 3), vec![0.0, 0.1, 0.2, 0.3]);
        // A flat range still gets ticks around its value.
        let flat = ticks(5.0, 5.0, 4);
        assert!(flat[0] < 5.0 && *flat.last().unwrap() > 5.0);
        assert_eq!(decade_ticks(1.0, 1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
    }

    fn row(n: usize, spacing: f64, text: &str) -> Vec<(f64, String)> {
        (0..n)
            .map(|i| (i as f64 * spacing, format!("{text} {i}")))
            .collect()
    }

    #[test]
    fn short_labels_stay_horizontal() {
        let r = layout_labels(&row(7, 80.0, "99"), 11.0);
        assert!(!r.rotated && r.labels.len() == 7 && !r.overlaps(11.0));
    }

    #[test]
    fn long_labels_rotate_and_never_overlap() {
        // The overhead study's sampling labels on a 520 px axis.
        let ticks = row(13, 40.0, "perf-rapl 1000 Hz");
        let r = layout_labels(&ticks, 11.0);
        assert!(r.rotated && r.labels.len() == 13, "{r:?}");
        assert!(!r.overlaps(11.0));
        // Flat labels would have overlapped: the check is not vacuous.
        let flat = LabelRow {
            rotated: false,
            ..r.clone()
        };
        assert!(flat.overlaps(11.0));
        assert!(r.height > text_width("perf-rapl 1000 Hz 12", 11.0) * 0.5);
    }

    #[test]
    fn crowded_labels_are_thinned() {
        let r = layout_labels(&row(200, 3.0, "x"), 11.0);
        assert!(r.rotated && r.labels.len() < 50, "{}", r.labels.len());
        assert!(!r.overlaps(11.0));
    }
}
