//! The common shape of an RFC 3339 time, read without a general parser.
//!
//! Nearly every event time a stream carries is `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`;
//! reading it byte by byte costs a fraction of chrono's RFC 3339 parser, which the decode
//! of every row pays. Anything else (a space or lowercase `t`, a leap second, an invalid
//! date) is left to chrono, so the instant read is chrono's whatever the text (a property
//! test compares the two).

/// Microseconds since the epoch of `t` in the common RFC 3339 shape (fraction digits past
/// the sixth are cut, as chrono's `timestamp_micros` does); `None` for any other text.
pub(crate) fn parse(t: &[u8]) -> Option<i64> {
    if t.len() < 20 || t[4] != b'-' || t[7] != b'-' || t[10] != b'T' {
        return None;
    }
    if t[13] != b':' || t[16] != b':' {
        return None;
    }
    let year = digits(&t[0..4])?;
    let month = digits(&t[5..7])?;
    let day = digits(&t[8..10])?;
    let hour = digits(&t[11..13])?;
    let minute = digits(&t[14..16])?;
    let second = digits(&t[17..19])?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // A leap second (:60) is chrono's to read.
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut at = 19;
    let mut micros = 0i64;
    if t[at] == b'.' {
        at += 1;
        let start = at;
        while at < t.len() && t[at].is_ascii_digit() {
            if at - start < 6 {
                micros = micros * 10 + i64::from(t[at] - b'0');
            }
            at += 1;
        }
        let n = at - start;
        if n == 0 || n > 9 {
            return None;
        }
        for _ in n..6 {
            micros *= 10;
        }
    }
    let offset_s = match &t[at..] {
        [b'Z'] | [b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = digits(&[*h1, *h2])?;
            let m = digits(&[*m1, *m2])?;
            if h > 23 || m > 59 {
                return None;
            }
            let s = i64::from(h * 3600 + m * 60);
            if *sign == b'-' {
                -s
            } else {
                s
            }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(year), month, day);
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_s;
    Some(seconds * 1_000_000 + micros)
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use proptest::prelude::*;

    fn chrono_micros(t: &str) -> Option<i64> {
        DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|d| d.timestamp_micros())
    }

    #[test]
    fn reads_the_common_shapes() {
        for t in [
            "2026-10-03T14:00:00Z",
            "2026-10-03T14:00:00.011Z",
            "2026-10-03T14:00:00.123456789+05:30",
            "1969-12-31T23:59:59.999999-00:00",
            "2024-02-29T00:00:00z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.9Z",
        ] {
            assert_eq!(super::parse(t.as_bytes()), chrono_micros(t), "{t}");
            assert!(super::parse(t.as_bytes()).is_some(), "{t}");
        }
    }

    #[test]
    fn leaves_the_rest_to_chrono() {
        for t in [
            "2026-10-03 14:00:00Z",
            "2026-10-03t14:00:00Z",
            "2026-10-03T14:00:60Z",
            "2025-02-29T00:00:00Z",
            "2026-13-03T14:00:00Z",
            "2026-10-03T14:00:00",
            "2026-10-03T14:00:00.Z",
            "2026-10-03T14:00:00.1234567891Z",
            "2026-10-03T14:00:00+0530",
            "2026-10-03T24:00:00Z",
            "+2026-10-03T14:00:00Z",
            "2026-10-03T14:00:00Z ",
        ] {
            assert_eq!(super::parse(t.as_bytes()), None, "{t}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Where the fast path reads a time, chrono reads the same instant.
        #[test]
        fn agrees_with_chrono(
            year in 0u32..10_000,
            month in 0u32..14,
            day in 0u32..33,
            hour in 0u32..25,
            minute in 0u32..61,
            second in 0u32..61,
            fraction in proptest::option::of("[0-9]{0,10}"),
            zone in prop_oneof![
                Just("Z".to_string()),
                Just("z".to_string()),
                (0u32..25, 0u32..61, any::<bool>())
                    .prop_map(|(h, m, neg)| format!("{}{h:02}:{m:02}", if neg { '-' } else { '+' })),
            ],
        ) {
            let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
            let t = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}{zone}");
            if let Some(fast) = super::parse(t.as_bytes()) {
                prop_assert_eq!(Some(fast), chrono_micros(&t), "{}", t);
            }
        }

        /// Any text: never a different instant from chrono's, never a panic.
        #[test]
        fn never_reads_what_chrono_reads_otherwise(t in "[0-9T:.Zz+ -]{0,40}") {
            if let Some(fast) = super::parse(t.as_bytes()) {
                prop_assert_eq!(Some(fast), chrono_micros(&t), "{}", t);
            }
        }
    }
}
