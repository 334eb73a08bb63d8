//! The sluice runner: source → windows → stage → publish.
//!
//! ```text
//!  reader thread                    ingest task
//!  ─────────────                    ───────────────────────────────────────────────
//!  NDJSON chunk ─ decode ─▶ channel ─▶ route rows ─▶ window buffers ─▶ (budget) stage part
//!   (positions, rejects)              │  replayed? skip      │
//!                                     │  late? policy        ▼ watermark passed the end
//!                                     └──────────────▶ seal ─▶ stage ─▶ publish (1 commit)
//!   rejects, dropped late events ─▶ dead letters ─▶ committed before the next data commit
//! ```
//!
//! Reading and decoding run on their own thread, so they overlap with staging and commits.
//! The resume position written with each commit is the lowest position any unpublished
//! window holds, so a crash at any instant loses nothing and a restart from the table's
//! positions reproduces what one clean run would have published (E1). The watermark's input
//! (the largest event time before the resume position) is stored with the offsets, so late
//! events are recognised after a restart exactly as in a clean run.

mod backfill;
mod buffer;
mod config;
mod dedupe;
mod derive;
mod follow;
mod kafka;
mod ledger;
mod ndjson;
mod publisher;
mod run;
mod state;

pub use backfill::{backfill, BackfillProgress, BackfillSummary};
pub use config::{
    Clock, FixedClock, IngestConfig, IngestError, LatePolicy, PublishMode, RunSummary,
};
pub use dedupe::{dedupe, dedupe_by_position, drop_losers, incumbent_columns, KeySpec};
pub use derive::{DeriveError, DeriveSpec, DeriveSummary, Deriver};
pub use follow::Follow;
pub use kafka::{KafkaRun, KafkaRunError, KafkaSummary};
pub use run::Ingester;

#[cfg(test)]
mod tests;
