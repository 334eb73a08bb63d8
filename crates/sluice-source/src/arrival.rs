//! The order a file source reads its files in: the order they arrived, whatever their names.
//!
//! Every file has a *rank*: files are read by rank, names breaking ties. A file keeps the
//! rank it was given when it was first seen: the files of a source opened over a table that
//! has read none of them get ranks in name order, and a file that appears later gets the
//! next rank, so it is read after every file seen before it even if its name sorts first
//! (uuid-named, host-named, late-arriving files). Positions `(file ordinal, offset)` follow
//! this order, so a new file's records never sort before positions already published.
//!
//! Ranks live in the table: a commit stores the rank of every file read up to the position
//! it covers, and a run resumes with the stored ranks (files the table has no rank for are
//! new). A table written before ranks were kept has offsets without ranks: the files there
//! at the first look rank 0, in name order, as that version read them (so one that appeared
//! with a name before files already read is refused, as it was then: its positions would
//! sort below published ones), and files that appear after that look rank after them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::file::SourceFile;

/// The ranks of a file source's files; see the module doc.
#[derive(Debug, Clone, Default)]
pub(crate) struct Arrival {
    ranks: HashMap<Arc<str>, i64>,
    /// The rank the next new file gets.
    next: i64,
    /// A table from before ranks: the next [`Arrival::order`] ranks the files it does not
    /// know [`LEGACY_RANK`] (name order) instead of as new.
    legacy: bool,
}

/// The rank a file of a table written before ranks were kept has (see the module doc).
const LEGACY_RANK: i64 = 0;

impl Arrival {
    /// Ranks as the table stores them (`stored`, by file name), and the files it has resume
    /// offsets for (`committed`): a file with an offset but no rank was read by an earlier
    /// version, in name order.
    pub fn from_table(stored: &HashMap<String, i64>, committed: &HashMap<String, i64>) -> Self {
        let mut ranks: HashMap<Arc<str>, i64> = committed
            .keys()
            .map(|name| (Arc::from(name.as_str()), LEGACY_RANK))
            .collect();
        ranks.extend(
            stored
                .iter()
                .map(|(name, rank)| (Arc::from(name.as_str()), *rank)),
        );
        let next = ranks.values().copied().max().unwrap_or(LEGACY_RANK) + 1;
        Arrival {
            ranks,
            next,
            legacy: stored.is_empty() && !committed.is_empty(),
        }
    }

    /// The rank of `name`, if it has one.
    pub fn rank(&self, name: &str) -> Option<i64> {
        self.ranks.get(name).copied()
    }

    /// The sort key of a file called `name`: its rank (a name without one sorts as a file of
    /// a table from before ranks), then its name.
    pub fn key<'a>(&self, name: &'a str) -> (i64, &'a str) {
        (self.rank(name).unwrap_or(LEGACY_RANK), name)
    }

    /// Orders `files` by rank, then name; files without a rank are new: they get the next
    /// ranks, in name order, after every ranked one (for a table from before ranks, rank 0).
    pub fn order(&mut self, files: &mut [SourceFile]) {
        if std::mem::take(&mut self.legacy) {
            for f in files.iter() {
                self.ranks.entry(f.name.clone()).or_insert(LEGACY_RANK);
            }
        }
        files.sort_by(|a, b| {
            let (ra, rb) = (self.rank(&a.name), self.rank(&b.name));
            // New files (no rank) after ranked ones, by name.
            (ra.is_none(), ra, &a.name).cmp(&(rb.is_none(), rb, &b.name))
        });
        for f in files.iter() {
            if !self.ranks.contains_key(&f.name) {
                self.ranks.insert(f.name.clone(), self.next);
                self.next += 1;
            }
        }
    }

    /// Appends the files of `listed` that `files` does not hold yet, as new files (next
    /// ranks, in name order).
    pub fn append_new(&mut self, files: &mut Vec<SourceFile>, mut listed: Vec<SourceFile>) {
        listed.retain(|f| !self.ranks.contains_key(&f.name));
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        for f in listed {
            self.ranks.insert(f.name.clone(), self.next);
            self.next += 1;
            files.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::Compression;

    fn file(name: &str) -> SourceFile {
        SourceFile {
            name: Arc::from(name),
            path: name.into(),
            len: 1,
            size: 1,
            compression: Compression::None,
            modified_ms: None,
        }
    }

    fn names(files: &[SourceFile]) -> Vec<&str> {
        files.iter().map(|f| f.name.as_ref()).collect()
    }

    #[test]
    fn new_files_come_after_ranked_ones_whatever_their_names() {
        let stored: HashMap<String, i64> = [("m".to_string(), 2), ("z".to_string(), 1)].into();
        let committed: HashMap<String, i64> = [("k".to_string(), 10)].into();
        let mut arrival = Arrival::from_table(&stored, &committed);
        let mut files: Vec<SourceFile> = ["a", "m", "k", "b", "z"].map(file).into();
        arrival.order(&mut files);
        assert_eq!(names(&files), ["k", "z", "m", "a", "b"]);
        assert_eq!(arrival.rank("a"), Some(3));
        assert_eq!(arrival.rank("b"), Some(4));
        arrival.append_new(&mut files, ["0", "a", "c"].map(file).into());
        assert_eq!(names(&files), ["k", "z", "m", "a", "b", "0", "c"]);
        assert_eq!(arrival.key("0"), (5, "0"));
        assert_eq!(arrival.key("gone"), (0, "gone"));
    }

    /// A table from before ranks (offsets, no ranks): the files there at the first look keep
    /// the name order that version read them in; files appearing later come after them.
    #[test]
    fn a_table_from_before_ranks_keeps_name_order_for_the_files_it_had() {
        let committed: HashMap<String, i64> = [("k".to_string(), 10)].into();
        let mut arrival = Arrival::from_table(&HashMap::new(), &committed);
        let mut files: Vec<SourceFile> = ["m", "k", "a"].map(file).into();
        arrival.order(&mut files);
        assert_eq!(names(&files), ["a", "k", "m"]);
        assert_eq!(arrival.rank("a"), Some(0));
        arrival.append_new(&mut files, ["0"].map(file).into());
        assert_eq!(names(&files), ["a", "k", "m", "0"]);
        assert_eq!(arrival.rank("0"), Some(1));
    }
}
