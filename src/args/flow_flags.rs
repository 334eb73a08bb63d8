//! How late rows and idle inputs are handled, and how long a run lasts: `--late`,
//! `--max-rewrite-age`, `--late-batch`, `--retain`, `--follow` with `--poll-interval`,
//! `--idle-timeout` and `--until-idle`.

use sluice_ingest::{defaults, LatePolicy};

use super::run_args::RunArgs;
use super::values::{duration_option, duration_or_default};
use crate::exit::usage;

/// The flow group, resolved (`--follow` apart: it depends on the source).
#[derive(Debug)]
pub(crate) struct FlowGroup {
    pub late: LatePolicy,
    pub max_rewrite_age_ms: Option<i64>,
    pub late_batch_ms: i64,
    /// `--retain`, in milliseconds.
    pub retain_ms: Option<i64>,
    /// `--idle-timeout`: seal open windows after no input for this long.
    pub idle_timeout_ms: Option<i64>,
    /// `--until-idle`: end the run after no input for this long.
    pub until_idle_ms: Option<i64>,
}

/// Validated --follow options.
#[derive(Debug, Clone, Copy)]
pub struct FollowSettings {
    pub poll_ms: u64,
    pub idle_timeout_ms: Option<i64>,
    pub until_idle_ms: Option<i64>,
}
impl RunArgs {
    /// The flow group's flags.
    pub(crate) fn flow_group(&self) -> anyhow::Result<FlowGroup> {
        let late = LatePolicy::parse_name(self.late.as_deref().unwrap_or(defaults::LATE))
            .ok_or_else(|| usage("--late: use drop, rewrite or merge"))?;
        let retain_ms = duration_option("--retain", self.retain.as_deref())?;
        if retain_ms.is_some() && (!self.derive_tables.is_empty() || !self.derive.is_empty()) {
            // A derived window recomputed over an expired (empty) raw window would publish
            // what its query gives over no rows (one row of zero counts, say).
            return Err(usage(
                "--retain: not with --derive yet; expire the raw and derived tables with sluice expire",
            ));
        }
        Ok(FlowGroup {
            late,
            max_rewrite_age_ms: duration_option(
                "--max-rewrite-age",
                self.max_rewrite_age.as_deref(),
            )?,
            late_batch_ms: duration_or_default(
                "--late-batch",
                &self.late_batch,
                defaults::LATE_BATCH,
            )?,
            retain_ms,
            idle_timeout_ms: duration_option("--idle-timeout", self.idle_timeout.as_deref())?,
            until_idle_ms: duration_option("--until-idle", self.until_idle.as_deref())?,
        })
    }

    /// `--follow` and its options (`--poll-interval`, `--idle-timeout`, `--until-idle`),
    /// refused without it (a Kafka run is always followed: it takes `--until-idle`).
    pub(crate) fn follow_settings(
        &self,
        kafka: bool,
        idle_timeout_ms: Option<i64>,
        until_idle_ms: Option<i64>,
    ) -> anyhow::Result<Option<FollowSettings>> {
        let poll_ms = duration_option("--poll-interval", self.poll_interval.as_deref())?;
        if self.follow {
            let poll_ms = duration_or_default(
                "--poll-interval",
                &self.poll_interval,
                defaults::POLL_INTERVAL,
            )?;
            if poll_ms < 1 {
                return Err(usage("--poll-interval: must be at least 1ms"));
            }
            Ok(Some(FollowSettings {
                poll_ms: poll_ms as u64,
                idle_timeout_ms,
                until_idle_ms,
            }))
        } else {
            let given = [
                ("--poll-interval", poll_ms),
                ("--idle-timeout", idle_timeout_ms),
                ("--until-idle", until_idle_ms),
            ];
            // A Kafka run is always followed: it takes --idle-timeout and --until-idle.
            let given = if kafka { &given[..1] } else { &given[..] };
            if let Some((flag, _)) = given.iter().find(|(_, v)| v.is_some()) {
                return Err(usage(format!(
                    "{flag}: only with --follow (a bounded run seals every window at the end of its input)"
                )));
            }
            Ok(None)
        }
    }
}
