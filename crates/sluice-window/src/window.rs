//! Tumbling event-time windows: their size (1 minute to 1 day, dividing a day) and the window
//! containing an event time.

use crate::duration::{parse_duration_ms, DurationError};
use crate::time::EventTime;

const MINUTE_US: i64 = 60_000_000;
const DAY_US: i64 = 86_400_000_000;

/// The size of a tumbling window: whole minutes, from 1 minute to 1 day, dividing a day, so
/// that windows align to UTC midnight and never straddle two days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowSize(i64);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowSizeError {
    #[error(transparent)]
    Duration(#[from] DurationError),
    #[error("window size {0} is not a whole number of minutes from 1m to 1d")]
    OutOfRange(String),
    #[error(
        "window size {0} does not divide a day evenly (try 1m, 5m, 10m, 15m, 30m, 1h, 2h, 6h, 1d)"
    )]
    NotDayAligned(String),
}

impl WindowSize {
    pub fn parse(text: &str) -> Result<Self, WindowSizeError> {
        let ms = parse_duration_ms(text)?;
        Self::from_micros(ms.saturating_mul(1_000)).map_err(|e| match e {
            WindowSizeError::OutOfRange(_) => WindowSizeError::OutOfRange(text.to_string()),
            WindowSizeError::NotDayAligned(_) => WindowSizeError::NotDayAligned(text.to_string()),
            other => other,
        })
    }

    pub fn from_micros(micros: i64) -> Result<Self, WindowSizeError> {
        if !(MINUTE_US..=DAY_US).contains(&micros) || micros % MINUTE_US != 0 {
            return Err(WindowSizeError::OutOfRange(format!("{micros}us")));
        }
        if DAY_US % micros != 0 {
            return Err(WindowSizeError::NotDayAligned(format!("{micros}us")));
        }
        Ok(WindowSize(micros))
    }

    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// `1h`, `15m`, `1d`: the shortest spelling, for metadata and listings.
    pub fn label(self) -> String {
        let minutes = self.0 / MINUTE_US;
        if minutes % 1440 == 0 {
            format!("{}d", minutes / 1440)
        } else if minutes % 60 == 0 {
            format!("{}h", minutes / 60)
        } else {
            format!("{minutes}m")
        }
    }
}

/// One tumbling event-time interval `[start, end)`, aligned to UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window {
    start: EventTime,
    size: WindowSize,
}

impl Window {
    /// The window that holds `t`.
    pub fn containing(size: WindowSize, t: EventTime) -> Self {
        let start = t.as_micros().div_euclid(size.0) * size.0;
        Window {
            start: EventTime::from_micros(start),
            size,
        }
    }

    /// The window that starts at `start`, which must be aligned to `size`.
    pub fn starting_at(size: WindowSize, start: EventTime) -> Option<Self> {
        (start.as_micros().rem_euclid(size.0) == 0).then_some(Window { start, size })
    }

    pub fn start(self) -> EventTime {
        self.start
    }

    pub fn end(self) -> EventTime {
        EventTime::from_micros(self.start.as_micros() + self.size.0)
    }

    pub fn size(self) -> WindowSize {
        self.size
    }

    pub fn contains(self, t: EventTime) -> bool {
        self.start <= t && t < self.end()
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}, {})",
            self.start.to_rfc3339(),
            self.end().to_rfc3339()
        )
    }
}
