//! Landing a commit in the log, at a cost that does not grow with the table.
//!
//! deltalake's `CommitBuilder` does three things after it has serialised a commit: it lists
//! the log to find the latest version (a listing of `_delta_log`, whose length grows with the
//! table's history until log cleanup), writes the commit with a conditional put, and then
//! brings its snapshot to the new version, passing every active file of the table through
//! the kernel's log replay again. The first and last grow with the table; only the put is
//! needed. Measured before this module (bench/RESULTS.md): a publication took 2.4 ms with 10
//! windows in the table and 33 ms with 10,000, and 4.7 ms at version 10 against 16.7 ms at
//! version 10,000.
//!
//! A writer that has the table to itself (no commit retries: one writer per pipeline) knows
//! the next version without listing, because its commits land only on the version it read
//! (anything else is [`PublishError::TableMoved`] and a re-read), and it keeps what its own
//! commits need (the address index, the `txn`s, the schema) itself. So [`WindowTable::land`]
//! writes such a commit directly: deltalake still checks the protocol and serialises the
//! actions (`into_prepared_commit_future`), and the log store's `write_commit_entry` puts
//! version `read + 1` if absent, exactly the put `CommitBuilder` makes. The loaded snapshot
//! is then behind this writer's head; [`WindowTable::catch_up`] brings it forward, once,
//! when something needs deltalake's own view of the table (a MERGE, a compaction, a read of
//! the table's rows, a checkpoint).
//!
//! Commits go through `CommitBuilder` as before, after a catch-up, when they change the
//! table's metadata, when the writer shares the table (commit retries over other shards'
//! commits need its conflict checker and snapshot), when the log store is not one with
//! conditional puts, and at every checkpoint version: the post-commit hook then writes the
//! checkpoint and cleans up expired log files, once per checkpoint interval as before.

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Transaction};
use deltalake::logstore::LogStore;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::DeltaTableError;

use crate::table::error::{commit_error, PublishError};
use crate::table::window_table::WindowTable;
use crate::COMMIT_INFO_KEY;

/// The log store whose commits are conditional puts of serialised bytes (deltalake's
/// default for local, S3, GCS and Azure tables), the one [`WindowTable::land`] writes to
/// directly.
const DIRECT_LOG_STORE: &str = "DefaultLogStore";

/// One commit: its actions, `txn`s, commit metadata and operation.
pub(crate) struct CommitRequest {
    pub actions: Vec<Action>,
    pub txns: Vec<Transaction>,
    pub info: Option<serde_json::Value>,
    pub operation: DeltaOperation,
    /// How errors name what was committed (a window, a group of windows).
    pub label: String,
}

/// A landed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Landed {
    pub version: u64,
    /// The version the commit was made on top of (its read version).
    pub read_version: u64,
    /// Versions of other writers the commit was retried over.
    pub retries: u64,
    /// Whether the commit wrote a checkpoint.
    pub checkpoint: bool,
}

/// Whether the commit of `version` writes a checkpoint (deltalake's post-commit rule).
pub(crate) fn checkpoint_at(version: u64, interval: u64) -> bool {
    (version + 1).is_multiple_of(interval)
}

