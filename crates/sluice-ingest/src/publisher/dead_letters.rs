//! The publisher's dead letters: kept until the next commit, committed to the dead-letter
//! table (with the offsets below which every dead letter is there) before any data commit
//! that moves the resume position past them, and expired past the retention.

use sluice_publish::{DeadLetter, DeadLetterOwner};
use sluice_stage::Phase;

use super::Publisher;
use crate::config::IngestError;

impl Publisher {
    /// Per source partition, the offset below which every dead letter is in the
    /// dead-letter table.
    pub async fn dead_letter_offsets(
        &self,
        partitions: &[String],
    ) -> Result<std::collections::HashMap<String, i64>, IngestError> {
        match &self.dlq {
            Some(dlq) => Ok(dlq
                .committed_offsets(&self.dead_letter_owner()?, partitions)
                .await?),
            None => Ok(Default::default()),
        }
    }

    /// Whose dead letters this run writes: its pipeline's, for this table.
    fn dead_letter_owner(&self) -> Result<DeadLetterOwner, IngestError> {
        Ok(DeadLetterOwner::of(&self.table, &self.policy.pipeline)?)
    }

    pub fn dead_letter(&mut self, letter: DeadLetter) {
        self.dead_pending_bytes += std::mem::size_of::<DeadLetter>()
            + letter.source.len()
            + letter.reason.len()
            + letter.detail.len()
            + letter.raw.len()
            + letter.window.as_ref().map_or(0, String::len);
        self.dead_pending.push(letter);
    }

    /// The memory the dead letters not yet committed hold.
    pub fn dead_letter_bytes(&self) -> usize {
        self.dead_pending_bytes
    }

    /// Commits the pending dead letters with the dead-letter offsets `through`; returns
    /// whether there were any. Runs before every data commit, so no data commit ever moves
    /// the resume position past a dead letter that is not in the dead-letter table.
    pub async fn commit_dead_letters(
        &mut self,
        through: &[(String, i64)],
        now_ms: i64,
    ) -> Result<bool, IngestError> {
        if self.dead_pending.is_empty() {
            return Ok(false);
        }
        let owner = self.dead_letter_owner()?;
        let (Some(dlq), Some(stager)) = (self.dlq.as_mut(), self.dlq_stager.as_mut()) else {
            return Err(IngestError::NoDeadLetterTable {
                count: self.dead_pending.len(),
            });
        };
        let busy = self.stager.busy().clone();
        let append = dlq.append(&owner, &self.dead_pending, through, now_ms, stager);
        busy.time_async(Phase::Commit, append).await?;
        self.dead_pending.clear();
        self.dead_pending_bytes = 0;
        Ok(true)
    }

    /// Removes the pipeline's dead letters detected more than `retain_ms` before `now_ms`
    /// (whole files of the dead-letter table; see [`DeadLetterTable::expire`]); returns the
    /// rows removed. Reads the table's statistics only once a dead letter can be due: the
    /// previous pass says when.
    pub async fn expire_dead_letters(
        &mut self,
        retain_ms: i64,
        now_ms: i64,
    ) -> Result<u64, IngestError> {
        let Some(dlq) = self.dlq.as_mut() else {
            return Ok(0);
        };
        if self.dead_letters_due_ms.is_some_and(|due| now_ms < due) {
            return Ok(0);
        }
        let rule = sluice_publish::DeadLetterExpiryRule {
            detected_before_ms: now_ms.saturating_sub(retain_ms),
            pipeline: Some(self.policy.pipeline.clone()),
            meant_for: sluice_publish::MeantFor::Any,
            dry_run: false,
        };
        let report = dlq.expire(&rule, now_ms).await?;
        // Dead letters committed from now on are detected at `now_ms` or later.
        let later = now_ms.saturating_add(retain_ms);
        self.dead_letters_due_ms = Some(
            report
                .next_due_ms
                .map_or(later, |d| d.saturating_add(retain_ms).min(later)),
        );
        if report.files_kept_whole > 0 {
            tracing::debug!(
                files = report.files_kept_whole,
                "dead-letter files with rows past the retention kept whole (they straddle the cutoff or mix pipelines)"
            );
        }
        Ok(u64::try_from(report.rows).unwrap_or_default())
    }

    /// The pending dead letters, counted by reason.
    pub fn dead_letter_reasons(&self) -> std::collections::BTreeMap<String, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for d in &self.dead_pending {
            *counts.entry(d.reason.clone()).or_default() += 1;
        }
        counts
    }

    pub fn has_dead_letters(&self) -> bool {
        !self.dead_pending.is_empty()
    }
}
