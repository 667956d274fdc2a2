use std::fmt;

/// Which kind of quantity failed to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Rate,
    Size,
    Duration,
}

impl Quantity {
    fn name(self) -> &'static str {
        match self {
            Quantity::Rate => "rate",
            Quantity::Size => "size",
            Quantity::Duration => "duration",
        }
    }
}

/// Why a rate, size or duration could not be read: one line naming the input and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    quantity: Quantity,
    input: String,
    problem: String,
}

impl UnitError {
    pub(crate) fn new(quantity: Quantity, input: &str, problem: impl Into<String>) -> Self {
        UnitError {
            quantity,
            input: input.to_string(),
            problem: problem.into(),
        }
    }

    /// The kind of quantity that was being read.
    pub fn quantity(&self) -> Quantity {
        self.quantity
    }

    /// The text that was given.
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} '{}': {}",
            self.quantity.name(),
            self.input.escape_debug(),
            self.problem
        )
    }
}

impl std::error::Error for UnitError {}

/// The error for a quantity that does not start with a usable number; `example` is a valid
/// spelling to suggest.
pub(crate) fn bad_number(
    quantity: Quantity,
    input: &str,
    why: crate::number::NumberError,
    example: &str,
) -> UnitError {
    use crate::number::NumberError;
    let problem = match why {
        NumberError::Missing if input.trim().is_empty() => format!("empty; write e.g. {example}"),
        NumberError::Missing => format!("does not start with a number; write e.g. {example}"),
        NumberError::Negative => format!("cannot be negative; write e.g. {example}"),
        NumberError::TooLong => "has more than 38 digits".to_string(),
    };
    UnitError::new(quantity, input, problem)
}
