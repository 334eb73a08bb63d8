//! Event times: microseconds since the epoch, read from text or numbers in the formats
//! `--time-format` names (RFC 3339, lenient ISO 8601, epoch counts, strftime patterns) and in
//! the zone `--time-zone` names.

use std::str::FromStr;
use std::sync::Arc;

use chrono::format::{Item, StrftimeItems};
use chrono::{
    DateTime, FixedOffset, LocalResult, NaiveDate, NaiveDateTime, SecondsFormat, TimeZone, Utc,
};

use crate::number::Decimal;

/// An event time in microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventTime(i64);

impl EventTime {
    pub const MIN: EventTime = EventTime(i64::MIN);
    pub const MAX: EventTime = EventTime(i64::MAX);

    pub const fn from_micros(micros: i64) -> Self {
        EventTime(micros)
    }

    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// RFC 3339 text with second precision, for messages and metadata.
    pub fn to_rfc3339(self) -> String {
        match DateTime::<Utc>::from_timestamp_micros(self.0) {
            Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            None => format!("{}us", self.0),
        }
    }

    pub(crate) fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::<Utc>::from_timestamp_micros(self.0)
    }

    /// Whether this time is inside the range events may have (see [`check_range`]).
    pub fn in_event_range(self) -> bool {
        (MIN_EVENT_US..=MAX_EVENT_US).contains(&self.0)
    }
}

/// How the event-time field of a record is written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TimeFormat {
    /// ISO 8601 / RFC 3339 text: `2026-10-03T14:25:00Z`, `2026-10-03T16:25:00.123+02:00`,
    /// and the common relaxations: a space for the `T`, no seconds, any fraction, an offset
    /// written `+02`, `+0200` or `+02:00`, a date alone (midnight), and no offset at all (the
    /// time is then read in the [`Zone`]).
    Rfc3339,
    /// A count of seconds since the Unix epoch: a JSON number (a fraction is kept to the
    /// microsecond) or a string holding one.
    EpochSeconds,
    /// A count of milliseconds since the Unix epoch (number or numeric string).
    EpochMillis,
    /// A count of microseconds since the Unix epoch (number or numeric string).
    EpochMicros,
    /// A count of nanoseconds since the Unix epoch (number or numeric string), truncated to
    /// the microsecond.
    EpochNanos,
    /// A strftime pattern (chrono's syntax), e.g. `%Y/%m/%d %H:%M`; without an offset in the
    /// pattern (`%z`), times are read in the [`Zone`].
    Pattern(Arc<str>),
}

/// The zone in which event times without an offset are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Zone {
    #[default]
    Utc,
    /// A fixed offset east of UTC, in seconds.
    Fixed(i32),
    /// An IANA zone (daylight saving time applied).
    Named(chrono_tz::Tz),
}

impl Zone {
    /// A total order for keys (UTC, then offsets, then IANA zones in database order); it
    /// means nothing else.
    fn rank(self) -> (u8, i64) {
        match self {
            Zone::Utc => (0, 0),
            Zone::Fixed(s) => (1, i64::from(s)),
            Zone::Named(tz) => (2, tz as i64),
        }
    }

