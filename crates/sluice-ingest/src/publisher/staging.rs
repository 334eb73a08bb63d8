//! The staging tasks of a group's publications: a first publication's rows deduped a group
//! of key buckets at a time, and a republication (late rows, a replay) added to its window or
//! rewriting it. Each runs on a task of its own, beside the run's routing and the other
//! publications' staging ([`STAGING_TASKS_MAX`]).

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use sluice_publish::{PublishedFile, Replace};
use sluice_stage::{StageError, StageSlot, StagedFile};

use crate::buffer::WindowBuffer;
use crate::config::IngestError;
use crate::dedupe::unique_rows;
use crate::dedupe::{any_key_in, dedupe, split_by_key, KeySpec};

/// Stages a window's rows deduped by `key`, one group of key buckets at a time (one file per
/// group that has rows, in `slots`' names): each group's parts are read, joined by its
/// in-memory rows, deduped and encoded, and dropped before the next group is read. Rows of
/// one key are in one group, so the winners are those of one dedupe over the whole window.
pub(super) async fn stage_deduped(
    slots: Vec<StageSlot>,
    schema: SchemaRef,
    parts: Vec<(Option<u32>, String)>,
    batches: Vec<RecordBatch>,
    key: KeySpec,
) -> Result<Vec<StagedFile>, IngestError> {
    let groups = slots.len().max(1) as u32;
    let mut in_memory = if groups == 1 {
        vec![batches]
    } else {
        let columns = key.columns.clone();
        tokio::task::spawn_blocking(move || split_by_key(batches, &columns, groups))
            .await
            .map_err(StageError::from)??
    };
    let mut files = Vec::with_capacity(slots.len());
    for (group, slot) in slots.into_iter().enumerate() {
        let mut inputs: Vec<RecordBatch> = Vec::new();
        for (bucket, path) in &parts {
            if bucket.map_or(group == 0, |b| b % groups == group as u32) {
                inputs.extend(slot.read(path).await?);
            }
        }
        inputs.append(&mut in_memory[group]);
        if groups > 1 && inputs.iter().all(|b| b.num_rows() == 0) {
            continue; // no rows of this group: no file (its name stays unused)
        }
        let (dedupe_schema, key) = (schema.clone(), key.clone());
        let file = slot
            .write_computed(schema.clone(), move || {
                Ok::<_, IngestError>(vec![dedupe(&dedupe_schema, &inputs, &key)?])
            })
            .await?;
        files.push(file);
    }
    Ok(files)
}

/// At most this many of a group's publications stage at once (each on a task of its own):
/// two keep both cores of a small machine busy when several windows are due together (the
/// end of the input, a catch-up, the late rows of many windows), while `--flush-bytes-max`
/// bounds the rows they hold ([`Publisher::make_room`]).
pub(super) const STAGING_TASKS_MAX: usize = 2;

/// What a staging task wrote: the publication's files, and for a republication how they
/// replace the window's.
#[derive(Debug)]
pub(super) struct Staged {
    pub files: Vec<StagedFile>,
    pub replace: Option<Replace>,
}

impl Staged {
    pub fn files(files: Vec<StagedFile>) -> Staged {
        Staged {
            files,
            replace: None,
        }
    }
}

/// Stages a republication of a window (late rows, a replay) as one file: its rows deduped
/// by row key (or position) are added as one more file when none of their keys is in the
/// window's `present` files yet, else the window is rewritten with them. `columns` are the
/// columns that identify a row (`Policy::key_columns`).
pub(super) async fn restage(
    slot: StageSlot,
    schema: SchemaRef,
    buffer: WindowBuffer,
    present: Vec<PublishedFile>,
    key: Option<KeySpec>,
    columns: Vec<String>,
) -> Result<Staged, IngestError> {
    let mut inputs: Vec<RecordBatch> = Vec::new();
    for part in &buffer.parts {
        inputs.extend(slot.read(&part.file.path).await?);
    }
    inputs.extend(buffer.batches);
    let (dedupe_schema, dedupe_key) = (schema.clone(), key.clone());
    let unique = slot
        .compute(move || {
            Ok::<_, IngestError>(unique_rows(&dedupe_schema, &inputs, dedupe_key.as_ref())?)
        })
        .await?;
    let mut present_keys: Vec<RecordBatch> = Vec::new();
    for f in &present {
        present_keys.extend(slot.read_columns(&f.path, file_size(f), &columns).await?);
    }
    if !any_key_in(&unique, &present_keys, &columns)? {
        // The rewrite would keep every published row and add these: adding them as one
        // more file gives the same rows without reading and re-encoding the window.
        drop(present_keys);
        let file = slot
            .write_computed(schema, move || Ok::<_, IngestError>(vec![unique]))
            .await?;
        return Ok(Staged {
            files: vec![file],
            replace: Some(Replace::AddLate),
        });
    }
    drop(present_keys);
    let mut inputs: Vec<RecordBatch> = Vec::new();
    for f in &present {
        inputs.extend(slot.read(&f.path).await?);
    }
    inputs.push(unique);
    let dedupe_schema = schema.clone();
    let file = slot
        .write_computed(schema, move || {
            Ok::<_, IngestError>(vec![unique_rows(&dedupe_schema, &inputs, key.as_ref())?])
        })
        .await?;
    Ok(Staged {
        files: vec![file],
        replace: Some(Replace::Window),
    })
}

/// A published file's size as the Delta log gives it (what a ranged read of it may fetch up
/// to); a negative size, which no writer records, reads as 0 (the file is then read whole).
pub(super) fn file_size(file: &PublishedFile) -> u64 {
    u64::try_from(file.size_bytes).unwrap_or(0)
}
