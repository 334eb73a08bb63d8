use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::Int64Type;
use sluice_publish::{DeadLetterTable, TableOptions, WindowTable};
use sluice_source::generate::{generate, GeneratorSpec};
use sluice_source::{schema, LineDecoder, NdjsonSource};
use sluice_stage::StageOptions;
use sluice_window::{AddressLayout, TimeFormat, WindowSize};

use super::*;

static NO_RULES: crate::expectations::Expectations = crate::expectations::Expectations::none();

fn config(key: bool, flush_bytes_max: usize) -> IngestConfig {
    let window = WindowSize::parse("1h").unwrap();
    IngestConfig {
        expectations: Default::default(),
        pipeline: "test".into(),
        window,
        layout: AddressLayout::default_for(window),
        lateness_ms: 10 * 60_000,
        key: key.then(|| KeySpec {
            columns: vec!["event_id".into()],
            time_field: "ts".into(),
            time: TimeFormat::Rfc3339.into(),
            sequence: Vec::new(),
        }),
        flush_bytes_max,
        chunk_bytes: 64 << 10,
        chunks_in_flight_max: 2,
        decode_threads: 2,
        group_windows_max: 256,
        late_batch_ms: 0,
        stage: StageOptions::default(),
        restart: crate::RestartPolicy::immediate(5),
        late: LatePolicy::Rewrite,
        mode: PublishMode::Swap,
        max_rewrite_age_ms: None,
        skew: sluice_window::SkewGuard::DEFAULT,
        compact: None,
        retain_ms: None,
        deletes: None,
        history: false,
    }
}

async fn ingest(input: &Path, table_dir: &Path, cfg: IngestConfig, attempt: &str) -> RunSummary {
    let source = NdjsonSource::open(input).unwrap();
    let text = std::fs::read(&source.files()[0].path).unwrap();
    let record_schema = schema::infer(text.split(|b| *b == b'\n'), 1000, &[]).unwrap();
    let options = TableOptions {
        location: table_dir.to_str().unwrap().into(),
        storage_options: Default::default(),
        checkpoint_interval: 10,
        ..TableOptions::new("")
    };
    let table = WindowTable::open_or_create(&options, Some(&record_schema), cfg.layout, cfg.window)
        .await
        .unwrap();
    let decoder = LineDecoder::new(
        table.record_schema(),
        sluice_source::DecodeOptions::new("ts", TimeFormat::Rfc3339),
    )
    .unwrap();
    let dlq = DeadLetterTable::open_or_create(&TableOptions::new(
        table_dir.with_extension("dlq").to_str().unwrap(),
    ))
    .await
    .unwrap();
    let clock = FixedClock(1_800_000_000_000);
    let ingester = Ingester::recover(cfg, source, decoder, table, dlq, attempt.into(), &clock)
        .await
        .unwrap();
    ingester.run().await.unwrap().0
}

/// The result of `query` over the table at `dir`, registered as `name`.
async fn sql(dir: &Path, name: &str, query: &str) -> Vec<RecordBatch> {
    let ctx = sluice_sql::session(
        &[sluice_sql::TableRef {
            name: name.into(),
            location: dir.to_str().unwrap().into(),
            version: None,
        }],
        &Default::default(),
    )
    .await
    .unwrap();
    sluice_sql::query(&ctx, query).await.unwrap()
}

/// `(window address, event_id, offset)` of every row, sorted.
async fn rows(table_dir: &Path) -> Vec<(String, String, i64)> {
    let batches: Vec<RecordBatch> = sql(
        table_dir,
        "t",
        "SELECT dt || '/' || hour AS w, event_id, _sluice_offset FROM t",
    )
    .await;
    let mut out = Vec::new();
    for b in &batches {
        let w = deltalake::arrow::compute::cast(
            b.column(0),
            &deltalake::arrow::datatypes::DataType::Utf8,
        )
        .unwrap();
        let id = deltalake::arrow::compute::cast(
            b.column(1),
            &deltalake::arrow::datatypes::DataType::Utf8,
        )
        .unwrap();
        let off = b.column(2).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((
                w.as_string::<i32>().value(i).to_string(),
                id.as_string::<i32>().value(i).to_string(),
                off.value(i),
            ));
        }
        assert_eq!(off.null_count(), 0);
    }
    out.sort();
    out
}

