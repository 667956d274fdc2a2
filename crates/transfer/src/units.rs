//! Parsing of rates, durations and sizes given on the command line.

use std::time::Duration;

/// Parses a rate into bits per second.
///
/// Accepted: `800mbit`, `1gbit`, `100kbit`, `1.5gbps` (bits), `100MB/s`, `5MiB/s` (bytes),
/// a bare number (bits/s).
pub fn parse_rate_bps(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad rate {s:?}: expected e.g. 800mbit, 1gbit or 100MB/s"))?;
    let unit = unit.trim();
    let bits = match unit {
        "" | "bit" | "bps" | "bit/s" | "b/s" if !t.ends_with("B/s") => 1.0,
        "kbit" | "kbps" | "kbit/s" | "kb/s" if !t.ends_with("B/s") => 1e3,
        "mbit" | "mbps" | "mbit/s" | "mb/s" if !t.ends_with("B/s") => 1e6,
        "gbit" | "gbps" | "gbit/s" | "gb/s" if !t.ends_with("B/s") => 1e9,
        "b/s" => 8.0,
        "kb/s" => 8e3,
        "mb/s" => 8e6,
        "gb/s" => 8e9,
        "kib/s" => 8.0 * 1024.0,
        "mib/s" => 8.0 * 1024.0 * 1024.0,
        "gib/s" => 8.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "bad rate unit in {s:?}: use bit, kbit, mbit, gbit (bits/s) or kB/s, MB/s, MiB/s (bytes/s)"
            ))
        }
    };
    let r = v * bits;
    if !(r.is_finite() && r > 0.0) {
        return Err(format!("bad rate {s:?}: must be positive"));
    }
    Ok(r)
}

/// Parses a duration: `36ms`, `0.036s`, `500us`; a bare number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t.as_str(), 1e-3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration {s:?}: expected e.g. 36ms or 0.5s"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("bad duration {s:?}: must be non-negative"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Parses a byte size: `4MiB`, `4M` (MiB), `512k` (KiB), `1000000`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected e.g. 4MiB or 512KiB"))?;
    let m = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        _ => {
            return Err(format!(
                "bad size unit in {s:?}: use B, KiB, MiB, GiB, kB, MB, GB"
            ))
        }
    };
    Ok((v * m) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate_bps("800mbit").unwrap(), 800e6);
        assert_eq!(parse_rate_bps("1gbit").unwrap(), 1e9);
        assert_eq!(parse_rate_bps("100MB/s").unwrap(), 800e6);
        assert_eq!(parse_rate_bps("1MiB/s").unwrap(), 8.0 * 1048576.0);
        assert_eq!(parse_rate_bps("250").unwrap(), 250.0);
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("10furlongs").is_err());
        assert!(parse_rate_bps("0mbit").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("36ms").unwrap(), Duration::from_millis(36));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("44").unwrap(), Duration::from_millis(44));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("4 parsecs").is_err());
    }
}
