//! A window's publication as one Delta commit: the files it removes (swap) or keeps
//! (add_late), the files it adds with their coverage tags, its `txn` offsets and its
//! commitInfo. Several windows sealed together may share one commit ([`WindowTable::
//! publish_group`]): each window still swaps atomically with its own files and coverage,
//! and the `txn`s move once. A commit lands only on the version the writer read; anything
//! else is [`PublishError::TableMoved`] or a conflict, and the caller re-reads the table.

use std::collections::HashMap;

use deltalake::kernel::{Action, Add, Remove, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::DeltaTableError;
use serde_json::json;
use sluice_stage::StagedFile;
use sluice_window::{Shard, Window};

use crate::table::error::PublishError;
use crate::table::land::CommitRequest;
use crate::table::options::app_id;
use crate::table::window_table::{address_key, AddressIndex, Coverage, PublishedFile, WindowTable};
use crate::tags;

/// What happens to the files already at the window's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Swap: remove them all; the staged files are the whole window.
    Window,
    /// Keep them; the staged files add rows whose row keys cannot be there yet (late rows
    /// keyed by source position).
    AddLate,
}

/// One window's publication: everything that goes into its one commit.
#[derive(Debug, Clone)]
pub struct Publication {
    pub pipeline: String,
    pub window: Window,
    pub files: Vec<StagedFile>,
    pub replace: Replace,
    pub coverage: Coverage,
    /// `(partition, resume offset)` for each partition whose resume position advanced.
    pub txns: Vec<(String, i64)>,
    /// Source position ranges of the window's rows, for the commit metadata.
    pub position_ranges: serde_json::Value,
    /// The caller's clock: file modification and removal times.
    pub published_at_ms: i64,
}

/// A committed publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub version: u64,
    pub files_removed: usize,
    pub files_added: usize,
    /// The window's rows after the commit (a MERGE: the rows it inserted or updated).
    pub rows: i64,
    /// How many rows the commit added to the table, less those it removed: summed over every
    /// commit of a pipeline, the rows it holds (files without row counts count as 0 removed).
    pub rows_net: i64,
    /// Bytes of the files the commit added (0 for a MERGE, whose files deltalake writes).
    pub bytes_added: i64,
}

/// What a commit removed at one address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Removed {
    pub files: usize,
    pub rows: i64,
}

/// What [`WindowTable::commit_files`] commits.
pub(crate) struct FileCommit<'a> {
    /// One entry per address, no address twice.
    pub changes: Vec<AddressChange<'a>>,
    pub pipeline: &'a str,
    pub txns: Vec<Transaction>,
    pub info: serde_json::Value,
    pub at_ms: i64,
}

/// One address's part of a [`FileCommit`].
pub(crate) struct AddressChange<'a> {
    pub address: &'a sluice_window::Address,
    pub files: &'a [StagedFile],
    pub replace: Replace,
    pub coverage: Option<&'a Coverage>,
}

impl WindowTable {
    /// Commits one window: removes (for a swap), adds, txns and metadata, atomically.
    pub async fn publish(&mut self, p: Publication) -> Result<Published, PublishError> {
        let mut published = self.publish_group(vec![p]).await?;
        Ok(published.remove(0))
    }