    /// `UTC`, an offset (`+02:00`, `-0530`, `+02`), or an IANA name (`Europe/Berlin`).
    pub fn parse(text: &str) -> Result<Zone, TimeError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("utc") || t == "Z" {
            return Ok(Zone::Utc);
        }
        if t.starts_with(['+', '-']) {
            return parse_offset(t)
                .map(Zone::Fixed)
                .ok_or_else(|| TimeError::UnknownZone(text.to_string()));
        }
        chrono_tz::Tz::from_str(t)
            .map(Zone::Named)
            .map_err(|_| TimeError::UnknownZone(text.to_string()))
    }

    pub fn name(self) -> String {
        match self {
            Zone::Utc => "UTC".into(),
            Zone::Fixed(s) => {
                let sign = if s < 0 { '-' } else { '+' };
                let a = s.unsigned_abs();
                format!("{sign}{:02}:{:02}", a / 3600, (a % 3600) / 60)
            }
            Zone::Named(tz) => tz.name().to_string(),
        }
    }

    /// The instant (microseconds since the epoch) of a wall-clock time written as
    /// microseconds since 1970-01-01T00:00 (a timestamp_ntz value) in this zone.
    pub fn instant_of_wall_micros(self, micros: i64) -> Option<i64> {
        let naive = DateTime::<Utc>::from_timestamp_micros(micros)?.naive_utc();
        self.instant(naive, "").ok()
    }

    /// The instant of a wall-clock time in this zone. An ambiguous time (the hour repeated
    /// when daylight saving time ends) is its earlier instant; a time that does not exist (the
    /// hour skipped when it starts) is an error.
    fn instant(self, naive: NaiveDateTime, text: &str) -> Result<i64, TimeError> {
        let micros = match self {
            Zone::Utc => Some(naive.and_utc().timestamp_micros()),
            Zone::Fixed(s) => Some(naive.and_utc().timestamp_micros() - i64::from(s) * 1_000_000),
            Zone::Named(tz) => match tz.from_local_datetime(&naive) {
                LocalResult::Single(t) => Some(t.timestamp_micros()),
                LocalResult::Ambiguous(early, _) => Some(early.timestamp_micros()),
                LocalResult::None => None,
            },
        };
        micros.ok_or_else(|| TimeError::NoSuchLocalTime {
            text: text.to_string(),
            zone: self.name(),
        })
    }
}

impl PartialOrd for Zone {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Zone {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// How event times are read: the format, and the zone for times written without an offset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimeSpec {
    pub format: TimeFormat,
    pub zone: Zone,
}

impl From<TimeFormat> for TimeSpec {
    fn from(format: TimeFormat) -> Self {
        TimeSpec {
            format,
            zone: Zone::Utc,
        }
    }
}

impl TimeSpec {
    pub fn new(format: TimeFormat, zone: Zone) -> Self {
        TimeSpec { format, zone }
    }

    /// For messages: `rfc3339`, `%Y/%m/%d %H:%M in Europe/Berlin`.
    pub fn describe(&self) -> String {
        match self.zone {
            Zone::Utc => self.format.name().to_string(),
            zone => format!("{} in {}", self.format.name(), zone.name()),
        }
    }

    /// Reads an event time from a JSON value's text: a string's contents, or a number as
    /// written (`1791037500`, `1.7910375e9`).
    pub fn parse_text(&self, text: &str) -> Result<EventTime, TimeError> {
        let micros = self.parse_micros(text)?;
        check_range(micros, &self.format, text)
    }

    /// As [`TimeSpec::parse_text`], for any instant a timestamp column can hold (years 1 to
    /// 9999) rather than an event time: microseconds since the epoch.
    pub fn parse_micros(&self, text: &str) -> Result<i64, TimeError> {
        let micros = match &self.format {
            TimeFormat::Rfc3339 => parse_iso(text, self.zone)?,
            TimeFormat::Pattern(p) => parse_pattern(text, p, self.zone)?,
            epoch => {
                let scale = epoch.epoch_scale().unwrap_or(0);
                Decimal::parse(text)
                    .ok_or_else(|| TimeError::NotANumber {
                        text: cut(text),
                        format: epoch.name().to_string(),
                    })?
                    .scaled_floor(scale)
                    .map_or(i64::MIN, |(v, _)| v)
            }
        };
        if !(MIN_TIMESTAMP_US..=MAX_TIMESTAMP_US).contains(&micros) {
            return Err(TimeError::OutOfRange {
                value: cut(text),
                format: self.format.name().to_string(),
            });
        }
        Ok(micros)
    }

    /// Reads an integer-valued event time (a `long` column of an epoch format).
    pub fn from_integer(&self, value: i64) -> Result<EventTime, TimeError> {
        self.format.from_integer(value)
    }

