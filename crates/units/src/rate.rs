use crate::error::{bad_number, Quantity, UnitError};
use crate::number::{leading_number, Prefix};
use std::fmt;
use std::str::FromStr;

/// A data rate in whole bits per second, more than 0.
///
/// Parsed and written as the crate documentation describes: `800M`, `800mbit`, `1gbit`,
/// `100MB/s`, `5MiB/s`; written in tc's form (`800mbit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitRate(u64);

const EXAMPLE: &str = "800mbit, 1gbit or 100MB/s";

impl BitRate {
    /// `bits` per second; `None` for 0.
    pub fn from_bits_per_second(bits: u64) -> Option<BitRate> {
        (bits > 0).then_some(BitRate(bits))
    }

    /// Bits per second.
    pub fn bits_per_second(self) -> u64 {
        self.0
    }

    /// Bytes per second (bits / 8).
    pub fn bytes_per_second(self) -> f64 {
        self.0 as f64 / 8.0
    }
}

/// How many bits one unit after the prefix stands for, or `None` for an unknown unit.
fn bits_per_unit(unit: &str) -> Option<u128> {
    if ["bit", "bits", "bit/s", "bits/s"]
        .iter()
        .any(|u| unit.eq_ignore_ascii_case(u))
    {
        return Some(1);
    }
    // `b` is bits and `B` bytes; `/s` and `ps` are optional and case-insensitive.
    let per_second = |tail: &str| {
        tail.is_empty() || tail.eq_ignore_ascii_case("/s") || tail.eq_ignore_ascii_case("ps")
    };
    match unit.as_bytes().first() {
        None => Some(1),
        Some(b'b') if per_second(&unit[1..]) => Some(1),
        Some(b'B') if per_second(&unit[1..]) => Some(8),
        _ => None,
    }
}

impl FromStr for BitRate {
    type Err = UnitError;

    fn from_str(input: &str) -> Result<BitRate, UnitError> {
        let s = input.trim();
        let (number, unit) =
            leading_number(s).map_err(|e| bad_number(Quantity::Rate, input, e, EXAMPLE))?;
        let (prefix, rest) = Prefix::split(unit);
        let unit_bits = bits_per_unit(rest).ok_or_else(|| {
            UnitError::new(
                Quantity::Rate,
                input,
                format!(
                    "unknown unit '{}'; write bits per second (800M, 800mbit, 1gbit, 100kbps) or bytes per second (100MB/s, 5MiB/s)",
                    unit.escape_debug()
                ),
            )
        })?;
        let bits = number.times(prefix.multiplier() * unit_bits);
        match bits.map(u64::try_from) {
            Some(Ok(0)) => Err(UnitError::new(
                Quantity::Rate,
                input,
                "must be more than 0 bit/s",
            )),
            Some(Ok(b)) => Ok(BitRate(b)),
            _ => Err(UnitError::new(
                Quantity::Rate,
                input,
                "is more than 2^64 - 1 bit/s",
            )),
        }
    }
}

impl fmt::Display for BitRate {
    /// The largest SI unit holding the rate exactly, as tc writes it: `1gbit`, `500mbit`,
    /// `1234bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scale, unit) = [
            (1_000_000_000_000, "tbit"),
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ]
        .into_iter()
        .find(|(scale, _)| self.0 % scale == 0)
        .unwrap_or((1, "bit"));
        write!(f, "{}{unit}", self.0 / scale)
    }
}
