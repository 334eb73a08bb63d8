//! The offset ledger of a run: what the table says about the run's source partitions (the
//! resume offset of each, the watermark's input, the skew guard's state, how far a shard has
//! sealed, the dead-letter offsets), and what the next commit must say. It produces every
//! `txn` a commit carries and is told which ones landed; it does no I/O and knows positions
//! only through the source's [`ReplayLog`].

use std::collections::HashMap;

use sluice_publish::{END_TXN_PREFIX, RANK_TXN_PREFIX};
use sluice_source::{Position, ReplayLog};
use sluice_window::{Shard, WatermarkState};

/// The `txn` partition name under which the watermark's input is stored: the largest event
/// time read before the resume position. A leading dot: NDJSON sources skip hidden files, so
/// no source partition can have this name.
pub(crate) const MAX_EVENT_TIME_TXN: &str = ".max_event_time_us";

/// The `txn` partition name of the clock-skew guard's state at the resume position (see
/// [`sluice_window::SkewGuard`]; [`WatermarkState::ahead_code`]): ahead events in a row, and
/// the earliest of them. It goes down as well as up (`sluice_publish::STATE_TXN_PREFIX`).
pub(crate) const AHEAD_TXN: &str = ".state.ahead";

/// The names of a run's state `txn`s (per shard in a sharded table, as each shard has its
/// own watermark).
#[derive(Debug, Clone)]
struct StateNames {
    watermark: String,
    ahead: String,
    /// In a sharded table, the shard's sealed-through `txn`
    /// ([`sluice_publish::shard_sealed_txn`]).
    sealed: Option<String>,
}

/// The offset ledger; see the module doc.
#[derive(Debug)]
pub(crate) struct Ledger {
    names: StateNames,
    /// Resume offsets in the table, per source partition.
    committed: HashMap<String, i64>,
    /// The largest event time before the committed resume position, as stored in the table.
    max_event_us: Option<i64>,
    /// The skew guard's state at the committed resume position.
    ahead_code: Option<i64>,
    /// How far this shard has sealed, as stored in the table (sharded tables).
    sealed_us: Option<i64>,
    /// Per source partition: every dead letter below this offset is in the dead-letter table.
    dead_committed: HashMap<String, i64>,
    /// Per source partition of a log that keeps its read order: its rank, as stored in the
    /// table ([`ReplayLog::keeps_ranks`]).
    ranks: HashMap<String, i64>,
    /// Per source partition read to an end its offset does not measure: its stored size
    /// then, as stored in the table ([`ReplayLog::ends_to_store`]).
    ends: HashMap<String, i64>,
    /// Per source partition, where the next read of it starts (the end of the last chunk).
    cursors: HashMap<String, i64>,
}

impl Ledger {
    /// An empty ledger for a run over `log`, in `shard` of a sharded table.
    pub fn new(log: &dyn ReplayLog, shard: Option<Shard>) -> Ledger {
        let first = log.partitions().first().cloned();
        let per_shard = |name: &str| match (shard, &first) {
            (Some(_), Some(p)) => format!("{p}/{name}"),
            _ => name.to_string(),
        };
        Ledger {
            names: StateNames {
                watermark: per_shard(MAX_EVENT_TIME_TXN),
                ahead: per_shard(AHEAD_TXN),
                sealed: shard.map(sluice_publish::shard_sealed_txn),
            },
            committed: HashMap::new(),
            max_event_us: None,
            ahead_code: None,
            sealed_us: None,
            dead_committed: HashMap::new(),
            ranks: HashMap::new(),
            ends: HashMap::new(),
            cursors: HashMap::new(),
        }
    }

    /// Every `txn` name the ledger reads from the table: the log's partitions (and their
    /// ranks) and the state.
    pub fn txn_names(&self, log: &dyn ReplayLog) -> Vec<String> {
        let mut names: Vec<String> = log.partitions().iter().map(|p| p.to_string()).collect();
        if log.keeps_ranks() {
            names.extend(log.partitions().iter().map(|p| rank_txn(p)));
            names.extend(log.partitions().iter().map(|p| end_txn(p)));
        }
        names.push(self.names.watermark.clone());
        names.push(self.names.ahead.clone());
        names.extend(self.names.sealed.clone());
        names
    }

    /// Takes the table's `txn`s (as read for [`Ledger::txn_names`]) and the dead-letter
    /// table's offsets as the committed state; reading starts again at the offsets.
    pub fn restore(&mut self, mut txns: HashMap<String, i64>, dead: HashMap<String, i64>) {
        self.max_event_us = txns.remove(&self.names.watermark);
        self.ahead_code = txns.remove(&self.names.ahead);
        self.sealed_us = match &self.names.sealed {
            Some(name) => txns.remove(name),
            None => None,
        };
        self.ranks = take_prefixed(&mut txns, RANK_TXN_PREFIX);
        self.ends = take_prefixed(&mut txns, END_TXN_PREFIX);
        self.cursors = txns.clone();
        self.committed = txns;
        self.dead_committed = dead;
    }

    /// The ranks stored in the table, per source partition.
    pub fn ranks(&self) -> &HashMap<String, i64> {
        &self.ranks
    }

    /// The sizes stored in the table for partitions read to their end.
    pub fn ends(&self) -> &HashMap<String, i64> {
        &self.ends
    }

    /// The resume offsets in the table, per source partition.
    pub fn committed(&self) -> &HashMap<String, i64> {
        &self.committed
    }