    /// `t` written in this format, as [`TimeSpec::parse_text`] reads back as `t` itself;
    /// `None` where the format cannot hold it exactly (a pattern without seconds for a time
    /// with seconds, say). RFC 3339 is written in UTC, a pattern in the zone.
    pub fn write(&self, t: EventTime) -> Option<String> {
        use std::fmt::Write;
        let text = match &self.format {
            TimeFormat::Rfc3339 => t
                .to_datetime()?
                .to_rfc3339_opts(SecondsFormat::AutoSi, true),
            TimeFormat::Pattern(pattern) => {
                let utc = t.to_datetime()?;
                let mut text = String::new();
                // A pattern chrono cannot write is an error of the formatter, not a panic.
                let written = match self.zone {
                    Zone::Utc => write!(text, "{}", utc.format(pattern)),
                    Zone::Fixed(s) => {
                        let zone = FixedOffset::east_opt(s)?;
                        write!(text, "{}", utc.with_timezone(&zone).format(pattern))
                    }
                    Zone::Named(tz) => write!(text, "{}", utc.with_timezone(&tz).format(pattern)),
                };
                written.ok()?;
                text
            }
            epoch => scaled_text(t.as_micros(), epoch.epoch_scale()?),
        };
        (self.parse_text(&text).ok()? == t).then_some(text)
    }

    /// Reads a float-valued event time (a `double` column of an epoch format).
    pub fn from_float(&self, value: f64) -> Result<EventTime, TimeError> {
        // Through its shortest exact text: the same instant `parse_text` gives the JSON.
        self.parse_text(&value.to_string())
    }
}

/// `micros` as a count of `10^scale` microseconds (seconds: 6, nanoseconds: -3), exactly: an
/// integer, or a decimal fraction without trailing zeros.
fn scaled_text(micros: i64, scale: i32) -> String {
    let v = i128::from(micros);
    if scale <= 0 {
        return (v * 10i128.pow(scale.unsigned_abs())).to_string();
    }
    let unit = 10i128.pow(scale as u32);
    let (whole, fraction) = (v.abs() / unit, v.abs() % unit);
    let sign = if v < 0 { "-" } else { "" };
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{fraction:0width$}", width = scale as usize);
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}

/// The event time of one record could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TimeError {
    #[error("event time {text:?} is not RFC 3339 / ISO 8601 ({reason})")]
    NotRfc3339 { text: String, reason: String },
    #[error("event time {text:?} does not match the time format {pattern:?} ({reason})")]
    NotPattern {
        text: String,
        pattern: String,
        reason: String,
    },
    #[error("event time {text:?} is not a number, as the time format {format} needs")]
    NotANumber { text: String, format: String },
    #[error("event time {value} is out of range for {format} (years 1900 to 9999)")]
    OutOfRange { value: String, format: String },
    #[error("event time {text:?} does not exist in zone {zone} (a daylight saving time gap)")]
    NoSuchLocalTime { text: String, zone: String },
    #[error("event time is an integer but the time format is {0}")]
    IntegerForText(String),
    #[error("unknown time format {0:?}: use rfc3339, epoch_s, epoch_ms, epoch_us, epoch_ns or a strftime pattern such as \"%Y/%m/%d %H:%M\"")]
    UnknownFormat(String),
    #[error("time format {pattern:?} is not a valid strftime pattern")]
    BadPattern { pattern: String },
    #[error("unknown time zone {0:?}: use UTC, an offset such as +02:00, or an IANA name such as Europe/Berlin")]
    UnknownZone(String),
}

/// Events must lie within this range (years 1900 to 9999) so that every window and address
/// computation stays far from integer overflow.
const MIN_EVENT_US: i64 = -2_208_988_800_000_000;
const MAX_EVENT_US: i64 = 253_402_300_799_000_000;
/// What a Delta timestamp holds: 0001-01-01 to 9999-12-31.
const MIN_TIMESTAMP_US: i64 = -62_135_596_800_000_000;
const MAX_TIMESTAMP_US: i64 = 253_402_300_799_999_999;

