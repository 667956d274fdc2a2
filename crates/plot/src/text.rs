//! Text in charts: escaping, number labels, width estimates and wrapping.

/// Escapes text for XML/HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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

/// Estimated rendered width of `s` in pixels at `font_px` in a sans-serif font. Errs wide
/// (DejaVu Sans, the widest common default, averages about 0.6 em), so layouts computed
/// from it leave room in any browser.
pub fn text_width(s: &str, font_px: f64) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' | '(' | ')' => 0.35,
            'f' | 't' | 'r' | 'I' | '-' | '/' => 0.45,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.95,
            c if c.is_ascii_uppercase() => 0.72,
            _ => 0.62,
        })
        .sum();
    em * font_px
}

/// Splits `s` into lines no wider than `max_px` at `font_px`, breaking at spaces (a single
/// word wider than the limit keeps its own line). Nothing is cut.
pub fn wrap(s: &str, max_px: f64, font_px: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if line.is_empty() || text_width(&candidate, font_px) <= max_px {
            line = candidate;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<a & \"b\" 'c'>"),
            "&lt;a &amp; &quot;b&quot; &#39;c&#39;&gt;"
        );
        assert_eq!(esc("µJ → kWh"), "µJ → kWh");
    }

    #[test]
    fn number_labels_stay_distinct() {
        assert_eq!(fmt_num(1.425), "1.425");
        assert_eq!(fmt_num(1.45), "1.45");
        assert_eq!(fmt_num(250.0), "250");
        assert_eq!(fmt_num(-0.00001), "-1.00e-5");
        assert_eq!(fmt_num(0.00025), "2.50e-4");
        assert_eq!(fmt_num(0.0), "0");
    }

    #[test]
    fn wider_text_is_estimated_wider() {
        assert!(text_width("WWWW", 12.0) > text_width("iiii", 12.0));
        assert!(text_width("abc", 24.0) > text_width("abc", 12.0));
        assert_eq!(text_width("", 12.0), 0.0);
    }

    #[test]
    fn wrapping_keeps_every_word_and_respects_the_width() {
        let s = "adaptive+ghost-predictive (hints predictive) with a long tail";
        let lines = wrap(s, 120.0, 11.0);
        assert!(lines.len() > 1, "{lines:?}");
        assert_eq!(lines.join(" "), s);
        for l in &lines {
            // Only a single unbreakable word may exceed the limit.
            assert!(text_width(l, 11.0) <= 120.0 || !l.contains(' '), "{l}");
        }
        assert_eq!(wrap("", 50.0, 11.0), vec![String::new()]);
    }
}
