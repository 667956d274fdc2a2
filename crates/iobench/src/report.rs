//! Human-readable outputs: the paper-shaped tables (III, IV, V), the MB/J ranking (Figures 4
//! and 9), the buffer curve (Figure 5), SVG plots, and the recommendations.

use crate::analysis::{sig, CellStats, Recommendation};
use crate::catalog::{is_main, Op, Size};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Table III/IV/V shape for `op`: one row per method, energy (median [IQR]) and time per size.
pub fn paper_table(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
    let cells: Vec<&CellStats> = stats
        .iter()
        .filter(|c| c.op == op && is_main(c.op, c.buffer))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let sizes: BTreeSet<Size> = cells.iter().map(|c| c.size).collect();
    let largest = *sizes.iter().max()?;
    let mut methods: Vec<&str> = cells
        .iter()
        .map(|c| c.method.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let at = |m: &str, s: Size| cells.iter().find(|c| c.method == m && c.size == s).copied();
    methods.sort_by(|a, b| {
        let ea = at(a, largest).map_or(f64::INFINITY, |c| c.energy_median_j);
        let eb = at(b, largest).map_or(f64::INFINITY, |c| c.energy_median_j);
        ea.total_cmp(&eb)
    });
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**{}** — energy J: median [q1–q3], time ms: median. Energy {provenance}.\n",
        op.title()
    );
    let _ = write!(s, "| method |");
    for z in &sizes {
        let _ = write!(s, " {z} energy (J) | {z} time (ms) |");
    }
    let _ = write!(s, "\n|---|");
    for _ in &sizes {
        let _ = write!(s, "---:|---:|");
    }
    s.push('\n');
    for m in methods {
        let _ = write!(s, "| {m} |");
        for &z in &sizes {
            match at(m, z) {
                Some(c) => {
                    let _ = write!(
                        s,
                        " {} [{}–{}] | {} |",
                        sig(c.energy_median_j),
                        sig(c.energy_q1_j),
                        sig(c.energy_q3_j),
                        sig(c.time_median_s * 1e3)
                    );
                }
                None => s.push_str(" – | – |"),
            }
        }
        s.push('\n');
    }
    Some(s)
}

/// The cells of `op` at its largest size (default buffer), best MB/J first.
pub fn ranking_cells(stats: &[CellStats], op: Op) -> Vec<&CellStats> {
    let cells: Vec<&CellStats> = stats
        .iter()
        .filter(|c| c.op == op && is_main(c.op, c.buffer))
        .collect();
    let Some(largest) = cells.iter().map(|c| c.size).max() else {
        return vec![];
    };
    let mut v: Vec<&CellStats> = cells.into_iter().filter(|c| c.size == largest).collect();
    v.sort_by(|a, b| b.mb_per_j.total_cmp(&a.mb_per_j));
    v
}

/// MB/J ranking (Figures 4 and 9) for `op` as a markdown table.
pub fn ranking_table(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
    let v = ranking_cells(stats, op);
    let first = v.first()?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**{} — MB per joule on {} ({} runs each)**, energy {provenance}.\n\n| rank | method | MB/J | median J | median ms |\n|---:|---|---:|---:|---:|",
        op.title(),
        first.size,
        first.n
    );
    for (i, c) in v.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            i + 1,
            c.method,
            sig(c.mb_per_j),
            sig(c.energy_median_j),
            sig(c.time_median_s * 1e3)
        );
    }
    Some(s)
}