impl TimeFormat {
    /// `rfc3339` (also `iso8601`), `epoch_s`, `epoch_ms`, `epoch_us`, `epoch_ns`, or a
    /// strftime pattern (anything holding a `%`).
    pub fn parse_name(name: &str) -> Result<Self, TimeError> {
        match name {
            "rfc3339" | "iso8601" => Ok(TimeFormat::Rfc3339),
            "epoch_s" | "epoch_seconds" => Ok(TimeFormat::EpochSeconds),
            "epoch_ms" | "epoch_millis" => Ok(TimeFormat::EpochMillis),
            "epoch_us" | "epoch_micros" => Ok(TimeFormat::EpochMicros),
            "epoch_ns" | "epoch_nanos" => Ok(TimeFormat::EpochNanos),
            p if p.contains('%') => {
                let bad = StrftimeItems::new(p).any(|i| matches!(i, Item::Error));
                if bad {
                    Err(TimeError::BadPattern {
                        pattern: p.to_string(),
                    })
                } else {
                    Ok(TimeFormat::Pattern(Arc::from(p)))
                }
            }
            other => Err(TimeError::UnknownFormat(other.to_string())),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            TimeFormat::Rfc3339 => "rfc3339",
            TimeFormat::EpochSeconds => "epoch_s",
            TimeFormat::EpochMillis => "epoch_ms",
            TimeFormat::EpochMicros => "epoch_us",
            TimeFormat::EpochNanos => "epoch_ns",
            TimeFormat::Pattern(p) => p,
        }
    }

    /// Powers of ten from the format's unit to microseconds; `None` for text formats.
    fn epoch_scale(&self) -> Option<i32> {
        match self {
            TimeFormat::EpochSeconds => Some(6),
            TimeFormat::EpochMillis => Some(3),
            TimeFormat::EpochMicros => Some(0),
            TimeFormat::EpochNanos => Some(-3),
            TimeFormat::Rfc3339 | TimeFormat::Pattern(_) => None,
        }
    }

    /// Whether times are counts since the epoch (numbers, or strings holding one).
    pub fn is_epoch(&self) -> bool {
        self.epoch_scale().is_some()
    }

    /// Reads a string-valued event time, in UTC when it has no offset.
    pub fn parse_str(&self, text: &str) -> Result<EventTime, TimeError> {
        TimeSpec::from(self.clone()).parse_text(text)
    }

    /// Reads an integer-valued event time.
    pub fn from_integer(&self, value: i64) -> Result<EventTime, TimeError> {
        let Some(scale) = self.epoch_scale() else {
            return Err(TimeError::IntegerForText(self.name().to_string()));
        };
        let out_of_range = || TimeError::OutOfRange {
            value: value.to_string(),
            format: self.name().to_string(),
        };
        let micros = if scale >= 0 {
            value
                .checked_mul(10i64.pow(scale as u32))
                .ok_or_else(out_of_range)?
        } else {
            value.div_euclid(10i64.pow((-scale) as u32))
        };
        check_range(micros, self, &value.to_string())
    }
}

/// ISO 8601 / RFC 3339 text, strict first (the common case, fast), then relaxed.
fn parse_iso(text: &str, zone: Zone) -> Result<i64, TimeError> {
    let t = text.trim();
    if let Some(micros) = crate::rfc3339::parse(t.as_bytes()) {
        return Ok(micros);
    }
    if let Ok(parsed) = DateTime::parse_from_rfc3339(t) {
        return Ok(parsed.timestamp_micros());
    }
    let bad = |reason: &str| TimeError::NotRfc3339 {
        text: cut(text),
        reason: reason.to_string(),
    };
    if t.len() == 10 {
        let date = NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|e| bad(&e.to_string()))?;
        return zone.instant(date.and_time(chrono::NaiveTime::MIN), text);
    }
    // The time part starts at byte 11 (after the date and `T` or a space): text whose byte 10
    // or 11 falls inside a character is not this shape.
    if t.len() < 16 || !t.is_char_boundary(10) || !t.is_char_boundary(11) {
        return Err(bad(
            "expected YYYY-MM-DD[ HH:MM[:SS[.fraction]]][Z or offset]",
        ));
    }
    // The offset, if any, follows the time part (which starts after the date and `T`/space).
    let (local, offset): (&str, Option<i32>) = if let Some(l) = t.strip_suffix(['Z', 'z']) {
        (l, Some(0))
    } else if let Some(i) = t[11..].rfind(['+', '-']).map(|i| i + 11) {
        let offset = parse_offset(&t[i..]).ok_or_else(|| bad("bad offset"))?;
        (&t[..i], Some(offset))
    } else {
        (t, None)
    };
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(local, f).ok())
    .ok_or_else(|| bad("expected YYYY-MM-DD[ HH:MM[:SS[.fraction]]][Z or offset]"))?;
    match offset {
        Some(seconds) => Ok(naive.and_utc().timestamp_micros() - i64::from(seconds) * 1_000_000),
        None => zone.instant(naive, text),
    }
}

