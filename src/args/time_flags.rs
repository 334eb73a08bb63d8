//! When an event happened and which window holds it: `--time-field`, `--time-format`,
//! `--time-zone`, `--time-column`, the skew guard, `--window`, `--window-zone`, `--address`
//! and `--lateness`.

use sluice_ingest::defaults;
use sluice_window::{
    parse_duration_ms, AddressLayout, SkewGuard, TimeFormat, TimeSpec, WindowSize, Zone,
};

use super::run_args::RunArgs;
use crate::exit::usage;

/// The time group, resolved.
#[derive(Debug)]
pub(crate) struct TimeGroup {
    pub time_field: String,
    pub time: TimeSpec,
    /// `--time-column`.
    pub time_column: Option<String>,
    pub skew: SkewGuard,
    pub window: WindowSize,
    pub layout: AddressLayout,
    pub lateness_ms: i64,
}

impl RunArgs {
    /// The time group's flags.
    pub(crate) fn time_group(&self) -> anyhow::Result<TimeGroup> {
        let (time_field, time, skew) = self.time_settings()?;
        let window = self.window_size()?;
        let layout = match self.address.as_deref() {
            None => AddressLayout::default_for(window),
            Some(name) => {
                AddressLayout::parse_name(name).map_err(|e| usage(format!("--address: {e}")))?
            }
        };
        layout
            .validate(window)
            .map_err(|e| usage(format!("--address: {e}")))?;
        let time_column = self.time_column.clone().filter(|c| !c.is_empty());
        if let Some(c) = time_column
            .as_deref()
            .filter(|c| !sluice_source::schema::acceptable(c))
        {
            return Err(usage(format!(
                "--time-column {c:?}: not a column name Delta readers take (empty, or one of ` ,;{{}}()=`, a tab, a newline or a control character)"
            )));
        }
        let lateness_ms = parse_duration_ms(self.lateness.as_deref().unwrap_or(defaults::LATENESS))
            .map_err(|e| usage(format!("--lateness: {e}")))?;
        Ok(TimeGroup {
            time_field,
            time,
            time_column,
            skew,
            window,
            layout,
            lateness_ms,
        })
    }

    /// `--window` in `--window-zone`. A window read back from a table's contract carries its
    /// zone (`1d in America/New_York`); another zone given with it is refused.
    fn window_size(&self) -> anyhow::Result<WindowSize> {
        let window = WindowSize::parse(self.window.as_deref().unwrap_or(defaults::WINDOW))
            .map_err(|e| usage(format!("--window: {e}")))?;
        let Some(text) = &self.window_zone else {
            return Ok(window);
        };
        let zone = Zone::parse(text).map_err(|e| usage(format!("--window-zone: {e}")))?;
        if window.zone() != Zone::Utc && window.zone() != zone {
            return Err(usage(format!(
                "--window-zone {text}: the window is {}",
                window.label()
            )));
        }
        window
            .in_zone(zone)
            .map_err(|e| usage(format!("--window-zone: {e}")))
    }

    /// `--time-field`, `--time-format`, `--time-zone`, `--max-time-ahead` and
    /// `--time-jump-events`: the time field, how its values are read, and the skew guard.
    fn time_settings(&self) -> anyhow::Result<(String, TimeSpec, SkewGuard)> {
        let time_field = self
            .time_field
            .clone()
            .unwrap_or_else(|| defaults::TIME_FIELD.into());
        if time_field.is_empty() {
            return Err(usage("--time-field: empty field name"));
        }
        let time_format =
            TimeFormat::parse_name(self.time_format.as_deref().unwrap_or(defaults::TIME_FORMAT))
                .map_err(|e| usage(format!("--time-format: {e}")))?;
        let zone = Zone::parse(self.time_zone.as_deref().unwrap_or(defaults::TIME_ZONE))
            .map_err(|e| usage(format!("--time-zone: {e}")))?;
        let time = TimeSpec::new(time_format, zone);
        let skew = match self.max_time_ahead.as_deref() {
            Some("off") => SkewGuard::OFF,
            ahead => {
                let ahead_ms = parse_duration_ms(ahead.unwrap_or(defaults::MAX_TIME_AHEAD))
                    .map_err(|e| usage(format!("--max-time-ahead: {e} (or off)")))?;
                let jump_events = self.time_jump_events.unwrap_or(defaults::TIME_JUMP_EVENTS);
                if !(1..=sluice_window::JUMP_EVENTS_MAX).contains(&jump_events) {
                    return Err(usage(format!(
                        "--time-jump-events: from 1 to {}",
                        sluice_window::JUMP_EVENTS_MAX
                    )));
                }
                SkewGuard {
                    ahead_us: ahead_ms.saturating_mul(1000),
                    jump_events,
                }
            }
        };
        Ok((time_field, time, skew))
    }
}
