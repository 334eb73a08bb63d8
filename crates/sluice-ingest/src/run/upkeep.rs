//! The table upkeep a run does after its commits, when asked to: compaction of the windows a
//! commit left with more files than they need, and removal of windows past the retention.

use sluice_source::ReplayLog;
use sluice_window::{EventTime, Window};

use super::Ingester;
use crate::config::IngestError;

impl<L: ReplayLog> Ingester<'_, L> {
    /// After a commit of `windows`: compacts those that now hold more files than
    /// [`crate::IngestConfig::compact`] allows, then removes windows past
    /// [`crate::IngestConfig::retain_ms`].
    pub(super) async fn upkeep(&mut self, windows: &[Window]) -> Result<(), IngestError> {
        if let Some(rule) = self.config.compact.clone() {
            for window in windows {
                if let Some(c) = self
                    .publisher
                    .compact(*window, &rule, self.clock.now_ms())
                    .await?
                {
                    self.instruments.windows_compacted.increment(1);
                    self.summary.windows_compacted += 1;
                    self.summary.last_version = Some(c.version);
                }
            }
        }
        self.expire_past_retention().await
    }

    /// Removes this writer's windows that ended more than the retention before the
    /// watermark of the events, but those it still holds rows of; and the pipeline's dead
    /// letters detected more than the retention before now (a dead letter has no window of
    /// its own: the instant it was detected is the one every dead letter has).
    async fn expire_past_retention(&mut self) -> Result<(), IngestError> {
        let Some(retain_ms) = self.config.retain_ms else {
            return Ok(());
        };
        let rows = self
            .publisher
            .expire_dead_letters(retain_ms, self.clock.now_ms())
            .await?;
        self.instruments.dead_letters_expired.increment(rows);
        self.summary.dead_letters_expired += rows;
        let Some(watermark) = self.state.watermark_of_events() else {
            return Ok(());
        };
        let ended_before = EventTime::from_micros(
            watermark
                .as_micros()
                .saturating_sub(retain_ms.saturating_mul(1000)),
        );
        let state = &self.state;
        let gone = self
            .publisher
            .expire(ended_before, |w| state.holds(w), self.clock.now_ms())
            .await?;
        for e in &gone {
            tracing::info!(window = %e.address, rows = e.rows, version = e.version, "expired");
        }
        if let Some(version) = gone.iter().filter_map(|e| e.version).max() {
            self.summary.last_version = Some(version);
        }
        self.instruments
            .windows_expired
            .increment(gone.len() as u64);
        self.summary.windows_expired += gone.len() as u64;
        Ok(())
    }
}