    /// Commits several windows of one pipeline in one commit (a group commit): each window
    /// removes its files (for a swap) and adds its own, with its own coverage, so a reader of
    /// any version still sees each window absent or whole as of one publication (E2); the
    /// `txn`s move once, to the latest offset the publications name for each partition (they
    /// are given in the order their windows sealed, so the last one names the resume
    /// position after all of them). Returns one [`Published`] per publication, in order,
    /// all with the commit's version.
    ///
    /// The commit metadata of a single publication is one object naming its window; that of
    /// a group is `{"pipeline", "windows": [..]}` with one such object per window.
    pub async fn publish_group(
        &mut self,
        group: Vec<Publication>,
    ) -> Result<Vec<Published>, PublishError> {
        let Some(first) = group.first() else {
            return Err(PublishError::Invalid {
                window: "(none)".into(),
                reason: "a group commit needs at least one publication".into(),
            });
        };
        let pipeline = first.pipeline.clone();
        let addresses: Vec<sluice_window::Address> =
            group.iter().map(|p| self.address(p.window)).collect();
        let label = group_label(&addresses);
        let invalid = |reason: String| PublishError::Invalid {
            window: label.clone(),
            reason,
        };
        let delta = |source| PublishError::Delta {
            window: label.clone(),
            source,
        };
        check_group(&group, &addresses, &pipeline).map_err(invalid)?;
        let offsets = latest_offsets(group.iter().map(|p| p.txns.as_slice()));
        let at_ms = group.iter().map(|p| p.published_at_ms).max().unwrap_or(0);
        let txns = self.txn_actions(&pipeline, &offsets, at_ms)?;
        let mut infos = Vec::with_capacity(group.len());
        let mut rows = Vec::with_capacity(group.len());
        for (p, address) in group.iter().zip(&addresses) {
            let added: i64 = p.files.iter().map(|f| f.rows).sum();
            let window_rows = match p.replace {
                Replace::Window => added,
                Replace::AddLate => added + self.rows_at(address).await.map_err(delta)?,
            };
            rows.push(window_rows);
            infos.push(json!({
                "window": address.hive_path(),
                "window_start": p.window.start().to_rfc3339(),
                "window_end": p.window.end().to_rfc3339(),
                "mode": match p.replace { Replace::Window => "swap", Replace::AddLate => "add_late" },
                "rows_added": added,
                "window_rows": window_rows,
                "positions": p.position_ranges,
                "coverage": {"partition": p.coverage.partition, "offset": p.coverage.offset},
            }));
        }
        let info = if infos.len() == 1 {
            let mut info = infos.remove(0);
            info["pipeline"] = json!(pipeline);
            info
        } else {
            json!({"pipeline": pipeline, "windows": infos})
        };
        let changes = group
            .iter()
            .zip(&addresses)
            .map(|(p, address)| AddressChange {
                address,
                files: &p.files,
                replace: p.replace,
                coverage: Some(&p.coverage),
            })
            .collect();
        let (version, removed) = self
            .commit_files(FileCommit {
                changes,
                pipeline: &pipeline,
                txns,
                info,
                at_ms,
            })
            .await?;
        self.remember_txns(&pipeline, &offsets);
        Ok(group
            .iter()
            .zip(removed)
            .zip(rows)
            .map(|((p, removed), rows)| {
                let added: i64 = p.files.iter().map(|f| f.rows).sum();
                Published {
                    version,
                    files_removed: removed.files,
                    files_added: p.files.len(),
                    rows,
                    rows_net: added - removed.rows,
                    bytes_added: p.files.iter().map(|f| f.size_bytes).sum(),
                }
            })
            .collect())
    }

    /// One commit over one or more addresses: each removes its files (for
    /// [`Replace::Window`]) and adds its `files` tagged with the pipeline (and its coverage,
    /// if any); then the `txn` actions, and `info` as sluice's commit metadata. The read
    /// predicate is the addresses (a concurrent change at any of them conflicts). Attempted
    /// once against the loaded version (no blind retries). Returns the new version and what
    /// was removed at each address, in order.
    pub(crate) async fn commit_files(
        &mut self,
        c: FileCommit<'_>,
    ) -> Result<(u64, Vec<Removed>), PublishError> {
        let addresses: Vec<sluice_window::Address> = c
            .changes
            .iter()
            .map(|change| change.address.clone())
            .collect();
        let window_label = group_label(&addresses);
        debug_assert_eq!(
            addresses
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len(),
            addresses.len(),
            "E2: a commit changes each address once"
        );
        let delta = |source| PublishError::Delta {
            window: window_label.clone(),
            source,
        };
        let mut removed = Vec::with_capacity(c.changes.len());
        let mut actions: Vec<Action> = Vec::new();
        let grows = self.schema_change_pending();
        if let Some(metadata) = self.schema_action().map_err(delta)? {
            actions.push(metadata);
        }
        let mut replaced = Vec::with_capacity(c.changes.len());
        for change in &c.changes {
            let existing = if change.replace == Replace::Window {
                self.files_at(change.address).await.map_err(delta)?
            } else {
                Vec::new()
            };
            removed.push(Removed {
                files: existing.len(),
                rows: existing.iter().filter_map(|f| f.rows).sum(),
            });
            address_actions(&mut actions, change, &existing, c.pipeline, c.at_ms);
            replaced.push(existing);
        }
        // Readers take a commit without change files as its adds inserted and its removes
        // deleted: one that replaces rows says what really changed (see `change_feed`).
        if replaced.iter().any(|r| !r.is_empty()) && self.change_feed() {
            for (change, existing) in c.changes.iter().zip(&replaced) {
                let file = self.change_file(change, existing).await.map_err(delta)?;
                actions.push(Action::Cdc(file));
            }
        }
        let mut info = c.info;
        if grows {
            info["schema_added"] = json!(self.pending_added());
        }
        let operation = self.write_operation(&c.changes, &addresses);
        let landed = self
            .land(CommitRequest {
                actions,
                txns: c.txns,
                info: Some(info),
                operation,
                label: window_label.clone(),
            })
            .await?;
        let (version, read_version) = (landed.version, landed.read_version);
        debug_assert!(
            version > read_version,
            "E3: a commit lands after the version its writer read"
        );
        let labels = [
            ("pipeline", c.pipeline.to_string()),
            ("table", self.url().to_string()),
        ];
        // Versions other writers took first, over which the commit was retried (a sharded
        // table's writers race on every commit), and checkpoints this commit wrote.
        metrics::counter!("sluice_commit_retries_total", &labels).increment(landed.retries);
        metrics::counter!("sluice_checkpoints_total", &labels)
            .increment(u64::from(landed.checkpoint));
        self.schema_committed();
        if version != read_version + 1 && self.share.shard.is_none() {
            // Retried over other writers' commits: their files are not in the index. (In a
            // sharded table the index stays exact for this writer's own addresses, the only
            // ones it reads: no other writer adds or removes files in its shard.)
            self.index = None;
        }
        if let Some(index) = &mut self.index {
            index_changes(index, &c.changes, c.pipeline);
        }
        Ok((version, removed))
    }

