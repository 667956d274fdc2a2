//! Human-readable outputs: the paper-shaped tables (III, IV, V), the MB/J ranking (Figures 4
//! and 9), the buffer curve (Figure 5), SVG plots, and the recommendations. (The runs' section of
//! a `wattio report` page is the report's own, drawn from the same rows.)

use crate::analysis::{sig, CellStats, Recommendation};
use crate::catalog::{is_main, Op, Size};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use wattio_plot::{
    bar_chart, box_plot, energy_axis, line_chart, BoxGroup, Chart, LineOpts, Series, XScale,
};
use wattio_results::{Align, Table};

/// Table III/IV/V shape for `op`: one row per method, energy (median [IQR]) and time per size.
pub(crate) fn paper_table(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
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
    let mut columns = vec![("method".to_string(), Align::Plain)];
    for z in &sizes {
        columns.push((format!("{z} energy (J)"), Align::Right));
        columns.push((format!("{z} time (ms)"), Align::Right));
    }
    let mut table = Table::new(&columns);
    for m in methods {
        let mut row = vec![m.to_string()];
        for &z in &sizes {
            match at(m, z) {
                Some(c) => {
                    row.push(format!(
                        "{} [{}–{}]",
                        sig(c.energy_median_j),
                        sig(c.energy_q1_j),
                        sig(c.energy_q3_j)
                    ));
                    row.push(sig(c.time_median_s * 1e3));
                }
                None => row.extend(["–".to_string(), "–".to_string()]),
            }
        }
        table.push(row);
    }
    s.push_str(&table.markdown());
    Some(s)
}

/// The cells of `op` at its largest size (default buffer), best MB/J first.
pub(crate) fn ranking_cells(stats: &[CellStats], op: Op) -> Vec<&CellStats> {
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
pub(crate) fn ranking_table(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
    let v = ranking_cells(stats, op);
    let first = v.first()?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**{} — MB per joule on {} ({} runs each)**, energy {provenance}.\n",
        op.title(),
        first.size,
        first.n
    );
    let mut table = Table::new(&[
        ("rank", Align::Right),
        ("method", Align::Plain),
        ("MB/J", Align::Right),
        ("median J", Align::Right),
        ("median ms", Align::Right),
    ]);
    for (i, c) in v.iter().enumerate() {
        table.push(vec![
            (i + 1).to_string(),
            c.method.to_string(),
            sig(c.mb_per_j),
            sig(c.energy_median_j),
            sig(c.time_median_s * 1e3),
        ]);
    }
    s.push_str(&table.markdown());
    Some(s)
}

/// Flushed and unflushed writes side by side: each write method's MB/J and rank under the
/// paper's protocol (`write`, the window closing before writeback) and with fsync inside the
/// window (`writesync`), at the largest size both ran, and how the ranking changes.
pub(crate) fn flush_table(stats: &[CellStats], provenance: &str) -> Option<String> {
    let unflushed = ranking_cells(stats, Op::Write);
    let flushed = ranking_cells(stats, Op::Writesync);
    let (u0, f0) = (unflushed.first()?, flushed.first()?);
    if u0.size != f0.size {
        return None;
    }
    let rank_in = |v: &[&CellStats], m: &str| v.iter().position(|c| c.method == m);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**Writes on {}, unflushed (the paper's protocol) and flushed (fsync inside the window)**, energy {provenance}.\n",
        u0.size
    );
    let mut table = Table::new(&[
        ("method", Align::Plain),
        ("unflushed MB/J", Align::Right),
        ("rank", Align::Right),
        ("flushed MB/J", Align::Right),
        ("rank", Align::Right),
        ("flushed / unflushed energy", Align::Right),
    ]);
    let mut moved = 0;
    for (i, u) in unflushed.iter().enumerate() {
        let Some(j) = rank_in(&flushed, &u.method) else {
            continue;
        };
        let f = flushed[j];
        moved += usize::from(i != j);
        table.push(vec![
            u.method.to_string(),
            sig(u.mb_per_j),
            (i + 1).to_string(),
            sig(f.mb_per_j),
            (j + 1).to_string(),
            sig(f.energy_median_j / u.energy_median_j),
        ]);
    }
    s.push_str(&table.markdown());
    let _ = writeln!(
        s,
        "\nRanking: best unflushed {}, best flushed {}; {moved} of {} methods change rank once the writeback is in the window.",
        u0.method,
        f0.method,
        unflushed.len()
    );
    Some(s)
}

