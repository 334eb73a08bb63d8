//! Replaying dead letters (`sluice dead-letters --replay`): records that could not land, read
//! again with decode options that now fit them (a corrected time format, say), landed in their
//! windows at their original source positions, exactly once.
//!
//! A replay publishes through the run's own publisher ([`Publisher`]) under the table's
//! policy, so it keeps the table's promise as a run does (E9): in swap mode each window the
//! letters fall in is republished with the rows that change it (by row key, or position);
//! a merge upserts in its window; a mirror's MERGE across the table keeps one row per key,
//! ordered by the sequence and respecting tombstones; a history's changes become versions.
//! A replayed row keeps the dead letter's source partition and offset, so in a table keyed by
//! position it is the row a clean run would have written. A row already there changes
//! nothing, so a second replay (or a replay after a crash between the table's commit and the
//! dead-letter table's) commits nothing to the table. The caller then records each replayed
//! letter in the dead-letter table (reason `replayed`).

use std::collections::BTreeMap;

use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray, StructArray};
use deltalake::arrow::error::ArrowError;
use sluice_publish::{Coverage, PublishError, WindowTable, OFFSET_COLUMN, SOURCE_COLUMN};
use sluice_source::Chunk;
use sluice_source::{FieldPath, LineDecoder, RAW_BYTES_MAX};
use sluice_stage::{StageError, Stager};
use sluice_window::{TimeSpec, Window, WindowFinder};

use crate::buffer::WindowBuffer;
use crate::config::{IngestConfig, IngestError};
use crate::dedupe::{absent_rows, drop_losers, unique_rows, with_positions};
use crate::expectations::{ApplyError, Expectations};
use crate::publisher::{CommitMeta, Committed, Policy, Publisher};

/// A dead letter to replay, as the dead-letter table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    pub source: String,
    pub offset: i64,
    pub reason: String,
    pub raw: String,
}

/// What became of one replayed letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Its row is in the table now, at this address (landed by this replay, or one before).
    Landed { address: String },
    /// It still does not decode: the reason code and detail.
    Failing { reason: String, detail: String },
}

