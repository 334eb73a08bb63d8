//! Sources of sluice: where events come from and how a position names each one.
//!
//! - [`ndjson`]: a file source: one file or a directory of them ([`file`](mod@file)s in a [`store`]:
//!   local, or an object-store prefix), read in the order they arrived by a [`reader`]: NDJSON,
//!   [`csv`] records as rows of text fields ([`text_rows`]), or [`parquet`] row groups as
//!   Arrow; plain or [`compression`] gzip/zstd. An event's position
//!   is `(file, byte offset of its record)`, so a restart seeks instead of re-reading.
//! - [`chunk`]: what every source hands over: records at their positions; [`reject`]: why
//!   a record is a dead letter.
//! - [`log`]: the seam a run reads through, [`ReplayLog`]: ordered positions per source
//!   partition, where to resume from the table's offsets, and which offsets a publication
//!   moves. [`NdjsonSource`] and [`LogPartition`] (a Kafka partition) implement it.
//! - [`decode`]: NDJSON lines to Arrow record batches with arrow-json, per chunk, falling back
//!   to per-line decoding only for chunks that hold a bad line. Bad lines become [`Reject`]s
//!   with their position and reason; good lines are never lost with them. Records that
//!   arrive as Arrow (Parquet, Avro) or as text fields (CSV) go into the record schema's
//!   columns directly where that decides them as their JSON objects would, and are read as
//!   those JSON objects where it does not: one set of rules for every format.
//! - [`schema`]: the record schema, from a small JSON/TOML schema file or inferred; nested
//!   types and dotted field paths.
//! - [`kafka`]: a Kafka topic read by a consumer group whose assignments start at the
//!   table's positions; each partition is a source of its own (one writer shard).
//! - [`generate`]: a deterministic event stream (seeded) for the demo, tests and benchmarks.

mod arrival;
pub mod chunk;
pub mod compression;
pub mod csv;
pub mod decode;
pub mod envelope;
pub mod file;
pub mod generate;
mod json;
pub mod kafka;
pub mod log;
pub mod message_columns;
pub mod ndjson;
pub mod object;
pub mod parquet;
pub mod reader;
pub mod registry;
pub mod reject;
pub mod rows;
pub mod schema;
pub mod store;
pub mod text_rows;

pub use chunk::{ArrowRows, Chunk, Overlong, Position};
pub use compression::Compression;
pub use csv::CsvOptions;
pub use decode::{
    Deal, DecodeError, DecodeOptions, Decoded, DecodedChunk, LineDecoder, ParallelDecoder, Reject,
    RejectReason, SchemaEvolution, COLUMNS_MAX_DEFAULT, RAW_BYTES_MAX,
};
pub use file::{SourceError, SourceFile};
pub use log::{LogPartition, ReplayLog};
pub use message_columns::{BytesAs, MessageColumns, MessageMeta, MessagePart};
pub use ndjson::NdjsonSource;
pub use object::{source_store, Listing, ObjectFiles};
pub use reader::{FileFormat, FileReader};
pub use schema::{FieldPath, PathError, RecordSchema, SchemaError};
pub use store::{FileStore, LocalFiles};
pub use text_rows::TextRows;
