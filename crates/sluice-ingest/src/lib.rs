//! The sluice runner: source → windows → stage → publish.
//!
//! ```text
//!   sluice-source                         sluice-ingest                              sluice-publish
//!  ┌──────────────────┐   decoded     ┌──────────────────────────────────────────┐
//!  │ ReplayLog        │   chunks      │ Ingester<L: ReplayLog>   (the driver)    │
//!  │  NdjsonSource    │──────────────▶│  │ route(times, positions)               │
//!  │  LogPartition    │  (reader      │  ▼                                       │
//!  │  (Kafka)         │   thread)     │ WindowState   pure: watermark, window    │
//!  │ positions, resume│               │  book, buffers (byte budget), late and   │
//!  │ at, what a txn   │◀── resume ────│  far-ahead decisions → windows due       │
//!  │ offset covers    │    offsets    │  │ due window + its rows                 │
//!  └──────────────────┘               │  ▼                                       │
//!                                     │ Ledger        offsets per partition,     │
//!                                     │  watermark/skew state → the txns of a    │
//!                                     │  commit, told which ones landed          │
//!                                     │  │ CommitMeta (txns, ranges, coverage)   │
//!                                     │  ▼                                       │     ┌─────────────┐
//!                                     │ Publisher     stage parts and files,     │────▶│ WindowTable │
//!                                     │  dedupe per key bucket group, dead       │     │ DeadLetter- │
//!                                     │  letters first, the pending publication  │     │ Table       │
//!                                     │  │ Committed                             │     └─────────────┘
//!                                     │  ▼                                       │
//!                                     │ Deriver       derived windows recomputed │
//!                                     │ Restarts      conflict or store failure: │
//!                                     │  pause, re-read the table, resume; the   │
//!                                     │  one rule of every mode (restart.rs)     │
//!                                     └──────────────────────────────────────────┘
//!   modes: Ingester::run / ::follow (NDJSON)    KafkaRun: one Ingester<LogPartition> per
//!          NdjsonBackfill, KafkaBackfill:       assigned partition (a shard), same Restarts
//!            WindowState (Rules::batch)        Deriver::keep_up_restarting (keep_up.rs): the
//!            + Publisher                       derived tables' one step, for a run's ticks,
//!                                              derive --follow / a range, after a backfill
//! ```
//!
//! Each type owns one job and keeps its fields private: `WindowState` (state.rs) decides
//! (no I/O; property-tested: the same events in any chunking route the same way, E5), the
//! `Ledger` (ledger.rs) counts positions, the `Publisher` (publisher.rs) does the I/O, and
//! the [`Ingester`] moves what one returns to the next (and keeps the run's counts). Backfill
//! routes by the same `WindowState` (under batch rules: nothing is late) into the same
//! buffers and publisher, so a day-long window is bounded by `--flush-bytes-max` as a
//! stream's is, and writes the stream's files byte for byte (the resilience suite's
//! `same_files`). Every mode restarts by the one rule of restart.rs
//! (`resilience::modes` tests each: an outage resumed, the limit's message).
//!
//! Between decoding and routing, the pipeline's [`expectations`] run on each decoded batch:
//! a row that breaks a `drop` rule becomes a dead letter there, like a row that did not decode,
//! and one that breaks a `fail` rule ends the run before its window is published.
//!
//! Reading and decoding run on their own thread, so they overlap with staging and commits.
//! The resume position written with each commit is the lowest position any unpublished
//! window holds, so a crash at any instant loses nothing and a restart from the table's
//! positions reproduces what one clean run would have published (E1). The watermark's input
//! (the largest event time before the resume position) is stored with the offsets, so late
//! events are recognised after a restart exactly as in a clean run.

mod backfill;
mod buffer;
pub mod condition;
mod config;
mod decoding;
mod dedupe;
pub mod defaults;
mod deletes;
mod derive;
pub mod duplicates;
pub mod expectations;
mod follow;
mod history;
mod instruments;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "kafka")]
mod kafka_backfill;
mod keep_up;
mod keys;
mod ledger;
mod ndjson;
mod open;
mod publisher;
pub mod replay;
mod restart;
mod run;
mod state;

pub use backfill::{backfill, BackfillProgress, BackfillSummary, NdjsonBackfill};
pub use config::{
    Clock, DeleteRule, FieldCounts, FixedClock, IngestConfig, IngestError, LatePolicy, PublishMode,
    RejectedRecord, Rejections, RunSummary, DEAD_LETTER_SHARE,
};
pub use dedupe::{dedupe, dedupe_by_position, drop_losers, incumbent_columns, KeySpec};
pub use deletes::{DeletePredicate, DeletePredicateError};
pub use derive::{DeriveError, DeriveSpec, DeriveSummary, Deriver};
pub use follow::Follow;
pub use instruments::{describe_metrics, LagUnit, RunLabels};
#[cfg(feature = "kafka")]
pub use kafka::{KafkaRun, KafkaRunError, KafkaSummary, JOIN_WAIT_MS, TICK_MS_DEFAULT};
#[cfg(feature = "kafka")]
pub use kafka_backfill::{KafkaBackfill, KafkaBackfillError, KafkaBackfillSummary};
pub use keep_up::RawShape;
pub use open::{
    field_names, open_raw, run_contract, shard_writer_options, terms, OpenRawError, RawTableSpec,
    SHARD_COMMIT_RETRIES,
};
pub use restart::{
    AfterFailure, RestartEnd, RestartPolicy, Restarts, RestartsExhausted, Resumable,
    RESTART_PAUSE_MS_FIRST, RESTART_PAUSE_MS_MAX,
};
pub use run::{Ingester, RunProgress};

#[cfg(test)]
mod tests;
