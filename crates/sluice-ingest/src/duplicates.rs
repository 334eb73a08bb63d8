//! Duplicate deliveries a run without a natural key keeps. Without `--key`, rows are keyed by
//! source position, so a record delivered twice (at-least-once) is two rows; the run counts
//! records that are byte-for-byte copies of an earlier one so its summary can say so and
//! suggest `--key`. Only counted: nothing is dropped.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Distinct lines remembered, at most: about 24 bytes each, so the count costs at most a few
/// MiB; past it, copies of lines not remembered go uncounted and the count is a lower bound.
pub const DUPLICATE_LINES_REMEMBERED_MAX: usize = 262_144;

/// Counts lines equal to an earlier line at another position.
#[derive(Debug, Default)]
pub struct LineDuplicates {
    /// Line hash → the position (file, offset) where it was first seen: a line read again at
    /// its own position (a restart re-reading the source) is not a copy.
    first_seen: HashMap<u64, (u32, i64)>,
    hasher: std::hash::RandomState,
    /// Copies counted.
    pub copies: u64,
    /// Whether the memory bound was reached (the count is then a lower bound).
    pub capped: bool,
}

impl LineDuplicates {
    /// Counts the line at `(file, offset)` (its bytes without the newline).
    pub fn see(&mut self, file: u32, offset: i64, line: &[u8]) {
        let line = line.trim_ascii();
        let mut h = self.hasher.build_hasher();
        h.write(line);
        let hash = h.finish();
        match self.first_seen.get(&hash) {
            Some(&first) if first != (file, offset) => self.copies += 1,
            Some(_) => {}
            None if self.first_seen.len() < DUPLICATE_LINES_REMEMBERED_MAX => {
                self.first_seen.insert(hash, (file, offset));
            }
            None => self.capped = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_at_other_positions_count_and_rereads_do_not() {
        let mut d = LineDuplicates::default();
        d.see(0, 0, b"{\"id\":1}");
        d.see(0, 9, b"{\"id\":2}");
        d.see(0, 18, b"{\"id\":1}\r");
        d.see(0, 0, b"{\"id\":1}"); // the same line re-read after a restart
        d.see(1, 0, b"{\"id\":2}");
        assert_eq!(d.copies, 2);
        assert!(!d.capped);
    }
}
