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

/// Significant digits kept: a decimal(38, s) column's every value. u128 holds any 38-digit
/// integer (below 3.4e38), and `digits * 10 + 9` is taken only while fewer than 38 digits
/// are held (below 1e37), so it never overflows.
const DIGITS_MAX: usize = 38;

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

impl Decimal {
    /// The same number with trailing zeros moved into the exponent (`1.50` and `1.5`, `100`
    /// and `1e2` are one value).
    fn normalized(self) -> Decimal {
        let mut d = self;
        while d.digits != 0 && d.digits.is_multiple_of(10) {
            d.digits /= 10;
            d.exponent = d.exponent.saturating_add(1);
        }
        if d.digits == 0 {
            d.exponent = 0;
        }
        d
    }

    /// Significant decimal digits (0 for zero).
    fn significant_digits(self) -> u32 {
        if self.digits == 0 {
            0
        } else {
            self.digits.ilog10() + 1
        }
    }

    /// Whether the value is exactly `other`'s.
    fn same_value(self, other: Decimal) -> bool {
        self.normalized() == other.normalized()
    }

    /// The digits' count and the power of ten of the leading digit, for a value known to be
    /// within `digits_max` significant digits and a decimal exponent range.
    fn within(self, digits_max: u32, leading_exponent: std::ops::RangeInclusive<i64>) -> bool {
        let n = self.normalized();
        let digits = n.significant_digits();
        digits == 0
            || (digits <= digits_max
                && leading_exponent.contains(&(i64::from(n.exponent) + i64::from(digits) - 1)))
    }
}

impl Decimal {
    /// Digits before and after the point of the value, without leading and trailing zeros:
    /// `123.45` is (3, 2), `1e3` (4, 0), `0.001` (0, 3), `0` (0, 0). What a decimal(p, s)
    /// needs to hold it: s at least the second, p - s at least the first.
    pub fn integer_and_fraction_digits(self) -> (u32, u32) {
        let n = self.normalized();
        let digits = i64::from(n.significant_digits());
        let exponent = i64::from(n.exponent);
        let clamp = |v: i64| v.clamp(0, i64::from(u32::MAX)) as u32;
        if digits == 0 {
            (0, 0)
        } else if exponent >= 0 {
            (clamp(digits + exponent), 0)
        } else {
            (clamp(digits + exponent), clamp(-exponent))
        }
    }
}

/// The double a JSON number (or numeric string) denotes, if the double holds that number as
/// written: read back (as its shortest decimal text), it is the same number. `0.1`, `2.5`,
/// `1e300` and `9007199254740992` are; `9007199254740993` (2^53 + 1, which a double rounds
/// to 2^53), `0.1000000000000000000001`, `1e400` (infinite) and `1e-400` (zero) are not.
pub fn parse_f64_exact(text: &str) -> Option<f64> {
    // The common case, read directly: a plain decimal of at most 15 significant digits.
    if let Some(value) = plain_f64(text) {
        return Some(value);
    }
    // Up to 15 significant digits in the range of normal doubles, every decimal reads back as
    // itself (DBL_DIG): no need to format the double to know.
    parse_exact(text, 15, -307..=307)
}

/// `text` if it is `[-]digits[.digits]` of at most 20 bytes with at most 15 digits after
/// its leading zeros: the double it denotes, which holds it exactly (DBL_DIG), computed as
/// the digits (below 2^53) over a power of ten (at most 10^22): both exact in a double, so
/// their quotient is correctly rounded, as a full parser's (Clinger's fast path).
fn plain_f64(text: &str) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let t = text.as_bytes();
    if t.len() > 20 {
        return None;
    }
    let (negative, digits) = match t.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    // `1.` and `.5` are not JSON numbers: their own reading decides.
    if digits.first() == Some(&b'.') || digits.last() == Some(&b'.') {
        return None;
    }
    let (mut mantissa, mut significant, mut fraction) = (0u64, 0usize, None::<usize>);
    let mut any = false;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                any = true;
                if mantissa != 0 || c != b'0' {
                    significant += 1;
                    if significant > 15 {
                        return None; // (before the digits could overflow)
                    }
                }
                mantissa = mantissa * 10 + u64::from(c - b'0');
                if let Some(f) = fraction.as_mut() {
                    *f += 1;
                }
            }
            b'.' if fraction.is_none() => fraction = Some(0),
            _ => return None,
        }
    }
    if !any {
        return None;
    }
    let value = mantissa as f64 / POW10[fraction.unwrap_or(0)];
    Some(if negative { -value } else { value })
}

/// As [`parse_f64_exact`], for a float (32 bits): `16777217` (2^24 + 1) is not one.
pub fn parse_f32_exact(text: &str) -> Option<f32> {
    // FLT_DIG: 6 significant digits read back as themselves in the normal range.
    parse_exact(text, 6, -37..=37)
}