    /// The watermark's input at the committed resume position.
    pub fn watermark_state(&self) -> WatermarkState {
        WatermarkState {
            max_seen: self.max_event_us.map(sluice_window::EventTime::from_micros),
            ..WatermarkState::default()
        }
        .with_ahead_code(self.ahead_code.unwrap_or(0))
    }

    /// Where each source partition's next read starts.
    pub fn cursors(&self) -> &HashMap<String, i64> {
        &self.cursors
    }

    /// `partition` was read up to `end`.
    pub fn read_to(&mut self, partition: &str, end: i64) {
        self.cursors.insert(partition.to_string(), end);
    }

    /// Dead letters of `partition` below this offset are in the dead-letter table already.
    pub fn dead_below(&self, partition: &str) -> i64 {
        self.dead_committed.get(partition).copied().unwrap_or(0)
    }

    /// The dead-letter offsets to store with dead letters read up to `read`.
    pub fn dead_through(&self, log: &dyn ReplayLog, read: Position) -> Vec<(String, i64)> {
        log.advances(&self.dead_committed, read)
    }

    /// The dead-letter offsets `through` are in the dead-letter table.
    pub fn dead_committed(&mut self, through: Vec<(String, i64)>) {
        for (name, offset) in through {
            self.dead_committed.insert(name, offset);
        }
    }

    /// The `txn`s a publication commits when the stream resumes at `resume` after it, with
    /// the watermark's input `state` before `resume` (if known) and the allowed lateness;
    /// `read`: the position it covers (the ranks of the partitions up to it are stored).
    pub fn txns(
        &self,
        log: &dyn ReplayLog,
        (resume, read): (Position, Position),
        state: Option<WatermarkState>,
        lateness_us: i64,
    ) -> Vec<(String, i64)> {
        let mut txns = log.advances(&self.committed, resume);
        let ends = log.ends_to_store(&self.ends, &txns);
        txns.extend(ends.into_iter().map(|(p, size)| (end_txn(&p), size)));
        txns.extend(
            log.ranks_to_store(&self.ranks, read)
                .into_iter()
                .map(|(p, rank)| (rank_txn(&p), rank)),
        );
        if self.names.sealed.is_some() {
            // Every commit of a shard carries its partition's txn, moved or not: a zombie
            // writer of the same partition, or this writer's own earlier attempt that landed
            // unreported, then always conflicts with it (commits of sharded tables retry
            // over non-conflicting commits).
            for p in log.partitions() {
                if !txns.iter().any(|(n, _)| n.as_str() == p.as_ref()) {
                    let at = self.committed.get(p.as_ref()).copied().unwrap_or(0);
                    txns.push((p.to_string(), at));
                }
            }
        }
        if let Some(state) = state {
            // The skew guard's state at the resume position, when it differs from the table's.
            let code = state.ahead_code();
            if self.ahead_code.unwrap_or(0) != code {
                txns.push((self.names.ahead.clone(), code));
            }
        }
        if let Some(us) = state.and_then(|s| s.max_seen).map(|t| t.as_micros()) {
            if self.max_event_us.is_none_or(|c| us > c) {
                txns.push((self.names.watermark.clone(), us));
            }
            // Every window ending by the committed input's watermark is published (rows of
            // it after the resume position are late), so this shard has sealed it.
            let through = us.saturating_sub(lateness_us);
            if let Some(name) = &self.names.sealed {
                if self.sealed_us.is_none_or(|c| through > c) {
                    txns.push((name.clone(), through));
                }
            }
        }
        debug_assert!(
            txns.iter()
                .all(|(name, at)| self.committed.get(name).is_none_or(|c| at >= c)),
            "E1: a publication's resume offsets never move back"
        );
        txns
    }

    /// The `txn`s of a commit landed.
    pub fn committed_txns(&mut self, txns: Vec<(String, i64)>) {
        for (name, offset) in txns {
            if name == self.names.watermark {
                self.max_event_us = Some(offset);
            } else if name == self.names.ahead {
                self.ahead_code = Some(offset);
            } else if self.names.sealed.as_ref() == Some(&name) {
                self.sealed_us = Some(offset);
            } else if let Some(partition) = name.strip_prefix(RANK_TXN_PREFIX) {
                self.ranks.insert(partition.to_string(), offset);
            } else if let Some(partition) = name.strip_prefix(END_TXN_PREFIX) {
                self.ends.insert(partition.to_string(), offset);
            } else {
                // E1: a partition's resume offset only moves forward (`sluice verify`'s
                // `offset_regression` checks the same of the table's log).
                debug_assert!(
                    self.committed.get(&name).is_none_or(|at| offset >= *at),
                    "E1: the resume offset of {name} moved back from {:?} to {offset}",
                    self.committed.get(&name)
                );
                self.committed.insert(name, offset);
            }
        }
    }
}

/// The `txn` partition name of `partition`'s rank.
fn rank_txn(partition: &str) -> String {
    format!("{RANK_TXN_PREFIX}{partition}")
}

/// The `txn` partition name of `partition`'s stored size at its end.
fn end_txn(partition: &str) -> String {
    format!("{END_TXN_PREFIX}{partition}")
}

/// Takes the `txns` (as read from the table) named `prefix` + a source partition out, by
/// source partition (ranks, ends).
fn take_prefixed(txns: &mut HashMap<String, i64>, prefix: &str) -> HashMap<String, i64> {
    txns.extract_if(|name, _| name.starts_with(prefix))
        .map(|(name, value)| (name[prefix.len()..].to_string(), value))
        .collect()
}
