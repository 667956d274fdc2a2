//! Grouped vertical bars (one group per category, one bar per series) with optional error
//! bars, shaded per-group bands and horizontal reference lines, on the same canvas, axes and
//! legend as the other charts.

use crate::axis::{layout_labels, ticks};
use crate::chart::{
    extent, legend_height, legend_layout, legend_svg, no_data, round_significant, tick_width,
    whisker, Canvas, Chart, Entry, Reference, TICK_FONT,
};
use crate::style::{series_style, Style, PALETTE, REFERENCE_DASHES};
use crate::text::{esc, fmt_num, text_width};
use std::fmt::Write;

/// Font size of the values written above the bars.
const VALUE_FONT: f64 = 9.0;
/// Horizontal distance between neighbouring bars of a group: the rotated value labels
/// (one line of [`VALUE_FONT`] text each) need at least this much to stay apart.
const BAR_PITCH: f64 = 15.0;
/// Colour of shaded bands (a tolerance around a target).
const BAND_COLOUR: &str = "#59A14F";

/// One series of a grouped bar chart: a value per group (`None`: no bar in that group) and,
/// optionally, a range per group drawn as an error bar (e.g. the minimum and maximum of the
/// runs whose median the bar shows).
#[derive(Debug, Clone)]
pub struct BarSeries {
    pub name: String,
    /// One entry per group, in the order of the chart's groups.
    pub values: Vec<Option<f64>>,
    /// One entry per group, or empty for no error bars.
    pub ranges: Vec<Option<(f64, f64)>>,
}

/// Options of [`grouped_bar_chart`].
#[derive(Debug, Clone, Default)]
pub struct GroupedBarOpts {
    /// Horizontal lines across the plot (a link's capacity), drawn dashed and listed in the legend.
    pub references: Vec<Reference>,
    /// A shaded band per group (one entry per group, or empty), e.g. a target ± its tolerance.
    pub bands: Vec<Option<(f64, f64)>>,
    /// Legend name of the bands.
    pub band_name: String,
    /// Legend name of the error bars (what the range is, e.g. "min–max of the runs").
    pub range_name: String,
    /// Write each bar's value (3 significant digits) above it.
    pub value_labels: bool,
}

