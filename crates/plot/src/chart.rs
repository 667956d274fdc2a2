//! The three chart types on one canvas layout: title, optional note lines, y axis on the
//! left, x tick labels laid out so none overlaps, legend on the right widened to fit.

use crate::axis::{decade_ticks, layout_labels, ticks, LabelRow};
use crate::style::{series_style, Style, BASELINE, PALETTE, REFERENCE_DASHES};
use crate::text::{esc, fmt_num, text_width, wrap};
use std::fmt::Write;

pub(crate) const TICK_FONT: f64 = 11.0;
pub(crate) const LABEL_FONT: f64 = 12.0;
const TITLE_FONT: f64 = 14.0;
/// Bold text is wider than [`text_width`]'s regular estimate by about this factor.
const BOLD: f64 = 1.12;
const NOTE_FONT: f64 = 11.0;
/// Space between the x axis line and its tick labels.
const X_LABEL_GAP: f64 = 3.0;
/// Legend names wrap at this width instead of being cut.
const LEGEND_TEXT_MAX: f64 = 200.0;

/// What every chart says about itself.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// Drawn at the top and used as the SVG `<title>`.
    pub title: String,
    /// Where the numbers come from (*measured (mechanism)* / *estimated (model)*): embedded as
    /// `data-provenance` and in the `<title>`.
    pub provenance: String,
    /// A visible note under the title (e.g. "energy estimated (…)"); empty for none.
    pub note: String,
    pub x_label: String,
    /// Energy axes name *measured* or *estimated*, e.g. "Energy (J), estimated".
    pub y_label: String,
    /// Small print at the bottom (e.g. the command that made the data); empty for none.
    pub footnote: String,
}

/// An energy or power axis name that keeps the provenance's *measured* or *estimated*:
/// `energy_axis("Energy (J)", "estimated (model: …)")` is "Energy (J), estimated". A
/// provenance that says neither is appended whole.
pub fn energy_axis(quantity: &str, provenance: &str) -> String {
    let kind = if provenance.contains("estimated") {
        "estimated"
    } else if provenance.contains("measured") {
        "measured"
    } else {
        provenance
    };
    format!("{quantity}, {kind}")
}

/// One line (or set of points) of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal line across the plot: a value that does not depend on x (a static strategy,
/// a lower bound).
#[derive(Debug, Clone)]
pub struct Reference {
    pub name: String,
    pub y: f64,
}

/// How x values map to positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XScale {
    #[default]
    Linear,
    /// Powers of ten equally spaced (sampling frequencies); non-positive x are dropped.
    Log,
    /// Each distinct x value gets an equal slot, labelled with its value: sweeps over
    /// settings such as the cache knob's 0, 50, 70, 90, 95, 99, 100.
    Categorical,
}

/// Options of [`line_chart`].
#[derive(Debug, Clone, Copy)]
pub struct LineOpts {
    pub x_scale: XScale,
    /// Draw a marker at every point (sparse sweeps); single-point series always get one.
    pub markers: bool,
    /// Include y = 0 in the range.
    pub y_zero: bool,
    /// Tick label of an x value.
    pub x_format: fn(f64) -> String,
}

impl Default for LineOpts {
    fn default() -> Self {
        LineOpts {
            x_scale: XScale::Linear,
            markers: false,
            y_zero: false,
            x_format: fmt_num,
        }
    }
}

/// One box of a box plot.
#[derive(Debug, Clone)]
pub struct BoxGroup {
    pub label: String,
    pub values: Vec<f64>,
    /// Drawn in the baseline colour (e.g. "off", the runs without measurement).
    pub baseline: bool,
}

/// A legend entry: the name and exactly the marks the series draws.
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) style: Style,
    pub(crate) line: bool,
    pub(crate) marker: bool,
    /// Attributes of a filled swatch (bars, shaded bands); `None` for none.
    pub(crate) swatch: Option<String>,
    /// Draw an error bar (the whiskers of a grouped bar chart).
    pub(crate) whisker: bool,
    pub(crate) index: usize,
}

/// Canvas geometry: plot area [left, left + pw] × [top, top + ph] inside width × height.
pub(crate) struct Canvas {
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) pw: f64,
    pub(crate) ph: f64,
    pub(crate) y0: f64,
    pub(crate) y1: f64,
    note: Vec<String>,
    footnote: Vec<String>,
}

