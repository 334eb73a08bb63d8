//! Rows of open windows, held in memory up to one byte budget for all windows together.

use std::collections::{BTreeMap, HashMap};

use deltalake::arrow::array::RecordBatch;
use sluice_stage::{StageError, StagedFile, Stager};
use sluice_window::Window;

/// The rows one open window holds: in memory, and in staged parts flushed to stay in budget.
#[derive(Debug, Default)]
pub(crate) struct WindowBuffer {
    pub batches: Vec<RecordBatch>,
    pub bytes: usize,
    pub rows: u64,
    /// Parts staged for this window by budget flushes (not yet published).
    pub parts: Vec<Part>,
    /// The in-memory bytes the parts held before they were staged.
    pub parts_bytes: usize,
    /// First and last offset per source partition, for the commit metadata.
    pub ranges: HashMap<String, (i64, i64)>,
}

/// Rows of a window staged early, to stay within the memory budget.
#[derive(Debug)]
pub(crate) struct Part {
    pub file: StagedFile,
    /// With a row key: the key bucket ([`crate::dedupe::KEY_BUCKETS`]) of every row of the
    /// part, so that the window's publication dedupes one group of buckets at a time.
    pub bucket: Option<u32>,
}

/// All rows of a window, in read order: its staged parts read back, then its in-memory rows.
pub(crate) async fn read_rows(
    stager: &Stager,
    parts: &[Part],
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>, StageError> {
    let mut rows: Vec<RecordBatch> = Vec::new();
    for part in parts {
        rows.extend(stager.read(&part.file.path).await?);
    }
    rows.extend(batches);
    Ok(rows)
}

impl WindowBuffer {
    /// The window's bytes, in memory and staged (as they were in memory).
    pub fn total_bytes(&self) -> usize {
        self.bytes + self.parts_bytes
    }

    /// The files of the parts staged so far (intermediates: deleted once the window's
    /// publication has its rows in other files).
    pub fn part_files(&self) -> Vec<StagedFile> {
        self.parts.iter().map(|p| p.file.clone()).collect()
    }
}

/// All open windows' buffers and the memory they hold.
#[derive(Debug)]
pub(crate) struct Buffers {
    windows: BTreeMap<Window, WindowBuffer>,
    bytes: usize,
    bytes_max: usize,
}

impl Buffers {
    pub fn new(bytes_max: usize) -> Self {
        Buffers {
            windows: BTreeMap::new(),
            bytes: 0,
            bytes_max,
        }
    }

    pub fn push(
        &mut self,
        window: Window,
        batch: RecordBatch,
        partition: &str,
        first: i64,
        last: i64,
    ) {
        let bytes = batch.get_array_memory_size();
        let buffer = self.windows.entry(window).or_default();
        buffer.rows += batch.num_rows() as u64;
        buffer.bytes += bytes;
        buffer.batches.push(batch);
        buffer
            .ranges
            .entry(partition.to_string())
            .and_modify(|(lo, hi)| {
                *lo = (*lo).min(first);
                *hi = (*hi).max(last);
            })
            .or_insert((first, last));
        self.bytes += bytes;
    }

    /// The bytes `window` holds, in memory and staged (0 for a window without rows).
    pub fn total_bytes_of(&self, window: Window) -> usize {
        self.windows
            .get(&window)
            .map_or(0, WindowBuffer::total_bytes)
    }

    /// The bytes held in memory, all windows together.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    pub fn over_budget(&self) -> bool {
        self.bytes > self.bytes_max
    }

    /// The window holding the most bytes in memory.
    pub fn largest(&self) -> Option<Window> {
        self.windows
            .iter()
            .filter(|(_, b)| b.bytes > 0)
            .max_by_key(|(_, b)| b.bytes)
            .map(|(w, _)| *w)
    }

    /// Takes the in-memory rows of `window` (to stage them as parts), counted as staged.
    pub fn take_batches(&mut self, window: Window) -> Vec<RecordBatch> {
        let Some(buffer) = self.windows.get_mut(&window) else {
            return Vec::new();
        };
        self.bytes -= buffer.bytes;
        buffer.parts_bytes += buffer.bytes;
        buffer.bytes = 0;
        std::mem::take(&mut buffer.batches)
    }

    pub fn add_part(&mut self, window: Window, part: Part) {
        self.windows.entry(window).or_default().parts.push(part);
    }

    pub fn remove(&mut self, window: Window) -> WindowBuffer {
        let buffer = self.windows.remove(&window).unwrap_or_default();
        self.bytes -= buffer.bytes;
        buffer
    }
}
