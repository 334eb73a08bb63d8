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

use tokio::sync::watch;

/// How a followed run polls its source, when it seals idle windows and when it ends.
#[derive(Debug, Clone)]
pub struct Follow {
    /// Pause between two reads of the source when the last one found nothing new.
    pub poll_ms: u64,
    /// Seal every open window after this long without new input (processing time);
    /// `None`: windows seal by event time only.
    pub idle_timeout_ms: Option<i64>,
    /// End the run after this long without new input, publishing every window it holds (as
    /// at the end of a bounded input); `None`: run until `stop`.
    pub until_idle_ms: Option<i64>,
    /// `true` ends the run gracefully: at the next chunk boundary, after committing the pending
    /// dead letters. Windows still open stay unpublished; the next run re-reads them from the
    /// table's resume position (nothing is lost, nothing doubles).
    pub stop: watch::Receiver<bool>,
}

/// Waits one poll interval, or less if `stop` changes.
pub(crate) async fn pause(follow: &mut Follow) {
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
