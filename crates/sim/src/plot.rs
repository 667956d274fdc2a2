//! Minimal SVG line charts (no dependency): value against knob, several series, optional
//! horizontal reference lines.

/// One line.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Stroke colour.
    pub color: &'static str,
    /// Dashed?
    pub dashed: bool,
    /// (knob, value) points.
    pub points: Vec<(f64, f64)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Render a chart. The x axis is the knob (0–100, but knobs 90–100 are spread out: the x
/// position is a piecewise scale so the paper's 90/95/99/100 points are readable).
pub fn chart(
    title: &str,
    y_label: &str,
    series: &[Series],
    refs: &[(String, f64, &'static str)],
    footnote: &str,
) -> String {
    let (w, h) = (560.0, 360.0);
    let (l, r, t, b) = (70.0, 170.0, 40.0, 70.0);
    let pw = w - l - r;
    let ph = h - t - b;
    let xs = [0.0, 50.0, 70.0, 90.0, 95.0, 99.0, 100.0];
    let xpos = |k: f64| -> f64 {
        // Equal spacing between the sweep's knob values.
        let i = xs.iter().position(|x| k <= *x).unwrap_or(xs.len() - 1);
        let f = if i == 0 {
            0.0
        } else {
            (i - 1) as f64 + (k - xs[i - 1]) / (xs[i] - xs[i - 1])
        };
        l + pw * f / (xs.len() - 1) as f64
    };
    let mut ymax: f64 = 0.0;
    for s in series {
        for p in &s.points {
            ymax = ymax.max(p.1);
        }
    }
    for r in refs {
        ymax = ymax.max(r.1);
    }
    let ymax = if ymax <= 0.0 { 1.0 } else { nice(ymax * 1.1) };
    // Start the axis above zero when every value is far from it (energy), so differences show;
    // the tick labels say where it starts.
    let mut ymin = f64::INFINITY;
    for s in series {
        for p in &s.points {
            ymin = ymin.min(p.1);
        }
    }
    for r in refs {
        ymin = ymin.min(r.1);
    }
    let ymin = if ymin.is_finite() && ymin > 0.4 * ymax {
        (ymin * 0.9 / (ymax / 10.0)).floor() * (ymax / 10.0)
    } else {
        0.0
    };
    let ypos = |v: f64| t + ph * (1.0 - (v - ymin) / (ymax - ymin));
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        l + pw / 2.0,
        esc(title)
    );
    // Axes and grid.
    let step = nice((ymax - ymin) / 5.0);
    let mut v = ymin;
    while v <= ymax + 1e-9 {
        let y = ypos(v);
        o += &format!("<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n", l + pw, l - 6.0, y + 4.0, fmt(v));
        v += step;
    }
    for k in xs {
        let x = xpos(k);
        o += &format!("<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\n<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{k}</text>\n", t + ph, t + ph + 5.0, t + ph + 18.0);
    }
    o += &format!("<rect x=\"{l}\" y=\"{t}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#333\"/>\n");
    o += &format!("<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">knob (0 = energy, 100 = performance; sweep points evenly spaced)</text>\n", l + pw / 2.0, t + ph + 36.0);
    o += &format!(
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        t + ph / 2.0,
        esc(y_label)
    );
    let mut ly = t + 10.0;
    for (label, v, color) in refs {
        let y = ypos(*v);
        o += &format!("<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" stroke-dasharray=\"2,3\" stroke-width=\"1.5\"/>\n", l + pw);
        o += &format!("<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-dasharray=\"2,3\" stroke-width=\"1.5\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n", l + pw + 8.0, l + pw + 28.0, l + pw + 32.0, ly + 4.0, esc(label));
        ly += 18.0;
    }
    for s in series {
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|(k, v)| format!("{:.1},{:.1}", xpos(*k), ypos(*v)))
            .collect();
        let dash = if s.dashed {
            " stroke-dasharray=\"6,4\""
        } else {
            ""
        };
        o += &format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            s.color,
            pts.join(" ")
        );
        for (k, v) in &s.points {
            o += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/>\n",
                xpos(*k),
                ypos(*v),
                s.color
            );
        }
        o += &format!("<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{}\" stroke-width=\"2\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n", l + pw + 8.0, l + pw + 28.0, s.color, l + pw + 32.0, ly + 4.0, esc(&s.label));
        ly += 18.0;
    }
    o += &format!(
        "<text x=\"8\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">{}</text>\n",
        h - 8.0,
        esc(footnote)
    );
    o += "</svg>\n";
    o
}

fn nice(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if x <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_well_formed_svg() {
        let s = chart(
            "t <x>",
            "y",
            &[Series {
                label: "a".into(),
                color: "red",
                dashed: false,
                points: vec![(0.0, 1.0), (50.0, 2.0), (100.0, 3.0)],
            }],
            &[("lb".into(), 0.5, "black")],
            "note",
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;x&gt;"));
        assert_eq!(s.matches("<circle").count(), 3);
    }
}
