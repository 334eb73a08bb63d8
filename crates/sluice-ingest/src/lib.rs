//! The sluice runner: source → windows → stage → publish.
//!
//! ```text
//!  reader thread                    ingest task
//!  ─────────────                    ───────────────────────────────────────────────
//!  NDJSON chunk ─ decode ─▶ channel ─▶ route rows ─▶ window buffers ─▶ (budget) stage part
//!   (positions, rejects)              │  replayed? skip      │
//!                                     │  late? reopen        ▼ watermark passed the end
//!                                     └──────────────▶ seal ─▶ stage ─▶ publish (1 commit)
//! ```
//!
//! Reading and decoding run on their own thread, so they overlap with staging and commits.
//! The resume position written with each commit is the lowest position any unpublished
//! window holds, so a crash at any instant loses nothing and a restart from the table's
//! positions reproduces what one clean run would have published (E1).

mod buffer;
mod dedupe;
mod rejects;
mod run;

pub use dedupe::{dedupe, KeySpec};
pub use rejects::{RejectFile, RejectRecord, RejectSink};
pub use run::{Clock, FixedClock, IngestConfig, IngestError, Ingester, RunSummary};

#[cfg(test)]
mod tests;
