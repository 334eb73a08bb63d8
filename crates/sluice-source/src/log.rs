//! The seam between a run and what it reads: a *replayable log*, whose records have ordered
//! positions, and whose position per source partition the table stores (one `txn` each).
//!
//! Two logs exist: [`NdjsonSource`] (files read in the order they arrived; a position is
//! the file's ordinal and a byte offset) and [`LogPartition`] (one partition of a message log such as a
//! Kafka topic partition; a position is the message offset). The runner only ever asks a log
//! the questions below, so the encoding of positions lives here and nowhere else.

use std::collections::HashMap;
use std::sync::Arc;

use crate::chunk::Position;
use crate::file::SourceError;
use crate::ndjson::NdjsonSource;

/// A replayable log of records with ordered positions.
///
/// The table stores, per source partition, the offset below which every record is published
/// (`txn` version); everything a run needs to resume follows from those offsets and this trait.
pub trait ReplayLog: Send + Sync {
    /// The log's source partitions, in position order (their names are the `txn` appId
    /// suffixes).
    fn partitions(&self) -> Vec<Arc<str>>;

    /// The `source` label of the run's metrics: its one source partition, or `*` for a
    /// source of several (or of any number, like a directory).
    fn metrics_source(&self) -> String {
        match self.partitions().as_slice() {
            [one] => one.to_string(),
            _ => "*".to_string(),
        }
    }

    /// The name of the source partition a position of this run is in.
    fn partition_of(&self, position: Position) -> Option<&Arc<str>>;

    /// The position of `offset` in the source partition `name`, which may not be part of
    /// this run (it then sorts where it would be).
    fn position_of(&self, name: &str, offset: i64) -> Position;

    /// Where a run resumes, given the table's offsets: the first record no publication holds.
    fn resume_at(&self, committed: &HashMap<String, i64>) -> Position;

    /// The offsets to store when every record before `to` is published: each source
    /// partition whose stored offset (in `committed`) moves up, with its new offset.
    fn advances(&self, committed: &HashMap<String, i64>, to: Position) -> Vec<(String, i64)>;

    /// Checks that the table's offsets still describe this log (an NDJSON source may only
    /// grow at its end); an error means resuming would misplace records.
    fn check_resume(&self, committed: &HashMap<String, i64>) -> Result<(), SourceError>;

    /// Whether the log reads its partitions in the order they arrived and keeps that order
    /// in the table, as a rank per partition (a file source; see [`crate::arrival`]).
    fn keeps_ranks(&self) -> bool {
        false
    }

    /// Takes the ranks the table stores (by partition) and its resume offsets: the
    /// partitions are read in that order from now on.
    fn adopt_ranks(
        &mut self,
        _stored: &HashMap<String, i64>,
        _committed: &HashMap<String, i64>,
    ) -> Result<(), SourceError> {
        Ok(())
    }

    /// The ranks a commit that covers `read` stores: those of the partitions up to `read`
    /// that `stored` lacks. (A position the table names is then always in the same place
    /// after a restart.)
    fn ranks_to_store(
        &self,
        _stored: &HashMap<String, i64>,
        _read: Position,
    ) -> Vec<(String, i64)> {
        Vec::new()
    }

    /// Takes the sizes the table stores for partitions read to their end (by partition).
    fn adopt_ends(&mut self, _ends: &HashMap<String, i64>) {}

    /// The sizes a commit moving the offsets `advanced` stores: those of the partitions it
    /// moves to an end their offset does not measure (a compressed or Parquet file), so a
    /// later run sees them change ([`NdjsonSource::ends_to_store`]).
    fn ends_to_store(
        &self,
        _stored: &HashMap<String, i64>,
        _advanced: &[(String, i64)],
    ) -> Vec<(String, i64)> {
        Vec::new()
    }
}

impl ReplayLog for NdjsonSource {
    fn partitions(&self) -> Vec<Arc<str>> {
        self.files().iter().map(|f| f.name.clone()).collect()
    }

    fn metrics_source(&self) -> String {
        match (self.is_one_file(), self.files()) {
            (true, [one]) => one.name.to_string(),
            _ => "*".to_string(),
        }
    }

    fn partition_of(&self, position: Position) -> Option<&Arc<str>> {
        self.name(position.file)
    }

    fn position_of(&self, name: &str, offset: i64) -> Position {
        NdjsonSource::position_of(self, name, offset)
    }

    fn resume_at(&self, committed: &HashMap<String, i64>) -> Position {
        let files = self.files();
        for (i, f) in files.iter().enumerate() {
            let offset = committed.get(f.name.as_ref()).copied().unwrap_or(0);
            if (offset as u64) < f.len {
                return Position {
                    file: NdjsonSource::ordinal(i),
                    offset,
                };
            }
        }
        let last = files.len() - 1;
        Position {
            file: NdjsonSource::ordinal(last),
            offset: files[last].len as i64,
        }
    }

    fn advances(&self, committed: &HashMap<String, i64>, to: Position) -> Vec<(String, i64)> {
        let mut moved = Vec::new();
        for (i, file) in self.files().iter().enumerate() {
            let target = match NdjsonSource::ordinal(i).cmp(&to.file) {
                std::cmp::Ordering::Less => file.len as i64,
                std::cmp::Ordering::Equal => to.offset,
                std::cmp::Ordering::Greater => break,
            };
            if target > committed.get(file.name.as_ref()).copied().unwrap_or(0) {
                moved.push((file.name.to_string(), target));
            }
        }
        moved
    }

    fn check_resume(&self, committed: &HashMap<String, i64>) -> Result<(), SourceError> {
        self.check_append_only(committed)
    }

