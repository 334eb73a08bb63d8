//! Decoding off the runtime's threads: a chunk's decode is CPU work (for a large chunk, tens
//! of milliseconds) that must not hold up the timers, the consumer's events and the other
//! tasks of a run.

use std::time::Duration;

use sluice_source::{Chunk, DecodeError, Decoded, LineDecoder};

use crate::config::IngestError;

/// Decodes `chunk` with `decoder` on a blocking thread; the decoder comes back (its schema
/// may have grown: schema evolution), with the chunk and the time the decode took.
pub(crate) async fn decode_blocking(
    mut decoder: LineDecoder,
    chunk: Chunk,
) -> Result<(LineDecoder, Result<Decoded, DecodeError>, Chunk, Duration), IngestError> {
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let decoded = decoder.decode(&chunk);
        (decoder, decoded, chunk, started.elapsed())
    })
    .await
    .map_err(|_| IngestError::ReaderGone)
}