/// The outcome of a replay.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Each letter's fate, in the order given.
    pub fates: Vec<(Letter, Fate)>,
    /// Rows the commit added or replaced (0: every row was there already).
    pub rows_changed: u64,
    /// Windows republished.
    pub windows: u64,
    /// The commit's version, if one was made.
    pub version: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error("arrow failed on replayed rows: {0}")]
    Arrow(#[from] ArrowError),
    #[error("reading the table failed: {0}")]
    Table(#[from] deltalake::DeltaTableError),
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error(transparent)]
    Publication(#[from] IngestError),
}

/// How the table stores event times: its time field and format (the contract's, whatever
/// the replay reads its letters with).
#[derive(Debug, Clone)]
pub struct StoredTime {
    pub field: String,
    pub time: TimeSpec,
}

/// Replays `letters` into `table` under `config`, the table's own options (its mode, key,
/// sequence, deletes and history; see the module docs): decodes them with `decoder` (which
/// must not grow the schema: its evolution rejects new fields), and publishes each window
/// they change as a run would, staging with `stager`. A replayed row's time field holds
/// its event time as `stored` writes it, whatever the letters were read with, so that every
/// reader of the table's time field (a dedupe's, a later run's) reads it back. Returns the
/// table after the replay.
pub async fn replay(
    config: &IngestConfig,
    stored: &StoredTime,
    table: WindowTable,
    decoder: &mut LineDecoder,
    stager: Stager,
    letters: Vec<Letter>,
    at_ms: i64,
) -> Result<(Replayed, WindowTable), ReplayError> {
    // Every row the publication compares holds its time as the table writes it (a replayed
    // one too, see `in_stored_time`): a dedupe by event time reads it so.
    let mut config = config.clone();
    if let Some(key) = config.key.as_mut() {
        key.time_field = stored.field.clone();
        key.time = stored.time.clone();
    }
    let mut publisher = Publisher::new(Policy::of(&config), table, None, stager);
    let schema = publisher.file_schema().clone();
    let mut finder = WindowFinder::new(publisher.table().size());
    let mut fates = Vec::with_capacity(letters.len());
    let mut offered: BTreeMap<Window, Vec<RecordBatch>> = BTreeMap::new();
    for letter in &letters {
        match decode(decoder, letter, &config.expectations)
            .and_then(|(r, t)| Ok((in_stored_time(r, t, stored)?, t)))
        {
            Err(fate) => fates.push(fate),
            Ok((records, t)) => {
                let window = finder.find(t);
                let row = with_positions(&schema, &records, &letter.source, vec![letter.offset])?;
                offered.entry(window).or_default().push(row);
                fates.push(Fate::Landed {
                    address: publisher.table().address(window).hive_path(),
                });
            }
        }
    }
    let mut landed = Landing::default();
    for (window, rows) in offered {
        let Some((rows, changing)) = changing_rows(&mut publisher, window, rows).await? else {
            continue;
        };
        let coverage = coverage_of(&mut publisher, window, &rows).await?;
        let buffer = WindowBuffer {
            bytes: rows.get_array_memory_size(),
            rows: rows.num_rows() as u64,
            batches: vec![rows],
            ..WindowBuffer::default()
        };
        if publisher.must_commit_group_before(window, true, buffer.bytes) {
            landed.add(publisher.finish_pending().await?);
        }
        let meta = CommitMeta {
            txns: Vec::new(),
            position_ranges: serde_json::json!({"replayed_dead_letters": buffer.rows}),
            coverage,
            now_ms: at_ms,
        };
        landed.rows_changed += changing;
        landed.add(publisher.publish(window, buffer, true, meta).await?);
    }
    landed.add(publisher.finish_pending().await?);
    let fates = letters.into_iter().zip(fates).collect();
    let replayed = Replayed {
        fates,
        rows_changed: landed.rows_changed,
        windows: landed.windows,
        version: landed.version,
    };
    Ok((replayed, publisher.into_table()))
}

/// A letter's record decoded as the table's row, with its event time; or why it still does
/// not land.
fn decode(
    decoder: &mut LineDecoder,
    letter: &Letter,
    rules: &Expectations,
) -> Result<(RecordBatch, sluice_window::EventTime), Fate> {
    if let Some(why) = changed_copy(&letter.raw).or_else(|| unparsed(&letter.reason)) {
        return Err(Fate::Failing {
            reason: NOT_REPLAYABLE.into(),
            detail: why,
        });
    }
    // Read as the file's line was: a byte-order mark inside a file is not skipped.
    let chunk = Chunk {
        file: 0,
        start: letter.offset,
        data: format!("{}\n", letter.raw).into_bytes(),
        message_offsets: None,
        ..Chunk::default()
    };
    // A record that breaks the decoder (E8) stays a dead letter, as in a run: a replay
    // that failed on it would fail again on every rerun.
    let decoded = decoder
        .decode(&chunk)
        .map_err(|e| internal_error(e.to_string()))?;
    // The table's rules hold for a replayed row as for any other: one that breaks a drop or
    // a fail rule stays a dead letter.
    let decoded = rules
        .apply(decoded, &chunk, &letter.source, &mut Default::default())
        .map_err(|e| match e {
            ApplyError::Broken(b) => Fate::Failing {
                reason: "expectation".into(),
                detail: format!(
                    "{}: {} is false for this row (--expect-or-fail)",
                    b.rule, b.sql
                ),
            },
            e => internal_error(e.to_string()),
        })?;
    if let Some(r) = decoded.rejects.first() {
        return Err(Fate::Failing {
            reason: r.reason.as_str().to_string(),
            detail: r.reason.detail(),
        });
    }
    match decoded.event_times.first() {
        Some(t) => Ok((decoded.batch, *t)),
        None => Err(internal_error("the record decoded to no row".into())),
    }
}

/// `records` (a letter's one row, read at event time `t`) with the table's time field
/// holding `t` as the table writes it, where that field is text: a letter read with other
/// time options would otherwise leave a time the table's format cannot read back, which a
/// dedupe by event time would take for the earliest (and a later run's too). A field of
/// another type holds the instant itself, or is left as it is.
fn in_stored_time(
    records: RecordBatch,
    t: sluice_window::EventTime,
    stored: &StoredTime,
) -> Result<RecordBatch, Fate> {
    let schema = records.schema();
    let Ok(path) = FieldPath::resolve(&schema, &stored.field) else {
        return Ok(records);
    };
    let is_text = path
        .field(&schema)
        .is_ok_and(|f| *f.data_type() == deltalake::arrow::datatypes::DataType::Utf8);
    if !is_text {
        return Ok(records);
    }
    let text = stored.time.write(t).ok_or_else(|| Fate::Failing {
        reason: NOT_REPLAYABLE.into(),
        detail: format!(
            "its event time {} cannot be written exactly in the table's time format ({}), which its time field must hold",
            t.to_rfc3339(),
            stored.time.describe()
        ),
    })?;
    with_text_at(&records, path.names(), &text).map_err(|e| internal_error(e.to_string()))
}

/// `batch` with the text of the field at `path` (top-level name, then struct members)
/// replaced by `text` in every row.
fn with_text_at(
    batch: &RecordBatch,
    path: &[String],
    text: &str,
) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    let i = schema.index_of(&path[0])?;
    let mut columns = batch.columns().to_vec();
    columns[i] = text_replaced(&columns[i], &path[1..], text)?;
    RecordBatch::try_new(schema, columns)
}

fn text_replaced(array: &ArrayRef, rest: &[String], text: &str) -> Result<ArrayRef, ArrowError> {
    let Some((name, rest)) = rest.split_first() else {
        let texts: StringArray = std::iter::repeat_n(Some(text), array.len()).collect();
        return Ok(Arc::new(texts));
    };
    let parent = array
        .as_struct_opt()
        .ok_or_else(|| ArrowError::SchemaError(format!("{name}: not a struct member")))?;
    let (fields, mut children, nulls) = parent.clone().into_parts();
    let j = fields
        .iter()
        .position(|f| f.name() == name)
        .ok_or_else(|| ArrowError::SchemaError(format!("no member {name}")))?;
    children[j] = text_replaced(&children[j], rest, text)?;
    Ok(Arc::new(StructArray::try_new(fields, children, nulls)?))
}