impl WindowTable {
    /// Lands `request` on top of this writer's latest version: directly when the writer has
    /// the table to itself (see the module's doc), else through `CommitBuilder` after a
    /// catch-up. Never retried blindly: a version taken by another writer is
    /// [`PublishError::TableMoved`] (or a conflict).
    pub(crate) async fn land(&mut self, request: CommitRequest) -> Result<Landed, PublishError> {
        let CommitRequest {
            actions,
            txns,
            info,
            operation,
            label,
        } = request;
        let delta = |source| PublishError::Delta {
            window: label.clone(),
            source,
        };
        let Some(read_version) = self.version() else {
            return Err(PublishError::Invalid {
                window: label.clone(),
                reason: "the table has no version to commit on top of".into(),
            });
        };
        let next = read_version + 1;
        let interval = self
            .loaded
            .snapshot()
            .map_err(delta)?
            .table_config()
            .checkpoint_interval()
            .get();
        let changes_metadata = actions
            .iter()
            .any(|a| matches!(a, Action::Metadata(_) | Action::Protocol(_)));
        let direct = !changes_metadata
            && self.commit_retries == 0
            && !checkpoint_at(next, interval)
            && self.loaded.log_store().name() == DIRECT_LOG_STORE;
        if !direct {
            self.catch_up().await.map_err(delta)?;
        }
        let snapshot = self.loaded.snapshot().map_err(delta)?;
        let log_store = self.loaded.log_store();
        let properties = commit_properties_at(next, snapshot, txns, info, self.commit_retries);
        let commit = CommitBuilder::from(properties).with_actions(actions).build(
            Some(snapshot),
            log_store.clone(),
            operation,
        );
        if direct {
            // The protocol check and the serialised commit, as deltalake makes them; then the
            // put of version `next` if absent, as `CommitBuilder` makes it.
            let prepared = commit
                .into_prepared_commit_future()
                .await
                .map_err(|e| commit_error(label.clone(), read_version, e))?;
            let bytes = prepared.commit_or_bytes().clone();
            drop(prepared);
            log_store
                .write_commit_entry(next, bytes, deltalake_operation_id(next))
                .await
                .map_err(|e| commit_error(label.clone(), read_version, e.into()))?;
            self.own_head = Some(next);
            return Ok(Landed {
                version: next,
                read_version,
                retries: 0,
                checkpoint: false,
            });
        }
        let finalized = commit
            .await
            .map_err(|e| commit_error(label.clone(), read_version, e))?;
        let landed = Landed {
            version: finalized.version(),
            read_version,
            retries: finalized.metrics.num_retries,
            checkpoint: finalized.metrics.new_checkpoint_created,
        };
        self.loaded.state = Some(finalized.snapshot());
        Ok(landed)
    }

    /// Brings the loaded snapshot to this writer's head (its latest commit), if its direct
    /// commits left it behind. Call before anything reads deltalake's view of the table.
    pub(crate) async fn catch_up(&mut self) -> Result<(), DeltaTableError> {
        let Some(head) = self.own_head else {
            return Ok(());
        };
        self.loaded.update_incremental(Some(head)).await?;
        assert_eq!(
            self.loaded.version(),
            Some(head),
            "E3: the loaded snapshot reaches this writer's own head"
        );
        self.own_head = None;
        Ok(())
    }
}

/// The operation id deltalake's log store takes with a commit (its default store ignores
/// it; others name temporary files by it): derived from the version, not drawn at random.
fn deltalake_operation_id(version: u64) -> uuid::Uuid {
    uuid::Uuid::from_u64_pair(0x736c_7569_6365, version)
}

#[cfg(test)]
mod tests;

/// The properties of every sluice commit on top of `snapshot`: attempted once with
/// `retries` = 0, no blind retries (if the table moved since this writer read it — a
/// concurrent writer, or this writer's own earlier attempt that landed but reported failure —
/// the caller re-reads the table and decides from its state, E1, E3). With `retries` > 0 (the
/// writers of a sharded table), deltalake's conflict checker retries over commits that touch
/// neither this commit's address nor its `txn` appIds; every such commit carries its shard's
/// `txn`, so this writer's own earlier attempt, or a zombie's commit, always conflicts.
/// Then `txns`; sluice's commit metadata `info`, if any;
/// and expired-log cleanup only with the commits that write a checkpoint. (deltalake cleans
/// up after every commit by default, listing the whole `_delta_log` each time, a cost growing
/// with the table's history; sluice pays it once per checkpoint interval, as Spark does.)
pub(crate) fn commit_properties(
    snapshot: &deltalake::table::state::DeltaTableState,
    txns: Vec<Transaction>,
    info: Option<serde_json::Value>,
    retries: usize,
) -> CommitProperties {
    commit_properties_at(snapshot.version() + 1, snapshot, txns, info, retries)
}

/// [`commit_properties`] for the commit of version `next` on top of `snapshot`'s table (the
/// snapshot may be behind this writer's own commits: see [`crate::table::land`]). Expired log
/// files are cleaned up with the commit that writes a checkpoint, after it.
pub(crate) fn commit_properties_at(
    next: u64,
    snapshot: &deltalake::table::state::DeltaTableState,
    txns: Vec<Transaction>,
    info: Option<serde_json::Value>,
    retries: usize,
) -> CommitProperties {
    use deltalake::table::config::TablePropertiesExt;
    let config = snapshot.table_config();
    let interval = config.checkpoint_interval().get();
    let cleanup = config.enable_expired_log_cleanup() && checkpoint_at(next, interval);
    let properties = CommitProperties::default()
        .with_max_retries(retries)
        .with_application_transactions(txns)
        .with_cleanup_expired_logs(Some(cleanup));
    match info {
        Some(info) => properties.with_metadata([(COMMIT_INFO_KEY.to_string(), info)]),
        None => properties,
    }
}
