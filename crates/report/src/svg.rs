//! Minimal SVG charts (line, box, bar) written as strings: no JavaScript, no fonts or
//! resources from the network, so a report is one self-contained file.

use std::fmt::Write;
use wattio_stats::Summary;

const W: f64 = 720.0;
const H: f64 = 360.0;
const ML: f64 = 70.0; // left margin: y tick labels
const MR: f64 = 175.0; // right margin: legend
const MT: f64 = 20.0;
const MB: f64 = 60.0; // bottom margin: x tick labels + axis label
/// Colour-blind-safe palette (Okabe–Ito).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];
/// The baseline colour (the paper draws the no-measurement baseline in red).
pub const BASELINE: &str = "#D62728";

/// Escapes text for XML/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// "Nice" tick positions covering [lo, hi].
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
    let mut v = Vec::new();
    let end = (hi / step).ceil() * step;
    let n = ((end - start) / step).round() as usize;
    for i in 0..=n.min(50) {
        // Multiply rather than accumulate so ticks stay round (no 0.30000000000000004).
        let t = start + i as f64 * step;
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
    }
    v
}

/// Short number label: up to 4 decimals (2 above 100), trailing zeros trimmed, so
/// neighbouring ticks such as 1.425 and 1.45 stay distinct.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    }
    let s = if a >= 100.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    xlog: bool,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        let (x, a, b) = if self.xlog {
            (x.log10(), self.x0.log10(), self.x1.log10())
        } else {
            (x, self.x0, self.x1)
        };
        ML + (x - a) / (b - a) * (W - ML - MR)
    }
    fn py(&self, y: f64) -> f64 {
        H - MB - (y - self.y0) / (self.y1 - self.y0) * (H - MT - MB)
    }
}

fn open(out: &mut String, title: &str, provenance: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" data-provenance="{p}"><title>{t} ({p})</title>"#,
        t = esc(title),
        p = esc(provenance)
    );
    let _ = write!(
        out,
        r##"<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>"##
    );
}

