//! Addresses: the Delta partition values a window is written under (`dt=…/hour=…`, then the
//! pipeline and shard columns where a table has them), a one-to-one map from windows so a
//! rerun of a window replaces exactly its files.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};

use crate::time::{EventTime, Zone};
use crate::window::{Window, WindowSize};
use crate::zoned;

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

    /// The window size the layout itself implies: 1h for `dt_hour`, 1d for `dt`; `None` for
    /// `window_start`, which takes any size.
    pub fn fixed_size(self) -> Option<WindowSize> {
        match self {
            AddressLayout::DtHour => WindowSize::from_micros(3_600_000_000).ok(),
            AddressLayout::Dt => WindowSize::from_micros(86_400_000_000).ok(),
            AddressLayout::WindowStart => None,
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

    /// The partition columns of a table with this layout, in path order: the window's, then
    /// the pipeline column if the table holds several pipelines, then the shard column if the
    /// table is sharded.
    pub fn table_columns(self, pipelines: bool, sharded: bool) -> Vec<String> {
        let mut columns: Vec<String> = self.columns().iter().map(|c| c.to_string()).collect();
        if pipelines {
            columns.push(PIPELINE_COLUMN.to_string());
        }
        if sharded {
            columns.push(SHARD_COLUMN.to_string());
        }
        columns
    }

    /// The partition columns of a window, in path order.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            AddressLayout::DtHour => &["dt", "hour"],
            AddressLayout::Dt => &["dt"],
            AddressLayout::WindowStart => &["window_start"],
        }
    }

    pub fn address(self, window: Window) -> Address {
        let address = self.address_at(window.start(), window.size().zone());
        debug_assert!(
            window.size().zone() != Zone::Utc
                || self.validate(window.size()).is_err()
                || self.window_of(window.size(), &address.owned_pairs()) == Ok(window),
            "E2: an address names one window, which it is read back as"
        );
        address
    }

    /// The address of the window starting at `start` in `zone`: its local date and hour
    /// (`dt`, `hour`), or its start in UTC (`window_start`, which names an instant).
    fn address_at(self, start: EventTime, zone: Zone) -> Address {
        let zone = match self {
            AddressLayout::WindowStart => Zone::Utc,
            _ => zone,
        };
        let t = zoned::wall_time(zone, start.as_micros())
            .expect("event times are range-checked on parse, so window starts are valid dates");
        let values = match self {
            AddressLayout::DtHour => vec![date_text(&t), format!("{:02}", t.hour())],
            AddressLayout::Dt => vec![date_text(&t)],
            AddressLayout::WindowStart => vec![t.format("%Y%m%dT%H%MZ").to_string()],
        };
        let address = Address {
            columns: self.columns(),
            values,
            pipeline: None,
            shard: None,
        };
        debug_assert!(address.path_safe(), "paths: an address is safe as a path");
        address
    }

    /// The window at an address read back from the table's partition values.
    pub fn window_of(
        self,
        size: WindowSize,
        values: &[(String, String)],
    ) -> Result<Window, AddressError> {
        let bad = || AddressError::NotAnAddress(values.to_vec());
        let start = match (self, size.zone()) {
            (AddressLayout::WindowStart, _) | (_, Zone::Utc) => self.start_of(values)?,
            (_, zone) => {
                let wall = self.start_of(values)?.to_datetime().ok_or_else(bad)?;
                let start = zoned::start_of_slot(zone, size.as_micros(), wall.naive_utc());
                EventTime::from_micros(start.ok_or_else(bad)?)
            }
        };
        let window = Window::starting_at(size, start).ok_or_else(bad)?;
        if self
            .address_at(window.start(), window.size().zone())
            .values
            .iter()
            .map(String::as_str)
            .ne(self
                .columns()
                .iter()
                .map(|c| value_of(values, c).unwrap_or_default()))
        {
            return Err(bad());
        }
        Ok(window)
    }

    /// The window at an address read back from partition values, when its size is known:
    /// `size` (the one a table's contract records, with its zone), else the size the layout
    /// fixes (`dt_hour`, `dt`: in UTC).
    pub fn window_at(
        self,
        size: Option<WindowSize>,
        values: &[(String, String)],
    ) -> Option<Window> {
        self.window_of(size.or(self.fixed_size())?, values).ok()
    }

    /// The start of the window at an address read back from partition values (the window's
    /// size is not needed: every layout names its window's start), as its wall-clock time
    /// read in UTC: the instant itself for windows in UTC, and always for `window_start`. A
    /// window in another zone is found by [`AddressLayout::window_of`].
    pub fn start_of(self, values: &[(String, String)]) -> Result<EventTime, AddressError> {
        let get = |name: &str| value_of(values, name);
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
        Ok(EventTime::from_micros(start.and_utc().timestamp_micros()))
    }

    /// The layout whose window columns `values` hold (`window_start`; `dt` and `hour`; `dt`).
    pub fn of_partition_values(values: &[(String, String)]) -> Option<AddressLayout> {
        let has = |name: &str| values.iter().any(|(k, _)| k == name);
        if has("window_start") {
            Some(AddressLayout::WindowStart)
        } else if has("dt") && has("hour") {
            Some(AddressLayout::DtHour)
        } else if has("dt") {
            Some(AddressLayout::Dt)
        } else {
            None
        }
    }
}

