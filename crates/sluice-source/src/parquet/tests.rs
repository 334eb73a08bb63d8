use std::collections::HashMap;
use std::path::Path;

use deltalake::arrow::array::{
    ArrayRef, BinaryArray, Decimal128Array, Int32Array, StringArray, TimestampMicrosecondArray,
    UInt64Array,
};
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::parquet::file::properties::WriterProperties;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::{DataType, TimeUnit};

use super::*;
use crate::reader::FileFormat;
use crate::rows::{table_type, with_footer_types};
use crate::NdjsonSource;

/// `rows` rows in row groups of `group_rows`: id, ts, name (null every 3rd), raw bytes, an
/// amount, a big unsigned count.
fn write_parquet(path: &Path, first: i32, rows: i32, group_rows: usize) {
    let ids: Vec<i32> = (first..first + rows).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int32Array::from(ids.clone()))),
        (
            "ts",
            Arc::new(
                TimestampMicrosecondArray::from(
                    ids.iter()
                        .map(|i| 1_791_036_000_000_000 + *i as i64 * 1_000_001)
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
        ),
        (
            "name",
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| (i % 3 != 0).then(|| format!("n\"{i}\n")))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "raw",
            Arc::new(BinaryArray::from_iter_values(
                ids.iter().map(|i| vec![0u8, 255, *i as u8]),
            )),
        ),
        (
            "amount",
            Arc::new(
                Decimal128Array::from(ids.iter().map(|i| *i as i128 * 101).collect::<Vec<_>>())
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
        ),
        (
            "count",
            Arc::new(UInt64Array::from(
                ids.iter().map(|_| u64::MAX).collect::<Vec<_>>(),
            )),
        ),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// The Parquet files of `dir`, bounded or followed.
fn parquet_files(dir: &Path, following: bool) -> NdjsonSource {
    let store = Arc::new(crate::LocalFiles::new(dir));
    NdjsonSource::open_store(store, following, FileFormat::Parquet).unwrap()
}

/// What a source read: its records (file, offset, line), dead letters, and chunk ends.
#[derive(Default)]
struct Read {
    rows: Vec<(u32, i64, String)>,
    bad: Vec<Reject>,
    ends: Vec<i64>,
}

/// Every record of `source` from `resume`.
fn read_all(source: &NdjsonSource, resume: &HashMap<String, i64>) -> Read {
    let mut reader = source.reader(resume, 1 << 20).unwrap();
    let Read {
        rows: mut out,
        mut bad,
        mut ends,
    } = Read::default();
    while let Some(c) = reader.next_chunk().unwrap() {
        for (offset, line) in c.as_lines().lines() {
            out.push((c.file, offset, String::from_utf8(line.to_vec()).unwrap()));
        }
        bad.extend(c.bad.clone());
        ends.push(c.end());
    }
    Read {
        rows: out,
        bad,
        ends,
    }
}

#[test]
fn rows_are_records_at_their_row_numbers_from_any_resume_row() {
    let dir = tempfile::tempdir().unwrap();
    write_parquet(&dir.path().join("a.parquet"), 0, 25, 10);
    let source = parquet_files(dir.path(), false);
    assert_eq!(source.files()[0].len, COMPRESSED_LEN);
    let Read { rows, bad, ends } = read_all(&source, &HashMap::new());
    assert!(bad.is_empty());
    assert_eq!(rows.len(), 25);
    assert!(rows.iter().enumerate().all(|(i, r)| r.1 == i as i64));
    assert_eq!(
        *ends.last().unwrap(),
        COMPRESSED_LEN as i64,
        "read to its end"
    );
    let row: serde_json::Value = serde_json::from_str(&rows[4].2).unwrap();
    assert_eq!(row["id"], 4);
    assert_eq!(row["name"], "n\"4\n");
    assert_eq!(row["raw"], "AP8E", "binary as base64 of [0, 255, 4]");
    assert_eq!(row["amount"], serde_json::json!(4.04));
    assert_eq!(row["count"], serde_json::json!(u64::MAX));
    let ts = row["ts"].as_str().unwrap();
    assert!(ts.starts_with("2026-10-03T14:00:04.000004"), "{ts}");
    let nulls: serde_json::Value = serde_json::from_str(&rows[3].2).unwrap();
    assert!(nulls.get("name").is_none(), "a null is left out: {nulls}");

    // A restart at row 12 skips the first row group and 2 rows of the second.
    let resume: HashMap<String, i64> = [("a.parquet".to_string(), 12)].into();
    let rest = read_all(&source, &resume).rows;
    assert_eq!(rest.len(), 13);
    assert_eq!((rest[0].1, rest[0].2.clone()), (12, rows[12].2.clone()));
    // A restart anywhere reads every later row group, the short last one too.
    let dir = tempfile::tempdir().unwrap();
    write_parquet(&dir.path().join("b.parquet"), 0, 516, 100);
    let many = parquet_files(dir.path(), false);
    for start in [0, 32, 99, 100, 499, 500, 515] {
        let resume: HashMap<String, i64> = [("b.parquet".to_string(), start)].into();
        let offsets: Vec<i64> = read_all(&many, &resume).rows.iter().map(|r| r.1).collect();
        assert_eq!(
            offsets,
            (start..516).collect::<Vec<i64>>(),
            "from row {start}"
        );
    }
    // Read to its end: nothing is left.
    let done: HashMap<String, i64> = [("a.parquet".to_string(), COMPRESSED_LEN as i64)].into();
    assert!(read_all(&source, &done).rows.is_empty());
}

/// A file without its footer yet (it starts as Parquet does) is still being written, in any
/// run and wherever it is: nothing of it is read, nor of the files after it, and it is no
/// dead letter; once its footer is written it is read, then the files after it.
#[test]
fn a_parquet_file_without_its_footer_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.parquet.tmp");
    write_parquet(&whole, 0, 40, 10);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::remove_file(&whole).unwrap();
    std::fs::write(dir.path().join("a.parquet"), &bytes[..bytes.len() * 3 / 4]).unwrap();
    write_parquet(&dir.path().join("b.parquet"), 0, 3, 10);
    for following in [false, true] {
        let Read { rows, bad, .. } =
            read_all(&parquet_files(dir.path(), following), &HashMap::new());
        assert_eq!((rows.len(), bad.len()), (0, 0), "following: {following}");
    }
    std::fs::write(dir.path().join("a.parquet"), &bytes).unwrap();
    let Read { rows, bad, .. } = read_all(&parquet_files(dir.path(), false), &HashMap::new());
    assert_eq!((rows.len(), bad.len()), (43, 0));
}

#[test]
fn a_file_that_is_not_parquet_is_one_dead_letter_and_the_next_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.parquet"), b"this is no Parquet at all").unwrap();
    write_parquet(&dir.path().join("b.parquet"), 0, 3, 10);
    let source = parquet_files(dir.path(), false);
    let Read { rows, bad, .. } = read_all(&source, &HashMap::new());
    assert_eq!(rows.len(), 3);
    assert_eq!(bad.len(), 1);
    assert_eq!((bad[0].file, bad[0].offset), (1, 0));
    assert!(
        matches!(bad[0].reason, RejectReason::Unreadable(_)),
        "{:?}",
        bad[0]
    );

    // Followed, a last file without its footer yet is waited for.
    let following = parquet_files(dir.path(), true);
    std::fs::write(dir.path().join("c.parquet"), b"PAR1").unwrap();
    let mut following = following;
    following.refresh().unwrap();
    let Read { rows, bad, .. } = read_all(&following, &HashMap::new());
    assert_eq!(
        (rows.len(), bad.len()),
        (3, 1),
        "c.parquet is not a dead letter yet"
    );
}

