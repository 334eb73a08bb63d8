//! Decoding on several threads with exactly the results of one decoder.
//!
//! A [`LineDecoder`]'s only state is the record schema, which a chunk may grow (a field
//! that appears later). Chunks dealt out together are each decoded by a copy of the decoder
//! as it stood before the first of them; the results are then taken in order. A chunk whose
//! copy saw the schema as a single decoder would have (no earlier chunk of the deal grew
//! it) is that decoder's result, and when it grew the schema the copy's grown schema is
//! adopted. A chunk after one that grew the schema was decoded under a stale schema: it is
//! decoded again, in order, by the grown decoder. Schemas grow rarely, so nearly every
//! chunk is decoded once; the results and the final schema are those of decoding the chunks
//! one after another, whatever the thread count (checked by the tests beside this file).

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{DecodeError, Decoded, LineDecoder};
use crate::chunk::Chunk;

/// A chunk's decode (or its error), with the chunk.
pub type DecodedChunk = (Result<Decoded, DecodeError>, Chunk);

type Job = (Chunk, LineDecoder);
type Done = (Result<Decoded, DecodeError>, Chunk, LineDecoder, Duration);

/// A [`LineDecoder`] that decodes a deal of chunks on up to `threads` threads (the caller's
/// and `threads - 1` helpers), in order, as the one decoder would.
pub struct ParallelDecoder {
    decoder: LineDecoder,
    helpers: Vec<Helper>,
}

struct Helper {
    jobs: Option<mpsc::SyncSender<Job>>,
    done: mpsc::Receiver<Done>,
    thread: Option<JoinHandle<()>>,
}

impl Helper {
    fn spawn(n: usize) -> std::io::Result<Helper> {
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(1);
        let (done_tx, done) = mpsc::sync_channel::<Done>(1);
        let thread = std::thread::Builder::new()
            .name(format!("sluice-decode-{n}"))
            .spawn(move || {
                for (chunk, mut decoder) in job_rx {
                    let started = Instant::now();
                    let result = decoder.decode(&chunk);
                    if done_tx
                        .send((result, chunk, decoder, started.elapsed()))
                        .is_err()
                    {
                        return;
                    }
                }
            })?;
        Ok(Helper {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Closing the job channel ends the thread after its current chunk.
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a deal of chunks gave: the decodes in chunk order, and the time the threads spent
/// decoding (summed over threads, re-decodes included).
pub struct Deal {
    pub decoded: Vec<DecodedChunk>,
    pub busy: Duration,
}

impl ParallelDecoder {
    /// Decodes on `threads` threads (at least one: the caller's). A helper thread that
    /// cannot be started leaves fewer threads, never an error: the results are the same.
    pub fn new(decoder: LineDecoder, threads: usize) -> Self {
        let helpers = (1..threads.max(1))
            .map_while(|n| Helper::spawn(n).ok())
            .collect();
        ParallelDecoder { decoder, helpers }
    }

    /// Chunks a deal takes: one per thread.
    pub fn threads(&self) -> usize {
        self.helpers.len() + 1
    }

    /// The decoder as the chunks decoded so far left it (its schema grown by them).
    pub fn decoder(&self) -> &LineDecoder {
        &self.decoder
    }

    /// Decodes `chunks` (consecutive, at most [`Self::threads`] of them) as
    /// [`LineDecoder::decode`] would one after another. A chunk's error ends the deal: the
    /// chunks after it are left out, as decoding one chunk at a time would have stopped
    /// there.
    pub fn decode(&mut self, chunks: Vec<Chunk>) -> Deal {
        assert!(
            chunks.len() <= self.threads(),
            "E5: a deal of {} chunks for {} threads",
            chunks.len(),
            self.threads()
        );
        let mut chunks = chunks.into_iter();
        let Some(first) = chunks.next() else {
            return Deal {
                decoded: Vec::new(),
                busy: Duration::ZERO,
            };
        };
        // Helpers get the later chunks, each with a copy of the decoder as it stands now.
        let mut dealt = 0;
        for (helper, chunk) in self.helpers.iter().zip(chunks) {
            let job = (chunk, self.decoder.clone());
            let sent = helper.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
            assert!(sent, "E8: a decode helper thread is gone (it panicked)");
            dealt += 1;
        }
        let mut busy = Duration::ZERO;
        let mut decoded = Vec::with_capacity(dealt + 1);
        // The first chunk: this thread, with the decoder itself (a single decoder's result).
        let started = Instant::now();
        let result = self.decoder.decode(&first);
        busy += started.elapsed();
        let mut stale = matches!(&result, Ok(d) if !d.added.is_empty());
        let mut failed = result.is_err();
        decoded.push((result, first));
        for helper in &self.helpers[..dealt] {
            let (result, chunk, copy, took) = helper
                .done
                .recv()
                .expect("a decode helper thread is gone (it panicked)");
            busy += took;
            if failed {
                // Decoded one after another, the run would have stopped before this chunk.
                continue;
            }
            let result = if stale {
                let started = Instant::now();
                let again = self.decoder.decode(&chunk);
                busy += started.elapsed();
                again
            } else {
                if matches!(&result, Ok(d) if !d.added.is_empty()) {
                    // The copy saw the schema this decoder has, and grew it: adopt it.
                    self.decoder = copy;
                    stale = true;
                }
                result
            };
            failed = result.is_err();
            decoded.push((result, chunk));
        }
        Deal { decoded, busy }
    }
}

#[cfg(test)]
#[path = "parallel_tests.rs"]
mod tests;
