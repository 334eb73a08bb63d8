//! Following a source that keeps growing (`sluice run --follow`): read what is there, wait,
//! read what was appended, for as long as the caller wants.
//!
//! Everything in a followed run depends only on the input, exactly as in a bounded run,
//! except two choices the user makes explicitly, in processing time:
//! - the idle timeout seals every open window once no new input arrived for that long;
//!   events that come later for those windows are late (the late policy handles them), so
//!   under `--late drop` what lands in the table depends on arrival timing;
//! - the late batch interval ([`IngestConfig::late_batch_ms`](crate::IngestConfig)) only
//!   changes how many republications late rows cost, never what the table holds.

use std::time::Duration;

use sluice_window::EventTime;
use tokio::sync::watch;

use crate::config::IngestError;
use crate::run::Ingester;

/// How a followed run polls its source, when it seals idle windows and when it ends.
#[derive(Debug, Clone)]
pub struct Follow {
    /// Pause between two reads of the source when the last one found nothing new.
    pub poll_ms: u64,
    /// Seal every open window after this long without new input (processing time);
    /// `None`: windows seal by event time only.
    pub idle_timeout_ms: Option<i64>,
    /// End the run after this long without new input; `None`: run until `stop`.
    pub until_idle_ms: Option<i64>,
    /// `true` ends the run gracefully: at the next chunk boundary, after committing the pending
    /// dead letters. Windows still open stay unpublished; the next run re-reads them from the
    /// table's resume position (nothing is lost, nothing doubles).
    pub stop: watch::Receiver<bool>,
}

impl Ingester<'_> {
    pub(crate) async fn follow_until_stopped(
        &mut self,
        follow: &mut Follow,
    ) -> Result<(), IngestError> {
        let mut last_input_ms = self.clock.now_ms();
        loop {
            let bytes = self.read_pass(Some(&follow.stop)).await?;
            let now_ms = self.clock.now_ms();
            if bytes > 0 {
                last_input_ms = now_ms;
            }
            // Late batches whose interval passed while the source was quiet.
            self.publish_sealed().await?;
            self.commit_dead_letters().await?;
            if *follow.stop.borrow() {
                return Ok(());
            }
            let idle_ms = now_ms.saturating_sub(last_input_ms);
            if follow.idle_timeout_ms.is_some_and(|t| idle_ms >= t) {
                self.seal_idle().await?;
            }
            if follow.until_idle_ms.is_some_and(|t| idle_ms >= t) {
                return Ok(());
            }
            pause(follow).await;
            if *follow.stop.borrow() {
                return Ok(());
            }
            self.source.refresh()?;
        }
    }

    /// Seals every open window: the watermark moves to the end of the newest one, as if an
    /// event that much past it had arrived. The moved watermark is stored with the next
    /// commit like any other, so a restart treats later events for these windows as late,
    /// as this run does.
    async fn seal_idle(&mut self) -> Result<(), IngestError> {
        let Some(end) = self.book.open_windows().map(|(w, _)| w.end()).max() else {
            return Ok(());
        };
        let lateness_us = self.watermark.lateness_us();
        self.watermark.observe(EventTime::from_micros(
            end.as_micros().saturating_add(lateness_us),
        ));
        self.draining = true;
        let published = self.publish_sealed().await;
        self.draining = false;
        published?;
        self.summary.idle_seals += 1;
        tracing::info!(watermark = %self.watermark.current().to_rfc3339(), "idle: sealed every open window");
        Ok(())
    }
}

/// Waits one poll interval, or less if `stop` changes.
async fn pause(follow: &mut Follow) {
    let sleep = tokio::time::sleep(Duration::from_millis(follow.poll_ms));
    tokio::pin!(sleep);
    tokio::select! {
        _ = &mut sleep => {}
        changed = follow.stop.changed() => {
            if changed.is_err() {
                // Nobody can stop us any more: just wait out the interval.
                sleep.await;
            }
        }
    }
}