impl Canvas {
    /// Lays out a chart whose plot area is `pw` × `ph`, with y tick labels `y_ticks`, a
    /// legend `legend_w` wide and `below` pixels of x tick labels.
    pub(crate) fn new(
        c: &Chart,
        pw: f64,
        ph: f64,
        y_tick_w: f64,
        legend_w: f64,
        below: f64,
    ) -> Canvas {
        let left = 14.0 + LABEL_FONT + y_tick_w + 8.0;
        let width =
            (left + pw + legend_w + 16.0).max(text_width(&c.title, TITLE_FONT) * BOLD + 20.0);
        let note = if c.note.is_empty() {
            Vec::new()
        } else {
            wrap(&c.note, width - 20.0, NOTE_FONT)
        };
        let footnote = if c.footnote.is_empty() {
            Vec::new()
        } else {
            wrap(&c.footnote, width - 16.0, 10.0)
        };
        let top = 34.0 + note.len() as f64 * 15.0;
        let x_label_h = if c.x_label.is_empty() { 0.0 } else { 20.0 };
        let height =
            top + ph + X_LABEL_GAP + below + x_label_h + footnote.len() as f64 * 13.0 + 10.0;
        Canvas {
            width,
            height,
            left,
            top,
            pw,
            ph,
            y0: 0.0,
            y1: 1.0,
            note,
            footnote,
        }
    }

    pub(crate) fn py(&self, y: f64) -> f64 {
        self.top + self.ph - (y - self.y0) / (self.y1 - self.y0) * self.ph
    }

    pub(crate) fn bottom(&self) -> f64 {
        self.top + self.ph
    }

    /// Makes the plot taller when a legend `legend_h` high would run off the chart, spans the
    /// y axis over the ticks `yt` (outer ticks at the plot's edges), and starts the SVG: title,
    /// note, gridlines and y axis.
    pub(crate) fn start(&mut self, c: &Chart, legend_h: f64, yt: &[f64]) -> String {
        if legend_h > self.ph + self.height - self.bottom() - 10.0 {
            let extra = legend_h - self.ph;
            self.ph += extra;
            self.height += extra;
        }
        self.y0 = yt[0];
        self.y1 = *yt.last().unwrap_or(&1.0);
        let mut out = String::new();
        self.open(&mut out, c);
        self.y_axis(&mut out, yt, &c.y_label);
        out
    }

    /// A horizontal reference line across the plot at `y`, in the style of its legend entry.
    pub(crate) fn reference_line(&self, out: &mut String, e: &Entry, y: f64) {
        let _ = write!(
            out,
            r#"<g class="series" data-series="{i}"><line x1="{l}" x2="{r}" y1="{y:.1}" y2="{y:.1}" {a}/></g>"#,
            i = e.index,
            l = self.left,
            r = self.left + self.pw,
            y = self.py(y),
            a = e.style.line_attrs()
        );
    }

    pub(crate) fn open(&self, out: &mut String, c: &Chart) {
        let (w, h) = (self.width.ceil(), self.height.ceil());
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" font-family="sans-serif" data-provenance="{p}"><title>{t} ({p})</title><rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/><text x="10" y="22" font-size="{TITLE_FONT}" font-weight="bold">{t}</text>"##,
            t = esc(&c.title),
            p = esc(&c.provenance)
        );
        for (i, l) in self.note.iter().enumerate() {
            let _ = write!(
                out,
                r##"<text x="10" y="{y}" font-size="{NOTE_FONT}" fill="#8b0000">{l}</text>"##,
                y = 40.0 + i as f64 * 15.0,
                l = esc(l)
            );
        }
    }

    /// Gridlines, y tick labels, the y axis label and the axis lines.
    pub(crate) fn y_axis(&self, out: &mut String, y_ticks: &[f64], label: &str) {
        for t in y_ticks {
            let y = self.py(*t);
            let _ = write!(
                out,
                r##"<line x1="{l}" x2="{r}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="{TICK_FONT}">{v}</text>"##,
                l = self.left,
                r = self.left + self.pw,
                tx = self.left - 6.0,
                ty = y + 4.0,
                v = fmt_num(*t)
            );
        }
        let _ = write!(
            out,
            r##"<text transform="translate({x} {c:.1}) rotate(-90)" text-anchor="middle" font-size="{LABEL_FONT}">{l}</text><line x1="{left}" x2="{left}" y1="{top}" y2="{b}" stroke="#333"/><line x1="{left}" x2="{r}" y1="{b}" y2="{b}" stroke="#333"/>"##,
            x = 14.0 + LABEL_FONT / 2.0,
            c = self.top + self.ph / 2.0,
            l = esc(label),
            left = self.left,
            top = self.top,
            b = self.bottom(),
            r = self.left + self.pw
        );
    }

    /// X tick labels, the x axis label under them, the footnote, and `</svg>`.
    pub(crate) fn close(&self, out: &mut String, row: &LabelRow, c: &Chart) {
        // A few pixels below the axis, so the first x label clears the lowest y label where
        // the two axes meet.
        out.push_str(&row.svg(self.bottom() + X_LABEL_GAP, TICK_FONT));
        let mut y = self.bottom() + X_LABEL_GAP + row.height;
        if !c.x_label.is_empty() {
            y += 16.0;
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="{LABEL_FONT}">{l}</text>"#,
                x = self.left + self.pw / 2.0,
                l = esc(&c.x_label)
            );
        }
        for l in &self.footnote {
            y += 13.0;
            let _ = write!(
                out,
                r##"<text x="8" y="{y:.1}" font-size="10" fill="#555">{l}</text>"##,
                l = esc(l)
            );
        }
        out.push_str("</svg>");
    }
}

