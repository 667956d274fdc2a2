use crate::error::{bad_number, Quantity, UnitError};
use crate::number::{leading_number, Prefix};
use std::fmt;
use std::str::FromStr;

/// A size in bytes.
///
/// Parsed and written as the crate documentation describes: `4096`, `4KiB`, `4k` (= 4 KiB),
/// `4kB` (= 4000 bytes); written as `4MiB`, `4500kB` or `1234B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(u64);

const EXAMPLE: &str = "4MiB, 512KiB or 1GB";

impl ByteSize {
    /// `bytes` bytes.
    pub const fn from_bytes(bytes: u64) -> ByteSize {
        ByteSize(bytes)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl From<ByteSize> for u64 {
    fn from(s: ByteSize) -> u64 {
        s.0
    }
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(input: &str) -> Result<ByteSize, UnitError> {
        let s = input.trim();
        let (number, unit) =
            leading_number(s).map_err(|e| bad_number(Quantity::Size, input, e, EXAMPLE))?;
        let (prefix, rest) = Prefix::split(unit);
        let multiplier = match rest {
            // A bare prefix is IEC (`4M` = 4 MiB); so is `Ki`… with or without `B`.
            "" => prefix.as_iec().multiplier(),
            "B" => prefix.multiplier(),
            _ if rest.starts_with('b') || rest.eq_ignore_ascii_case("bit") => {
                let n = &s[..s.len() - unit.len()];
                let n = n.trim_end();
                return Err(UnitError::new(
                    Quantity::Size,
                    input,
                    format!(
                        "'{}' is bits; a size is in bytes: write {n}MB (10^6 bytes) or {n}MiB (2^20 bytes)",
                        unit.escape_debug()
                    ),
                ));
            }
            _ => {
                return Err(UnitError::new(
                    Quantity::Size,
                    input,
                    format!(
                        "unknown unit '{}'; use B, KiB, MiB, GiB, TiB (powers of 1024; also K, M, G, T) or kB, MB, GB, TB (powers of 1000)",
                        unit.escape_debug()
                    ),
                ))
            }
        };
        number
            .times(multiplier)
            .and_then(|b| u64::try_from(b).ok())
            .map(ByteSize)
            .ok_or_else(|| UnitError::new(Quantity::Size, input, "is more than 2^64 - 1 bytes"))
    }
}

impl fmt::Display for ByteSize {
    /// The largest IEC unit holding the size exactly, else the largest SI one, else bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 8] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
            (1_000_000_000_000, "TB"),
            (1_000_000_000, "GB"),
            (1_000_000, "MB"),
            (1_000, "kB"),
        ];
        let (scale, unit) = UNITS
            .into_iter()
            .find(|(scale, _)| self.0 != 0 && self.0 % scale == 0)
            .unwrap_or((1, "B"));
        write!(f, "{}{unit}", self.0 / scale)
    }
}
