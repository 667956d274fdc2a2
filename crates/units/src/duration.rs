use crate::error::{bad_number, Quantity, UnitError};
use crate::number::leading_number;
use std::time::Duration;

const EXAMPLE: &str = "36ms, 0.5s or 1m30s";

/// Nanoseconds per unit, largest first; the first spelling is the one [`format_duration`] writes.
const UNITS: [(&[&str], u128); 6] = [
    (&["h"], 3_600_000_000_000),
    (&["m", "min"], 60_000_000_000),
    (&["s"], 1_000_000_000),
    (&["ms"], 1_000_000),
    (&["us", "µs", "μs"], 1_000),
    (&["ns"], 1),
];

fn nanos_per(unit: &str) -> Option<u128> {
    let unit = unit.to_lowercase();
    UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
        .map(|(_, ns)| *ns)
}

/// Parses a duration: one or more `number unit` terms, summed (`36ms`, `0.5s`, `1h30m`,
/// `1m 30.5s`); units `ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`, case-insensitive. A number
/// without a unit is an error. Rounded half up to whole nanoseconds.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let too_long = || UnitError::new(Quantity::Duration, input, "is longer than 2^64 - 1 seconds");
    let mut rest = input.trim();
    let mut total_ns: u128 = 0;
    loop {
        let (number, after) =
            leading_number(rest).map_err(|e| bad_number(Quantity::Duration, input, e, EXAMPLE))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(after.len());
        let unit = &after[..unit_len];
        if unit.is_empty() {
            let n = rest[..rest.len() - after.len()].trim_end();
            let whole = rest.len() == input.trim().len();
            let problem = if whole {
                format!("no unit; write {n}ms or {n}s")
            } else {
                format!("no unit after {n}; write {n}ms or {n}s")
            };
            return Err(UnitError::new(Quantity::Duration, input, problem));
        }
        let ns = nanos_per(unit).ok_or_else(|| {
            UnitError::new(
                Quantity::Duration,
                input,
                format!(
                    "unknown unit '{}'; use ns, us, ms, s, m (minutes) or h",
                    unit.escape_debug()
                ),
            )
        })?;
        total_ns = number
            .times(ns)
            .and_then(|n| total_ns.checked_add(n))
            .ok_or_else(too_long)?;
        rest = after[unit_len..].trim_start();
        if rest.is_empty() {
            break;
        }
    }
    let secs = u64::try_from(total_ns / 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (total_ns % 1_000_000_000) as u32))
}

/// Writes `d` in the largest unit that holds it exactly: `2h`, `90m`, `36ms`, `1500ms`,
/// `250us`, `7ns`, `0s`. [`parse_duration`] reads it back to the same value.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    let (names, scale) = UNITS
        .iter()
        .find(|(_, scale)| ns != 0 && ns % scale == 0)
        .copied()
        .unwrap_or((&["s"], 1_000_000_000));
    format!("{}{}", ns / scale, names[0])
}