/// The source offsets of the dead letters at `dlq_dir`, sorted.
async fn dead_letter_offsets(dlq_dir: &Path) -> Vec<i64> {
    let batches = sql(
        dlq_dir,
        "d",
        "SELECT source_offset FROM d ORDER BY source_offset",
    )
    .await;
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

/// The number of data files in the table's latest version.
async fn active_file_count(table_dir: &Path) -> usize {
    let table = sluice_publish::open_table(table_dir.to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    sluice_publish::active_files(&table).await.unwrap().len()
}

fn write_input(dir: &Path, events: u64) -> std::path::PathBuf {
    let path = dir.join("events.ndjson");
    let mut f = std::fs::File::create(&path).unwrap();
    generate(
        &GeneratorSpec {
            events,
            hours: 6,
            ..Default::default()
        },
        &mut f,
    )
    .unwrap();
    writeln!(f, "{{\"event_id\":\"bad\",\"ts\":\"no time\"}}").unwrap();
    writeln!(f, "{{not json").unwrap();
    path
}

/// The table's contents as a reader sees them: every row with every column (positions
/// included), in one canonical order, as JSON lines.
async fn table_contents(table_dir: &Path) -> String {
    let batches = sql(
        table_dir,
        "t",
        "SELECT * FROM t ORDER BY dt, hour, _sluice_source, _sluice_offset",
    )
    .await;
    sluice_sql::format(&batches, sluice_sql::Format::Json).unwrap()
}

/// E5: the same input read in chunks of 700 bytes, 64 KiB or 4 MiB gives byte-identical
/// table contents: every row and every value the same, with keys by position and by event
/// id. (The files and their coverage may differ: a publication covers the input read when it
/// ran, and late rows are published in batches that end where a chunk ends.)
#[tokio::test]
async fn e5_the_same_input_in_any_chunk_size_gives_byte_identical_tables() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path(), 3000);
    for key in [false, true] {
        let mut tables = Vec::new();
        for chunk_bytes in [700, 64 << 10, 4 << 20] {
            let table_dir = dir.path().join(format!("t-{key}-{chunk_bytes}"));
            let cfg = IngestConfig {
                chunk_bytes,
                ..config(key, 64 << 20)
            };
            let summary = ingest(&input, &table_dir, cfg, "a").await;
            assert!(
                summary.late > 0 && summary.windows_published >= 6,
                "{summary:?}"
            );
            tables.push((chunk_bytes, table_contents(&table_dir).await));
        }
        let (_, first) = &tables[0];
        assert!(
            first.lines().count() >= 3000,
            "rows: {}",
            first.lines().count()
        );
        for (chunk_bytes, contents) in &tables[1..] {
            assert!(
                contents == first,
                "keyed by {}: the table read in chunks of {chunk_bytes} bytes differs from the one read in chunks of 700",
                if key { "event_id" } else { "position" }
            );
        }
    }
}

/// E6: every line of the input is a row or a dead letter, once, and a rerun adds nothing.
#[tokio::test]
async fn e6_every_line_lands_once_and_a_rerun_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path(), 3000);
    let table_dir = dir.path().join("t");
    let first = ingest(&input, &table_dir, config(false, 64 << 20), "a1").await;
    assert_eq!(first.rejected, 2);
    let lines = std::fs::read_to_string(&input).unwrap().lines().count() as u64;
    assert_eq!(first.rows + first.rejected, lines);
    let got = rows(&table_dir).await;
    assert_eq!(
        got.len() as u64,
        first.rows,
        "one row per good line (row key = position)"
    );
    let offsets: std::collections::BTreeSet<i64> = got.iter().map(|r| r.2).collect();
    assert_eq!(offsets.len(), got.len(), "no position twice");
    // Read back: the rows' positions and the dead letters' positions are every line's, once.
    let dead = dead_letter_offsets(&table_dir.with_extension("dlq")).await;
    assert_eq!(dead.len(), 2, "{dead:?}");
    let mut landed: Vec<i64> = offsets.iter().copied().chain(dead).collect();
    landed.sort_unstable();
    let text = std::fs::read(&input).unwrap();
    let mut line_starts = vec![0i64];
    line_starts.extend(
        text.iter()
            .enumerate()
            .filter(|(i, b)| **b == b'\n' && i + 1 < text.len())
            .map(|(i, _)| i as i64 + 1),
    );
    assert_eq!(
        landed, line_starts,
        "every line is a row or a dead letter, once"
    );
    assert!(first.late > 0, "the generator makes late events: {first:?}");

    let again = ingest(&input, &table_dir, config(false, 64 << 20), "a2").await;
    assert_eq!(again.commits, 0, "{again:?}");
    assert_eq!(rows(&table_dir).await, got);
}

#[tokio::test]
async fn a_tiny_budget_flushes_parts_and_changes_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path(), 3000);
    let big = ingest(
        &input,
        &dir.path().join("big"),
        config(false, 64 << 20),
        "a",
    )
    .await;
    let small = ingest(
        &input,
        &dir.path().join("small"),
        config(false, 32 << 10),
        "a",
    )
    .await;
    assert_eq!(big.parts_flushed, 0);
    assert!(small.parts_flushed > 0, "{small:?}");
    assert_eq!(
        rows(&dir.path().join("big")).await,
        rows(&dir.path().join("small")).await
    );
}

