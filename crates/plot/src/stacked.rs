//! Horizontal stacked bars: one bar per run or method, one segment per part of its energy
//! (CPU package, DRAM, GPU, disks, the rest of the platform), and a whisker over the part that
//! is an interval rather than a figure.

use crate::axis::{layout_labels, ticks};
use crate::chart::{
    extent, horizontal_bar_frame, no_data, round_significant, whisker, Canvas, Chart, TICK_FONT,
};
use crate::style::PALETTE;
use crate::text::{esc, fmt_num, text_width};
use std::fmt::Write;

/// One bar of a [`stacked_bar_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct StackedBar {
    /// Written left of the bar.
    pub label: String,
    /// One value per part of the chart, in its order (`None`: the bar has no such part).
    pub parts: Vec<Option<f64>>,
    /// Where a part is an interval: its index and its lower and upper bound, drawn as a
    /// whisker from the segment's start.
    pub range: Option<(usize, f64, f64)>,
}

/// Stacked horizontal bars, one colour per part (named in `parts`, listed under the bars),
/// the total written at each bar's end; a part's interval is a whisker over its segment.
pub fn stacked_bar_chart(c: &Chart, parts: &[String], bars: &[StackedBar]) -> String {
    let ends = bars.iter().flat_map(|b| {
        let total: f64 = b.parts.iter().flatten().sum();
        let over = b.range.map_or(total, |(i, _, hi)| start_of(b, i) + hi);
        [total, over]
    });
    let Some((_, hi)) = extent(ends) else {
        return no_data(c);
    };
    let xt = ticks(0.0, hi.max(0.0), 5);
    let x1 = *xt.last().unwrap_or(&1.0);
    let label_w = bars
        .iter()
        .map(|b| text_width(&b.label, TICK_FONT))
        .fold(0.0, f64::max);
    let (pw, bar_h) = (480.0, 20.0);
    let rows = bars.len() + parts.len();
    let ph = rows as f64 * (bar_h + 8.0) + 8.0;
    let px = |x: f64| x / x1 * pw;
    let ticks_px: Vec<(f64, String)> = xt.iter().map(|t| (px(*t), fmt_num(*t))).collect();
    let row = layout_labels(&ticks_px, TICK_FONT);
    let value = |v: f64| fmt_num(round_significant(v, 3));
    let canvas = Canvas::new(
        c,
        pw,
        ph,
        label_w,
        text_width(&value(hi), TICK_FONT) + 10.0,
        row.height,
    );
    let mut out = String::new();
    canvas.open(&mut out, c);
    let l = canvas.left;
    let grid: Vec<f64> = xt.iter().map(|t| px(*t)).collect();
    horizontal_bar_frame(&mut out, &canvas, c, (pw, ph), &grid);
    let y_of = |i: usize| canvas.top + 8.0 + i as f64 * (bar_h + 8.0);
    for (i, bar) in bars.iter().enumerate() {
        let y = y_of(i);
        let _ = write!(
            out,
            r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="{TICK_FONT}">{n}</text>"#,
            tx = l - 6.0,
            ty = y + bar_h * 0.7,
            n = esc(&bar.label)
        );
        let mut at = 0.0;
        for (k, v) in bar.parts.iter().enumerate() {
            let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) else {
                continue;
            };
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="{fill}"><title>{name}: {val} J</title></rect>"#,
                x = l + px(at),
                w = px(v).max(1.0),
                fill = PALETTE[k % PALETTE.len()],
                name = esc(&parts[k]),
                val = value(v)
            );
            at += v;
        }
        if let Some((k, lo, hi)) = bar.range {
            let s = start_of(bar, k);
            let mid = y + bar_h / 2.0;
            // A horizontal whisker: the drawing helper is vertical, so it is rotated about its middle.
            let _ = write!(
                out,
                r#"<g transform="rotate(-90 {cx:.1} {mid:.1})">{w}</g>"#,
                cx = l + px(s + (lo + hi) / 2.0),
                w = whisker(
                    l + px(s + (lo + hi) / 2.0),
                    mid - (px(hi) - px(lo)) / 2.0,
                    mid + (px(hi) - px(lo)) / 2.0,
                    8.0
                )
            );
        }
        let _ = write!(
            out,
            r#"<text x="{vx:.1}" y="{ty:.1}" font-size="{TICK_FONT}">{val}</text>"#,
            vx = l + px(at) + 4.0,
            ty = y + bar_h * 0.7,
            val = value(at)
        );
    }
    for (k, name) in parts.iter().enumerate() {
        let y = y_of(bars.len() + k);
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="12" height="12" fill="{fill}"/><text x="{tx:.1}" y="{ty:.1}" font-size="{TICK_FONT}">{n}</text>"#,
            x = l + 8.0,
            fill = PALETTE[k % PALETTE.len()],
            tx = l + 26.0,
            ty = y + 10.0,
            n = esc(name)
        );
    }
    let row = row.shifted(l);
    canvas.close(&mut out, &row, c);
    out
}

/// Where part `k` of `bar` starts: the sum of the parts before it.
fn start_of(bar: &StackedBar, k: usize) -> f64 {
    bar.parts.iter().take(k).flatten().sum()
}
