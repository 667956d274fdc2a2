//! The decimal number at the start of a quantity, kept exact.

/// At most this many digits, so that the mantissa fits a `u128`.
const MAX_DIGITS: usize = 38;

/// A non-negative decimal number `mantissa / 10^scale`, exactly as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decimal {
    mantissa: u128,
    scale: u32,
}

impl Decimal {
    /// `self × multiplier`, rounded half up to an integer; `None` past `u128::MAX / 2`, far
    /// beyond any quantity's range.
    pub(crate) fn times(self, multiplier: u128) -> Option<u128> {
        // scale <= MAX_DIGITS, and 2 × 10^38 < u128::MAX.
        let den = 10u128.pow(self.scale);
        let twice = self.mantissa.checked_mul(multiplier)?.checked_mul(2)?;
        Some(twice / (2 * den) + u128::from(twice % (2 * den) >= den))
    }
}

/// Why no number could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// The text does not start with a digit or a `.` followed by one.
    Missing,
    /// It starts with `-`.
    Negative,
    /// More than [`MAX_DIGITS`] digits.
    TooLong,
}

/// Splits `s` (already trimmed) into its leading number and the rest, spaces after the number
/// skipped.
pub(crate) fn leading_number(s: &str) -> Result<(Decimal, &str), NumberError> {
    if s.starts_with('-') {
        return Err(NumberError::Negative);
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let text = &s[..end];
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(NumberError::Missing);
    }
    if int.len() + frac.len() > MAX_DIGITS {
        return Err(NumberError::TooLong);
    }
    let mantissa = int
        .bytes()
        .chain(frac.bytes())
        .fold(0u128, |m, d| m * 10 + u128::from(d - b'0'));
    let number = Decimal {
        mantissa,
        scale: frac.len() as u32,
    };
    Ok((number, s[end..].trim_start()))
}

/// An SI (`k`, `M`, `G`, `T`) or IEC (`Ki` … `Ti`) prefix at the start of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefix {
    None,
    Si(u32),
    Iec(u32),
}

impl Prefix {
    /// The prefix at the start of `unit` (letters case-insensitive) and what follows it.
    pub(crate) fn split(unit: &str) -> (Prefix, &str) {
        let power = match unit.bytes().next().map(|b| b.to_ascii_lowercase()) {
            Some(b'k') => 1,
            Some(b'm') => 2,
            Some(b'g') => 3,
            Some(b't') => 4,
            _ => return (Prefix::None, unit),
        };
        match unit[1..].strip_prefix(['i', 'I']) {
            Some(rest) => (Prefix::Iec(power), rest),
            None => (Prefix::Si(power), &unit[1..]),
        }
    }

    /// 1000^n, 1024^n, or 1.
    pub(crate) fn multiplier(self) -> u128 {
        match self {
            Prefix::None => 1,
            Prefix::Si(n) => 1000u128.pow(n),
            Prefix::Iec(n) => 1024u128.pow(n),
        }
    }

    /// The same power read as IEC (a bare prefix on a size: `4M` is 4 MiB).
    pub(crate) fn as_iec(self) -> Prefix {
        match self {
            Prefix::Si(n) => Prefix::Iec(n),
            p => p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &str) -> u128 {
        leading_number(s).unwrap().0.times(1).unwrap()
    }

    #[test]
    fn numbers_are_exact_and_rounded_half_up() {
        assert_eq!(value("42"), 42);
        assert_eq!(value("0.5"), 1);
        assert_eq!(value("0.49"), 0);
        assert_eq!(value(".5"), 1);
        assert_eq!(value("7."), 7);
        let (d, rest) = leading_number("1.1 MB").unwrap();
        assert_eq!((d.times(1_000_000), rest), (Some(1_100_000), "MB"));
        assert_eq!(value(&format!("0.{}", "9".repeat(37))), 1);
        assert_eq!(leading_number(&"9".repeat(38)).unwrap().0.times(10), None);
        assert_eq!(leading_number("-1"), Err(NumberError::Negative));
        assert_eq!(leading_number("."), Err(NumberError::Missing));
        assert_eq!(leading_number("1.2.3"), Err(NumberError::Missing));
        assert_eq!(leading_number("MB"), Err(NumberError::Missing));
        assert_eq!(leading_number(&"9".repeat(39)), Err(NumberError::TooLong));
    }

    #[test]
    fn prefixes() {
        assert_eq!(Prefix::split("Mbit"), (Prefix::Si(2), "bit"));
        assert_eq!(Prefix::split("mibit"), (Prefix::Iec(2), "bit"));
        assert_eq!(Prefix::split("KiB"), (Prefix::Iec(1), "B"));
        assert_eq!(Prefix::split("Bps"), (Prefix::None, "Bps"));
        assert_eq!(Prefix::Iec(3).multiplier(), 1 << 30);
        assert_eq!(Prefix::Si(4).multiplier(), 1_000_000_000_000);
    }
}
