//! Exact reading of JSON number text: no value is rounded or truncated without the caller
//! knowing (a `2.5` read into an integer column would otherwise become `2`, silently).

/// A decimal number as written: `negative`, the digits as an integer, and a power of ten,
/// so that the value is `(-1)^negative * digits * 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: u128,
    exponent: i32,
}

/// Significant digits kept: more than any i64 or microsecond count needs, far below u128's
/// 38 digits, so `digits * 10` never overflows while parsing.
const DIGITS_MAX: usize = 36;

impl Decimal {
    /// Parses `[-+]digits[.digits][(e|E)[-+]digits]` (surrounding whitespace allowed); `None`
    /// for anything else, or for more than [`DIGITS_MAX`] significant digits.
    pub fn parse(text: &str) -> Option<Decimal> {
        let t = text.trim().as_bytes();
        let (negative, mut rest) = match t.first()? {
            b'-' => (true, &t[1..]),
            b'+' => (false, &t[1..]),
            _ => (false, t),
        };
        let mut digits: u128 = 0;
        let mut significant = 0usize;
        let mut exponent: i64 = 0;
        let mut any = false;
        let mut take = |d: u8, after_point: bool, exponent: &mut i64| -> Option<()> {
            if digits == 0 && d == b'0' {
                // Leading zeros are not significant.
            } else if significant < DIGITS_MAX {
                digits = digits * 10 + u128::from(d - b'0');
                significant += 1;
            } else if d != b'0' {
                return None; // would round
            } else if !after_point {
                *exponent += 1;
                return Some(());
            } else {
                return Some(()); // a trailing zero after the point changes nothing
            }
            if after_point && (digits != 0 || d == b'0') {
                *exponent -= 1;
            }
            Some(())
        };
        while let Some((&c, tail)) = rest.split_first() {
            if !c.is_ascii_digit() {
                break;
            }
            any = true;
            take(c, false, &mut exponent)?;
            rest = tail;
        }
        if let Some((&b'.', tail)) = rest.split_first() {
            rest = tail;
            while let Some((&c, tail)) = rest.split_first() {
                if !c.is_ascii_digit() {
                    break;
                }
                any = true;
                take(c, true, &mut exponent)?;
                rest = tail;
            }
        }
        if !any {
            return None;
        }
        if let Some((&(b'e' | b'E'), tail)) = rest.split_first() {
            let (sign, mut tail) = match tail.first()? {
                b'-' => (-1i64, &tail[1..]),
                b'+' => (1, &tail[1..]),
                _ => (1, tail),
            };
            let mut e: i64 = 0;
            let mut seen = false;
            while let Some((&c, t2)) = tail.split_first() {
                if !c.is_ascii_digit() {
                    break;
                }
                seen = true;
                e = (e * 10 + i64::from(c - b'0')).min(1_000_000);
                tail = t2;
            }
            if !seen {
                return None;
            }
            exponent += sign * e;
            rest = tail;
        }
        if !rest.is_empty() {
            return None;
        }
        Some(Decimal {
            negative: negative && digits != 0,
            digits,
            exponent: exponent.clamp(-1_000_000, 1_000_000) as i32,
        })
    }

    /// The value times `10^scale`, rounded toward negative infinity, if it fits an i64; and
    /// whether that was exact.
    pub fn scaled_floor(self, scale: i32) -> Option<(i64, bool)> {
        let e = self.exponent.saturating_add(scale);
        let (whole, exact): (u128, bool) = if self.digits == 0 {
            (0, true)
        } else if e >= 0 {
            if e > 38 {
                return None;
            }
            (
                self.digits.checked_mul(10u128.checked_pow(e as u32)?)?,
                true,
            )
        } else if e < -38 {
            (0, false)
        } else {
            let p = 10u128.pow((-e) as u32);
            (self.digits / p, self.digits.is_multiple_of(p))
        };
        let magnitude = i128::try_from(whole).ok()?;
        let value = if self.negative {
            -magnitude - i128::from(!exact)
        } else {
            magnitude
        };
        Some((i64::try_from(value).ok()?, exact))
    }
}

impl Decimal {
    /// The value times `10^scale` if that is an integer of at most `precision` digits
    /// (a decimal(precision, scale) column's unscaled value); `None` if it would round or
    /// overflow.
    pub fn scaled_exact(self, scale: i32, precision: u32) -> Option<i128> {
        let e = self.exponent.saturating_add(scale);
        let whole: u128 = if self.digits == 0 {
            0
        } else if e >= 0 {
            if e > 38 {
                return None;
            }
            self.digits.checked_mul(10u128.checked_pow(e as u32)?)?
        } else {
            if e < -38 {
                return None;
            }
            let p = 10u128.pow((-e) as u32);
            if !self.digits.is_multiple_of(p) {
                return None;
            }
            self.digits / p
        };
        if whole >= 10u128.checked_pow(precision.min(38))? {
            return None;
        }
        let v = i128::try_from(whole).ok()?;
        Some(if self.negative { -v } else { v })
    }
}

/// The integer a JSON number (or numeric string) denotes, if it is one exactly: `12`, `-3`,
/// `1e3`, `2.0`; `None` for `2.5`, for values outside i64, and for anything not a number.
pub fn parse_integer_exact(text: &str) -> Option<i64> {
    match Decimal::parse(text)?.scaled_floor(0)? {
        (v, true) => Some(v),
        (_, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_exactly_or_not_at_all() {
        for (text, want) in [
            ("12", Some(12)),
            ("-3", Some(-3)),
            ("+7", Some(7)),
            ("1e3", Some(1000)),
            ("2.0", Some(2)),
            ("2.50e1", Some(25)),
            ("0.000", Some(0)),
            ("-0", Some(0)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("2.5", None),
            ("1e-1", None),
            ("1e30", None),
            ("", None),
            ("-", None),
            ("1.", Some(1)),
            (".5", None),
            ("0x10", None),
            ("12abc", None),
            ("1e", None),
            ("NaN", None),
            (" 42 ", Some(42)),
            ("000000000000000000000000000000000000000000001", Some(1)),
        ] {
            assert_eq!(parse_integer_exact(text), want, "{text:?}");
        }
    }

    #[test]
    fn scaled_values_round_toward_negative_infinity() {
        let d = |t: &str| Decimal::parse(t).unwrap();
        assert_eq!(
            d("1791037500.123456").scaled_floor(6),
            Some((1_791_037_500_123_456, true))
        );
        assert_eq!(d("1.0000005").scaled_floor(6), Some((1_000_000, false)));
        assert_eq!(d("-1.0000005").scaled_floor(6), Some((-1_000_001, false)));
        assert_eq!(
            d("1791037500123").scaled_floor(3),
            Some((1_791_037_500_123_000, true))
        );
        assert_eq!(
            d("1791037500123456789").scaled_floor(-3),
            Some((1_791_037_500_123_456, false))
        );
        assert_eq!(d("1e30").scaled_floor(6), None);
        assert_eq!(d("1e-300").scaled_floor(6), Some((0, false)));
        assert_eq!(d("12.34").scaled_exact(2, 4), Some(1234));
        assert_eq!(d("-12.3").scaled_exact(2, 4), Some(-1230));
        assert_eq!(d("12.345").scaled_exact(2, 10), None);
        assert_eq!(d("123.45").scaled_exact(2, 4), None);
        assert_eq!(d("1e2").scaled_exact(0, 3), Some(100));
    }
}
