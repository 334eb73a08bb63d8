//! Keeping derived tables up to their raw table, by the one restart rule: the one step every
//! mode uses (a run's ticks and end, a Kafka run, `sluice derive --follow`, the derived
//! tables after a backfill) and the loops built on it (following the raw table, deriving a
//! range).

use std::time::Duration;

use sluice_publish::WindowTable;
use sluice_window::EventTime;
use tokio::sync::watch;

use crate::config::Clock;
use crate::derive::{DeriveError, Deriver};
use crate::restart::{RestartEnd, RestartPolicy, Restarts};

/// How the raw table is read: one writer's windows, or a Kafka run's shards.
#[derive(Debug, Clone, Copy)]
pub enum RawShape<'a> {
    /// One writer: the windows changed since each derived table settled.
    Whole,
    /// A shard per partition, written by `pipeline`: only complete windows (see
    /// [`Deriver::follow_sharded`]).
    Sharded { pipeline: &'a str },
}

impl Deriver {
    /// One look at the raw table: re-reads it and brings every derived table up to it.
    pub async fn keep_up(
        &mut self,
        raw: &mut WindowTable,
        shape: RawShape<'_>,
        now_ms: i64,
    ) -> Result<(), DeriveError> {
        raw.reload()
            .await
            .map_err(|e| DeriveError::Raw(Box::new(e)))?;
        match shape {
            RawShape::Whole => self.catch_up(raw, now_ms).await,
            RawShape::Sharded { pipeline } => self.follow_sharded(raw, pipeline, now_ms).await,
        }
    }

    /// [`Deriver::keep_up`] until a look succeeds, by the one restart rule: a failure another
    /// writer causes (a derived window published by a process beside this one), or a store
    /// failure that outlasted its retries, is looked at again from the re-read tables after
    /// `policy`'s pause, up to its limit of failures in a row.
    pub async fn keep_up_restarting(
        &mut self,
        raw: &mut WindowTable,
        shape: RawShape<'_>,
        policy: RestartPolicy,
        clock: &dyn Clock,
    ) -> Result<(), RestartEnd<DeriveError>> {
        let mut restarts = Restarts::new(policy);
        loop {
            match self.keep_up(raw, shape, clock.now_ms()).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let pause =
                        restarts.resume_after(e, "re-reading the tables and deriving again")?;
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// `sluice derive --follow`: every `poll_ms`, [`Deriver::keep_up_restarting`], until
    /// `stop` turns `true`. Returns how many times it looked.
    pub async fn follow(
        &mut self,
        raw: &mut WindowTable,
        shape: RawShape<'_>,
        poll_ms: u64,
        policy: RestartPolicy,
        clock: &dyn Clock,
        mut stop: watch::Receiver<bool>,
    ) -> Result<u64, RestartEnd<DeriveError>> {
        let mut looks: u64 = 0;
        while !*stop.borrow() {
            self.keep_up_restarting(raw, shape, policy, clock).await?;
            looks += 1;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(poll_ms)) => {}
                changed = stop.changed() => {
                    if changed.is_err() {
                        // Nobody can stop it any more: end rather than follow forever.
                        break;
                    }
                }
            }
        }
        Ok(looks)
    }

    /// [`Deriver::derive_range`] by the one restart rule: after a resumable failure the raw
    /// table is re-read and the range derived again (windows already published are found
    /// unchanged). Reports `(done, total)` as it goes.
    pub async fn derive_range_restarting(
        &mut self,
        raw: &mut WindowTable,
        (from, to): (EventTime, EventTime),
        policy: RestartPolicy,
        clock: &dyn Clock,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), RestartEnd<DeriveError>> {
        let mut restarts = Restarts::new(policy);
        loop {
            let derived = async {
                if restarts.total() > 0 {
                    raw.reload()
                        .await
                        .map_err(|e| DeriveError::Raw(Box::new(e)))?;
                }
                self.derive_range(raw, from, to, clock.now_ms(), &mut *progress)
                    .await
            }
            .await;
            let Err(e) = derived else { return Ok(()) };
            let pause =
                restarts.resume_after(e, "re-reading the tables and deriving the range again")?;
            tokio::time::sleep(pause).await;
        }
    }
}