    /// The operation a commit of `changes` records: an overwrite of its addresses when one of
    /// them is swapped, else an append; partitioned by the layout's columns.
    fn write_operation(
        &self,
        changes: &[AddressChange<'_>],
        addresses: &[sluice_window::Address],
    ) -> DeltaOperation {
        let predicate = addresses
            .iter()
            .map(address_predicate)
            .collect::<Vec<_>>()
            .join(" OR ");
        let overwrite = changes.iter().any(|ch| ch.replace == Replace::Window);
        DeltaOperation::Write {
            mode: if overwrite {
                SaveMode::Overwrite
            } else {
                SaveMode::Append
            },
            partition_by: Some(
                self.share
                    .layout
                    .columns()
                    .iter()
                    .map(|c| c.to_string())
                    .collect(),
            ),
            predicate: Some(predicate),
        }
    }

    /// A commit holding only `txn` actions and commit metadata (no data change).
    pub(crate) async fn commit_txns_only(
        &mut self,
        txns: Vec<Transaction>,
        info: serde_json::Value,
        what: &str,
    ) -> Result<u64, PublishError> {
        let delta = |source| PublishError::Delta {
            window: what.to_string(),
            source,
        };
        let mut info = info;
        let mut actions = Vec::new();
        if let Some(metadata) = self.schema_action().map_err(delta)? {
            info["schema_added"] = json!(self.pending_added());
            actions.push(metadata);
        }
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let landed = self
            .land(CommitRequest {
                actions,
                txns,
                info: Some(info),
                operation,
                label: what.to_string(),
            })
            .await?;
        self.schema_committed();
        Ok(landed.version)
    }

    /// Notes `txns` of `pipeline` as committed (the regression check's reference).
    pub(crate) fn remember_txns(&mut self, pipeline: &str, txns: &[(String, i64)]) {
        for (partition, offset) in txns {
            self.txns.insert(app_id(pipeline, partition), *offset);
        }
    }

    /// `txn` actions for `(partition, offset)` pairs, refusing any that would move a committed
    /// resume position back (checked before anything is written).
    pub(crate) fn txn_actions(
        &self,
        pipeline: &str,
        txns: &[(String, i64)],
        at_ms: i64,
    ) -> Result<Vec<Transaction>, PublishError> {
        let mut actions = Vec::with_capacity(txns.len());
        for (partition, offset) in txns {
            let id = app_id(pipeline, partition);
            if let Some(&committed) = self.txns.get(&id).filter(|_| !is_state_txn(partition)) {
                if *offset < committed {
                    return Err(PublishError::TxnRegression {
                        app_id: id,
                        committed,
                        proposed: *offset,
                    });
                }
            }
            actions.push(Transaction::new_with_last_update(&id, *offset, Some(at_ms)));
        }
        // Delivered notifications, recorded with the writer's own commits. A mark never moves
        // back: the notifier raises it only after delivering.
        for (target, through) in self.notified.marks() {
            actions.push(Transaction::new_with_last_update(
                app_id(pipeline, &crate::marks::notify_txn(&target)),
                through as i64,
                Some(at_ms),
            ));
        }
        if let Some(shard) = self.share.shard {
            // Makes this commit conflict with a compaction of the shard's windows, which the
            // conflict checker would otherwise retry over (see `crate::compact`).
            let fence = app_id(pipeline, &shard_fence_txn(shard));
            actions.push(Transaction::new_with_last_update(
                &fence,
                at_ms,
                Some(at_ms),
            ));
        }
        Ok(actions)
    }

    async fn rows_at(&mut self, address: &sluice_window::Address) -> Result<i64, DeltaTableError> {
        Ok(self
            .files_at(address)
            .await?
            .iter()
            .filter_map(|f| f.rows)
            .sum())
    }
}

/// `txn` partitions named `.state.*` (their last `/` segment) hold state as of the resume
/// position rather than a position: they may go down as well as up, so the resume-position
/// regression check does not apply to them.
pub const STATE_TXN_PREFIX: &str = ".state.";

/// The address index after a commit of `changes`: a swap's files replace the address's, late
/// rows' files join them.
fn index_changes(index: &mut AddressIndex, changes: &[AddressChange<'_>], pipeline: &str) {
    for change in changes {
        let added: Vec<PublishedFile> = change
            .files
            .iter()
            .map(|f| PublishedFile {
                path: f.path.clone(),
                size_bytes: f.size_bytes,
                rows: Some(f.rows),
                partition_values: address_key(change.address),
                pipeline: Some(pipeline.to_string()),
                coverage: change.coverage.cloned(),
            })
            .collect();
        let at = index.entry(address_key(change.address)).or_default();
        match change.replace {
            Replace::Window => *at = added,
            Replace::AddLate => at.extend(added),
        }
    }
}

/// The invariants of a group commit, checked before anything is written: one pipeline, each
/// window once, files to publish, each under its window's address (E2).
fn check_group(
    group: &[Publication],
    addresses: &[sluice_window::Address],
    pipeline: &str,
) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (p, address) in group.iter().zip(addresses) {
        if p.pipeline != pipeline {
            return Err(format!(
                "publications of pipelines {pipeline:?} and {:?} in one commit",
                p.pipeline
            ));
        }
        if !seen.insert(address.hive_path()) {
            return Err(format!(
                "window {} appears twice in one commit",
                address.label()
            ));
        }
        if p.files.is_empty() {
            return Err(format!("no files to publish for {}", address.label()));
        }
        let prefix = format!("{}/", address.hive_path());
        if let Some(f) = p.files.iter().find(|f| !f.path.starts_with(&prefix)) {
            return Err(format!(
                "file {} is not under the window's address {prefix}",
                f.path
            ));
        }
    }
    Ok(())
}

/// The `remove` actions of `existing` and the `add` actions of `change`'s files, appended to
/// `actions`.
fn address_actions(
    actions: &mut Vec<Action>,
    change: &AddressChange<'_>,
    existing: &[PublishedFile],
    pipeline: &str,
    at_ms: i64,
) {
    let tags = FileTags {
        pipeline: Some(pipeline),
        coverage: change.coverage,
    };
    file_actions(
        actions,
        FileChange {
            address: change.address,
            removed: existing,
            added: change.files,
            data_change: true,
            at_ms,
        },
        &tags,
    );
}

/// The tags sluice puts on the files it adds.
pub(crate) struct FileTags<'a> {
    pub pipeline: Option<&'a str>,
    pub coverage: Option<&'a Coverage>,
}