/// Fill attributes of the `i`-th bar series: solid in the palette's first cycle, translucent
/// with an outline of the same colour in the second, so eleven or more series stay apart.
fn bar_attrs(i: usize) -> String {
    let colour = series_style(i).colour;
    if (i / PALETTE.len()) % 2 == 0 {
        format!(r#"fill="{colour}""#)
    } else {
        format!(r#"fill="{colour}" fill-opacity="0.35" stroke="{colour}" stroke-width="1.5""#)
    }
}

fn band_attrs() -> String {
    format!(r#"fill="{BAND_COLOUR}" fill-opacity="0.2" stroke="{BAND_COLOUR}" stroke-width="1""#)
}

/// Grouped vertical bars: one group per entry of `groups` (labelled below the axis), one bar
/// per series in each group, in the series' colour; error bars where a series has ranges,
/// shaded bands and reference lines where the options give them. The y axis starts at zero
/// (bars show magnitudes) and leaves room above the tallest bar for its value label. The
/// legend lists every series with the swatch its bars use, then the references, the bands
/// and the error bars, each drawn as in the plot.
pub fn grouped_bar_chart(
    c: &Chart,
    groups: &[String],
    series: &[BarSeries],
    o: &GroupedBarOpts,
) -> String {
    let bars = Bars { groups, series, o };
    let Some((lo, hi)) = bars.y_extent() else {
        return no_data(c);
    };
    let ph = 300.0;
    // Head room for the value labels written upwards from the tallest bar or whisker.
    let label_len = if o.value_labels {
        series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .map(|v| text_width(&value_text(*v), VALUE_FONT) + 6.0)
            .fold(0.0, f64::max)
    } else {
        0.0
    };
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let frac = (label_len / ph).min(0.5);
    let yt = ticks(lo, hi + span * frac / (1.0 - frac), 5);
    let geometry = Geometry::new(groups, series.len());
    let legend = bars.legend();
    let (legend_lines, legend_w) = legend_layout(&legend.entries);
    let labels: Vec<(f64, String)> = groups
        .iter()
        .enumerate()
        .map(|(g, name)| (geometry.group_w * (g as f64 + 0.5), name.clone()))
        .collect();
    let row = layout_labels(&labels, TICK_FONT);
    let mut canvas = Canvas::new(c, geometry.width, ph, tick_width(&yt), legend_w, row.height);
    let mut out = canvas.start(c, legend_height(&legend_lines), &yt);
    let row = row.shifted(canvas.left);
    bars.draw_bars(&mut out, &canvas, &geometry);
    if let Some(entry) = legend.bands {
        bars.draw_bands(&mut out, &canvas, &geometry, entry);
    }
    if let Some(entry) = legend.ranges {
        bars.draw_ranges(&mut out, &canvas, &geometry, entry);
    }
    for (k, r) in o.references.iter().enumerate() {
        canvas.reference_line(&mut out, &legend.entries[series.len() + k], r.y);
    }
    if o.value_labels {
        bars.draw_values(&mut out, &canvas, &geometry);
    }
    legend_svg(&mut out, &canvas, &legend.entries, &legend_lines);
    canvas.close(&mut out, &row, c);
    out
}

/// A bar's value as written on it: 3 significant digits.
fn value_text(v: f64) -> String {
    fmt_num(round_significant(v, 3))
}

/// Where the bars go across the plot.
struct Geometry {
    /// The plot's width.
    width: f64,
    group_w: f64,
    pitch: f64,
    bar_w: f64,
}

impl Geometry {
    fn new(groups: &[String], n_series: usize) -> Geometry {
        let ns = n_series.max(1) as f64;
        // Wide enough for its bars, and for its label to stay horizontal when there is room.
        let widest_label = groups
            .iter()
            .map(|g| text_width(g, TICK_FONT))
            .fold(0.0, f64::max);
        let group_w = (ns * BAR_PITCH + BAR_PITCH * 1.4).max((widest_label + 12.0).min(160.0));
        let pw = (groups.len() as f64 * group_w).max(360.0);
        let group_w = pw / groups.len().max(1) as f64;
        let pitch = (group_w - BAR_PITCH * 1.4) / ns;
        Geometry {
            width: pw,
            group_w,
            pitch,
            bar_w: pitch * 0.82,
        }
    }

    /// The centre of series `s`'s bar in group `g`, from the plot's left edge.
    fn bar_x(&self, g: usize, s: usize) -> f64 {
        self.group_w * g as f64 + BAR_PITCH * 0.7 + self.pitch * (s as f64 + 0.5)
    }
}

/// The legend's entries, and which of them stand for the bands and the error bars.
struct Legend {
    entries: Vec<Entry>,
    bands: Option<usize>,
    ranges: Option<usize>,
}

/// What a grouped bar chart draws.
struct Bars<'a> {
    groups: &'a [String],
    series: &'a [BarSeries],
    o: &'a GroupedBarOpts,
}

impl Bars<'_> {
    fn value(&self, s: &BarSeries, g: usize) -> Option<f64> {
        s.values.get(g).copied().flatten()
    }

    fn range(&self, s: &BarSeries, g: usize) -> Option<(f64, f64)> {
        s.ranges.get(g).copied().flatten()
    }

    fn band(&self, g: usize) -> Option<(f64, f64)> {
        self.o.bands.get(g).copied().flatten()
    }

    /// The y range: every value and error bar, zero, the references and the bands; `None`
    /// when there is no finite value or range at all.
    fn y_extent(&self) -> Option<(f64, f64)> {
        let n = self.groups.len();
        let (lo, hi) = extent(
            self.series
                .iter()
                .flat_map(|s| (0..n).filter_map(|g| self.value(s, g)))
                .chain(
                    self.series
                        .iter()
                        .flat_map(|s| (0..n).filter_map(|g| self.range(s, g)))
                        .flat_map(|(a, b)| [a, b]),
                )
                .filter(|v| v.is_finite()),
        )?;
        Some(
            extent(
                [lo.min(0.0), hi.max(0.0)]
                    .into_iter()
                    .chain(self.o.references.iter().map(|r| r.y))
                    .chain(
                        (0..n)
                            .filter_map(|g| self.band(g))
                            .flat_map(|(a, b)| [a, b]),
                    ),
            )
            .unwrap_or((lo, hi)),
        )
    }

    /// Every series with its swatch, then the references, the bands and the error bars.
    fn legend(&self) -> Legend {
        let n = self.groups.len();
        let mut entries: Vec<Entry> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            entries.push(Entry {
                name: s.name.clone(),
                style: series_style(i),
                line: false,
                marker: false,
                swatch: Some(bar_attrs(i)),
                whisker: false,
                index: i,
            });
        }
        for (k, r) in self.o.references.iter().enumerate() {
            entries.push(Entry {
                name: r.name.clone(),
                style: Style {
                    colour: "#333",
                    dash: REFERENCE_DASHES[k % REFERENCE_DASHES.len()],
                    ..series_style(0)
                },
                line: true,
                marker: false,
                swatch: None,
                whisker: false,
                index: self.series.len() + k,
            });
        }
        let bands = (0..n).any(|g| self.band(g).is_some()).then(|| {
            let index = entries.len();
            entries.push(Entry {
                name: self.o.band_name.clone(),
                style: series_style(0),
                line: false,
                marker: false,
                swatch: Some(band_attrs()),
                whisker: false,
                index,
            });
            index
        });
        let has_ranges = self
            .series
            .iter()
            .any(|s| (0..n).any(|g| self.range(s, g).is_some()));
        let ranges = has_ranges.then(|| {
            let index = entries.len();
            entries.push(Entry {
                name: self.o.range_name.clone(),
                style: series_style(0),
                line: false,
                marker: false,
                swatch: None,
                whisker: true,
                index,
            });
            index
        });
        Legend {
            entries,
            bands,
            ranges,
        }
    }

    fn draw_bars(&self, out: &mut String, canvas: &Canvas, geometry: &Geometry) {
        let zero = canvas.py(0f64.clamp(canvas.y0, canvas.y1));
        let bar_w = geometry.bar_w;
        for (i, s) in self.series.iter().enumerate() {
            let _ = write!(out, r#"<g class="series" data-series="{i}">"#);
            for (g, group) in self.groups.iter().enumerate() {
                let Some(v) = self.value(s, g).filter(|v| v.is_finite()) else {
                    continue;
                };
                let x = canvas.left + geometry.bar_x(g, i);
                let y = canvas.py(v);
                let _ = write!(
                    out,
                    r#"<rect x="{bx:.1}" y="{top:.1}" width="{bar_w:.1}" height="{h:.1}" {attrs}><title>{gn} / {sn}: {val}</title></rect>"#,
                    bx = x - bar_w / 2.0,
                    top = y.min(zero),
                    h = (y - zero).abs().max(0.5),
                    attrs = bar_attrs(i),
                    gn = esc(group),
                    sn = esc(&s.name),
                    val = value_text(v),
                );
            }
            out.push_str("</g>");
        }
    }

    /// Over the bars, translucent, so the band shows across the bars it judges.
    fn draw_bands(&self, out: &mut String, canvas: &Canvas, geometry: &Geometry, entry: usize) {
        let _ = write!(out, r#"<g class="series" data-series="{entry}">"#);
        for (g, group) in self.groups.iter().enumerate() {
            if let Some((a, b)) = self.band(g) {
                let (top, bottom) = (canvas.py(a.max(b)), canvas.py(a.min(b)));
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" {attrs}><title>{n}: {lo}–{hi}</title></rect>"#,
                    x = canvas.left + geometry.group_w * g as f64 + BAR_PITCH * 0.35,
                    w = geometry.group_w - BAR_PITCH * 0.7,
                    h = (bottom - top).max(0.5),
                    attrs = band_attrs(),
                    n = esc(group),
                    lo = value_text(a.min(b)),
                    hi = value_text(a.max(b)),
                );
            }
        }
        out.push_str("</g>");
    }

    fn draw_ranges(&self, out: &mut String, canvas: &Canvas, geometry: &Geometry, entry: usize) {
        let _ = write!(out, r#"<g class="series" data-series="{entry}">"#);
        for (i, s) in self.series.iter().enumerate() {
            for g in 0..self.groups.len() {
                if let Some((a, b)) = self
                    .range(s, g)
                    .filter(|(a, b)| a.is_finite() && b.is_finite())
                {
                    let x = canvas.left + geometry.bar_x(g, i);
                    out.push_str(&whisker(
                        x,
                        canvas.py(a),
                        canvas.py(b),
                        geometry.bar_w * 0.6,
                    ));
                }
            }
        }
        out.push_str("</g>");
    }

    /// Inside the bar, reading up from its base, where the bar (below its error bar) is long
    /// enough; above the bar and its error bar otherwise. A white halo keeps the digits legible
    /// on any bar colour and across reference lines.
    fn draw_values(&self, out: &mut String, canvas: &Canvas, geometry: &Geometry) {
        let zero = canvas.py(0f64.clamp(canvas.y0, canvas.y1));
        out.push_str(r#"<g class="values">"#);
        for (i, s) in self.series.iter().enumerate() {
            for g in 0..self.groups.len() {
                let Some(v) = self.value(s, g).filter(|v| v.is_finite()) else {
                    continue;
                };
                let text = value_text(v);
                let len = text_width(&text, VALUE_FONT);
                let range = self.range(s, g);
                let low = range.map_or(v, |(a, b)| v.min(a).min(b));
                let high = range.map_or(v, |(a, b)| v.max(a).max(b));
                let x = canvas.left + geometry.bar_x(g, i) + VALUE_FONT * 0.35;
                let y = if v > 0.0 && zero - canvas.py(low) >= len + 8.0 {
                    zero - 4.0
                } else {
                    canvas.py(high.max(0.0)) - 4.0
                };
                let _ = write!(
                    out,
                    r##"<text x="{x:.1}" y="{y:.1}" font-size="{VALUE_FONT}" fill="#111" stroke="#fff" stroke-width="2.5" stroke-opacity="0.85" paint-order="stroke" transform="rotate(-90 {x:.1} {y:.1})">{text}</text>"##
                );
            }
        }
        out.push_str("</g>");
    }
}
