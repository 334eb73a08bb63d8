use chrono::{DateTime, SecondsFormat, Utc};

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
}

/// How the event-time field of a record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeFormat {
    /// A string such as `2026-10-03T14:25:00Z` or `2026-10-03T16:25:00.123+02:00`.
    Rfc3339,
    /// An integer count of seconds since the Unix epoch.
    EpochSeconds,
    /// An integer count of milliseconds since the Unix epoch.
    EpochMillis,
    /// An integer count of microseconds since the Unix epoch.
    EpochMicros,
}

/// The event time of one record could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TimeError {
    #[error("event time {text:?} is not RFC 3339 ({reason})")]
    NotRfc3339 { text: String, reason: String },
    #[error("event time {value} is out of range for {format}")]
    OutOfRange { value: i64, format: &'static str },
    #[error("event time is a string but the time format is {0}")]
    StringForEpoch(&'static str),
    #[error("event time is an integer but the time format is rfc3339")]
    IntegerForRfc3339,
    #[error("unknown time format {0:?}: use rfc3339, epoch_s, epoch_ms or epoch_us")]
    UnknownFormat(String),
}

/// Events must lie within this range (years 1900 to 9999) so that every window and address
/// computation stays far from integer overflow.
const MIN_EVENT_US: i64 = -2_208_988_800_000_000;
const MAX_EVENT_US: i64 = 253_402_300_799_000_000;

impl TimeFormat {
    pub fn parse_name(name: &str) -> Result<Self, TimeError> {
        match name {
            "rfc3339" => Ok(TimeFormat::Rfc3339),
            "epoch_s" | "epoch_seconds" => Ok(TimeFormat::EpochSeconds),
            "epoch_ms" | "epoch_millis" => Ok(TimeFormat::EpochMillis),
            "epoch_us" | "epoch_micros" => Ok(TimeFormat::EpochMicros),
            other => Err(TimeError::UnknownFormat(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeFormat::Rfc3339 => "rfc3339",
            TimeFormat::EpochSeconds => "epoch_s",
            TimeFormat::EpochMillis => "epoch_ms",
            TimeFormat::EpochMicros => "epoch_us",
        }
    }

    /// Reads a string-valued event time.
    pub fn parse_str(self, text: &str) -> Result<EventTime, TimeError> {
        if self != TimeFormat::Rfc3339 {
            return Err(TimeError::StringForEpoch(self.name()));
        }
        let parsed =
            DateTime::parse_from_rfc3339(text.trim()).map_err(|e| TimeError::NotRfc3339 {
                text: text.to_string(),
                reason: e.to_string(),
            })?;
        let micros = parsed.timestamp_micros();
        check_range(micros, self)
    }

    /// Reads an integer-valued event time.
    pub fn from_integer(self, value: i64) -> Result<EventTime, TimeError> {
        let scale: i64 = match self {
            TimeFormat::Rfc3339 => return Err(TimeError::IntegerForRfc3339),
            TimeFormat::EpochSeconds => 1_000_000,
            TimeFormat::EpochMillis => 1_000,
            TimeFormat::EpochMicros => 1,
        };
        let micros = value.checked_mul(scale).ok_or(TimeError::OutOfRange {
            value,
            format: self.name(),
        })?;
        check_range(micros, self).map_err(|_| TimeError::OutOfRange {
            value,
            format: self.name(),
        })
    }
}

/// An instant typed by a person: `2026-10-03`, `2026-10-03T14`, `2026-10-03T14:00`,
/// `2026-10-03T14:00Z`, or full RFC 3339 (`2026-10-03T14:00:00+02:00`). Without an offset the
/// time is UTC.
pub fn parse_instant(text: &str) -> Result<EventTime, TimeError> {
    let t = text.trim();
    if let Ok(parsed) = DateTime::parse_from_rfc3339(t) {
        return check_range(parsed.timestamp_micros(), TimeFormat::Rfc3339);
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
        .and_then(|p| check_range(p.timestamp_micros(), TimeFormat::Rfc3339))
}

fn check_range(micros: i64, format: TimeFormat) -> Result<EventTime, TimeError> {
    if (MIN_EVENT_US..=MAX_EVENT_US).contains(&micros) {
        Ok(EventTime(micros))
    } else {
        Err(TimeError::OutOfRange {
            value: micros,
            format: format.name(),
        })
    }
}
