//! Rows that arrive as Arrow land with the same values, event times and dead letters whether
//! they fit (decoded directly) or are read as JSON lines.

use std::sync::Arc;

use deltalake::arrow::array::{
    Array, ArrayRef, DictionaryArray, Float32Array, Int32Array, ListArray, MapArray, RecordBatch,
    StringArray, StructArray, TimestampMillisecondArray,
};
use deltalake::arrow::buffer::OffsetBuffer;
use deltalake::arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema};
use sluice_window::TimeFormat;

use crate::chunk::{ArrowRows, Chunk};
use crate::decode::{DecodeOptions, Decoded, LineDecoder};
use crate::schema::RecordSchema;

/// Avro-like rows: an enum, an int, a float, a timestamp in milliseconds, a nested record,
/// a list and a map; row 2 has no time, row 3 no key.
fn rows() -> RecordBatch {
    let kind: DictionaryArray<Int32Type> = vec![Some("view"), Some("buy"), Some("view"), None]
        .into_iter()
        .collect();
    let members = Fields::from(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
    ]);
    let actor = StructArray::new(
        members,
        vec![
            Arc::new(Int32Array::from(vec![1, 2, 3, 4])) as ArrayRef,
            Arc::new(StringArray::from(vec![
                Some("a"),
                None,
                Some("ü"),
                Some("d"),
            ])),
        ],
        None,
    );
    let tags = ListArray::new(
        Arc::new(Field::new("item", DataType::Utf8, false)),
        OffsetBuffer::from_lengths([2, 0, 1, 1]),
        Arc::new(StringArray::from(vec!["x", "y", "z", "w"])),
        None,
    );
    let entries = StructArray::new(
        Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Int32, true),
        ]),
        vec![
            Arc::new(StringArray::from(vec!["p", "q", "r"])) as ArrayRef,
            Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
        ],
        None,
    );
    let labels = MapArray::new(
        Arc::new(Field::new("entries", entries.data_type().clone(), false)),
        OffsetBuffer::from_lengths([1, 2, 0, 0]),
        entries,
        None,
        false,
    );
    let ts = TimestampMillisecondArray::from(vec![
        Some(1_791_036_000_123),
        Some(1_791_036_060_000),
        None,
        Some(1_791_036_120_000),
    ])
    .with_timezone("+00:00");
    let ids = StringArray::from(vec![Some("e1"), Some("e2"), Some("e3"), None]);
    RecordBatch::try_from_iter(vec![
        ("event_id", Arc::new(ids) as ArrayRef),
        ("ts", Arc::new(ts)),
        ("kind", Arc::new(kind)),
        ("n", Arc::new(Int32Array::from(vec![7, -8, 9, 10]))),
        (
            "amount",
            Arc::new(Float32Array::from(vec![1.5, 2.25, 0.0, -1.0])),
        ),
        ("actor", Arc::new(actor)),
        ("tags", Arc::new(tags)),
        ("labels", Arc::new(labels)),
    ])
    .unwrap()
}

fn decoder(schema: &str) -> LineDecoder {
    let spec: RecordSchema = toml::from_str(schema).unwrap();
    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.key = vec!["event_id".into()];
    LineDecoder::new(spec.to_arrow().unwrap(), options).unwrap()
}

const SCHEMA: &str = r#"
[[fields]]
name = "event_id"
type = "string"
[[fields]]
name = "ts"
type = "timestamp"
[[fields]]
name = "kind"
type = "string"
[[fields]]
name = "n"
type = "long"
[[fields]]
name = "amount"
type = "double"
[[fields]]
name = "actor"
type = "struct<id:long,name:string,plan:string>"
[[fields]]
name = "tags"
type = "array<string>"
[[fields]]
name = "labels"
type = "map<string,long>"
[[fields]]
name = "coupon"
type = "string"
"#;

