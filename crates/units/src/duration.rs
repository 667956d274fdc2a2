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
    parse_terms(input, EXAMPLE)
}

/// What a plain number, written without a unit, means to [`parse_duration_bare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareUnit {
    Milliseconds,
    Seconds,
    Minutes,
}

impl BareUnit {
    fn nanos(self) -> u128 {
        match self {
            BareUnit::Milliseconds => 1_000_000,
            BareUnit::Seconds => 1_000_000_000,
            BareUnit::Minutes => 60_000_000_000,
        }
    }

    /// What to write instead of a bad value, naming both readings of the grammar.
    fn example(self) -> &'static str {
        match self {
            BareUnit::Milliseconds => "500 (milliseconds), 500ms, 2s or 1m30s",
            BareUnit::Seconds => "2 (seconds), 500ms, 2s or 1m30s",
            BareUnit::Minutes => "20 (minutes), 90s, 20m or 1h30m",
        }
    }
}

/// Like [`parse_duration`], but a plain number with no unit at all (`2`, `0.5`) counts in
/// `bare`: for flags that took a number of seconds (or milliseconds, or minutes) before they
/// took durations, so that scripts written then keep their meaning. A number without a unit
/// inside a longer duration (`1m30`) is still an error.
pub fn parse_duration_bare(input: &str, bare: BareUnit) -> Result<Duration, UnitError> {
    if let Ok((number, "")) = leading_number(input.trim()) {
        return from_nanos(input, number.times(bare.nanos()));
    }
    parse_terms(input, bare.example())
}

/// [`parse_duration_bare`] in seconds: `2` is two seconds, `500ms`, `2s` and `1m30s` as
/// [`parse_duration`] reads them. The parser of every wattio flag that once took seconds.
pub fn parse_duration_or_seconds(input: &str) -> Result<Duration, UnitError> {
    parse_duration_bare(input, BareUnit::Seconds)
}

fn too_long(input: &str) -> UnitError {
    UnitError::new(Quantity::Duration, input, "is longer than 2^64 - 1 seconds")
}

fn from_nanos(input: &str, total_ns: Option<u128>) -> Result<Duration, UnitError> {
    let total_ns = total_ns.ok_or_else(|| too_long(input))?;
    let secs = u64::try_from(total_ns / 1_000_000_000).map_err(|_| too_long(input))?;
    Ok(Duration::new(secs, (total_ns % 1_000_000_000) as u32))
}

/// One or more `number unit` terms; `example` is what the error of a bad number suggests.
fn parse_terms(input: &str, example: &str) -> Result<Duration, UnitError> {
    let mut rest = input.trim();
    let mut total_ns: u128 = 0;
    loop {
        let (number, after) =
            leading_number(rest).map_err(|e| bad_number(Quantity::Duration, input, e, example))?;
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
            .ok_or_else(|| too_long(input))?;
        rest = after[unit_len..].trim_start();
        if rest.is_empty() {
            break;
        }
    }
    from_nanos(input, Some(total_ns))
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

/// Writes `d` for a person reading an estimate or a progress line: rounded to whole seconds,
/// at most two units (`13s`, `4m05s`, `1h02m`). [`parse_duration`] reads it back, to that
/// rounding; [`format_duration`] is the exact form.
pub fn format_duration_rounded(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
