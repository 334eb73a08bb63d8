//! Which table version each notify target has been delivered through: marks a notifier
//! raises and the table's writer records with its every commit (as `txn`s), so a notifier
//! reads where to go on from the table itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The `txn` partition name under which delivery to notify target `target` is recorded
/// (appId `<pipeline>/.notify/<target>`, version = the last table version delivered).
pub fn notify_txn(target: &str) -> String {
    format!(".notify/{target}")
}

/// The last table version delivered to each notify target, shared by a notifier (which
/// raises a target's mark after delivering) and the writer of the table (whose every commit
/// records the marks, see `TableOptions::notified`). A clone is the same marks.
#[derive(Debug, Clone, Default)]
pub struct DeliveredMarks(Arc<Mutex<BTreeMap<String, u64>>>);

impl DeliveredMarks {
    /// Raises `target`'s mark to `through` (never lowers it).
    pub fn deliver(&self, target: &str, through: u64) {
        let mut marks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mark = marks.entry(target.to_string()).or_insert(through);
        *mark = (*mark).max(through);
    }

    /// Every target's mark.
    pub fn marks(&self) -> Vec<(String, u64)> {
        let marks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        marks.iter().map(|(t, v)| (t.clone(), *v)).collect()
    }
}