fn chunk(batch: RecordBatch) -> Chunk {
    Chunk {
        file: 1,
        start: 10,
        message_offsets: Some(Vec::new()),
        end_at: Some(14),
        arrow: vec![ArrowRows {
            batch,
            offsets: vec![10, 11, 12, 13],
        }],
        ..Chunk::default()
    }
}

/// A decoded chunk's rows, offsets, event times (µs) and rejects (offset, reason, raw).
type Summary = (RecordBatch, Vec<i64>, Vec<i64>, Vec<(i64, String, String)>);

fn summary(d: &Decoded) -> Summary {
    (
        d.batch.clone(),
        d.offsets.clone(),
        d.event_times.iter().map(|t| t.as_micros()).collect(),
        d.rejects
            .iter()
            .map(|r| (r.offset, r.reason.as_str().to_string(), r.raw.clone()))
            .collect(),
    )
}

#[test]
fn rows_that_fit_land_as_the_json_path_lands_them() {
    let chunk = chunk(rows());
    let decoder = decoder(SCHEMA);
    let direct = decoder
        .decode_arrow(&chunk)
        .expect("the rows fit the schema");
    let mut json = decoder.clone();
    let by_json = json.decode(&chunk.as_lines()).unwrap();
    assert_same_decoded(&direct, &by_json);
    assert_eq!(direct.batch.num_rows(), 2);
    let reasons: Vec<&str> = direct.rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, ["missing_time", "missing_key"]);
}

#[test]
fn rows_that_do_not_fit_are_left_to_the_json_path() {
    let decoder = decoder(SCHEMA);
    // A field the record lacks (schema evolution decides), an int where the record holds
    // text, a NaN (a dead letter by JSON decoding).
    let extra = rows().project(&[0, 1]).unwrap();
    let with = |name: &str, array: ArrayRef| {
        let mut fields: Vec<Field> = extra
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(name, array.data_type().clone(), true));
        let mut columns = extra.columns().to_vec();
        columns.push(array);
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    };
    let four = |v: f32| Arc::new(Float32Array::from(vec![v; 4])) as ArrayRef;
    for batch in [
        with("new_field", four(1.0)),
        with("kind", Arc::new(Int32Array::from(vec![1; 4]))),
        with("amount", four(f32::NAN)),
    ] {
        assert!(decoder.decode_arrow(&chunk(batch)).is_none());
    }
    // Fewer fields than the record: the others are null.
    let d = decoder.decode_arrow(&chunk(extra)).unwrap();
    assert_eq!(
        d.batch.column_by_name("coupon").unwrap().null_count(),
        d.batch.num_rows()
    );
}

/// Rows as Parquet files hold them: view and large text, nanosecond, second and zoneless
/// timestamps, unsigned integers, fixed-size and large bytes, dates and decimals.
fn parquet_rows() -> RecordBatch {
    use deltalake::arrow::array::{
        BinaryViewArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, LargeBinaryArray,
        LargeStringArray, StringViewArray, TimestampNanosecondArray, TimestampSecondArray,
        UInt16Array, UInt32Array, UInt64Array, UInt8Array,
    };
    let ids = StringViewArray::from(vec![
        Some("e1"),
        Some("a longer id than twelve"),
        Some("e3"),
    ]);
    let ts = TimestampNanosecondArray::from(vec![
        Some(1_791_036_000_123_456_000),
        None,
        Some(1_791_036_120_000_001_000),
    ])
    .with_timezone("UTC");
    let local = TimestampMillisecondArray::from(vec![Some(1_791_036_000_123), None, Some(-5)]);
    let secs = TimestampSecondArray::from(vec![Some(1_791_036_000), Some(0), None])
        .with_timezone("+00:00");
    let fixed = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
        vec![Some(vec![0u8, 255, 1]), None, Some(vec![2, 3, 4])].into_iter(),
        3,
    )
    .unwrap();
    let price = Decimal128Array::from(vec![Some(12_345), Some(-1), None])
        .with_precision_and_scale(10, 2)
        .unwrap();
    RecordBatch::try_from_iter(vec![
        ("event_id", Arc::new(ids) as ArrayRef),
        ("ts", Arc::new(ts)),
        ("local", Arc::new(local)),
        ("secs", Arc::new(secs)),
        ("u8", Arc::new(UInt8Array::from(vec![0, 255, 7]))),
        ("u16", Arc::new(UInt16Array::from(vec![0, u16::MAX, 7]))),
        (
            "u32",
            Arc::new(UInt32Array::from(vec![Some(u32::MAX), None, Some(1)])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1 << 63])),
        ),
        (
            "text",
            Arc::new(LargeStringArray::from(vec![
                Some("ü\n\"q\""),
                None,
                Some(""),
            ])),
        ),
        ("fixed", Arc::new(fixed)),
        (
            "bytes",
            Arc::new(LargeBinaryArray::from(vec![
                Some(&b"\x00\xff"[..]),
                Some(b""),
                None,
            ])),
        ),
        (
            "view",
            Arc::new(BinaryViewArray::from(vec![
                Some(&b"abc"[..]),
                None,
                Some(b"\x01"),
            ])),
        ),
        (
            "day",
            Arc::new(Date32Array::from(vec![Some(0), Some(-719_162), None])),
        ),
        ("price", Arc::new(price)),
    ])
    .unwrap()
}