fn y_axis(out: &mut String, f: &Frame, label: &str) {
    for t in ticks(f.y0, f.y1, 6) {
        if t < f.y0 - 1e-12 || t > f.y1 + 1e-12 {
            continue;
        }
        let y = f.py(t);
        let _ = write!(
            out,
            r##"<line x1="{ML}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            x2 = W - MR,
            tx = ML - 6.0,
            ty = y + 4.0,
            l = fmt_num(t)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(16 {c}) rotate(-90)" text-anchor="middle" font-size="12">{l}</text>"#,
        c = (MT + H - MB) / 2.0,
        l = esc(label)
    );
    let _ = write!(
        out,
        r##"<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{b}" stroke="#333"/><line x1="{ML}" x2="{r}" y1="{b}" y2="{b}" stroke="#333"/>"##,
        b = H - MB,
        r = W - MR
    );
}

fn x_label(out: &mut String, label: &str) {
    let _ = write!(
        out,
        r#"<text x="{c}" y="{y}" text-anchor="middle" font-size="12">{l}</text>"#,
        c = (ML + W - MR) / 2.0,
        y = H - 12.0,
        l = esc(label)
    );
}

fn legend(out: &mut String, names: &[(String, &str)]) {
    for (i, (name, colour)) in names.iter().enumerate().take(16) {
        let y = MT + 10.0 + i as f64 * 18.0;
        // A line sample, dashed like the series from the second palette cycle on.
        let _ = write!(
            out,
            r#"<line x1="{x}" x2="{x2}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="3"{d}/><text x="{tx}" y="{ty}" font-size="11">{n}</text>"#,
            x = W - MR + 8.0,
            x2 = W - MR + 26.0,
            ly = y - 4.0,
            d = dash(i),
            tx = W - MR + 30.0,
            ty = y,
            n = esc(&truncate(name, 22))
        );
    }
}

/// Dash pattern for series `i`: solid for the first palette cycle, dashed after, so
/// colours that repeat stay distinguishable.
fn dash(i: usize) -> &'static str {
    match i / PALETTE.len() {
        0 => "",
        1 => r#" stroke-dasharray="6,3""#,
        _ => r#" stroke-dasharray="2,2""#,
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut it = vals.filter(|v| v.is_finite()).peekable();
    it.peek()?;
    let (lo, hi) = it.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    Some((lo, hi))
}

fn pad(lo: f64, hi: f64, zero: bool) -> (f64, f64) {
    let (lo, hi) = if zero {
        (lo.min(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    };
    if hi > lo {
        let p = (hi - lo) * 0.05;
        (if zero && lo >= 0.0 { lo } else { lo - p }, hi + p)
    } else {
        (
            lo - 0.5_f64.max(lo.abs() * 0.05),
            hi + 0.5_f64.max(hi.abs() * 0.05),
        )
    }
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Options of [`line_chart`].
#[derive(Debug, Clone, Default)]
pub struct LineOpts {
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic x axis (knob sweeps over frequencies); non-positive x are dropped.
    pub x_log: bool,
    /// Draw markers at every point (for sparse curves).
    pub markers: bool,
    /// Include y = 0 in the range.
    pub y_zero: bool,
}

/// A line chart; `provenance` is embedded in the SVG (title and data attribute).
pub fn line_chart(title: &str, provenance: &str, series: &[Series], o: &LineOpts) -> String {
    let keep = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!o.x_log || p.0 > 0.0);
    let xs = extent(
        series
            .iter()
            .flat_map(|s| s.points.iter().filter(keep).map(|p| p.0)),
    );
    let ys = extent(
        series
            .iter()
            .flat_map(|s| s.points.iter().filter(keep).map(|p| p.1)),
    );
    let mut out = String::new();
    open(&mut out, title, provenance);
    let (Some((x0, x1)), Some((y0, y1))) = (xs, ys) else {
        let _ = write!(out, r#"<text x="20" y="40">no data</text></svg>"#);
        return out;
    };
    let (x0, x1) = if o.x_log {
        (
            10f64.powf(x0.log10().floor()),
            10f64.powf(x1.log10().ceil().max(x0.log10().floor() + 1.0)),
        )
    } else if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    let (y0, y1) = pad(y0, y1, o.y_zero);
    let f = Frame {
        x0,
        x1,
        y0,
        y1,
        xlog: o.x_log,
    };
    y_axis(&mut out, &f, &o.y_label);
    let xt: Vec<f64> = if o.x_log {
        let mut v = Vec::new();
        let mut t = x0;
        while t <= x1 * 1.0001 {
            v.push(t);
            t *= 10.0;
        }
        v
    } else {
        ticks(x0, x1, 7)
            .into_iter()
            .filter(|t| *t >= x0 - 1e-12 && *t <= x1 + 1e-12)
            .collect()
    };
    for t in xt {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="11">{l}</text>"#,
            x = f.px(t),
            y = H - MB + 16.0,
            l = fmt_num(t)
        );
    }
    x_label(&mut out, &o.x_label);
    let mut names = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .filter(keep)
            .map(|p| format!("{:.1},{:.1}", f.px(p.0), f.py(p.1)))
            .collect();
        if !pts.is_empty() {
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{c}" stroke-width="1.5"{d} points="{p}"/>"#,
                d = dash(i),
                p = pts.join(" ")
            );
            if o.markers {
                for p in &pts {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(out, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#);
                }
            }
        }
        names.push((s.name.clone(), c));
    }
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// One box of a box plot.
#[derive(Debug, Clone)]
pub struct BoxGroup {
    pub label: String,
    pub values: Vec<f64>,
    /// Drawn in the baseline colour (e.g. "off", the no-measurement runs).
    pub baseline: bool,
}

/// Box plot (Tukey: box q1–q3, median line, whiskers to the furthest point within
/// 1.5·IQR, every observation drawn as a dot so small samples stay honest).
pub fn box_plot(
    title: &str,
    provenance: &str,
    y_label: &str,
    x_label_text: &str,
    groups: &[BoxGroup],
) -> String {
    let mut out = String::new();
    open(&mut out, title, provenance);
    let Some((lo, hi)) = extent(groups.iter().flat_map(|g| g.values.iter().copied())) else {
        let _ = write!(out, r#"<text x="20" y="40">no data</text></svg>"#);
        return out;
    };
    let (y0, y1) = pad(lo, hi, false);
    let f = Frame {
        x0: 0.0,
        x1: groups.len() as f64,
        y0,
        y1,
        xlog: false,
    };
    y_axis(&mut out, &f, y_label);
    x_label(&mut out, x_label_text);
    let slot = (W - ML - MR) / groups.len().max(1) as f64;
    for (i, g) in groups.iter().enumerate() {
        let cx = ML + slot * (i as f64 + 0.5);
        let colour = if g.baseline { BASELINE } else { PALETTE[0] };
        let _ = write!(
            out,
            r#"<text x="{cx:.1}" y="{y}" text-anchor="middle" font-size="11">{l}</text>"#,
            y = H - MB + 16.0,
            l = esc(&truncate(&g.label, (slot / 6.0).max(4.0) as usize))
        );
        let Ok(s) = Summary::of(&g.values) else {
            continue;
        };
        let bw = (slot * 0.5).min(60.0);
        let lo_w = g
            .values
            .iter()
            .copied()
            .filter(|v| *v >= s.q1 - 1.5 * s.iqr())
            .fold(f64::INFINITY, f64::min);
        let hi_w = g
            .values
            .iter()
            .copied()
            .filter(|v| *v <= s.q3 + 1.5 * s.iqr())
            .fold(f64::NEG_INFINITY, f64::max);
        let _ = write!(
            out,
            r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{a:.1}" y2="{b:.1}" stroke="{colour}"/><rect x="{x:.1}" y="{top:.1}" width="{bw:.1}" height="{h:.1}" fill="{colour}" fill-opacity="0.25" stroke="{colour}"/><line x1="{x:.1}" x2="{x2:.1}" y1="{m:.1}" y2="{m:.1}" stroke="{colour}" stroke-width="2.5"/>"#,
            a = f.py(lo_w),
            b = f.py(hi_w),
            x = cx - bw / 2.0,
            x2 = cx + bw / 2.0,
            top = f.py(s.q3),
            h = (f.py(s.q1) - f.py(s.q3)).max(0.5),
            m = f.py(s.median)
        );
        for (k, v) in g.values.iter().enumerate() {
            // Deterministic jitter so overlapping points stay visible.
            let jitter = ((k * 37 % 11) as f64 / 10.0 - 0.5) * bw * 0.6;
            let _ = write!(
                out,
                r##"<circle cx="{x:.1}" cy="{y:.1}" r="2" fill="#333" fill-opacity="0.6"/>"##,
                x = cx + jitter,
                y = f.py(*v)
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// Vertical bar chart with one value per label.
pub fn bar_chart(title: &str, provenance: &str, y_label: &str, bars: &[(String, f64)]) -> String {
    let mut out = String::new();
    open(&mut out, title, provenance);
    let Some((lo, hi)) = extent(bars.iter().map(|b| b.1)) else {
        let _ = write!(out, r#"<text x="20" y="40">no data</text></svg>"#);
        return out;
    };
    let (y0, y1) = pad(lo, hi, true);
    let f = Frame {
        x0: 0.0,
        x1: bars.len() as f64,
        y0,
        y1,
        xlog: false,
    };
    y_axis(&mut out, &f, y_label);
    let slot = (W - ML - MR) / bars.len().max(1) as f64;
    for (i, (label, v)) in bars.iter().enumerate() {
        if !v.is_finite() {
            continue;
        }
        let cx = ML + slot * (i as f64 + 0.5);
        let bw = slot * 0.7;
        let (top, bottom) = (f.py(v.max(0.0)), f.py(v.min(0.0)));
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{top:.1}" width="{bw:.1}" height="{h:.1}" fill="{c}"/><text x="{cx:.1}" y="{ly:.1}" text-anchor="end" font-size="10" transform="rotate(-35 {cx:.1} {ly:.1})">{l}</text>"#,
            x = cx - bw / 2.0,
            h = (bottom - top).max(0.5),
            c = PALETTE[i % PALETTE.len()],
            ly = H - MB + 12.0,
            l = esc(&truncate(label, 18))
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.13, 0.87, 4);
        assert!(t[0] <= 0.13 && *t.last().unwrap() >= 0.87);
    }

    #[test]
    fn tick_labels_stay_distinct() {
        assert_eq!(fmt_num(1.425), "1.425");
        assert_eq!(fmt_num(1.45), "1.45");
        assert_eq!(fmt_num(250.0), "250");
        assert_eq!(fmt_num(0.00025), "2.50e-4");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        let svg = bar_chart("t<", "estimated (model: x<y)", "J", &[("a&b".into(), 1.0)]);
        assert!(svg.contains("a&amp;b") && !svg.contains("x<y"));
    }

    #[test]
    fn empty_input_does_not_panic() {
        assert!(line_chart("t", "p", &[], &LineOpts::default()).contains("no data"));
        assert!(box_plot("t", "p", "y", "x", &[]).contains("no data"));
        assert!(bar_chart("t", "p", "y", &[]).contains("no data"));
    }
}
