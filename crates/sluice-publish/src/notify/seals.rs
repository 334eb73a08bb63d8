//! When a window of a sharded table is complete: every shard that holds files in the table
//! has sealed past the window's end (its `txn` `<pipeline>/.shard/<n>/sealed_through_us`),
//! the rule `sluice status` and `sluice windows` apply. In a sharded table each writer
//! publishes its own part of a window (an address per shard), so a window's first
//! publication is not its completion: the feed notifies it `complete` at the version where
//! the slowest shard's seal passes its end, with the rows of every shard. A later
//! publication of a complete window (any shard's late rows, a backfill) is `rewritten`.
//!
//! Completeness is the rule applied to each version alone, not a latch: a shard whose first
//! files appear after a window was complete (a partition that was behind) makes it
//! incomplete until that shard seals past it, and it is notified `complete` again then. So
//! the notifications are a function of the log, whatever version a feed started at.

use std::collections::{BTreeMap, BTreeSet};

use sluice_window::{Shard, SHARD_COLUMN};

/// A window key: the sorted partition values of its address without the shard column.
pub(crate) type WindowKey = Vec<(String, String)>;

/// A window of the pipeline with files in the table: its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// `dt=2026-10-03/hour=14` (no shard).
    pub label: String,
    pub start: String,
    pub end: String,
    /// The window's end in microseconds, if known.
    pub end_us: Option<i64>,
}

/// The seals of one pipeline's shards and the windows waiting for them.
#[derive(Debug, Default)]
pub(crate) struct Seals {
    /// Sealed-through event time (µs) per shard, from this pipeline's `txn`s.
    sealed: BTreeMap<Shard, i64>,
    /// Every window of the pipeline that has files in the table.
    pub windows: BTreeMap<WindowKey, Pending>,
    /// The windows complete at the version read last.
    pub complete: BTreeSet<WindowKey>,
}

impl Seals {
    /// Notes a `txn` action of a commit: a shard's seal of `pipeline` moves.
    pub fn txn(&mut self, pipeline: &str, app_id: &str, version: i64) {
        let Some(shard) = app_id
            .strip_prefix(pipeline)
            .and_then(|r| r.strip_prefix("/.shard/"))
            .and_then(|r| r.strip_suffix("/sealed_through_us"))
            .and_then(|n| n.parse().ok())
        else {
            return;
        };
        self.sealed.insert(Shard(shard), version);
    }

    pub fn seal(&mut self, shard: Shard, through_us: i64) {
        self.sealed.insert(shard, through_us);
    }

    /// The event time every shard holding files has sealed through: the least of their
    /// seals; `None` while one of them has none (or no shard holds files).
    pub fn threshold(&self, shards_with_files: impl Iterator<Item = Shard>) -> Option<i64> {
        let mut least: Option<i64> = None;
        for shard in shards_with_files {
            let sealed = *self.sealed.get(&shard)?;
            least = Some(least.map_or(sealed, |l| l.min(sealed)));
        }
        least
    }
}

/// `partition values` without the shard column, and the shard if there was one.
pub(crate) fn split_shard(values: &[(String, String)]) -> (WindowKey, Option<Shard>) {
    let shard = Shard::of(values);
    let mut key: WindowKey = values
        .iter()
        .filter(|(k, _)| k != SHARD_COLUMN)
        .cloned()
        .collect();
    key.sort();
    (key, shard)
}

/// `dt=2026-10-03/hour=14/shard=3` without its shard segment.
pub(crate) fn label_without_shard(hive_path: &str) -> String {
    hive_path
        .split('/')
        .filter(|segment| !segment.starts_with(&format!("{SHARD_COLUMN}=")))
        .collect::<Vec<_>>()
        .join("/")
}

/// Microseconds of an RFC 3339 time, as sluice writes window bounds.
pub(crate) fn micros_of(rfc3339: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| t.timestamp_micros())
}