    fn keeps_ranks(&self) -> bool {
        true
    }

    fn adopt_ranks(
        &mut self,
        stored: &HashMap<String, i64>,
        committed: &HashMap<String, i64>,
    ) -> Result<(), SourceError> {
        NdjsonSource::adopt_ranks(self, stored, committed)
    }

    fn ranks_to_store(&self, stored: &HashMap<String, i64>, read: Position) -> Vec<(String, i64)> {
        NdjsonSource::ranks_to_store(self, stored, read)
    }

    fn adopt_ends(&mut self, ends: &HashMap<String, i64>) {
        NdjsonSource::adopt_ends(self, ends)
    }

    fn ends_to_store(
        &self,
        stored: &HashMap<String, i64>,
        advanced: &[(String, i64)],
    ) -> Vec<(String, i64)> {
        NdjsonSource::ends_to_store(self, stored, advanced)
    }
}

/// One partition of a message log (a Kafka topic partition): positions are message offsets,
/// its records come from the log's consumer (as [`crate::Chunk::messages`]), and it has no
/// end. Its one source partition is `name` (`<topic>/<partition>`).
#[derive(Debug, Clone)]
pub struct LogPartition {
    name: Arc<str>,
}

/// The position ordinal of a [`LogPartition`]'s records: partitions sorting before it are 0,
/// after it 2.
const PARTITION_ORDINAL: u32 = 1;

impl LogPartition {
    pub fn new(name: &str) -> Self {
        LogPartition {
            name: Arc::from(name),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The position of the message at `offset`.
    pub fn position(&self, offset: i64) -> Position {
        Position {
            file: PARTITION_ORDINAL,
            offset,
        }
    }
}

impl ReplayLog for LogPartition {
    fn partitions(&self) -> Vec<Arc<str>> {
        vec![self.name.clone()]
    }

    fn partition_of(&self, position: Position) -> Option<&Arc<str>> {
        (position.file == PARTITION_ORDINAL).then_some(&self.name)
    }

    fn position_of(&self, name: &str, offset: i64) -> Position {
        let file = match name.cmp(&self.name) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => PARTITION_ORDINAL,
            std::cmp::Ordering::Greater => 2,
        };
        Position { file, offset }
    }

    fn resume_at(&self, committed: &HashMap<String, i64>) -> Position {
        self.position(committed.get(self.name.as_ref()).copied().unwrap_or(0))
    }

    fn advances(&self, committed: &HashMap<String, i64>, to: Position) -> Vec<(String, i64)> {
        let target = match to.file.cmp(&PARTITION_ORDINAL) {
            std::cmp::Ordering::Less => return Vec::new(),
            std::cmp::Ordering::Equal => to.offset,
            std::cmp::Ordering::Greater => i64::MAX,
        };
        if target > committed.get(self.name.as_ref()).copied().unwrap_or(0) {
            vec![(self.name.to_string(), target)]
        } else {
            Vec::new()
        }
    }

    fn check_resume(&self, _committed: &HashMap<String, i64>) -> Result<(), SourceError> {
        // A message log keeps its offsets: any stored offset is a valid place to resume.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
        pairs.iter().map(|(n, o)| (n.to_string(), *o)).collect()
    }

    #[test]
    fn ndjson_positions_resume_and_advance_through_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.ndjson"), b"{}\n{}\n").unwrap();
        std::fs::write(dir.path().join("b.ndjson"), b"{}\n").unwrap();
        let source = NdjsonSource::open(dir.path()).unwrap();
        let log: &dyn ReplayLog = &source;
        assert_eq!(
            log.partitions(),
            vec![Arc::from("a.ndjson"), Arc::from("b.ndjson")]
        );
        // Nothing published: the first file's start.
        let start = log.resume_at(&HashMap::new());
        assert_eq!(
            log.partition_of(start).map(|n| n.as_ref()),
            Some("a.ndjson")
        );
        assert_eq!(start.offset, 0);
        // The first file done: the second one's start.
        let at = log.resume_at(&committed(&[("a.ndjson", 6)]));
        assert_eq!(log.partition_of(at).map(|n| n.as_ref()), Some("b.ndjson"));
        // Publishing up to 1 byte into b moves a to its end and b to 1.
        let to = log.position_of("b.ndjson", 1);
        assert_eq!(
            log.advances(&committed(&[("a.ndjson", 2)]), to),
            vec![("a.ndjson".to_string(), 6), ("b.ndjson".to_string(), 1)]
        );
        // A name not in this run sorts between the files.
        let gone = log.position_of("a2.ndjson", 0);
        assert!(gone > log.position_of("a.ndjson", 6) && gone < log.position_of("b.ndjson", 0));
        assert!(log.partition_of(gone).is_none());
    }

    #[test]
    fn a_log_partition_has_one_source_partition_and_no_end() {
        let log = LogPartition::new("events/3");
        assert_eq!(log.partitions(), vec![Arc::from("events/3")]);
        let at = log.resume_at(&committed(&[("events/3", 41)]));
        assert_eq!(at, log.position(41));
        assert_eq!(log.partition_of(at).map(|n| n.as_ref()), Some("events/3"));
        assert_eq!(
            log.advances(&committed(&[("events/3", 41)]), log.position(50)),
            vec![("events/3".to_string(), 50)]
        );
        assert!(log
            .advances(&committed(&[("events/3", 41)]), log.position(41))
            .is_empty());
        assert!(log.position_of("events/2", 9) < log.position(0));
        assert!(log.position_of("events/4", 0) > log.position(i64::MAX - 1));
        assert!(log
            .check_resume(&committed(&[("events/3", 1 << 40)]))
            .is_ok());
    }
}