/// Buffer curve (Figure 5): median energy per buffer size for each swept method, largest size.
pub(crate) fn buffer_table(stats: &[CellStats], provenance: &str) -> Option<String> {
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
    let mut columns = vec![
        ("use case / method".to_string(), Align::Plain),
        ("size".to_string(), Align::Plain),
    ];
    columns.extend(buffers.iter().map(|b| (human_buffer(*b), Align::Right)));
    columns.push(("best".to_string(), Align::Plain));
    let mut table = Table::new(&columns);
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
            let mut cells = vec![format!("{op}/{m}"), z.to_string()];
            cells.extend(
                buffers
                    .iter()
                    .map(|b| row.get(b).map_or("–".into(), |e| sig(*e))),
            );
            let best = row
                .iter()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(b, _)| human_buffer(*b))
                .unwrap_or_default();
            cells.push(best);
            table.push(cells);
        }
    }
    s.push_str(&table.markdown());
    Some(s)
}

pub(crate) fn human_buffer(b: u32) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// The heading of an iobench chart; the energy provenance is its visible note.
fn chart(title: String, provenance: &str, x_label: &str, y_label: String) -> Chart {
    Chart {
        title,
        provenance: provenance.into(),
        note: format!("energy {provenance}"),
        x_label: x_label.into(),
        y_label,
        footnote: String::new(),
    }
}

/// Horizontal bar chart of MB/J for `op` (SVG).
pub(crate) fn ranking_svg(stats: &[CellStats], op: Op, provenance: &str) -> Option<String> {
    let v = ranking_cells(stats, op);
    let first = v.first()?;
    let bars: Vec<(String, f64)> = v.iter().map(|c| (c.method.clone(), c.mb_per_j)).collect();
    let c = chart(
        format!(
            "{}: MB per joule, {} file (median of {} runs; higher is better)",
            op.title(),
            first.size,
            first.n
        ),
        provenance,
        &energy_axis("MB per joule (median)", provenance),
        "method".into(),
    );
    Some(bar_chart(&c, &bars) + "\n")
}

fn buffer_label(log2_bytes: f64) -> String {
    human_buffer(log2_bytes.exp2().round() as u32)
}

/// Line chart of median energy against buffer size (one slot per swept size, labelled in
/// bytes) for each swept method (SVG).
pub(crate) fn buffer_svg(stats: &[CellStats], provenance: &str) -> Option<String> {
    let swept: Vec<&CellStats> = stats
        .iter()
        .filter(|c| matches!(c.op, Op::Read | Op::Write | Op::Writesync))
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
    let series: Vec<Series> = series_keys
        .iter()
        .map(|(op, m)| {
            let mut points: Vec<(f64, f64)> = swept
                .iter()
                .filter(|c| c.op == *op && &c.method == m && c.size == largest)
                .map(|c| ((c.buffer as f64).log2(), c.energy_median_j))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: format!("{op}/{m}"),
                points,
            }
        })
        .collect();
    let c = chart(
        format!("Median energy against buffer size, {largest} file (lower is better)"),
        provenance,
        "buffer size",
        energy_axis("Energy (J), median", provenance),
    );
    let opts = LineOpts {
        x_scale: XScale::Categorical,
        markers: true,
        y_zero: true,
        x_format: buffer_label,
    };
    Some(line_chart(&c, &series, &[], &opts) + "\n")
}

/// The recommendation lines, one per use case.
pub(crate) fn recommendations_text(recs: &[Recommendation]) -> String {
    let mut s = String::new();
    for r in recs {
        let _ = writeln!(s, "- {}", r.line);
    }
    s
}

