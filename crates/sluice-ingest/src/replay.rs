//! Replaying dead letters (`sluice dead-letters --replay`): records that could not land, read
//! again with decode options that now fit them (a corrected time format, say), landed in their
//! windows at their original source positions, exactly once.
//!
//! Exactly once rests on the row key, as every publication does: a replayed row keeps the
//! dead letter's source partition and offset, so in a table keyed by position it is the row a
//! clean run would have written, and in a table with `--key` it takes part in its key's
//! dedupe (the later event time, then the higher position, wins). Each window the letters fall
//! in is read back and republished whole with the rows that change it, by one group commit; a
//! row already there changes nothing, so a second replay (or a replay after a crash between
//! the table's commit and the dead-letter table's) commits nothing to the table. The caller
//! then records each replayed letter in the dead-letter table (reason `replayed`).

use std::collections::BTreeMap;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::error::ArrowError;
use sluice_publish::{
    Coverage, Publication, PublishError, Replace, WindowTable, OFFSET_COLUMN, SOURCE_COLUMN,
};
use sluice_source::Chunk;
use sluice_source::{LineDecoder, RAW_BYTES_MAX};
use sluice_stage::{StageError, Stager};
use sluice_window::{Window, WindowFinder};

use crate::dedupe::{absent_rows, drop_losers, unique_rows, with_positions, KeySpec};

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
}

/// Replays `letters` into `table` (see the module docs): decodes them with `decoder` (which
/// must not grow the schema: its evolution rejects new fields), and republishes each window
/// they change by one group commit. `key`: the table's row key, or `None` for the position.
pub async fn replay(
    table: &mut WindowTable,
    decoder: &mut LineDecoder,
    stager: &mut Stager,
    key: Option<&KeySpec>,
    pipeline: &str,
    letters: Vec<Letter>,
    at_ms: i64,
) -> Result<Replayed, ReplayError> {
    let schema = table.file_schema().clone();
    let mut finder = WindowFinder::new(table.size());
    let mut fates = Vec::with_capacity(letters.len());
    let mut offered: BTreeMap<Window, Vec<RecordBatch>> = BTreeMap::new();
    for letter in &letters {
        if let Some(why) = changed_copy(&letter.raw) {
            fates.push(Fate::Failing {
                reason: NOT_REPLAYABLE.into(),
                detail: why,
            });
            continue;
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
        let decoded = match decoder.decode(&chunk) {
            Ok(decoded) => decoded,
            Err(e) => {
                fates.push(internal_error(e.to_string()));
                continue;
            }
        };
        if let Some(r) = decoded.rejects.first() {
            fates.push(Fate::Failing {
                reason: r.reason.as_str().to_string(),
                detail: r.reason.detail(),
            });
            continue;
        }
        let Some(t) = decoded.event_times.first() else {
            fates.push(internal_error("the record decoded to no row".into()));
            continue;
        };
        let window = finder.find(*t);
        let row = with_positions(&schema, &decoded.batch, &letter.source, vec![letter.offset])?;
        offered.entry(window).or_default().push(row);
        fates.push(Fate::Landed {
            address: table.address(window).hive_path(),
        });
    }
    let mut publications = Vec::new();
    let mut rows_changed = 0;
    for (window, rows) in offered {
        let address = table.address(window);
        let offered = unique_rows(&schema, &rows, key)?;
        let files = table.files_at(&address).await?;
        let mut current = Vec::new();
        for f in &files {
            current.extend(stager.read(&f.path).await?);
        }
        let changing = match key {
            Some(key) => drop_losers(&offered, &current, key)?,
            None => absent_rows(&offered, &current, &position_columns())?,
        };
        if changing.num_rows() == 0 {
            continue;
        }
        rows_changed += changing.num_rows() as u64;
        current.push(changing);
        let merged = unique_rows(&schema, &current, key)?;
        let file = stager.stage(&address, &schema, vec![merged]).await?;
        let coverage = files
            .iter()
            .filter_map(|f| f.coverage.clone())
            .max_by_key(|c| c.offset)
            .unwrap_or_else(|| lowest_coverage(&current));
        publications.push(Publication {
            pipeline: pipeline.to_string(),
            window,
            files: vec![file],
            replace: Replace::Window,
            coverage,
            txns: Vec::new(),
            position_ranges: serde_json::json!({"replayed_dead_letters": rows_changed}),
            published_at_ms: at_ms,
        });
    }
    let windows = publications.len() as u64;
    let version = if publications.is_empty() {
        None
    } else {
        let published = table.publish_group(publications).await?;
        published.first().map(|p| p.version)
    };
    let fates = letters.into_iter().zip(fates).collect();
    Ok(Replayed {
        fates,
        rows_changed,
        windows,
        version,
    })
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
        use deltalake::arrow::array::AsArray;
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