#[test]
fn a_new_table_takes_the_footer_types_of_scalar_columns() {
    let dir = tempfile::tempdir().unwrap();
    write_parquet(&dir.path().join("a.parquet"), 0, 5, 10);
    let source = parquet_files(dir.path(), false);
    let footer = source.footer_types().unwrap();
    let inferred = crate::schema::infer(
        source.head_lines(10).unwrap().iter().map(Vec::as_slice),
        10,
        &[],
    )
    .unwrap();
    let schema = with_footer_types(&inferred, &footer);
    let type_of = |name: &str| schema.field_with_name(name).unwrap().data_type().clone();
    assert_eq!(type_of("id"), DataType::Int32);
    assert_eq!(
        type_of("ts"),
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(type_of("raw"), DataType::Binary);
    assert_eq!(type_of("amount"), DataType::Decimal128(10, 2));
    assert_eq!(type_of("count"), DataType::Decimal128(20, 0));
    assert_eq!(type_of("name"), DataType::Utf8);
}

#[test]
fn types_without_a_delta_counterpart_become_ones_that_hold_their_values() {
    assert_eq!(table_type(&DataType::UInt32), DataType::Int64);
    assert_eq!(
        table_type(&DataType::Timestamp(TimeUnit::Nanosecond, None)),
        DataType::Timestamp(TimeUnit::Microsecond, None)
    );
    assert_eq!(
        table_type(&DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::LargeUtf8)
        )),
        DataType::Utf8
    );
    assert_eq!(
        table_type(&DataType::Time64(TimeUnit::Microsecond)),
        DataType::Utf8
    );
}