#[tokio::test]
async fn natural_keys_keep_one_row_per_window_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path(), 3000);
    let table_dir = dir.path().join("t");
    let mut files = Vec::new();
    for budget in [64 << 20, 32 << 10] {
        let _ = std::fs::remove_dir_all(&table_dir);
        let summary = ingest(&input, &table_dir, config(true, budget), "a").await;
        let got = rows(&table_dir).await;
        files.push(active_file_count(&table_dir).await);
        assert_eq!(summary.parts_flushed > 0, budget < 1 << 20, "{summary:?}");
        let mut per_key: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (w, id, _) in &got {
            *per_key.entry((w.clone(), id.clone())).or_default() += 1;
        }
        assert!(per_key.values().all(|n| *n == 1));
        // Duplicate deliveries repeat the same event id and time: the highest position wins.
        let text = std::fs::read_to_string(&input).unwrap();
        let mut last: BTreeMap<String, i64> = BTreeMap::new();
        let mut offset = 0i64;
        for line in text.lines() {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                if let (Some(id), Some(_)) = (
                    v["event_id"].as_str(),
                    v["ts"].as_str().filter(|t| t.ends_with('Z')),
                ) {
                    last.insert(id.to_string(), offset);
                }
            }
            offset += line.len() as i64 + 1;
        }
        let winners: BTreeMap<String, i64> =
            got.iter().map(|(_, id, o)| (id.clone(), *o)).collect();
        assert_eq!(winners, last);
    }
    // Windows over the tiny budget were staged in key buckets and deduped a group of buckets
    // at a time, one file per group: the same rows in more files.
    assert!(files[1] > files[0], "{files:?}");
}

#[test]
fn a_late_row_can_be_added_to_a_window_only_when_its_key_is_not_there_yet() {
    use deltalake::arrow::array::{StringArray, StringViewArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let batch = |ids: &[&str]| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)])),
            vec![Arc::new(StringArray::from(ids.to_vec()))],
        )
        .unwrap()
    };
    // A reader may hand the table's rows back as string views.
    let viewed = |ids: &[&str]| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "id",
                DataType::Utf8View,
                true,
            )])),
            vec![Arc::new(StringViewArray::from(ids.to_vec()))],
        )
        .unwrap()
    };
    let key = ["id".to_string()];
    let late = batch(&["e7", "e9"]);
    let any = |present: &[RecordBatch]| crate::dedupe::any_key_in(&late, present, &key).unwrap();
    assert!(!any(&[]));
    assert!(!any(&[batch(&["e1", "e2"]), batch(&[])]));
    assert!(any(&[batch(&["e1"]), batch(&["e2", "e9"])]));
    assert!(any(&[viewed(&["e7"])]));
    assert!(!any(&[viewed(&["e8"])]));
}

/// A new table without a schema file infers its schema from the source; a schema file with a
/// field the table lacks grows the record schema under `add` (the table itself changes with
/// its next commit) and is refused under `reject`, naming the table's fields.
#[tokio::test]
async fn the_raw_table_is_inferred_once_then_grows_only_under_add() {
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use sluice_source::SchemaEvolution;
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path(), 100);
    let source = NdjsonSource::open(&input).unwrap();
    let table_dir = dir.path().join("t");
    let options = TableOptions::new(table_dir.to_str().unwrap());
    let window = WindowSize::parse("1h").unwrap();
    let spec_reading = |declared, evolution, time_field: &str| RawTableSpec {
        options: &options,
        declared,
        layout: AddressLayout::default_for(window),
        window,
        evolution,
        infer_from: Some((&source, 1000)),
        decode: sluice_source::DecodeOptions::new(time_field, sluice_window::TimeFormat::Rfc3339),
        deletes: None,
        expectations: &NO_RULES,
        history: false,
    };
    let spec = |declared, evolution| spec_reading(declared, evolution, "ts");
    // A time field the records lack: refused before the table is created.
    let refused = open_raw(spec_reading(None, SchemaEvolution::Add, "when"))
        .await
        .unwrap_err();
    assert!(matches!(refused, OpenRawError::Decode { .. }), "{refused}");
    assert!(!table_dir.exists(), "nothing created");
    let (table, decoder) = open_raw(spec(None, SchemaEvolution::Add)).await.unwrap();
    let record = decoder.schema().clone();
    assert!(record.field_with_name("event_id").is_ok() && record.field_with_name("ts").is_ok());
    let version = table.version();
    drop(table);

    let mut fields: Vec<Field> = record.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("coupon", DataType::Utf8, true));
    let declared = std::sync::Arc::new(Schema::new(fields));
    let refused = open_raw(spec(Some(&declared), SchemaEvolution::Reject))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, OpenRawError::WouldGrow { table_fields } if table_fields.contains("event_id: string")),
        "{refused}"
    );
    let (table, grown) = open_raw(spec(Some(&declared), SchemaEvolution::Add))
        .await
        .unwrap();
    assert!(grown.schema().field_with_name("coupon").is_ok());
    assert_eq!(
        table.version(),
        version,
        "nothing is committed until rows need it"
    );
    assert!(table.record_schema().field_with_name("coupon").is_err());
}