/// The value of partition column `name`, if `values` hold it.
fn value_of<'a>(values: &'a [(String, String)], name: &str) -> Option<&'a str> {
    values
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn date_text(t: &NaiveDateTime) -> String {
    format!("{:04}-{:02}-{:02}", t.year(), t.month(), t.day())
}

/// The partition column naming the pipeline, in a table that holds several pipelines: each
/// pipeline's files of a window are under its own address, so a swap by one pipeline never
/// removes another's rows.
pub const PIPELINE_COLUMN: &str = "pipeline";

/// Whether `name` can name a pipeline: 1 to 128 ASCII letters, digits, `_`, `-` and `.`, not
/// starting with `.` (it appears in `txn` app ids and, in a table of several pipelines, as a
/// partition value in file paths, where no escaping is then needed).
pub fn valid_pipeline_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The partition column naming the writer shard (the source partition) of a sharded table.
pub const SHARD_COLUMN: &str = "shard";

/// One writer's share of a table written by several: its files at every window carry this
/// shard in their address, so a swap by one writer never removes another writer's files.
/// For a Kafka source the shard is the topic partition (each partition has one owner at a
/// time in a consumer group, and a zombie owner is fenced by the partition's `txn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard(pub u32);

impl Shard {
    /// The shard's partition value: its number in decimal (digits only: path-safe).
    pub fn value(self) -> String {
        self.0.to_string()
    }

    /// The shard named by a file's partition values, if any.
    pub fn of(values: &[(String, String)]) -> Option<Shard> {
        values
            .iter()
            .find(|(k, _)| k == SHARD_COLUMN)
            .and_then(|(_, v)| v.parse().ok())
            .map(Shard)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The partition values of one window: column names and their string values, and the
/// writer shard for sharded tables (always the last column).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    columns: &'static [&'static str],
    values: Vec<String>,
    pipeline: Option<String>,
    shard: Option<String>,
}

impl Address {
    /// The address a table's files are at, read back from their partition values (as the
    /// Delta log holds them): the layout whose window columns they hold, plus the pipeline and
    /// shard columns where the table has them. Every value is checked to be one sluice writes
    /// (a window start of the layout, a valid pipeline name, a shard number) and any other
    /// column refused, so the address's [`Address::hive_path`] is safe to use as a path.
    pub fn from_partition_values(values: &[(String, String)]) -> Result<Address, AddressError> {
        let bad = || AddressError::NotAnAddress(values.to_vec());
        let layout = AddressLayout::of_partition_values(values).ok_or_else(bad)?;
        let start = layout.start_of(values)?;
        let get = |name: &str| value_of(values, name).map(str::to_string);
        let known =
            |k: &str| layout.columns().contains(&k) || k == PIPELINE_COLUMN || k == SHARD_COLUMN;
        if values.iter().any(|(k, _)| !known(k)) {
            return Err(bad());
        }
        let pipeline = get(PIPELINE_COLUMN);
        if pipeline.as_deref().is_some_and(|p| !valid_pipeline_name(p)) {
            return Err(bad());
        }
        let shard = get(SHARD_COLUMN);
        if shard
            .as_deref()
            .is_some_and(|s| s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(bad());
        }
        // The window columns must be exactly those its start gives (no other spelling of
        // the same instant, nothing a path could carry).
        let address = Address {
            columns: layout.columns(),
            values: layout.columns().iter().filter_map(|c| get(c)).collect(),
            pipeline,
            shard,
        };
        if address.values != layout.address_at(start, Zone::Utc).values {
            return Err(bad());
        }
        debug_assert!(
            address.path_safe(),
            "paths: an address read back from the log is safe as a path"
        );
        Ok(address)
    }

    /// The same window's address in `pipeline`'s share of a table of several pipelines
    /// (`pipeline` must be [`valid_pipeline_name`]).
    pub fn in_pipeline(mut self, pipeline: &str) -> Address {
        debug_assert!(
            valid_pipeline_name(pipeline),
            "paths: a pipeline name is safe in an address"
        );
        self.pipeline = Some(pipeline.to_string());
        self
    }

    /// The same window's address in `shard`'s share of a sharded table.
    pub fn in_shard(mut self, shard: Shard) -> Address {
        self.shard = Some(shard.value());
        self
    }

    /// Every value is made of letters, digits, `-`, `_` and `.`, and none is `.` or `..`.
    fn path_safe(&self) -> bool {
        let safe = |v: &str| {
            !v.is_empty()
                && v != "."
                && v != ".."
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        self.pairs().all(|(_, v)| safe(v))
    }

    /// [`Address::pairs`], owned (as partition values are).
    fn owned_pairs(&self) -> Vec<(String, String)> {
        self.pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.columns
            .iter()
            .copied()
            .zip(self.values.iter().map(String::as_str))
            .chain(self.pipeline.as_deref().map(|p| (PIPELINE_COLUMN, p)))
            .chain(self.shard.as_deref().map(|s| (SHARD_COLUMN, s)))
    }

    /// `dt=2026-10-03/hour=14`. Values are digits, `-`, `T` and `Z` only (and a pipeline
    /// name's letters, digits, `_`, `-` and `.`), so no escaping is needed and the path equals
    /// Delta's own hive-style encoding.
    pub fn hive_path(&self) -> String {
        self.pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// `20261003T14` (`20261003T14T3` in shard 3): a compact tag for file names.
    pub fn tag(&self) -> String {
        self.values
            .iter()
            .chain(self.shard.as_ref())
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
