//! The one SVG chart module of wattio: line/scatter charts (linear, logarithmic or
//! categorical x axis, horizontal reference lines), box plots, horizontal bar charts and
//! grouped vertical bars with error bars, bands and reference lines,
//! written as self-contained SVG strings (no scripts, fonts or network resources) for
//! `wattio report`, `wattio cache sweep` and `wattio iobench`.
//!
//! What every chart guarantees: each series has its own colour, marker shape and dash pattern,
//! and the legend draws exactly the marks of its series; legend names wrap instead of being
//! cut; x tick labels are rotated or thinned, from text-width estimates, so none overlaps;
//! the energy provenance (*measured* / *estimated*) travels in the SVG's title and
//! `data-provenance` attribute, and callers put it on energy axes.
//!
//! Every chart takes a [`Chart`] (title, provenance, axis labels, notes; [`energy_axis`] names an
//! energy axis) and returns the SVG text: [`line_chart`] of [`Series`] with [`Reference`] lines
//! ([`LineOpts`], [`XScale`]), [`box_plot`] of [`BoxGroup`]s, [`bar_chart`], and
//! [`grouped_bar_chart`] of [`BarSeries`] ([`GroupedBarOpts`]). Series look apart through
//! [`series_style`] ([`Style`], [`Marker`], [`PALETTE`]).
//!
//! A section of a `wattio report` page is a [`ReportSection`] (the report has one per kind of
//! result file): it writes its figures and tables into an [`HtmlSection`], whose captions name
//! each figure's provenance. `cache sweep` and `iobench` use the charts alone, for the SVG
//! files they write beside their results.

mod axis;
mod chart;
mod grouped;
mod section;
mod stacked;
mod style;
mod text;

