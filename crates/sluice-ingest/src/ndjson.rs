//! Runs over an NDJSON source: read to the end (a bounded run), or follow the files as they
//! grow. Reading and decoding run on a thread of their own, so they overlap with staging and
//! commits; the runner takes the decoded chunks in order.

use sluice_publish::WindowTable;
use sluice_source::{Chunk, Deal, Decoded, NdjsonSource, ParallelDecoder, SourceError};
use sluice_stage::Phase;
use tokio::sync::{mpsc, watch};

use crate::config::{IngestError, RunSummary};
use crate::follow::{pause, Follow};
use crate::run::{Ingester, StepRestarts};

impl Ingester<'_, NdjsonSource> {
    /// Reads the source to its end, publishing every window it seals.
    ///
    /// A resumable failure ([`IngestError::is_resumable`]) makes the run re-read the tables and
    /// resume from them, exactly as a restarted process would, by the run's restart rule
    /// ([`crate::IngestConfig::restart`]).
    pub async fn run(self) -> Result<(RunSummary, WindowTable), IngestError> {
        self.drive(None).await
    }

    /// Follows the source (opened with [`NdjsonSource::open_following`]) until
    /// [`Follow::stop`] says so or it stayed idle for [`Follow::until_idle_ms`]; see
    /// [`Follow`]. Resumable failures are handled as in [`Ingester::run`].
    pub async fn follow(self, follow: Follow) -> Result<(RunSummary, WindowTable), IngestError> {
        self.drive(Some(follow)).await
    }

    async fn drive(
        mut self,
        mut follow: Option<Follow>,
    ) -> Result<(RunSummary, WindowTable), IngestError> {
        let mut restarts = StepRestarts::new(self.config());
        loop {
            let commits_before = self.commits();
            let outcome = match follow.as_mut() {
                None => self.read_to_end().await,
                Some(f) => self.follow_until_stopped(f).await,
            };
            let outcome = match outcome {
                Ok(()) => self.settle_derived().await,
                failed => failed,
            };
            let ended = outcome.is_ok();
            restarts
                .after_step(&mut self, outcome, commits_before)
                .await?;
            if ended {
                return Ok(self.finish());
            }
        }
    }

    async fn read_to_end(&mut self) -> Result<(), IngestError> {
        self.read_pass(None).await?;
        self.drain().await?;
        self.report_file_lag();
        Ok(())
    }

    /// Reports the bytes of the source files that the table's resume positions have not
    /// reached (what a restart would read again, or has not read yet; a compressed file's
    /// whole size until it is read to its end).
    fn report_file_lag(&self) {
        let lag: u64 = self
            .log()
            .files()
            .iter()
            .map(|f| f.bytes_after(self.resume_offset(&f.name).unwrap_or(0)))
            .sum();
        self.report_lag(crate::LagUnit::Bytes, lag);
    }

    /// Reads what the source holds now, from the cursors, routing and publishing as it goes;
    /// returns the bytes read. Stops early, between chunks, once `stop` says so.
    async fn read_pass(
        &mut self,
        stop: Option<&watch::Receiver<bool>>,
    ) -> Result<u64, IngestError> {
        type Item = Result<(Decoded, Chunk), IngestError>;
        let config = self.config();
        let (tx, mut rx) = mpsc::channel::<Item>(config.chunks_in_flight_max.max(1));
        let mut reader = self.log().reader(self.cursors(), config.chunk_bytes)?;
        let decoder = self.decoder().clone();
        let decode_threads = config.decode_threads;
        let busy = self.busy().clone();
        // A thread reads the chunks (decompressing, converting CSV records, waiting on an
        // object store) one deal ahead of the decoding, so reading overlaps with decoding.
        let (chunks_tx, chunks) =
            std::sync::mpsc::sync_channel::<Result<Chunk, SourceError>>(decode_threads.max(1));
        let read_thread = std::thread::Builder::new()
            .name("sluice-read".into())
            .spawn(move || loop {
                let next = reader.next_chunk().transpose();
                let last = !matches!(next, Some(Ok(_)));
                // The decoding thread went away (it failed or was stopped): stop reading.
                if next.is_none_or(|n| chunks_tx.send(n).is_err()) || last {
                    return;
                }
            })
            .map_err(|_| IngestError::ReaderGone)?;
        // The decoding thread takes a deal of chunks (one per decode thread), decodes them
        // together, and sends them on in order: a deal's decodes are those of one decoder
        // (`ParallelDecoder`), so the rows and the schema do not depend on the thread count.
        let thread = std::thread::Builder::new()
            .name("sluice-reader".into())
            .spawn(move || {
                let mut decoder = ParallelDecoder::new(decoder, decode_threads);
                let mut decode_all = || loop {
                    let mut deal = Vec::with_capacity(decoder.threads());
                    let mut read = Ok(true);
                    while deal.len() < decoder.threads() {
                        match chunks.recv() {
                            Ok(Ok(chunk)) => deal.push(chunk),
                            Ok(Err(e)) => {
                                read = Err(e);
                                break;
                            }
                            Err(_) => {
                                read = Ok(false);
                                break;
                            }
                        }
                    }
                    let Deal {
                        decoded,
                        busy: took,
                    } = decoder.decode(deal);
                    busy.add(Phase::Decode, took);
                    for (result, chunk) in decoded {
                        let item = result.map(|d| (d, chunk)).map_err(IngestError::from);
                        let stop = item.is_err();
                        if tx.blocking_send(item).is_err() || stop {
                            return;
                        }
                    }
                    match read {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e.into()));
                            return;
                        }
                    }
                };
                decode_all();
                // Unblocks the reading thread (its next send fails), then waits for it.
                drop(chunks);
                let _ = read_thread.join();
            })
            .map_err(|_| IngestError::ReaderGone)?;
        let mut bytes = 0u64;
        while let Some(item) = rx.recv().await {
            let (decoded, chunk) = item?;
            bytes += chunk.bytes_read();
            // Counted as read, so the progress a chunk's records report includes its bytes.
            self.count_bytes(chunk.bytes_read());
            let commits = self.commits();
            self.take(decoded, &chunk).await?;
            // The lag moves only with the table's resume positions (and the files' lengths,
            // at a refresh): a sum over every file after each chunk would cost a run over
            // many small files a pass over all of them per chunk.
            if self.commits() != commits {
                self.report_file_lag();
            }
            if stop.is_some_and(|s| *s.borrow()) {
                break;
            }
        }
        // Dropping the receiver ends the reader thread at its next chunk; it is waited for
        // off the runtime's threads (it may be in the middle of a deal's decode).
        drop(rx);
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|_| IngestError::ReaderGone)?
            .map_err(|_| IngestError::ReaderGone)?;
        self.report_file_lag();
        Ok(bytes)
    }

    async fn follow_until_stopped(&mut self, follow: &mut Follow) -> Result<(), IngestError> {
        let mut last_input_ms = self.clock().now_ms();
        loop {
            let bytes = self.read_pass(Some(&follow.stop)).await?;
            let now_ms = self.clock().now_ms();
            if bytes > 0 {
                last_input_ms = now_ms;
            }
            // Late batches whose interval passed while the source was quiet.
            self.publish_due().await?;
            self.commit_dead_letters().await?;
            if *follow.stop.borrow() {
                return Ok(());
            }
            let idle_ms = now_ms.saturating_sub(last_input_ms);
            if follow.idle_timeout_ms.is_some_and(|t| idle_ms >= t) {
                self.seal_idle().await?;
            }
            self.report_file_lag();
            if follow.until_idle_ms.is_some_and(|t| idle_ms >= t) {
                // Idle for --until-idle: the input ends here, as a bounded input ends (and a
                // Kafka run's at idle): every window held is published.
                return self.drain().await;
            }
            pause(follow).await;
            if *follow.stop.borrow() {
                return Ok(());
            }
            let read = self.cursors().clone();
            self.log_mut().refresh_after(&read)?;
        }
    }
}