/// A strftime pattern. A pattern with an offset (`%z`) or an epoch count (`%s`) names the
/// instant itself; any other is a wall-clock time in the zone. A pattern without a time of
/// day (`%Y-%m-%d`) reads midnight.
fn parse_pattern(text: &str, pattern: &str, zone: Zone) -> Result<i64, TimeError> {
    use chrono::format::{Fixed, Numeric};
    let t = text.trim();
    let bad = |e: chrono::ParseError| TimeError::NotPattern {
        text: cut(text),
        pattern: pattern.to_string(),
        reason: e.to_string(),
    };
    let mut offset = false;
    let mut epoch = false;
    for item in StrftimeItems::new(pattern) {
        match item {
            Item::Fixed(
                Fixed::TimezoneOffset
                | Fixed::TimezoneOffsetColon
                | Fixed::TimezoneOffsetDoubleColon
                | Fixed::TimezoneOffsetTripleColon
                | Fixed::TimezoneOffsetColonZ
                | Fixed::TimezoneOffsetZ,
            ) => offset = true,
            Item::Numeric(Numeric::Timestamp, _) => epoch = true,
            _ => {}
        }
    }
    if offset {
        return DateTime::parse_from_str(t, pattern)
            .map(|dt| dt.timestamp_micros())
            .map_err(bad);
    }
    let naive = match NaiveDateTime::parse_from_str(t, pattern) {
        Ok(n) => n,
        Err(e) if e.kind() == chrono::format::ParseErrorKind::NotEnough => {
            NaiveDate::parse_from_str(t, pattern)
                .map_err(bad)?
                .and_time(chrono::NaiveTime::MIN)
        }
        Err(e) => return Err(bad(e)),
    };
    if epoch {
        return Ok(naive.and_utc().timestamp_micros());
    }
    zone.instant(naive, text)
}

/// `+02:00`, `-0530`, `+02`: seconds east of UTC.
fn parse_offset(text: &str) -> Option<i32> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || rest.matches(':').count() > 1 {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    let offset = FixedOffset::east_opt(sign * (h * 3600 + m * 60))?;
    Some(offset.local_minus_utc())
}

/// An instant typed by a person: `2026-10-03`, `2026-10-03T14`, `2026-10-03T14:00`,
/// `2026-10-03T14:00Z`, or full RFC 3339 (`2026-10-03T14:00:00+02:00`). Without an offset the
/// time is UTC.
pub fn parse_instant(text: &str) -> Result<EventTime, TimeError> {
    let t = text.trim();
    if let Ok(parsed) = DateTime::parse_from_rfc3339(t) {
        return check_range(parsed.timestamp_micros(), &TimeFormat::Rfc3339, text);
    }
    let bare = t.strip_suffix('Z').unwrap_or(t);
    let full = match bare.len() {
        10 => format!("{bare}T00:00:00Z"),
        13 => format!("{bare}:00:00Z"),
        16 => format!("{bare}:00Z"),
        _ => format!("{bare}Z"),
    };
    DateTime::parse_from_rfc3339(&full)
        .map_err(|_| TimeError::NotRfc3339 {
            text: text.to_string(),
            reason: "expected YYYY-MM-DD[THH[:MM[:SS]]][Z or offset]".into(),
        })
        .and_then(|p| check_range(p.timestamp_micros(), &TimeFormat::Rfc3339, text))
}

fn check_range(micros: i64, format: &TimeFormat, text: &str) -> Result<EventTime, TimeError> {
    if (MIN_EVENT_US..=MAX_EVENT_US).contains(&micros) {
        Ok(EventTime(micros))
    } else {
        Err(TimeError::OutOfRange {
            value: cut(text),
            format: format.name().to_string(),
        })
    }
}

/// Input text in an error message, cut to a readable length.
fn cut(text: &str) -> String {
    const CHARS_MAX: usize = 64;
    match text.char_indices().nth(CHARS_MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
