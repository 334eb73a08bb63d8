//! Sources of sluice: where events come from and how a position names each one.
//!
//! - [`ndjson`]: one NDJSON file or a directory of them, read in name order. An event's
//!   position is `(file, byte offset of its line)`, so a restart seeks instead of re-reading.
//! - [`log`]: the seam a run reads through, [`ReplayLog`]: ordered positions per source
//!   partition, where to resume from the table's offsets, and which offsets a publication
//!   moves. [`NdjsonSource`] and [`LogPartition`] (a Kafka partition) implement it.
//! - [`decode`]: NDJSON lines to Arrow record batches with arrow-json, per chunk, falling back
//!   to per-line decoding only for chunks that hold a bad line. Bad lines become [`Reject`]s
//!   with their position and reason; good lines are never lost with them.
//! - [`schema`]: the record schema, from a small JSON/TOML schema file or inferred; nested
//!   types and dotted field paths.
//! - [`kafka`]: a Kafka topic read by a consumer group whose assignments start at the
//!   table's positions; each partition is a source of its own (one writer shard).
//! - [`generate`]: a deterministic event stream (seeded) for the demo, tests and benchmarks.

pub mod decode;
pub mod generate;
mod json;
pub mod kafka;
pub mod log;
pub mod ndjson;
pub mod schema;

pub use decode::{
    Deal, DecodeError, DecodeOptions, Decoded, DecodedChunk, LineDecoder, ParallelDecoder, Reject,
    RejectReason, SchemaEvolution, COLUMNS_MAX_DEFAULT, RAW_BYTES_MAX,
};
pub use log::{LogPartition, ReplayLog};
pub use ndjson::{Chunk, NdjsonReader, NdjsonSource, Overlong, Position, SourceError, SourceFile};
pub use schema::{FieldPath, PathError, RecordSchema, SchemaError};