/// The offered `rows` of `window`, unique by the table's row key, and how many of them
/// change the table; `None` if none would. Where the policy publishes within the window
/// (swap, a window-scope merge) they are compared with the window's rows here; a MERGE
/// across the table (a mirror, a history) decides itself, and its rows changed are counted
/// from its commit.
async fn changing_rows(
    publisher: &mut Publisher,
    window: Window,
    rows: Vec<RecordBatch>,
) -> Result<Option<(RecordBatch, u64)>, ReplayError> {
    let schema = publisher.file_schema().clone();
    let key = publisher.policy().key.clone();
    let offered = unique_rows(&schema, &rows, key.as_ref())?;
    if publisher.merges_across_table() {
        return Ok(Some((offered, 0)));
    }
    let address = publisher.table().address(window);
    let current = publisher.current_rows(&address).await?;
    let changing = match &key {
        Some(key) => drop_losers(&offered, &current, key)?,
        None => absent_rows(&offered, &current, &position_columns())?,
    };
    let n = changing.num_rows() as u64;
    Ok((n > 0).then_some((changing, n)))
}

/// What the replay's commits did.
#[derive(Debug, Default)]
struct Landing {
    rows_changed: u64,
    windows: u64,
    version: Option<u64>,
}

impl Landing {
    fn add(&mut self, committed: impl IntoIterator<Item = Committed>) {
        for c in committed.into_iter().filter(|c| c.landed) {
            self.windows += 1;
            if c.merge {
                self.rows_changed += c.published.rows.max(0) as u64;
            }
            self.version = Some(c.published.version);
        }
    }
}

/// The coverage a republication of `window` records: the window's own (the highest of its
/// files), or for a window without files the lowest position among `rows`.
async fn coverage_of(
    publisher: &mut Publisher,
    window: Window,
    rows: &RecordBatch,
) -> Result<Coverage, ReplayError> {
    let address = publisher.table().address(window);
    let files = publisher.table_mut().files_at(&address).await?;
    Ok(files
        .iter()
        .filter_map(|f| f.coverage.clone())
        .max_by_key(|c| c.offset)
        .unwrap_or_else(|| lowest_coverage(std::slice::from_ref(rows))))
}

/// The reason of a dead letter whose record the dead-letter table does not hold exactly.
const NOT_REPLAYABLE: &str = "not_replayable";

/// Why `raw` may not be the record as it was read: the dead-letter table keeps a record's
/// first [`RAW_BYTES_MAX`] bytes, as UTF-8 with bytes that are not replaced by U+FFFD.
/// Replayed, such a copy could land changed values, so it is not replayed (a record that
/// really holds U+FFFD is refused too: it cannot be told apart).
fn changed_copy(raw: &str) -> Option<String> {
    if raw.len() >= RAW_BYTES_MAX {
        return Some(format!(
            "the dead-letter table holds only its first {RAW_BYTES_MAX} bytes; backfill its window from the source instead"
        ));
    }
    raw.contains('\u{FFFD}').then(|| {
        "the dead-letter table holds it with bytes that are not UTF-8 replaced (U+FFFD); backfill its window from the source instead".to_string()
    })
}

/// Why a letter of `reason` is not replayed: a CSV record that could not be split into the
/// header's fields is kept as its text, not as a record, and no decode option changes how a
/// record is split. (Read as a JSON line it would fail as `not_one_object`, which is not why.)
fn unparsed(reason: &str) -> Option<String> {
    ["wrong_field_count", "unterminated_quote"].contains(&reason).then(|| {
        format!(
            "{reason}: a CSV record that is not the header's fields is kept as its text, not as a record; correct the file and backfill its window"
        )
    })
}

fn internal_error(detail: String) -> Fate {
    Fate::Failing {
        reason: "internal_error".into(),
        detail,
    }
}

fn position_columns() -> Vec<String> {
    vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()]
}

/// The coverage of a window that had no files: the lowest position among its rows (nothing
/// below it in the window was landed, so a restarted stream reads anything after it as late,
/// never as a replay).
fn lowest_coverage(rows: &[RecordBatch]) -> Coverage {
    let mut lowest: Option<(String, i64)> = None;
    for b in rows {
        let (Some(sources), Some(offsets)) = (
            b.column_by_name(SOURCE_COLUMN),
            b.column_by_name(OFFSET_COLUMN),
        ) else {
            continue;
        };
        let (sources, offsets) = (
            sources.as_string::<i32>(),
            offsets.as_primitive::<deltalake::arrow::datatypes::Int64Type>(),
        );
        for i in 0..b.num_rows() {
            let here = (sources.value(i).to_string(), offsets.value(i));
            if lowest.as_ref().is_none_or(|l| here.1 < l.1) {
                lowest = Some(here);
            }
        }
    }
    let (partition, offset) = lowest.unwrap_or_default();
    Coverage { partition, offset }
}