/// A binary floating-point type.
trait Float: std::str::FromStr + std::fmt::LowerExp + Copy {
    fn finite(self) -> bool;
}

impl Float for f64 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Float for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// `text` as an `F` if it holds the number exactly; a number of at most `digits_max`
/// significant digits whose leading digit's power of ten is in `exponents` always does.
fn parse_exact<F: Float>(
    text: &str,
    digits_max: u32,
    exponents: std::ops::RangeInclusive<i64>,
) -> Option<F> {
    let written = Decimal::parse(text)?;
    let value: F = text.trim().trim_start_matches('+').parse().ok()?;
    if !value.finite() {
        return None;
    }
    if written.within(digits_max, exponents) {
        return Some(value);
    }
    let shortest = Decimal::parse(&format!("{value:e}"))?;
    written.same_value(shortest).then_some(value)
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
    fn doubles_are_read_only_when_they_hold_the_number_as_written() {
        for text in [
            "0",
            "-0",
            "0.1",
            "2.5",
            "-1.25e-3",
            "1e300",
            "9007199254740992",
            "1.7976931348623157e308",
            "5e-324",
            "0.30000000000000004",
            "123456789012345",
            "1.50",
            "+3",
            "2.2250738585072014e-308",
        ] {
            assert!(parse_f64_exact(text).is_some(), "{text}");
            assert_eq!(
                parse_f64_exact(text),
                text.trim_start_matches('+').parse::<f64>().ok(),
                "{text}"
            );
        }
        for text in [
            "9007199254740993",
            "9223372036854775807",
            "0.1000000000000000000001",
            "1e400",
            "-1e400",
            "1e-400",
            "4.9e-324",
            "12345678901234567890",
            "NaN",
            "inf",
            "0x10",
            "",
            "1.2.3",
        ] {
            assert_eq!(parse_f64_exact(text), None, "{text}");
        }
        assert_eq!(parse_f32_exact("16777216"), Some(16_777_216.0));
        assert_eq!(parse_f32_exact("16777217"), None);
        assert_eq!(parse_f32_exact("0.1"), Some(0.1));
        assert_eq!(parse_f32_exact("3.4e39"), None);
    }

    proptest::proptest! {
        /// The direct reading of plain decimals is the full parser's, to the bit.
        #[test]
        fn plain_decimals_read_as_the_full_parser_reads_them(
            text in "-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,21})?",
        ) {
            let direct = super::plain_f64(&text);
            if let Some(v) = direct {
                let full: f64 = text.parse().unwrap();
                proptest::prop_assert_eq!(v.to_bits(), full.to_bits(), "{}", text);
            }
            // And whatever path reads it, the same answer as the general one.
            proptest::prop_assert_eq!(
                parse_f64_exact(&text).map(f64::to_bits),
                parse_exact::<f64>(&text, 15, -307..=307).map(f64::to_bits)
            );
        }
    }

    #[test]
    fn digits_on_each_side_of_the_point() {
        let d = |t: &str| Decimal::parse(t).unwrap().integer_and_fraction_digits();
        assert_eq!(d("123.45"), (3, 2));
        assert_eq!(d("1e3"), (4, 0));
        assert_eq!(d("0.001"), (0, 3));
        assert_eq!(d("0"), (0, 0));
        assert_eq!(d("-1.50"), (1, 1));
        assert_eq!(d("9223372036854775808"), (19, 0));
        assert_eq!(d("1e-40"), (0, 40));
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

    /// A decimal(38, s) column holds 38 digits: every such value parses exactly (the parser
    /// stopped at 36, so a Parquet decimal(38,10) of 37 or 38 digits was a dead letter).
    #[test]
    fn thirty_eight_digits_are_read_exactly() {
        let max = "9".repeat(38);
        let d = |t: &str| Decimal::parse(t);
        assert_eq!(
            d(&max).unwrap().scaled_exact(0, 38),
            Some(10i128.pow(38) - 1)
        );
        let scaled = format!("-{}.{}", &max[..28], &max[28..]);
        assert_eq!(
            d(&scaled).unwrap().scaled_exact(10, 38),
            Some(-(10i128.pow(38) - 1))
        );
        let digits37 = "1234567890123456789012345678901234567";
        assert_eq!(d(digits37).unwrap().integer_and_fraction_digits(), (37, 0));
        assert_eq!(
            d(&format!("{max}00"))
                .unwrap()
                .integer_and_fraction_digits(),
            (40, 0)
        );
        // 39 significant digits would round: not a value of any decimal column.
        assert_eq!(d(&format!("1{max}")), None);
        assert_eq!(d(&format!("0.{max}1")), None);
    }
}