pub(crate) fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((f64::min(a, v), f64::max(b, v))),
        })
}

/// Nice y ticks covering the data (and zero when asked); the axis spans the outer ticks.
fn y_ticks(lo: f64, hi: f64, zero: bool) -> Vec<f64> {
    let (lo, hi) = if zero {
        (lo.min(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    };
    ticks(lo, hi, 5)
}

pub(crate) fn tick_width(t: &[f64]) -> f64 {
    t.iter()
        .map(|v| text_width(&fmt_num(*v), TICK_FONT))
        .fold(0.0, f64::max)
}

pub(crate) fn no_data(c: &Chart) -> String {
    let canvas = Canvas::new(c, 300.0, 60.0, 0.0, 0.0, 0.0);
    let mut out = String::new();
    canvas.open(&mut out, c);
    let _ = write!(
        out,
        r#"<text x="20" y="{y}" font-size="{LABEL_FONT}">no data</text></svg>"#,
        y = canvas.top + 30.0
    );
    out
}

/// Legend lines (wrapped names) and its width.
pub(crate) fn legend_layout(entries: &[Entry]) -> (Vec<Vec<String>>, f64) {
    let lines: Vec<Vec<String>> = entries
        .iter()
        .map(|e| wrap(&e.name, LEGEND_TEXT_MAX, TICK_FONT))
        .collect();
    let widest = lines
        .iter()
        .flatten()
        .map(|l| text_width(l, TICK_FONT))
        .fold(0.0, f64::max);
    let w = if entries.is_empty() {
        0.0
    } else {
        widest + 44.0
    };
    (lines, w)
}

/// Height of a legend laid out by [`legend_layout`].
pub(crate) fn legend_height(lines: &[Vec<String>]) -> f64 {
    lines.iter().map(|l| 8.0 + l.len() as f64 * 13.0).sum()
}

pub(crate) fn legend_svg(
    out: &mut String,
    canvas: &Canvas,
    entries: &[Entry],
    lines: &[Vec<String>],
) -> f64 {
    let x = canvas.left + canvas.pw + 14.0;
    let mut y = canvas.top + 8.0;
    for (e, ls) in entries.iter().zip(lines) {
        let _ = write!(out, r#"<g class="legend-entry" data-series="{}">"#, e.index);
        if e.line {
            let _ = write!(
                out,
                r#"<line x1="{x}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" {a}/>"#,
                x2 = x + 24.0,
                a = e.style.line_attrs()
            );
        }
        if e.marker {
            out.push_str(&e.style.marker_svg(x + 12.0, y));
        }
        if let Some(attrs) = &e.swatch {
            let _ = write!(
                out,
                r#"<rect x="{sx}" y="{sy:.1}" width="16" height="10" {attrs}/>"#,
                sx = x + 4.0,
                sy = y - 5.0
            );
        }
        if e.whisker {
            out.push_str(&whisker(x + 12.0, y + 6.0, y - 6.0, 8.0));
        }
        for (k, l) in ls.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{tx}" y="{ty:.1}" font-size="{TICK_FONT}">{l}</text>"#,
                tx = x + 30.0,
                ty = y + 4.0 + k as f64 * 13.0,
                l = esc(l)
            );
        }
        out.push_str("</g>");
        y += 8.0 + ls.len() as f64 * 13.0;
    }
    y
}

/// A line (or scatter) chart with optional horizontal reference lines. Each series has its
/// own colour, marker shape and dash pattern ([`series_style`]); the legend draws the same
/// marks as the plot.
pub fn line_chart(c: &Chart, series: &[Series], references: &[Reference], o: &LineOpts) -> String {
    let keep = |p: &&(f64, f64)| {
        p.0.is_finite() && p.1.is_finite() && (o.x_scale != XScale::Log || p.0 > 0.0)
    };
    let kept_x = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().filter(keep).map(|p| p.0))
    };
    let ys = extent(
        series
            .iter()
            .flat_map(|s| s.points.iter().filter(keep).map(|p| p.1))
            .chain(references.iter().map(|r| r.y)),
    );
    let (Some(x_axis), Some((lo, hi))) = (XAxis::new(o.x_scale, kept_x(), 520.0), ys) else {
        return no_data(c);
    };
    let x_ticks = x_axis.ticks();
    let yt = y_ticks(lo, hi, o.y_zero);
    let mut entries: Vec<Entry> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let n = s.points.iter().filter(keep).count();
        entries.push(Entry {
            name: s.name.clone(),
            style: series_style(i),
            line: n > 1,
            marker: o.markers || n == 1,
            swatch: None,
            whisker: false,
            index: i,
        });
    }
    for (k, r) in references.iter().enumerate() {
        let i = series.len() + k;
        entries.push(Entry {
            name: r.name.clone(),
            style: Style {
                dash: REFERENCE_DASHES[k % REFERENCE_DASHES.len()],
                ..series_style(i)
            },
            line: true,
            marker: false,
            swatch: None,
            whisker: false,
            index: i,
        });
    }
    let (legend_lines, legend_w) = legend_layout(&entries);
    let labels: Vec<(f64, String)> = x_ticks
        .iter()
        .map(|t| (x_axis.px(*t), (o.x_format)(*t)))
        .collect();
    let row = layout_labels(&labels, TICK_FONT);
    let mut canvas = Canvas::new(
        c,
        x_axis.width,
        270.0,
        tick_width(&yt),
        legend_w,
        row.height,
    );
    let mut out = canvas.start(c, legend_height(&legend_lines), &yt);
    let row = row.shifted(canvas.left);
    if o.x_scale != XScale::Linear {
        for t in &x_ticks {
            let x = canvas.left + x_axis.px(*t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{t}" y2="{b}" stroke="#f0f0f0"/>"##,
                t = canvas.top,
                b = canvas.bottom()
            );
        }
    }
    for (k, r) in references.iter().enumerate() {
        canvas.reference_line(&mut out, &entries[series.len() + k], r.y);
    }
    for (s, e) in series.iter().zip(&entries) {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(keep)
            .map(|p| (canvas.left + x_axis.px(p.0), canvas.py(p.1)))
            .collect();
        series_svg(&mut out, e, &pts);
    }
    legend_svg(&mut out, &canvas, &entries, &legend_lines);
    canvas.close(&mut out, &row, c);
    out
}

