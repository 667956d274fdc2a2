//! How series are told apart: colour, marker shape and dash pattern.

use std::fmt::Write;

/// Tableau 10: ten colours chosen to stay distinct from each other (and, with the marker
/// shapes, for colour-blind readers), so ten series never share a colour.
pub const PALETTE: [&str; 10] = [
    "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F", "#EDC948", "#B07AA1", "#FF9DA7",
    "#9C755F", "#79706E",
];

/// The baseline colour (the RAPL overhead paper draws the no-measurement runs in red).
pub const BASELINE: &str = "#D62728";

/// Marker shapes, cycled with a period coprime to the palette's so that colour and shape
/// together tell up to 30 series apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Cross,
    Plus,
}

const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
    Marker::Plus,
];

/// Dash patterns: solid for the first palette cycle, then dashed, then dash-dot.
const DASHES: [&str; 3] = ["", "7,3", "9,3,2,3"];

/// Dash patterns of horizontal reference lines (knob-independent strategies, bounds): dotted
/// and dash-dotted, unlike any series, and differing between neighbouring references.
pub const REFERENCE_DASHES: [&str; 4] = ["2,3", "10,3,2,3", "2,2,2,6", "10,3,2,3,2,3"];

/// The look of one series; the legend draws its sample with the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub colour: &'static str,
    pub marker: Marker,
    /// SVG `stroke-dasharray`; empty for a solid line.
    pub dash: &'static str,
}

/// The style of the `i`-th series of a chart.
pub fn series_style(i: usize) -> Style {
    Style {
        colour: PALETTE[i % PALETTE.len()],
        marker: MARKERS[i % MARKERS.len()],
        dash: DASHES[(i / PALETTE.len()) % DASHES.len()],
    }
}

impl Style {
    /// Attributes of a line in this style.
    pub fn line_attrs(&self) -> String {
        let mut a = format!(r#"fill="none" stroke="{}" stroke-width="2""#, self.colour);
        if !self.dash.is_empty() {
            let _ = write!(a, r#" stroke-dasharray="{}""#, self.dash);
        }
        a
    }

    /// The marker centred on (x, y).
    pub fn marker_svg(&self, x: f64, y: f64) -> String {
        let c = self.colour;
        let r = 3.6;
        let poly = |pts: &[(f64, f64)]| {
            let p: Vec<String> = pts
                .iter()
                .map(|(dx, dy)| format!("{:.1},{:.1}", x + dx, y + dy))
                .collect();
            format!(
                r#"<polygon class="mark" points="{}" fill="{c}"/>"#,
                p.join(" ")
            )
        };
        let stroke = |d: &str| {
            format!(r#"<path class="mark" d="{d}" stroke="{c}" stroke-width="2" fill="none"/>"#)
        };
        match self.marker {
            Marker::Circle => {
                format!(r#"<circle class="mark" cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{c}"/>"#)
            }
            Marker::Square => format!(
                r#"<rect class="mark" x="{:.1}" y="{:.1}" width="{w:.1}" height="{w:.1}" fill="{c}"/>"#,
                x - r * 0.9,
                y - r * 0.9,
                w = r * 1.8
            ),
            Marker::TriangleUp => poly(&[(0.0, -r * 1.2), (r * 1.1, r * 0.8), (-r * 1.1, r * 0.8)]),
            Marker::TriangleDown => {
                poly(&[(0.0, r * 1.2), (r * 1.1, -r * 0.8), (-r * 1.1, -r * 0.8)])
            }
            Marker::Diamond => poly(&[(0.0, -r * 1.3), (r, 0.0), (0.0, r * 1.3), (-r, 0.0)]),
            Marker::Cross => stroke(&format!(
                "M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}",
                x - r,
                y - r,
                x + r,
                y + r,
                x - r,
                y + r,
                x + r,
                y - r
            )),
            Marker::Plus => stroke(&format!(
                "M{:.1} {y:.1}L{:.1} {y:.1}M{x:.1} {:.1}L{x:.1} {:.1}",
                x - r * 1.2,
                x + r * 1.2,
                y - r * 1.2,
                y + r * 1.2
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_series_get_ten_colours_and_thirty_get_distinct_looks() {
        let colours: std::collections::BTreeSet<&str> =
            (0..10).map(|i| series_style(i).colour).collect();
        assert_eq!(colours.len(), 10);
        let looks: std::collections::BTreeSet<String> = (0..30)
            .map(|i| {
                let s = series_style(i);
                format!("{}{:?}{}", s.colour, s.marker, s.dash)
            })
            .collect();
        assert_eq!(looks.len(), 30);
    }
}