/// Buffer curve (Figure 5): median energy per buffer size for each swept method, largest size.
pub fn buffer_table(stats: &[CellStats], provenance: &str) -> Option<String> {
    let swept: BTreeSet<(Op, String)> = stats
        .iter()
        .filter(|c| !is_main(c.op, c.buffer))
        .map(|c| (c.op, c.method.clone()))
        .collect();
    if swept.is_empty() {
        return None;
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**Buffer size sweep** — median energy (J) per buffer size; energy {provenance}.\n"
    );
    let buffers: BTreeSet<u32> = stats
        .iter()
        .filter(|c| swept.contains(&(c.op, c.method.clone())))
        .map(|c| c.buffer)
        .collect();
    let _ = write!(s, "| use case / method | size |");
    for b in &buffers {
        let _ = write!(s, " {} |", human_buffer(*b));
    }
    let _ = write!(s, " best |\n|---|---|");
    for _ in &buffers {
        s.push_str("---:|");
    }
    s.push_str("---|\n");
    for (op, m) in &swept {
        let sizes: BTreeSet<Size> = stats
            .iter()
            .filter(|c| c.op == *op && &c.method == m)
            .map(|c| c.size)
            .collect();
        for z in sizes {
            let row: BTreeMap<u32, f64> = stats
                .iter()
                .filter(|c| c.op == *op && &c.method == m && c.size == z)
                .map(|c| (c.buffer, c.energy_median_j))
                .collect();
            let _ = write!(s, "| {op}/{m} | {z} |");
            for b in &buffers {
                let _ = write!(s, " {} |", row.get(b).map_or("–".into(), |e| sig(*e)));
            }
            let best = row
                .iter()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(b, _)| human_buffer(*b))
                .unwrap_or_default();
            let _ = writeln!(s, " {best} |");
        }
    }
    Some(s)
}