/// One series of a line chart: its polyline and markers, as its legend entry says.
fn series_svg(out: &mut String, e: &Entry, pts: &[(f64, f64)]) {
    let _ = write!(out, r#"<g class="series" data-series="{}">"#, e.index);
    if e.line {
        let p: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            out,
            r#"<polyline {a} points="{p}"/>"#,
            a = e.style.line_attrs(),
            p = p.join(" ")
        );
    }
    if e.marker {
        for (x, y) in pts {
            out.push_str(&e.style.marker_svg(*x, *y));
        }
    }
    out.push_str("</g>");
}

/// A line chart's x axis: its scale, its span (whole decades on a log scale) and, on a
/// categorical one, the distinct x values in order.
struct XAxis {
    scale: XScale,
    x0: f64,
    x1: f64,
    categories: Vec<f64>,
    /// The plot's width.
    width: f64,
}

impl XAxis {
    /// The axis of the x values `xs` (finite, and positive on a log scale); `None` for none.
    fn new(scale: XScale, xs: impl Iterator<Item = f64>, width: f64) -> Option<XAxis> {
        let mut categories: Vec<f64> = xs.collect();
        let (x0, x1) = extent(categories.iter().copied())?;
        categories.sort_by(f64::total_cmp);
        categories.dedup();
        let (x0, x1) = match scale {
            XScale::Log => (
                10f64.powf(x0.log10().floor()),
                10f64.powf(x1.log10().ceil().max(x0.log10().floor() + 1.0)),
            ),
            _ if x1 > x0 => (x0, x1),
            _ => (x0 - 1.0, x1 + 1.0),
        };
        Some(XAxis {
            scale,
            x0,
            x1,
            categories,
            width,
        })
    }