/// Files removed from and added to one address, as one commit holds them.
pub(crate) struct FileChange<'a> {
    pub address: &'a sluice_window::Address,
    pub removed: &'a [PublishedFile],
    pub added: &'a [StagedFile],
    /// `false` for a compaction: the same rows in other files.
    pub data_change: bool,
    pub at_ms: i64,
}

/// The `remove` and `add` actions of `change`, appended to `actions`; the added files carry
/// `tags`.
pub(crate) fn file_actions(actions: &mut Vec<Action>, change: FileChange<'_>, tags: &FileTags<'_>) {
    let key = address_key(change.address);
    debug_assert!(
        change.removed.iter().all(|f| f.partition_values == key),
        "E2: a commit removes only files at the address it changes"
    );
    let prefix = format!("{}/", change.address.hive_path());
    debug_assert!(
        change.added.iter().all(|f| f.path.starts_with(&prefix)),
        "E2: a commit adds only files staged under the address it changes"
    );
    let partition_values: HashMap<String, Option<String>> = change
        .address
        .pairs()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
    for f in change.removed {
        actions.push(Action::Remove(Remove {
            path: f.path.clone(),
            data_change: change.data_change,
            deletion_timestamp: Some(change.at_ms),
            extended_file_metadata: Some(true),
            size: Some(f.size_bytes),
            partition_values: Some(partition_values.clone()),
            deletion_vector: None,
            tags: None,
            base_row_id: None,
            default_row_commit_version: None,
        }));
    }
    let mut file_tags: HashMap<String, Option<String>> = HashMap::new();
    if let Some(p) = tags.pipeline {
        file_tags.insert(tags::PIPELINE.to_string(), Some(p.to_string()));
    }
    if let Some(coverage) = tags.coverage {
        file_tags.insert(
            tags::COVERAGE_PARTITION.to_string(),
            Some(coverage.partition.clone()),
        );
        file_tags.insert(
            tags::COVERAGE_OFFSET.to_string(),
            Some(coverage.offset.to_string()),
        );
    }
    for f in change.added {
        actions.push(Action::Add(Add {
            path: f.path.clone(),
            partition_values: partition_values.clone(),
            size: f.size_bytes,
            modification_time: change.at_ms,
            data_change: change.data_change,
            stats: Some(f.stats.clone()),
            tags: (!file_tags.is_empty()).then(|| file_tags.clone()),
            ..Default::default()
        }));
    }
}