pub fn human_buffer(b: u32) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Horizontal bar chart of MB/J for `op` (SVG).
pub fn ranking_svg(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
    let v = ranking_cells(stats, op);
    let first = v.first()?;
    let max = v
        .iter()
        .map(|c| c.mb_per_j)
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let (w, left, bar_h, top) = (720.0, 120.0, 22.0, 58.0);
    let h = top + v.len() as f64 * (bar_h + 6.0) + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}: MB per joule, {} file (median of {} runs; higher is better)</text>"#,
        esc(op.title()),
        first.size,
        first.n
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="40" fill="darkred">energy {}</text>"#,
        esc(provenance)
    );
    let span = w - left - 90.0;
    for (i, c) in v.iter().enumerate() {
        let y = top + i as f64 * (bar_h + 6.0);
        let bw = (c.mb_per_j / max * span).max(1.0);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 15.0,
            esc(&c.method)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{left}" y="{y}" width="{bw:.1}" height="{bar_h}" fill="steelblue"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}">{}</text>"#,
            left + bw + 4.0,
            y + 15.0,
            sig(c.mb_per_j)
        );
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// Line chart of median energy against buffer size (log2 axis) for each swept method (SVG).
pub fn buffer_svg(stats: &[CellStats], provenance: &str) -> Option<String> {
    let swept: Vec<&CellStats> = stats
        .iter()
        .filter(|c| matches!(c.op, Op::Read | Op::Write))
        .collect();
    let series_keys: BTreeSet<(Op, String)> = stats
        .iter()
        .filter(|c| !is_main(c.op, c.buffer))
        .map(|c| (c.op, c.method.clone()))
        .collect();
    if series_keys.is_empty() {
        return None;
    }
    let largest = swept
        .iter()
        .filter(|c| series_keys.contains(&(c.op, c.method.clone())))
        .map(|c| c.size)
        .max()?;
    let pts: Vec<(String, Vec<(f64, f64)>)> = series_keys
        .iter()
        .map(|(op, m)| {
            let mut p: Vec<(f64, f64)> = swept
                .iter()
                .filter(|c| c.op == *op && &c.method == m && c.size == largest)
                .map(|c| ((c.buffer as f64).log2(), c.energy_median_j))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            (format!("{op}/{m}"), p)
        })
        .collect();
    let all: Vec<(f64, f64)> = pts.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let (x0, x1) = (
        all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min),
        all.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max),
    );
    let (y0, y1) = (0.0, all.iter().map(|p| p.1).fold(0.0f64, f64::max) * 1.1);
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 170.0, 60.0, 50.0);
    let sx = |x: f64| l + (x - x0) / (x1 - x0).max(1e-9) * (w - l - r);
    let sy = |y: f64| h - b - (y - y0) / (y1 - y0).max(1e-12) * (h - t - b);
    let colors = [
        "#4a7ab5", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6", "#555555", "#e377c2",
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Median energy (J) against buffer size, {largest} file (lower is better)</text>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="40" fill="darkred">energy {}</text>"#,
        esc(provenance)
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
        h - b,
        w - r,
        h - b
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b
    );
    let mut xs: Vec<f64> = all.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            sx(x),
            h - b + 16.0,
            human_buffer(x.exp2().round() as u32)
        );
    }
    for k in 0..=4 {
        let y = y0 + (y1 - y0) * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            l - 6.0,
            sy(y) + 4.0,
            sig(y)
        );
    }
    for (i, (name, p)) in pts.iter().enumerate() {
        let c = colors[i % colors.len()];
        let path: Vec<String> = p
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for (x, y) in p {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                sx(*x),
                sy(*y)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" fill="{c}">{}</text>"#,
            w - r + 10.0,
            t + 16.0 * i as f64,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// The recommendation lines, one per use case.
pub fn recommendations_text(recs: &[Recommendation]) -> String {
    let mut s = String::new();
    for r in recs {
        let _ = writeln!(s, "- {}", r.line);
    }
    s
}

/// Box plot of per-run energy for each method of `op` on its largest size (Figures 3, 8 and 10
/// of the paper): box = quartiles, line = median, whiskers = min and max, dots = runs.
pub fn box_svg(rows: &[crate::results::RunRecord], op: Op, provenance: &str) -> Option<String> {
    let rs: Vec<&crate::results::RunRecord> = rows
        .iter()
        .filter(|r| r.op == op && is_main(r.op, r.buffer))
        .collect();
    let size = rs.iter().map(|r| r.size).max()?;
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rs.iter().filter(|r| r.size == size) {
        by.entry(r.method.as_str()).or_default().push(r.energy_j);
    }
    let mut series: Vec<(&str, wattio_stats::Summary, Vec<f64>)> = by
        .into_iter()
        .filter_map(|(m, v)| wattio_stats::Summary::of(&v).ok().map(|s| (m, s, v)))
        .collect();
    series.sort_by(|a, b| a.1.median.total_cmp(&b.1.median));
    let ymax = series.iter().map(|s| s.1.max).fold(0.0f64, f64::max) * 1.08;
    if series.is_empty() || ymax <= 0.0 {
        return None;
    }
    let (w, h, l, t, b) = (80.0 + 90.0 * series.len() as f64, 400.0, 70.0, 60.0, 50.0);
    let sy = |y: f64| h - b - y / ymax * (h - t - b);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}: energy per run (J), {size} (lower is better)</text>"#,
        esc(op.title())
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="40" fill="darkred">energy {}</text>"#,
        esc(provenance)
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b
    );
    for k in 0..=4 {
        let y = ymax * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            l - 6.0,
            sy(y) + 4.0,
            sig(y)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{l}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="gainsboro"/>"#,
            sy(y),
            w - 10.0
        );
    }
    for (i, (m, st, v)) in series.iter().enumerate() {
        let cx = l + 50.0 + 90.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{cx}" y1="{:.1}" x2="{cx}" y2="{:.1}" stroke="black"/>"#,
            sy(st.min),
            sy(st.max)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{:.1}" width="40" height="{:.1}" fill="lightsteelblue" stroke="black"/>"#,
            cx - 20.0,
            sy(st.q3),
            (sy(st.q1) - sy(st.q3)).max(0.5)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{2:.1}" x2="{}" y2="{2:.1}" stroke="black" stroke-width="2"/>"#,
            cx - 20.0,
            cx + 20.0,
            sy(st.median)
        );
        for (k, x) in v.iter().enumerate() {
            let dx = (k % 5) as f64 * 3.0 - 6.0;
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="1.8" fill="darkred"/>"#,
                cx + 28.0 + dx,
                sy(*x)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{cx}" y="{}" text-anchor="middle">{}</text>"#,
            h - b + 16.0,
            esc(m)
        );
    }
    s.push_str("</svg>\n");
    Some(s)
}