    /// Where `x` lies, from the plot's left edge.
    fn px(&self, x: f64) -> f64 {
        let (x0, x1, pw) = (self.x0, self.x1, self.width);
        match self.scale {
            XScale::Linear => (x - x0) / (x1 - x0) * pw,
            XScale::Log => (x.log10() - x0.log10()) / (x1.log10() - x0.log10()) * pw,
            XScale::Categorical => {
                let i = self.categories.partition_point(|c| *c < x);
                (i as f64 + 0.5) / self.categories.len() as f64 * pw
            }
        }
    }

    fn ticks(&self) -> Vec<f64> {
        let (x0, x1) = (self.x0, self.x1);
        match self.scale {
            XScale::Linear => ticks(x0, x1, 7)
                .into_iter()
                .filter(|t| *t >= x0 - 1e-12 && *t <= x1 + 1e-12)
                .collect(),
            XScale::Log => decade_ticks(x0, x1),
            XScale::Categorical => self.categories.clone(),
        }
    }
}

/// Box plot (Tukey: box q1–q3, median line, whiskers to the furthest point within 1.5·IQR,
/// every observation drawn as a dot so small samples stay honest).
pub fn box_plot(c: &Chart, groups: &[BoxGroup]) -> String {
    let Some((lo, hi)) = extent(groups.iter().flat_map(|g| g.values.iter().copied())) else {
        return no_data(c);
    };
    let yt = y_ticks(lo, hi, false);
    let pw = (groups.len() as f64 * 70.0).clamp(300.0, 880.0);
    let slot = pw / groups.len() as f64;
    let labels: Vec<(f64, String)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (slot * (i as f64 + 0.5), g.label.clone()))
        .collect();
    let row = layout_labels(&labels, TICK_FONT);
    let mut canvas = Canvas::new(c, pw, 270.0, tick_width(&yt), 0.0, row.height);
    let mut out = canvas.start(c, 0.0, &yt);
    for (i, g) in groups.iter().enumerate() {
        let cx = canvas.left + slot * (i as f64 + 0.5);
        let colour = if g.baseline { BASELINE } else { PALETTE[0] };
        let Ok(s) = wattio_stats::Summary::of(&g.values) else {
            continue;
        };
        let fence = 1.5 * (s.q3 - s.q1);
        let within = |v: &&f64| **v >= s.q1 - fence && **v <= s.q3 + fence;
        let lo_w = g
            .values
            .iter()
            .filter(within)
            .fold(f64::INFINITY, |a, v| a.min(*v));
        let hi_w = g
            .values
            .iter()
            .filter(within)
            .fold(f64::NEG_INFINITY, |a, v| a.max(*v));
        let bw = (slot * 0.5).min(60.0);
        let _ = write!(
            out,
            r#"<g class="box"><line x1="{cx:.1}" x2="{cx:.1}" y1="{a:.1}" y2="{b:.1}" stroke="{colour}"/><rect x="{x:.1}" y="{top:.1}" width="{bw:.1}" height="{h:.1}" fill="{colour}" fill-opacity="0.25" stroke="{colour}"/><line x1="{x:.1}" x2="{x2:.1}" y1="{m:.1}" y2="{m:.1}" stroke="{colour}" stroke-width="2.5"/>"#,
            a = canvas.py(lo_w),
            b = canvas.py(hi_w),
            x = cx - bw / 2.0,
            x2 = cx + bw / 2.0,
            top = canvas.py(s.q3),
            h = (canvas.py(s.q1) - canvas.py(s.q3)).max(0.5),
            m = canvas.py(s.median)
        );
        for (k, v) in g.values.iter().enumerate() {
            // Deterministic jitter so overlapping points stay visible.
            let jitter = ((k * 37 % 11) as f64 / 10.0 - 0.5) * bw * 0.6;
            let _ = write!(
                out,
                r##"<circle cx="{x:.1}" cy="{y:.1}" r="2" fill="#333" fill-opacity="0.6"/>"##,
                x = cx + jitter,
                y = canvas.py(*v)
            );
        }
        out.push_str("</g>");
    }
    let row = row.shifted(canvas.left);
    canvas.close(&mut out, &row, c);
    out
}