pub use axis::{decade_ticks, layout_labels, ticks, LabelRow, TickLabel, ROTATION_DEG};
pub use chart::{
    bar_chart, box_plot, energy_axis, line_chart, BoxGroup, Chart, LineOpts, Reference, Series,
    XScale,
};
pub use grouped::{grouped_bar_chart, BarSeries, GroupedBarOpts};
pub use section::{provenance_html, HtmlSection, ReportSection};
pub use stacked::{stacked_bar_chart, StackedBar};
pub use style::{series_style, Marker, Style, BASELINE, PALETTE, REFERENCE_DASHES};
pub use text::{esc, fmt_num, text_width, wrap};

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that every element is closed in order (a small well-formedness parse: tags,
    /// self-closing tags, attribute quoting, and no raw `<`/`&` in text).
    fn assert_well_formed(svg: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            assert!(!text.contains('>'), "raw '>' in text: {text}");
            for (i, _) in text.match_indices('&') {
                let ent = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                        .iter()
                        .any(|e| ent.starts_with(e)),
                    "bare & in text: {text}"
                );
            }
            let end = rest[start..].find('>').expect("unclosed tag") + start;
            let tag = &rest[start + 1..end];
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
            assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap_or_default();
                stack.push(name.to_string());
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed elements: {stack:?}");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    fn chart(title: &str) -> Chart {
        Chart {
            title: title.into(),
            provenance: "estimated (model: x<y & z)".into(),
            note: "energy estimated (model: x<y & z)".into(),
            x_label: "knob".into(),
            y_label: "Energy (J), estimated".into(),
            footnote: "made by `wattio cache sweep`".into(),
        }
    }

    fn series(n: usize) -> Vec<Series> {
        (0..n)
            .map(|i| Series {
                name: format!("strategy {i} <with a rather long descriptive name & more>"),
                points: [0.0, 50.0, 70.0, 90.0, 95.0, 99.0, 100.0]
                    .iter()
                    .map(|k| (*k, 10.0 + i as f64 + k / 10.0))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn every_chart_is_well_formed_and_escaped() {
        let opts = LineOpts {
            x_scale: XScale::Categorical,
            markers: true,
            ..Default::default()
        };
        let refs = [Reference {
            name: "static & <fixed>".into(),
            y: 12.0,
        }];
        let charts = [
            line_chart(&chart("line <1>"), &series(12), &refs, &opts),
            box_plot(
                &chart("box"),
                &[BoxGroup {
                    label: "off <base>".into(),
                    values: vec![1.0, 2.0, 3.0, 10.0],
                    baseline: true,
                }],
            ),
            bar_chart(&chart("bar"), &[("a&b".into(), 3.0), ("c".into(), -1.0)]),
            line_chart(&chart("empty"), &[], &[], &LineOpts::default()),
            box_plot(&chart("empty"), &[]),
            bar_chart(&chart("empty"), &[]),
        ];
        for svg in &charts {
            assert_well_formed(svg);
            assert!(svg.contains("data-provenance=\"estimated (model: x&lt;y &amp; z)\""));
            assert!(!svg.contains("x<y"));
        }
        assert!(charts[0].contains("line &lt;1&gt;") && charts[2].contains("a&amp;b"));
        assert!(charts[3].contains("no data"));
    }

    /// The marks inside an element group (tag name and style attributes, positions dropped).
    fn marks(svg: &str, class: &str, index: usize) -> Vec<String> {
        let open = format!(r#"<g class="{class}" data-series="{index}">"#);
        let start = svg.find(&open).expect("group present") + open.len();
        let body = &svg[start..start + svg[start..].find("</g>").unwrap()];
        let mut out: Vec<String> = body
            .split('<')
            .filter(|t| {
                !t.is_empty()
                    && !t.starts_with("text")
                    && !t.starts_with("title")
                    && !t.starts_with('/')
            })
            .map(|t| {
                let name = t.split_whitespace().next().unwrap_or_default();
                let name = if name == "polyline" { "line" } else { name };
                let attr = |a: &str| {
                    t.split(&format!(" {a}=\""))
                        .nth(1)
                        .and_then(|v| v.split('"').next())
                        .unwrap_or("")
                        .to_string()
                };
                format!(
                    "{name} stroke={} fill={} dash={}",
                    attr("stroke"),
                    attr("fill"),
                    attr("stroke-dasharray")
                )
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn legend_draws_the_marks_of_its_series() {
        let mut s = series(11);
        // A knob-independent strategy has one point: it is drawn, and listed, as a marker.
        s[3].points.truncate(1);
        let refs = [Reference {
            name: "lower bound".into(),
            y: 5.0,
        }];
        for markers in [true, false] {
            let opts = LineOpts {
                x_scale: XScale::Categorical,
                markers,
                ..Default::default()
            };
            let svg = line_chart(&chart("t"), &s, &refs, &opts);
            for i in 0..12 {
                let plot = marks(&svg, "series", i);
                assert!(!plot.is_empty());
                assert_eq!(plot, marks(&svg, "legend-entry", i), "series {i}");
            }
            assert_eq!(marks(&svg, "series", 3).len(), 1, "one point: marker only");
            assert!(marks(&svg, "series", 11)[0].contains(REFERENCE_DASHES[0]));
            // Series 0 and 10 share a colour, not a look.
            assert_ne!(marks(&svg, "series", 0), marks(&svg, "series", 10));
        }
    }

    #[test]
    fn energy_axes_keep_measured_or_estimated() {
        assert_eq!(
            energy_axis("Energy (J)", "estimated (model: ccf-linear)"),
            "Energy (J), estimated"
        );
        assert_eq!(
            energy_axis("Power (W)", "measured (perf)"),
            "Power (W), measured"
        );
        assert_eq!(
            energy_axis("Energy (J)", "no energy recorded"),
            "Energy (J), no energy recorded"
        );
    }

    #[test]
    fn legend_names_are_never_cut() {
        let s = series(3);
        let svg = line_chart(&chart("t"), &s, &[], &LineOpts::default());
        for name in s.iter().map(|s| esc(&s.name)) {
            for word in name.split(' ') {
                assert!(svg.contains(word), "{word}");
            }
        }
        assert!(!svg.contains('…'));
        // The chart widened to the legend: its width covers the wrapped names.
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(width > 520.0 + 200.0, "{width}");
    }

    #[test]
    fn categorical_axis_spaces_sweep_points_evenly() {
        let s = series(1);
        let opts = LineOpts {
            x_scale: XScale::Categorical,
            ..Default::default()
        };
        let svg = line_chart(&chart("t"), &s, &[], &opts);
        let pts = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let xs: Vec<f64> = pts
            .split(' ')
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        let gaps: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.len(), 6);
        assert!(gaps.iter().all(|g| (g - gaps[0]).abs() < 0.2), "{gaps:?}");
        for k in ["90", "95", "99", "100"] {
            assert!(svg.contains(&format!(">{k}</text>")), "{k}");
        }
    }

    #[test]
    fn bar_values_are_rounded_and_labels_kept_whole() {
        let long = "a method name much longer than any truncation limit";
        let svg = bar_chart(
            &chart("t"),
            &[
                (long.into(), 139.52),
                ("b".into(), 8.3786),
                ("c".into(), 0.0),
            ],
        );
        assert!(svg.contains(">140<") && svg.contains(">8.38<"), "{svg}");
        assert!(svg.contains(long));
    }

    #[test]
    fn box_labels_do_not_overlap() {
        let groups: Vec<BoxGroup> = (0..14)
            .map(|i| BoxGroup {
                label: format!("perf-rapl {} Hz", 10 * (i + 1)),
                values: vec![1.0, 2.0, 3.0],
                baseline: i == 0,
            })
            .collect();
        let svg = box_plot(&chart("t"), &groups);
        assert_well_formed(&svg);
        assert!(svg.contains("rotate(-40"), "long labels rotate");
        assert!(svg.contains(BASELINE));
        for g in &groups {
            assert!(svg.contains(&g.label));
        }
    }

    fn bar_series(n: usize, groups: usize) -> Vec<BarSeries> {
        (0..n)
            .map(|i| BarSeries {
                name: format!("tool {i}"),
                values: (0..groups)
                    .map(|g| (i + g != 3).then_some(100.0 + 37.0 * i as f64 + g as f64))
                    .collect(),
                ranges: (0..groups)
                    .map(|g| Some((90.0 + 37.0 * i as f64, 120.0 + 37.0 * i as f64 + g as f64)))
                    .collect(),
            })
            .collect()
    }

    fn grouped_opts(groups: usize) -> GroupedBarOpts {
        GroupedBarOpts {
            references: vec![Reference {
                name: "link 1000 Mbit/s".into(),
                y: 1000.0,
            }],
            bands: (0..groups)
                .map(|g| Some((50.0 * g as f64, 60.0 * g as f64 + 10.0)))
                .collect(),
            band_name: "target ±10 %".into(),
            range_name: "min–max of the runs".into(),
            value_labels: true,
        }
    }

    #[test]
    fn grouped_bars_legend_draws_the_marks_of_its_series() {
        let groups: Vec<String> = ["small", "medium", "large", "mixed"]
            .map(String::from)
            .into();
        let s = bar_series(12, 4);
        let svg = grouped_bar_chart(&chart("bars <&>"), &groups, &s, &grouped_opts(4));
        assert_well_formed(&svg);
        // 12 series, the reference, the band and the error bars.
        for i in 0..15 {
            let plot = marks(&svg, "series", i);
            assert!(!plot.is_empty(), "entry {i}");
            assert_eq!(plot, marks(&svg, "legend-entry", i), "entry {i}");
        }
        // Series 0 and 10 share a colour, not a look; a missing value draws no bar.
        assert_ne!(marks(&svg, "series", 0), marks(&svg, "series", 10));
        assert_eq!(svg.matches("<title>small / tool 3:").count(), 0);
        assert_eq!(svg.matches("<title>medium / tool 3:").count(), 1);
        assert!(svg.contains("bars &lt;&amp;&gt;"));
    }

    /// The y of every element matching `open` (e.g. gridlines), as drawn.
    fn ys(svg: &str, open: &str, attr: &str) -> Vec<f64> {
        svg.split(open)
            .skip(1)
            .filter_map(|t| {
                t.split(&format!(" {attr}=\""))
                    .nth(1)?
                    .split('"')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    }

    #[test]
    fn grouped_bar_values_stay_inside_the_plot() {
        let groups: Vec<String> = ["a", "b"].map(String::from).into();
        let s = vec![BarSeries {
            name: "one".into(),
            values: vec![Some(123456.0), Some(7.0)],
            ranges: vec![],
        }];
        let opts = GroupedBarOpts {
            value_labels: true,
            ..Default::default()
        };
        let svg = grouped_bar_chart(&chart("t"), &groups, &s, &opts);
        let grid_top = ys(&svg, r##"<line x1"##, "y1")
            .into_iter()
            .fold(f64::INFINITY, f64::min);
        let values = &svg[svg.find(r#"<g class="values">"#).unwrap()..];
        let values = &values[..values.find("</g>").unwrap()];
        let labels: Vec<(f64, String)> = values
            .split("<text ")
            .skip(1)
            .map(|t| {
                let y: f64 = t
                    .split(" y=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let text = t
                    .split('>')
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap()
                    .to_string();
                (y, text)
            })
            .collect();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[0].1, "123000", "3 significant digits");
        for (y, text) in &labels {
            // Written upwards from y: its far end must stay below the topmost gridline.
            assert!(
                y - text_width(text, 9.0) >= grid_top - 0.5,
                "{text} at {y}, top {grid_top}"
            );
        }
    }

    #[test]
    fn grouped_bar_group_labels_rotate_when_long_and_empty_charts_say_so() {
        // Labels wider than a group may grow (160 px) rotate; shorter ones widen their group.
        let groups: Vec<String> = (0..8)
            .map(|i| {
                format!(
                    "{} % nginx HTTPS, a server described at length",
                    80 - 10 * i
                )
            })
            .collect();
        let s = bar_series(2, 8);
        let svg = grouped_bar_chart(&chart("t"), &groups, &s, &GroupedBarOpts::default());
        assert_well_formed(&svg);
        assert!(svg.contains("rotate(-40"), "long group labels rotate");
        let short: Vec<String> = (0..8)
            .map(|i| format!("{} % nginx HTTPS", 80 - 10 * i))
            .collect();
        let flat = grouped_bar_chart(&chart("t"), &short, &s, &GroupedBarOpts::default());
        assert!(!flat.contains("rotate(-40"), "short group labels stay flat");
        let empty = grouped_bar_chart(&chart("t"), &groups, &[], &GroupedBarOpts::default());
        assert!(empty.contains("no data"));
    }
}