/// The SQL predicate selecting `address`: its columns equal to its values, as quoted string
/// literals (an address value never becomes SQL text unescaped).
pub(crate) fn address_predicate(address: &sluice_window::Address) -> String {
    let terms = address
        .pairs()
        .map(|(k, v)| format!("{k} = '{}'", v.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" AND ");
    format!("({terms})")
}

/// How errors and logs name a commit's windows: the window, or the first and last and how
/// many ("publishing window dt=…/hour=08 .. dt=…/hour=11 (4 windows in one commit) …").
fn group_label(addresses: &[sluice_window::Address]) -> String {
    match addresses {
        [] => "(none)".to_string(),
        [one] => one.label(),
        [first, .., last] => format!(
            "{} .. {} ({} windows in one commit)",
            first.label(),
            last.label(),
            addresses.len()
        ),
    }
}

/// Per partition, the offset of its last occurrence in `txns` (lists in publication order),
/// partitions in order of first occurrence.
pub(crate) fn latest_offsets<'a>(
    txns: impl Iterator<Item = &'a [(String, i64)]>,
) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for list in txns {
        for (partition, offset) in list {
            match out.iter_mut().find(|(p, _)| p == partition) {
                Some(entry) => {
                    debug_assert!(
                        *offset >= entry.1 || is_state_txn(partition),
                        "E1: a group's resume offsets of {partition} only move forward"
                    );
                    entry.1 = *offset
                }
                None => out.push((partition.clone(), *offset)),
            }
        }
    }
    out
}

/// Whether a `txn` partition name carries pipeline state (the watermark, an ahead run), which
/// may move either way, rather than a resume offset.
fn is_state_txn(partition: &str) -> bool {
    partition
        .rsplit('/')
        .next()
        .is_some_and(|last| last.starts_with(STATE_TXN_PREFIX))
}

/// The `txn` partition every commit of a sharded table's writer of `shard` carries, and every
/// compaction of that shard's windows (see `compact`'s module documentation): its version is
/// the committer's clock, its only job is to make two such commits conflict.
pub(crate) fn shard_fence_txn(shard: Shard) -> String {
    format!(".shard/{shard}/{}fence", crate::STATE_TXN_PREFIX)
}