/// `v` rounded to `digits` significant digits (bar values: 139.52 reads as 140).
pub(crate) fn round_significant(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Horizontal bar chart, one bar per label in the given order, each bar's value written at
/// its end; long labels get the room they need on the left instead of being cut.
pub fn bar_chart(c: &Chart, bars: &[(String, f64)]) -> String {
    let Some((lo, hi)) = extent(bars.iter().map(|b| b.1)) else {
        return no_data(c);
    };
    let xt = ticks(lo.min(0.0), hi.max(0.0), 5);
    let (x0, x1) = (xt[0], *xt.last().unwrap_or(&1.0));
    let label_w = bars
        .iter()
        .map(|b| text_width(&b.0, TICK_FONT))
        .fold(0.0, f64::max);
    let pw = 480.0;
    let bar_h = 20.0;
    let ph = bars.len() as f64 * (bar_h + 8.0) + 8.0;
    let px = |x: f64| (x - x0) / (x1 - x0) * pw;
    let labels: Vec<(f64, String)> = xt.iter().map(|t| (px(*t), fmt_num(*t))).collect();
    let row = layout_labels(&labels, TICK_FONT);
    // The y "tick" column holds the bar labels; the value of the longest bar needs room on
    // the right.
    let value = |v: f64| fmt_num(round_significant(v, 3));
    let value_w = text_width(&value(hi), TICK_FONT) + 10.0;
    let canvas = Canvas::new(c, pw, ph, label_w, value_w, row.height);
    let mut out = String::new();
    canvas.open(&mut out, c);
    let l = canvas.left;
    let grid: Vec<f64> = xt.iter().map(|t| px(*t)).collect();
    horizontal_bar_frame(&mut out, &canvas, c, (pw, ph), &grid);
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = canvas.top + 8.0 + i as f64 * (bar_h + 8.0);
        let _ = write!(
            out,
            r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="{TICK_FONT}">{n}</text>"#,
            tx = l - 6.0,
            ty = y + bar_h * 0.7,
            n = esc(label)
        );
        if !v.is_finite() {
            continue;
        }
        let (a, z) = (px(v.min(0.0)), px(v.max(0.0)));
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="{fill}"/><text x="{vx:.1}" y="{ty:.1}" font-size="{TICK_FONT}">{val}</text>"#,
            x = l + a,
            w = (z - a).max(1.0),
            fill = PALETTE[0],
            vx = l + z + 4.0,
            ty = y + bar_h * 0.7,
            val = value(*v)
        );
    }
    let row = row.shifted(l);
    canvas.close(&mut out, &row, c);
    out
}

/// The frame of horizontal bars: a vertical grid line at each of `grid` (pixels from the
/// plot's left), the y label, and the two axes of a `pw` × `ph` plot.
pub(crate) fn horizontal_bar_frame(
    out: &mut String,
    canvas: &Canvas,
    c: &Chart,
    (pw, ph): (f64, f64),
    grid: &[f64],
) {
    let (l, b) = (canvas.left, canvas.bottom());
    for x in grid {
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{b}" stroke="#e3e3e3"/>"##,
            x = l + x,
            top = canvas.top
        );
    }
    let _ = write!(
        out,
        r##"<text transform="translate({x} {cy:.1}) rotate(-90)" text-anchor="middle" font-size="{LABEL_FONT}">{yl}</text><line x1="{l}" x2="{l}" y1="{top}" y2="{b}" stroke="#333"/><line x1="{l}" x2="{r}" y1="{b}" y2="{b}" stroke="#333"/>"##,
        x = 14.0 + LABEL_FONT / 2.0,
        cy = canvas.top + ph / 2.0,
        yl = esc(&c.y_label),
        top = canvas.top,
        r = l + pw
    );
}

/// Colour of error bars.
const RANGE_COLOUR: &str = "#222";

/// An error bar from `lo` to `hi` (pixel y) at `x`, with caps `cap` wide.
pub(crate) fn whisker(x: f64, lo: f64, hi: f64, cap: f64) -> String {
    format!(
        r#"<path d="M{x:.1} {lo:.1}V{hi:.1}M{a:.1} {lo:.1}H{b:.1}M{a:.1} {hi:.1}H{b:.1}" stroke="{RANGE_COLOUR}" stroke-width="1.2" fill="none"/>"#,
        a = x - cap / 2.0,
        b = x + cap / 2.0
    )
}
