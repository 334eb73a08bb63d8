use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};

use crate::time::EventTime;
use crate::window::{Window, WindowSize};

/// How a window maps to table partition values: its address.
///
/// Each layout is injective for the window sizes it accepts, so one address holds exactly one
/// window and a swap of that address replaces exactly that window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressLayout {
    /// `dt=2026-10-03/hour=14`: the layout an hourly batch job writes. Windows of 1h only.
    DtHour,
    /// `dt=2026-10-03`: daily windows only.
    Dt,
    /// `window_start=20261003T1405Z`: any window size.
    WindowStart,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    #[error("address layout {layout} needs {needs} windows, but the window is {window}")]
    SizeMismatch {
        layout: &'static str,
        needs: &'static str,
        window: String,
    },
    #[error("unknown address layout {0:?}: use dt_hour, dt or window_start")]
    UnknownLayout(String),
    #[error("partition values {0:?} are not an address of this layout")]
    NotAnAddress(Vec<(String, String)>),
}

impl AddressLayout {
    /// `dt/hour` for hourly windows, `dt` for daily windows, `window_start` otherwise.
    pub fn default_for(size: WindowSize) -> Self {
        match size.as_micros() {
            3_600_000_000 => AddressLayout::DtHour,
            86_400_000_000 => AddressLayout::Dt,
            _ => AddressLayout::WindowStart,
        }
    }

    pub fn parse_name(name: &str) -> Result<Self, AddressError> {
        match name {
            "dt_hour" => Ok(AddressLayout::DtHour),
            "dt" => Ok(AddressLayout::Dt),
            "window_start" => Ok(AddressLayout::WindowStart),
            other => Err(AddressError::UnknownLayout(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AddressLayout::DtHour => "dt_hour",
            AddressLayout::Dt => "dt",
            AddressLayout::WindowStart => "window_start",
        }
    }

    /// Rejects layouts that would put two windows at one address.
    pub fn validate(self, size: WindowSize) -> Result<(), AddressError> {
        let needs = match self {
            AddressLayout::DtHour if size.as_micros() != 3_600_000_000 => "1h",
            AddressLayout::Dt if size.as_micros() != 86_400_000_000 => "1d",
            _ => return Ok(()),
        };
        Err(AddressError::SizeMismatch {
            layout: self.name(),
            needs,
            window: size.label(),
        })
    }

    /// The partition columns, in path order.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            AddressLayout::DtHour => &["dt", "hour"],
            AddressLayout::Dt => &["dt"],
            AddressLayout::WindowStart => &["window_start"],
        }
    }

    pub fn address(self, window: Window) -> Address {
        let t = window
            .start()
            .to_datetime()
            .expect("event times are range-checked on parse, so window starts are valid dates")
            .naive_utc();
        let values = match self {
            AddressLayout::DtHour => vec![date_text(&t), format!("{:02}", t.hour())],
            AddressLayout::Dt => vec![date_text(&t)],
            AddressLayout::WindowStart => vec![t.format("%Y%m%dT%H%MZ").to_string()],
        };
        Address {
            columns: self.columns(),
            values,
        }
    }

    /// The window at an address read back from the table's partition values.
    pub fn window_of(
        self,
        size: WindowSize,
        values: &[(String, String)],
    ) -> Result<Window, AddressError> {
        let get = |name: &str| {
            values
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let bad = || AddressError::NotAnAddress(values.to_vec());
        let start: NaiveDateTime = match self {
            AddressLayout::DtHour => {
                let date = NaiveDate::parse_from_str(get("dt").ok_or_else(bad)?, "%Y-%m-%d")
                    .map_err(|_| bad())?;
                let hour: u32 = get("hour").ok_or_else(bad)?.parse().map_err(|_| bad())?;
                date.and_hms_opt(hour, 0, 0).ok_or_else(bad)?
            }
            AddressLayout::Dt => NaiveDate::parse_from_str(get("dt").ok_or_else(bad)?, "%Y-%m-%d")
                .map_err(|_| bad())?
                .and_hms_opt(0, 0, 0)
                .ok_or_else(bad)?,
            AddressLayout::WindowStart => {
                NaiveDateTime::parse_from_str(get("window_start").ok_or_else(bad)?, "%Y%m%dT%H%MZ")
                    .map_err(|_| bad())?
            }
        };
        let start = EventTime::from_micros(start.and_utc().timestamp_micros());
        let window = Window::starting_at(size, start).ok_or_else(bad)?;
        if self
            .address(window)
            .values
            .iter()
            .map(String::as_str)
            .ne(self.columns().iter().map(|c| get(c).unwrap_or_default()))
        {
            return Err(bad());
        }
        Ok(window)
    }
}

fn date_text(t: &NaiveDateTime) -> String {
    format!("{:04}-{:02}-{:02}", t.year(), t.month(), t.day())
}

/// The partition values of one window: column names and their string values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    columns: &'static [&'static str],
    values: Vec<String>,
}

impl Address {
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.columns
            .iter()
            .copied()
            .zip(self.values.iter().map(String::as_str))
    }

    /// `dt=2026-10-03/hour=14`. Values are digits, `-`, `T` and `Z` only, so no escaping is
    /// needed and the path equals Delta's own hive-style encoding.
    pub fn hive_path(&self) -> String {
        self.pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// `20261003T14`: a compact tag for file names.
    pub fn tag(&self) -> String {
        self.values
            .iter()
            .map(|v| v.replace('-', ""))
            .collect::<Vec<_>>()
            .join("T")
    }

    /// `dt=2026-10-03 hour=14`: for people.
    pub fn label(&self) -> String {
        self.pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
