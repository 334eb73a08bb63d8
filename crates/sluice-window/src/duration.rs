//! Durations as people write them on the command line (`90s`, `10m`, `1h`, `7d`), in
//! milliseconds.

/// A duration option could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("duration {0:?} has no unit: use ms, s, m, h or d (for example 10m)")]
    MissingUnit(String),
    #[error("duration {0:?} has an unknown unit: use ms, s, m, h or d")]
    UnknownUnit(String),
    #[error("duration {0:?} is not a whole number followed by a unit")]
    NotANumber(String),
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

/// Parses `500ms`, `30s`, `10m`, `1h`, `7d` (and sums like `1h30m`) into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<i64, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError::NotANumber(text.to_string()));
        }
        let value: i64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::Overflow(text.to_string()))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(text.to_string()));
        }
        let unit_ms: i64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(DurationError::UnknownUnit(text.to_string())),
        };
        rest = &rest[unit_len..];
        total = value
            .checked_mul(unit_ms)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
    }
    Ok(total)
}
