//! The pure window core of sluice: no I/O, no clock, no randomness.
//!
//! Everything here is a function of the input and the configuration (invariant E5 of
//! `DESIGN.md`): which window an event belongs to, which table address a window maps to,
//! when a window seals, how far the source may safely resume, and which of two deliveries
//! of one row key wins.
//!
//! ```
//! use sluice_window::{AddressLayout, EventTime, TimeFormat, Window, WindowSize};
//!
//! let size = WindowSize::parse("1h").unwrap();
//! let t = TimeFormat::Rfc3339.parse_str("2026-10-03T14:25:00Z").unwrap();
//! let window = Window::containing(size, t);
//! let address = AddressLayout::default_for(size).address(window);
//! assert_eq!(address.hive_path(), "dt=2026-10-03/hour=14");
//! assert_eq!(window.end(), EventTime::from_micros(t.as_micros() + 35 * 60 * 1_000_000));
//! ```

mod address;
mod book;
mod duration;
mod number;
mod rfc3339;
mod time;
mod watermark;
mod window;
mod zoned;

pub use address::{
    valid_pipeline_name, Address, AddressError, AddressLayout, Shard, PIPELINE_COLUMN, SHARD_COLUMN,
};
pub use book::{Route, WindowBook};
pub use duration::{parse_duration_ms, DurationError};
pub use number::{parse_f32_exact, parse_f64_exact, parse_integer_exact, Decimal};
pub use time::{parse_instant, EventTime, TimeError, TimeFormat, TimeSpec, Zone};
pub use watermark::{Observed, SkewGuard, Watermark, WatermarkState, JUMP_EVENTS_MAX};
pub use window::{Window, WindowFinder, WindowSize, WindowSizeError};

/// The deterministic winner among two deliveries of one row key: the later order wins (the
/// event time, or the record's sequence fields where the pipeline declares them), and on a
/// tie the higher source position wins (DESIGN.md, publish modes).
///
/// Returns true when `candidate` replaces `incumbent`.
pub fn key_winner<O: Ord, P: Ord>(candidate: (O, &P), incumbent: (O, &P)) -> bool {
    candidate > incumbent
}

#[cfg(test)]
mod tests;
