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
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::error::ArrowError;
use sluice_publish::{
    Coverage, Publication, PublishError, Replace, WindowTable, OFFSET_COLUMN, SOURCE_COLUMN,
};
use sluice_source::ndjson::Chunk;
use sluice_source::{DecodeError, LineDecoder};
use sluice_stage::{StageError, Stager};
use sluice_window::{Window, WindowFinder};

use crate::dedupe::{
    absent_rows, dedupe, dedupe_by_position, drop_losers, with_positions, KeySpec,
};

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
    #[error("decoding the dead letters failed: {0}")]
    Decode(#[from] DecodeError),
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
    let mut fates: Vec<Option<Fate>> = vec![None; letters.len()];
    let mut offered: BTreeMap<Window, Vec<RecordBatch>> = BTreeMap::new();
    for (i, letter) in letters.iter().enumerate() {
        let chunk = Chunk::messages(0, [(letter.offset, letter.raw.as_bytes())]);
        let decoded = decoder.decode(&chunk)?;
        if let Some(r) = decoded.rejects.first() {
            fates[i] = Some(Fate::Failing {
                reason: r.reason.as_str().to_string(),
                detail: r.reason.detail(),
            });
            continue;
        }
        let Some(t) = decoded.event_times.first() else {
            continue;
        };
        let window = finder.find(*t);
        let row = with_positions(&schema, &decoded.batch, &letter.source, vec![letter.offset])?;
        offered.entry(window).or_default().push(row);
        fates[i] = Some(Fate::Landed {
            address: table.address(window).hive_path(),
        });
    }
    let mut publications = Vec::new();
    let mut rows_changed = 0;
    for (window, rows) in offered {
        let address = table.address(window);
        let offered = unique(&schema, &rows, key)?;
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
        let merged = unique(&schema, &current, key)?;
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
    let fates = letters
        .into_iter()
        .zip(fates)
        .filter_map(|(l, f)| Some((l, f?)))
        .collect();
    Ok(Replayed {
        fates,
        rows_changed,
        windows,
        version,
    })
}

fn position_columns() -> Vec<String> {
    vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()]
}

/// One row per row key among `rows` (the winner by the key rule), in position order.
fn unique(
    schema: &deltalake::arrow::datatypes::SchemaRef,
    rows: &[RecordBatch],
    key: Option<&KeySpec>,
) -> Result<RecordBatch, ArrowError> {
    match key {
        Some(key) => dedupe(schema, rows, key),
        None if rows.is_empty() => Ok(RecordBatch::new_empty(schema.clone())),
        None => dedupe_by_position(schema, &[concat_batches(schema, rows)?]),
    }
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
