//! Rejected records: kept with their position and reason, never silently dropped (E6).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One rejected input record, as written to the rejects output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectRecord {
    pub pipeline: String,
    /// Source partition (for NDJSON: the file name).
    pub partition: String,
    pub offset: i64,
    /// Stable reason code: `malformed_json`, `wrong_type`, `not_one_object`, `missing_time`,
    /// `bad_time`.
    pub reason: String,
    pub detail: String,
    pub raw: String,
}

/// Where rejected records go. A sink must be idempotent by `(partition, offset)`: a replay
/// after a restart offers the same records again.
pub trait RejectSink: Send {
    fn write(&mut self, records: &[RejectRecord]) -> std::io::Result<()>;
    /// Makes everything written so far durable. Called before every commit that moves a
    /// resume position past rejected records, so no reject is lost to a crash.
    fn sync(&mut self) -> std::io::Result<()>;
}

/// An NDJSON file of [`RejectRecord`]s, appended to, that skips records it already holds.
#[derive(Debug)]
pub struct RejectFile {
    path: PathBuf,
    file: File,
    seen: HashSet<(String, i64)>,
    dirty: bool,
}

impl RejectFile {
    /// Opens (or creates) the file and reads the positions it already holds. A torn last line
    /// (a crash mid-write) is ignored: its record will be offered again by the replay.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut seen = HashSet::new();
        let mut valid_len = 0u64;
        if path.exists() {
            let mut reader = BufReader::new(File::open(path)?);
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader.read_line(&mut line)?;
                if n == 0 || !line.ends_with('\n') {
                    break;
                }
                match serde_json::from_str::<RejectRecord>(&line) {
                    Ok(r) => {
                        seen.insert((r.partition, r.offset));
                        valid_len += n as u64;
                    }
                    Err(_) => break,
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(false)
            .write(true)
            .truncate(false)
            .open(path)?;
        // Cut a torn tail so appends start on a line boundary.
        file.set_len(valid_len)?;
        let mut rf = RejectFile {
            path: path.to_path_buf(),
            file,
            seen,
            dirty: false,
        };
        use std::io::Seek;
        rf.file.seek(std::io::SeekFrom::End(0))?;
        Ok(rf)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

impl RejectSink for RejectFile {
    fn write(&mut self, records: &[RejectRecord]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for r in records {
            if self.seen.insert((r.partition.clone(), r.offset)) {
                serde_json::to_writer(&mut out, r).map_err(std::io::Error::other)?;
                out.push(b'\n');
            }
        }
        if !out.is_empty() {
            self.file.write_all(&out)?;
            self.dirty = true;
        }
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64) -> RejectRecord {
        RejectRecord {
            pipeline: "p".into(),
            partition: "a.ndjson".into(),
            offset,
            reason: "malformed_json".into(),
            detail: "x".into(),
            raw: "{".into(),
        }
    }

    #[test]
    fn replayed_rejects_are_written_once_and_torn_tails_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.ndjson");
        let mut f = RejectFile::open(&path).unwrap();
        f.write(&[record(1), record(2)]).unwrap();
        f.sync().unwrap();
        drop(f);
        // A crash mid-append leaves half a line.
        let mut raw = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        raw.write_all(b"{\"pipeline\":\"p\",\"parti").unwrap();
        drop(raw);
        let mut f = RejectFile::open(&path).unwrap();
        assert_eq!(f.len(), 2);
        f.write(&[record(2), record(3)]).unwrap();
        f.sync().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let offsets: Vec<i64> = text
            .lines()
            .map(|l| serde_json::from_str::<RejectRecord>(l).unwrap().offset)
            .collect();
        assert_eq!(offsets, vec![1, 2, 3]);
    }
}