/// A column another tool added to the table (`ALTER TABLE ADD COLUMNS`) comes after the
/// position columns in the file schema: decoded rows are placed by name, not by position
/// (by position, the new column's nulls went into `_sluice_source` and every commit failed).
#[test]
fn positions_are_placed_by_name_when_a_column_follows_them() {
    use deltalake::arrow::array::{Float64Array, Int64Array, StringArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let file = Arc::new(Schema::new(vec![
        Field::new("event_id", DataType::Utf8, true),
        Field::new(sluice_publish::SOURCE_COLUMN, DataType::Utf8, false),
        Field::new(sluice_publish::OFFSET_COLUMN, DataType::Int64, false),
        Field::new("coupon", DataType::Float64, true),
    ]));
    let records = RecordBatch::try_new(
        crate::dedupe::record_fields(&file),
        vec![
            Arc::new(StringArray::from(vec!["a", "b"])),
            Arc::new(Float64Array::from(vec![Some(1.5), None])),
        ],
    )
    .unwrap();
    let batch = crate::dedupe::with_positions(&file, &records, "events/0", vec![7, 9]).unwrap();
    assert_eq!(batch.schema(), file);
    let text = |i: usize| {
        batch
            .column(i)
            .as_string::<i32>()
            .iter()
            .flatten()
            .collect::<Vec<_>>()
    };
    assert_eq!(text(0), ["a", "b"]);
    assert_eq!(text(1), ["events/0", "events/0"]);
    let offsets = batch
        .column(2)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(offsets.values().to_vec(), [7, 9]);
    let coupon = batch
        .column(3)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    assert_eq!(coupon.iter().collect::<Vec<_>>(), [Some(1.5), None]);
}

/// Counts of fields left out keep at most `NAMES_MAX` names (the first seen); every other
/// field's rows are counted together, so a stream whose keys are data cannot grow them.
#[test]
fn counts_of_left_out_fields_are_bounded() {
    let mut counts = FieldCounts::default();
    for i in 0..(FieldCounts::NAMES_MAX + 50) {
        counts.add(&format!("user{i}"), 2);
    }
    counts.add("user0", 1);
    assert_eq!(counts.named.len(), FieldCounts::NAMES_MAX);
    assert_eq!(counts.named["user0"], 3);
    assert_eq!(counts.others, 100);
    let mut total = FieldCounts::default();
    total.absorb(&counts);
    total.absorb(&counts);
    assert_eq!(total.named.len(), FieldCounts::NAMES_MAX);
    assert_eq!(total.others, 200);
    assert_eq!(total.named["user0"], 6);
}

/// A table's rows read through DataFusion come with string views: their times read as
/// their text says (they read as the earliest time, so an older offered change beat a newer
/// row in a MERGE ordered by time), and they name the windows the rows are in.
#[test]
fn incumbent_times_read_from_string_views() {
    use deltalake::arrow::array::{ArrayRef, Int64Array, StringViewArray};
    use std::sync::Arc;
    let key = KeySpec {
        columns: vec!["id".into()],
        time_field: "ts".into(),
        time: TimeFormat::Rfc3339.into(),
        sequence: Vec::new(),
    };
    let rows = |id: i64, ts: &str, offset: i64| {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![id])) as ArrayRef),
            ("ts", Arc::new(StringViewArray::from(vec![ts])) as ArrayRef),
            (
                sluice_publish::SOURCE_COLUMN,
                Arc::new(deltalake::arrow::array::StringArray::from(vec!["a"])) as ArrayRef,
            ),
            (
                sluice_publish::OFFSET_COLUMN,
                Arc::new(Int64Array::from(vec![offset])) as ArrayRef,
            ),
        ])
        .unwrap()
    };
    let held = rows(1, "2026-10-03T02:30:00Z", 1);
    let older = rows(1, "2026-10-03T01:00:00Z", 9);
    let kept = drop_losers(&older, std::slice::from_ref(&held), &key).unwrap();
    assert_eq!(kept.num_rows(), 0, "the held row is newer");
    let size = WindowSize::parse("1h").unwrap();
    let windows = crate::dedupe::windows_of(&[held], &key, size).unwrap();
    let starts: Vec<String> = windows.iter().map(|w| w.start().to_rfc3339()).collect();
    assert_eq!(starts, ["2026-10-03T02:00:00Z"]);
}