fn chunk_of(batch: RecordBatch) -> Chunk {
    let offsets: Vec<i64> = (0..batch.num_rows() as i64).collect();
    Chunk {
        file: 1,
        start: 0,
        message_offsets: Some(Vec::new()),
        end_at: Some(offsets.len() as i64),
        arrow: vec![ArrowRows { batch, offsets }],
        ..Chunk::default()
    }
}

/// A decoder of the table a Parquet file of `batch`'s schema creates.
fn table_decoder(batch: &RecordBatch) -> LineDecoder {
    let schema = crate::rows::table_schema(&batch.schema());
    let options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    LineDecoder::new(schema, options).unwrap()
}

#[test]
fn parquet_types_that_fit_land_as_the_json_path_lands_them() {
    let batch = parquet_rows();
    let decoder = table_decoder(&batch);
    let chunk = chunk_of(batch);
    let direct = decoder
        .decode_arrow(&chunk)
        .expect("Parquet's types fit the table they make");
    let by_json = decoder.clone().decode(&chunk.as_lines()).unwrap();
    assert_same_decoded(&direct, &by_json);
    let reasons: Vec<&str> = direct.rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, ["missing_time"]);
}

#[test]
fn timestamps_that_are_not_whole_microseconds_of_years_1_to_9999_do_not_fit() {
    use deltalake::arrow::array::{TimestampNanosecondArray, TimestampSecondArray};
    let nanos = |v: i64| {
        Arc::new(
            TimestampNanosecondArray::from(vec![1_791_036_000_000_000_000, v]).with_timezone("UTC"),
        ) as ArrayRef
    };
    let seconds = |v: i64| {
        Arc::new(TimestampSecondArray::from(vec![1_791_036_000, v]).with_timezone("UTC"))
            as ArrayRef
    };
    let fits = |ts: ArrayRef| {
        let batch = RecordBatch::try_from_iter(vec![("ts", ts)]).unwrap();
        table_decoder(&batch)
            .decode_arrow(&chunk_of(batch))
            .is_some()
    };
    assert!(fits(nanos(1_791_036_000_000_001_000)));
    assert!(!fits(nanos(1_791_036_000_000_000_001)), "a nanosecond");
    assert!(fits(seconds(253_402_300_799)), "9999-12-31T23:59:59Z");
    assert!(!fits(seconds(253_402_300_800)), "year 10000");
    assert!(!fits(seconds(i64::MAX / 1000)), "overflows in microseconds");
}

/// Two decodings hold the same columns, bit for bit, and the same rejects.
fn assert_same_decoded(direct: &Decoded, by_json: &Decoded) {
    direct.assert_same_columns(by_json);
    assert_eq!(summary(direct), summary(by_json));
}
