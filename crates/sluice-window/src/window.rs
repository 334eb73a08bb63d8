//! Tumbling event-time windows: their size (1 minute to 1 day, dividing a day), the zone whose
//! days they align to, and the window containing an event time.

use crate::duration::{parse_duration_ms, DurationError};
use crate::time::{EventTime, Zone};
use crate::zoned;

const MINUTE_US: i64 = 60_000_000;
const DAY_US: i64 = 86_400_000_000;

/// The size of a tumbling window: whole minutes, from 1 minute to 1 day, dividing a day, so
/// that windows align to midnight and never straddle two days; and the zone whose midnight
/// that is (UTC unless `--window-zone` names another). In a zone with daylight saving time a
/// window is its slot of the local wall clock, so a daily window lasts 23 or 25 hours on the
/// days the clocks change (see `zoned`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowSize {
    micros: i64,
    zone: Zone,
}

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
    #[error("windows in {zone}, whose clocks change, must be whole hours (1h to 1d), not {size}: a repeated wall-clock slot would be two windows at one address")]
    ZoneNeedsHours { zone: String, size: String },
    #[error("windows of {size} in {zone} would put two stretches of time at one address: at {at} its clocks go back from {from} to {to}; use a larger window, or another --window-zone")]
    ZoneRepeatsSlot {
        zone: String,
        size: String,
        at: String,
        from: String,
        to: String,
    },
    #[error("window zone: {0}")]
    Zone(#[from] crate::time::TimeError),
}

impl WindowSize {
    /// `1h`, `15m`, `1d`; and as [`WindowSize::label`] writes a zoned size,
    /// `1d in America/New_York`.
    pub fn parse(text: &str) -> Result<Self, WindowSizeError> {
        if let Some((size, zone)) = text.split_once(" in ") {
            return Self::parse(size.trim())?.in_zone(Zone::parse(zone)?);
        }
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
        Ok(WindowSize {
            micros,
            zone: Zone::Utc,
        })
    }

    /// The same size with windows aligned to `zone`'s wall clock. A zone whose offset changes
    /// takes whole hours only: when the clocks go back an hour, a smaller slot (01:15) comes
    /// twice, and would be two windows at one address.
    pub fn in_zone(self, zone: Zone) -> Result<Self, WindowSizeError> {
        let whole_hours = self.micros % 3_600_000_000 == 0;
        if matches!(zone, Zone::Named(_)) && !whole_hours {
            return Err(WindowSizeError::ZoneNeedsHours {
                zone: zone.name(),
                size: self.label(),
            });
        }
        if let Some((at, from, to)) = zoned::repeated_slot(zone, self.micros) {
            return Err(WindowSizeError::ZoneRepeatsSlot {
                zone: zone.name(),
                size: self.label(),
                at: EventTime::from_micros(at).to_rfc3339(),
                from: from.format("%H:%M").to_string(),
                to: to.format("%H:%M").to_string(),
            });
        }
        Ok(WindowSize { zone, ..self })
    }

    /// The nominal length; a zoned window is longer or shorter on the days the clocks change.
    pub const fn as_micros(self) -> i64 {
        self.micros
    }

    /// The zone whose wall clock windows align to.
    pub const fn zone(self) -> Zone {
        self.zone
    }

    /// `1h`, `15m`, `1d` (the shortest spelling), then ` in ZONE` for a zone other than UTC:
    /// for metadata and listings; [`WindowSize::parse`] reads it back.
    pub fn label(self) -> String {
        let minutes = self.micros / MINUTE_US;
        let size = if minutes % 1440 == 0 {
            format!("{}d", minutes / 1440)
        } else if minutes % 60 == 0 {
            format!("{}h", minutes / 60)
        } else {
            format!("{minutes}m")
        };
        match self.zone {
            Zone::Utc => size,
            zone => format!("{size} in {}", zone.name()),
        }
    }
}

/// One tumbling event-time interval `[start, end)`, aligned to its size's zone (UTC unless
/// told otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window {
    start: EventTime,
    end: EventTime,
    size: WindowSize,
}

impl Window {
    /// The window that holds `t`.
    pub fn containing(size: WindowSize, t: EventTime) -> Self {
        let t = t.as_micros();
        let (start, end) = match size.zone {
            Zone::Utc => {
                let start = t.div_euclid(size.micros) * size.micros;
                (start, start.saturating_add(size.micros))
            }
            zone => zoned::bounds(zone, size.micros, t),
        };
        debug_assert!(start < end, "E5: a window starts before it ends");
        debug_assert!(
            start <= t && (t < end || end == i64::MAX),
            "E5: an event lies in the window assigned to it"
        );
        Window {
            start: EventTime::from_micros(start),
            end: EventTime::from_micros(end),
            size,
        }
    }

    /// The window that starts at `start`, which must be a window boundary of `size`.
    pub fn starting_at(size: WindowSize, start: EventTime) -> Option<Self> {
        let window = Window::containing(size, start);
        (window.start == start).then_some(window)
    }

    pub fn start(self) -> EventTime {
        self.start
    }

    pub fn end(self) -> EventTime {
        self.end
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

/// The windows of a run of event times, reusing the last one found: consecutive events mostly
/// share a window, and a window in a zone other than UTC takes several zone lookups to find.
#[derive(Debug, Clone, Copy)]
pub struct WindowFinder {
    size: WindowSize,
    last: Option<Window>,
}

impl WindowFinder {
    pub fn new(size: WindowSize) -> Self {
        WindowFinder { size, last: None }
    }

    /// The window that holds `t` (as [`Window::containing`]).
    pub fn find(&mut self, t: EventTime) -> Window {
        match self.last {
            Some(w) if w.contains(t) => w,
            _ => {
                let w = Window::containing(self.size, t);
                self.last = Some(w);
                w
            }
        }
    }
}