/// Box plot of per-run energy for each method of `op` on its largest size (Figures 3, 8 and 10
/// of the paper), methods ordered by median: box = quartiles, line = median, whiskers to the
/// furthest run within 1.5·IQR, dots = runs.
pub(crate) fn box_svg(
    rows: &[crate::results::RunRecord],
    op: Op,
    provenance: &str,
) -> Option<String> {
    let rs: Vec<&crate::results::RunRecord> = rows
        .iter()
        .filter(|r| r.op == op && is_main(r.op, r.buffer))
        .collect();
    let size = rs.iter().map(|r| r.size).max()?;
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rs.iter().filter(|r| r.size == size) {
        by.entry(r.method.as_str()).or_default().push(r.energy_j);
    }
    let mut groups: Vec<(f64, BoxGroup)> = by
        .into_iter()
        .filter_map(|(m, v)| {
            wattio_stats::median(&v).ok().map(|med| {
                (
                    med,
                    BoxGroup {
                        label: m.to_string(),
                        values: v,
                        baseline: false,
                    },
                )
            })
        })
        .collect();
    if groups.is_empty() {
        return None;
    }
    groups.sort_by(|a, b| a.0.total_cmp(&b.0));
    let groups: Vec<BoxGroup> = groups.into_iter().map(|g| g.1).collect();
    let c = chart(
        format!(
            "{}: energy per run, {size} file (lower is better)",
            op.title()
        ),
        provenance,
        "method",
        energy_axis("Energy per run (J)", provenance),
    );
    Some(box_plot(&c, &groups) + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(op: Op, method: &str, energy_j: f64) -> CellStats {
        CellStats {
            op,
            method: method.into(),
            size: Size::Small,
            buffer: 8192,
            n: 3,
            energy_median_j: energy_j,
            energy_q1_j: energy_j,
            energy_q3_j: energy_j,
            time_median_s: 0.05,
            time_q1_s: 0.05,
            time_q3_s: 0.05,
            bytes: 15_000_000,
            mb_per_j: 15.0 / energy_j,
        }
    }

    /// Each method's rank under both protocols, its energy ratio, and how many moved: channel
    /// is best unflushed and last flushed here (15/0.1 > 15/0.2 > 15/0.3; flushed 0.6 > 0.35 > 0.3).
    #[test]
    fn flushed_and_unflushed_writes_side_by_side() {
        let stats = vec![
            cell(Op::Write, "channel", 0.1),
            cell(Op::Write, "apache", 0.2),
            cell(Op::Write, "raf", 0.3),
            cell(Op::Writesync, "channel", 0.6),
            cell(Op::Writesync, "apache", 0.3),
            cell(Op::Writesync, "raf", 0.35),
            cell(Op::Read, "channel", 0.01),
        ];
        let t = flush_table(&stats, "estimated").unwrap();
        assert!(t.contains("| channel | 150 | 1 | 25.0 | 3 | 6.00 |"), "{t}");
        assert!(t.contains("| apache | 75.0 | 2 | 50.0 | 1 | 1.50 |"), "{t}");
        assert!(t.contains("| raf | 50.0 | 3 | 42.9 | 2 | 1.17 |"), "{t}");
        assert!(
            t.contains("best unflushed channel, best flushed apache; 3 of 3 methods change rank"),
            "{t}"
        );
        assert!(
            flush_table(&stats[..3], "estimated").is_none(),
            "no flushed runs, no table"
        );
    }

    /// The ranking as the study's Markdown has always laid it out: a bold title, a blank line,
    /// the header, right-aligned figures.
    #[test]
    fn the_ranking_table_keeps_its_layout() {
        let stats = vec![cell(Op::Read, "raf", 0.3), cell(Op::Read, "channel", 0.1)];
        let t = ranking_table(&stats, Op::Read, "estimated").unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("**") && lines[0].ends_with("energy estimated."),
            "{t}"
        );
        assert_eq!(lines[1], "");
        assert_eq!(lines[2], "| rank | method | MB/J | median J | median ms |");
        assert_eq!(lines[3], "|---:|---|---:|---:|---:|");
        assert!(lines[4].starts_with("| 1 | channel | 150 | "), "{t}");
        assert!(lines[5].starts_with("| 2 | raf | 50.0 | "), "{t}");
        assert!(t.ends_with("|\n") && lines.len() == 6, "{t}");
    }
}
