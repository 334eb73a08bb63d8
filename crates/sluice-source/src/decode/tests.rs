use std::sync::Arc;

use deltalake::arrow::datatypes::{Field, Schema};

use deltalake::arrow::datatypes::Int64Type;
use sluice_window::TimeFormat;

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

fn chunk(text: &str) -> Chunk {
    Chunk {
        file: 1,
        start: 100,
        data: text.as_bytes().to_vec(),
        message_offsets: None,
        ..Chunk::default()
    }
}

#[test]
fn every_message_is_a_row_or_a_reject_at_its_offset() {
    let mut d = LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let messages: Vec<(i64, &[u8])> = vec![
        (7, br#"{"ts":"2026-10-03T14:00:00Z","n":1}"#),
        (8, b""),
        (9, b"{\"ts\":\n\"2026-10-03T14:00:01Z\",\"n\":2}"),
        (12, b"not json"),
    ];
    let out = d.decode(&Chunk::messages(1, messages)).unwrap();
    assert_eq!(out.offsets, vec![7, 9]);
    let rejected: Vec<(i64, &str)> = out
        .rejects
        .iter()
        .map(|r| (r.offset, r.reason.as_str()))
        .collect();
    assert_eq!(
        rejected,
        vec![(8, "not_one_object"), (12, "not_one_object")]
    );
    assert_eq!(Chunk::messages(1, [(12i64, &b"x"[..])]).end(), 13);
}

#[test]
fn clean_chunks_decode_in_one_pass() {
    let mut d = LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let out = d
        .decode(&chunk("{\"ts\":\"2026-10-03T14:00:00Z\",\"n\":1}\n\n{\"ts\":\"2026-10-03T15:00:00Z\",\"n\":2,\"extra\":true}\n"))
        .unwrap();
    assert_eq!(out.batch.num_rows(), 2);
    assert_eq!(out.offsets, vec![100, 137]);
    assert!(out.rejects.is_empty());
    assert_eq!(out.event_times[1].to_rfc3339(), "2026-10-03T15:00:00Z");
}

#[test]
fn bad_lines_are_rejected_with_position_and_reason_and_good_ones_kept() {
    let mut d = LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let text = [
        r#"{"ts":"2026-10-03T14:00:00Z","n":1}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","n":"#,
        r#"{"ts":"2026-10-03T14:00:00Z","n":"three"}"#,
        r#"{"n":4}"#,
        r#"{"ts":"not a time","n":5}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","n":6} {"ts":"2026-10-03T14:00:00Z","n":7}"#,
        r#"[1,2]"#,
        r#"{"ts":"2026-10-03T14:00:09Z","n":8}"#,
    ]
    .join("\n");
    let out = d.decode(&chunk(&text)).unwrap();
    let ns = out.batch.column(1).as_primitive::<Int64Type>();
    assert_eq!(ns.values().to_vec(), vec![1, 8]);
    let reasons: Vec<&str> = out.rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "malformed_json",
            "wrong_type",
            "missing_time",
            "bad_time",
            "not_one_object",
            "not_one_object"
        ]
    );
    let mut offsets: Vec<i64> = out.offsets.clone();
    offsets.extend(out.rejects.iter().map(|r| r.offset));
    offsets.sort();
    assert_eq!(offsets.len(), 8, "every line is either a row or a reject");
    assert_eq!(out.rejects[0].raw, r#"{"ts":"2026-10-03T14:00:00Z","n":"#);
}

#[test]
fn time_fields_take_the_types_their_format_can_read() {
    let bools = Arc::new(Schema::new(vec![Field::new("ts", DataType::Boolean, true)]));
    assert!(matches!(
        LineDecoder::new(bools, DecodeOptions::new("ts", TimeFormat::EpochMillis)),
        Err(DecodeError::TimeFieldType { .. })
    ));
    assert!(matches!(
        LineDecoder::new(schema(), DecodeOptions::new("n", TimeFormat::Rfc3339)),
        Err(DecodeError::TimeFieldType { .. })
    ));
    assert!(matches!(
        LineDecoder::new(schema(), DecodeOptions::new("nope", TimeFormat::Rfc3339)),
        Err(DecodeError::NoTimeField(_))
    ));
}

/// Epoch counts as numbers or strings, with fractions; out-of-range values are `bad_time`.
#[test]
fn epoch_times_from_numbers_and_strings() {
    let mut d =
        LineDecoder::new(schema(), DecodeOptions::new("n", TimeFormat::EpochSeconds)).unwrap();
    let out = d
        .decode(&chunk(
            "{\"n\":1791037500}\n{\"n\":-99999999999999999}\n{\"n\":1e30}\n",
        ))
        .unwrap();
    assert_eq!(
        out.event_times,
        vec![EventTime::from_micros(1_791_037_500_000_000)]
    );
    let reasons: Vec<&str> = out.rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, ["bad_time", "bad_time"]);
    let mut d =
        LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::EpochMillis)).unwrap();
    let out = d
        .decode(&chunk(
            "{\"ts\":\"1791037500123\"}\n{\"ts\":1791037500123.5}\n",
        ))
        .unwrap();
    assert_eq!(
        out.event_times,
        vec![
            EventTime::from_micros(1_791_037_500_123_000),
            EventTime::from_micros(1_791_037_500_123_500)
        ]
    );
    // The text is kept as the record has it.
    assert_eq!(
        out.batch.column(0).as_string::<i32>().value(1),
        "1791037500123.5"
    );
}

fn typed(spec: &[(&str, &str)]) -> SchemaRef {
    Arc::new(Schema::new(
        spec.iter()
            .map(|(n, t)| Field::new(*n, crate::schema::parse_type(t).unwrap(), true))
            .collect::<Vec<_>>(),
    ))
}

fn reasons(out: &Decoded) -> Vec<(i64, &'static str)> {
    out.rejects
        .iter()
        .map(|r| (r.offset, r.reason.as_str()))
        .collect()
}

/// No value is rounded, truncated or clamped: a value that does not fit its column is a
/// `wrong_type` reject naming the field.
#[test]
fn values_are_read_exactly_or_rejected() {
    let s = typed(&[
        ("ts", "string"),
        ("n", "long"),
        ("small", "byte"),
        ("price", "decimal(6,2)"),
        ("at", "timestamp"),
        ("local", "timestamp_ntz"),
        ("blob", "binary"),
        ("label", "string"),
    ]);
    let mut d = LineDecoder::new(s, DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let lines = [
        r#"{"ts":"2026-10-03T14:00:00Z","n":"7","small":1e2,"price":12.5,"at":"2026-10-03 16:00:00+02:00","local":"2026-10-03 16:00:00","blob":"aGk=","label":5}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","n":2.5}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","small":300}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","price":1.234}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","at":1e30}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","blob":"not base64!"}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","n":9223372036854775808}"#,
        r#"{"ts":"2026-10-03T14:00:00Z","at":1791037500000000}"#,
    ];
    let out = d.decode(&chunk(&lines.join("\n"))).unwrap();
    assert_eq!(out.batch.num_rows(), 2, "{:?}", out.rejects);
    assert!(
        reasons(&out).iter().all(|(_, r)| *r == "wrong_type"),
        "{:?}",
        out.rejects
    );
    assert_eq!(out.rejects.len(), 6);
    assert!(
        out.rejects[0].reason.detail().contains("field n: \"2.5\""),
        "{:?}",
        out.rejects[0]
    );
    let b = &out.batch;
    assert_eq!(b.column(1).as_primitive::<Int64Type>().value(0), 7);
    assert_eq!(
        b.column(2)
            .as_primitive::<deltalake::arrow::datatypes::Int8Type>()
            .value(0),
        100
    );
    let price = b
        .column(3)
        .as_primitive::<deltalake::arrow::datatypes::Decimal128Type>();
    assert_eq!(price.value(0), 1250);
    let at = b
        .column(4)
        .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(at.value(0), 1_791_036_000_000_000);
    assert_eq!(at.value(1), 1_791_037_500_000_000);
    let local = b
        .column(5)
        .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(local.value(0), 1_791_043_200_000_000);
    assert_eq!(b.column(6).as_binary::<i32>().value(0), b"hi");
    assert_eq!(b.column(7).as_string::<i32>().value(0), "5");
}

/// A `timestamp` time field holds the event time; values out of range are `bad_time`.
#[test]
fn timestamp_time_fields_hold_the_event_time() {
    let s = typed(&[("ts", "timestamp"), ("n", "long")]);
    let spec = TimeSpec::new(
        TimeFormat::parse_name("%Y/%m/%d %H:%M").unwrap(),
        sluice_window::Zone::parse("+01:00").unwrap(),
    );
    let mut d = LineDecoder::new(s, DecodeOptions::new("ts", spec)).unwrap();
    let out = d
        .decode(&chunk(
            "{\"ts\":\"2010/01/01 01:00\"}\n{\"ts\":1e30}\n{\"ts\":\"2010-01-01\"}\n",
        ))
        .unwrap();
    assert_eq!(
        out.event_times,
        vec![EventTime::from_micros(1_262_304_000_000_000)]
    );
    let at = out
        .batch
        .column(0)
        .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(at.value(0), 1_262_304_000_000_000);
    assert_eq!(reasons(&out), [(126, "bad_time"), (138, "bad_time")]);
}

/// A `date` time field: the event time is the date's midnight in the time zone, the column
/// holds the date as written; a value with a time of day does not fit (it would be lost).
#[test]
fn date_time_fields_hold_the_date() {
    let s = typed(&[("day", "date"), ("n", "long")]);
    let spec = TimeSpec::new(
        TimeFormat::Rfc3339,
        sluice_window::Zone::parse("America/New_York").unwrap(),
    );
    let mut d = LineDecoder::new(s.clone(), DecodeOptions::new("day", spec)).unwrap();
    let out = d
        .decode(&chunk(
            "{\"day\":\"2013-03-10\"}\n{\"day\":\"2013-03-10 05:15\"}\n{\"day\":\"x\"}\n",
        ))
        .unwrap();
    assert_eq!(
        out.event_times,
        vec![EventTime::from_micros(1_362_891_600_000_000)],
        "midnight EST"
    );
    let days = out
        .batch
        .column(0)
        .as_primitive::<deltalake::arrow::datatypes::Date32Type>();
    assert_eq!(days.value(0), 15_774, "2013-03-10");
    assert_eq!(reasons(&out), [(121, "wrong_type"), (148, "bad_time")]);
    // An epoch count is not a date.
    assert!(matches!(
        LineDecoder::new(s, DecodeOptions::new("day", TimeFormat::EpochSeconds)),
        Err(DecodeError::TimeFieldType { .. })
    ));
}

/// Each reject's `reason: detail`, in order, starts as `starts` says.
fn assert_rejects_start(out: &Decoded, starts: &[&str]) {
    let details: Vec<String> = out
        .rejects
        .iter()
        .map(|r| format!("{}: {}", r.reason.as_str(), r.reason.detail()))
        .collect();
    assert_eq!(details.len(), starts.len(), "{details:?}");
    for (detail, start) in details.iter().zip(starts) {
        assert!(detail.starts_with(start), "{details:?}");
    }
}

/// With a row key, a row whose key is null or missing is a dead letter, nested keys too.
#[test]
fn rows_without_their_key_are_rejected() {
    let s = typed(&[
        ("ts", "string"),
        ("user", "struct<id:long>"),
        ("event_id", "string"),
    ]);
    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.key = vec!["event_id".into(), "user.id".into()];
    let mut d = LineDecoder::new(s.clone(), options.clone()).unwrap();
    let out = d
        .decode(&chunk(
            &[
                r#"{"ts":"2026-10-03T14:00:00Z","event_id":"a","user":{"id":1}}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","event_id":null,"user":{"id":1}}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","user":{"id":1}}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","event_id":"b","user":null}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","event_id":"c","user":{}}"#,
            ]
            .join("\n"),
        ))
        .unwrap();
    assert_eq!(out.batch.num_rows(), 1);
    assert_rejects_start(
        &out,
        &[
            "missing_key: key field event_id",
            "missing_key: key field event_id",
            "missing_key: key field user.id",
            "missing_key: key field user.id",
        ],
    );
    options.key = vec!["user".into()];
    assert!(matches!(
        LineDecoder::new(s, options),
        Err(DecodeError::KeyFieldType { .. })
    ));
}

/// With sequence fields, a row whose sequence is null or missing is a dead letter (a missing
/// key is named first); a sequence must be of a type that orders.
#[test]
fn rows_without_their_sequence_are_rejected() {
    let s = typed(&[
        ("ts", "string"),
        ("id", "string"),
        ("source", "struct<file:string,pos:long>"),
        ("ratio", "double"),
    ]);
    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.key = vec!["id".into()];
    options.sequence = vec!["source.file".into(), "source.pos".into()];
    let mut d = LineDecoder::new(s.clone(), options.clone()).unwrap();
    let out = d
        .decode(&chunk(
            &[
                r#"{"ts":"2026-10-03T14:00:00Z","id":"a","source":{"file":"b.1","pos":4}}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","id":"a","source":{"file":"b.1"}}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","id":"a","source":null}"#,
                r#"{"ts":"2026-10-03T14:00:00Z","source":null}"#,
            ]
            .join("\n"),
        ))
        .unwrap();
    assert_eq!(out.batch.num_rows(), 1);
    assert_rejects_start(
        &out,
        &[
            "missing_sequence: sequence field source.pos",
            "missing_sequence: sequence field source.file",
            "missing_key: key field id",
        ],
    );
    for bad in ["ratio", "source"] {
        options.sequence = vec![bad.into()];
        assert!(matches!(
            LineDecoder::new(s.clone(), options.clone()),
            Err(DecodeError::SequenceFieldType { .. })
        ));
    }
    options.sequence = vec!["nope".into()];
    assert!(matches!(
        LineDecoder::new(s, options),
        Err(DecodeError::NoSequenceField(_))
    ));
}

/// Nested time fields: `payload.created_at`.
#[test]
fn nested_time_fields() {
    let s = typed(&[("payload", "struct<created_at:string,n:long>")]);
    let mut d = LineDecoder::new(
        s,
        DecodeOptions::new("payload.created_at", TimeFormat::Rfc3339),
    )
    .unwrap();
    let out = d
        .decode(&chunk("{\"payload\":{\"created_at\":\"2026-10-03T14:00:00Z\",\"n\":1}}\n{\"payload\":null}\n{\"payload\":{\"n\":2}}\n"))
        .unwrap();
    assert_eq!(out.event_times.len(), 1);
    assert_eq!(
        reasons(&out),
        [(156, "missing_time"), (173, "missing_time")]
    );
}

const STREAM: [&str; 4] = [
    r#"{"ts":"2026-10-03T14:00:00Z","n":1}"#,
    r#"{"ts":"2026-10-03T14:00:01Z","n":2,"coupon":"X1","gone":null}"#,
    r#"{"ts":"2026-10-03T14:00:02Z","n":3,"user":{"plan":"pro"}}"#,
    r#"{"ts":"2026-10-03T14:00:03Z","n":4,"coupon":7}"#,
];

/// `add`: the schema grows by the fields, typed by their first appearance; a later value
/// of another type is `wrong_type` (7 reads as the string "7": numbers fit text columns).
#[test]
fn new_fields_are_added_as_columns() {
    let mut d = LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let out = d.decode(&chunk(&STREAM.join("\n"))).unwrap();
    assert_eq!(out.added, ["coupon", "user"]);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    assert_eq!(out.batch.num_rows(), 4);
    let names: Vec<String> = d
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name(), crate::schema::type_name(f.data_type())))
        .collect();
    assert_eq!(
        names,
        [
            "ts:string",
            "n:long",
            "coupon:string",
            "user:struct<plan:string>"
        ]
    );
    let coupon = out.batch.column(2).as_string::<i32>();
    assert_eq!(
        coupon.iter().collect::<Vec<_>>(),
        [None, Some("X1"), None, Some("7")]
    );
    // One line at a time grows it the same way.
    let mut one =
        LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    for (i, l) in STREAM.iter().enumerate() {
        one.decode(&Chunk {
            file: 1,
            start: i as i64 * 100,
            data: l.as_bytes().to_vec(),
            message_offsets: None,
            ..Chunk::default()
        })
        .unwrap();
    }
    assert_eq!(one.schema(), d.schema());
}

#[test]
fn new_fields_are_rejected_or_ignored_and_counted_when_asked() {
    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.evolution = SchemaEvolution::Reject;
    let mut d = LineDecoder::new(schema(), options.clone()).unwrap();
    let out = d.decode(&chunk(&STREAM.join("\n"))).unwrap();
    assert_eq!(out.batch.num_rows(), 1);
    let details: Vec<String> = out
        .rejects
        .iter()
        .map(|r| format!("{}: {}", r.reason.as_str(), r.reason.detail()))
        .collect();
    assert_eq!(
        details,
        [
            "unknown_field: fields the table does not have: coupon",
            "unknown_field: fields the table does not have: user",
            "unknown_field: fields the table does not have: coupon",
        ]
    );
    options.evolution = SchemaEvolution::Ignore;
    let mut d = LineDecoder::new(schema(), options).unwrap();
    let out = d.decode(&chunk(&STREAM.join("\n"))).unwrap();
    assert_eq!(out.batch.num_rows(), 4);
    assert_eq!(out.ignored_rows, 3);
    assert_eq!(
        out.ignored
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>(),
        [("coupon", 2), ("user", 1)]
    );
    assert_eq!(d.schema().fields().len(), 2);
}

/// Past the column limit, new fields are dead letters, never dropped.
#[test]
fn the_column_limit_turns_new_fields_into_dead_letters() {
    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.columns_max = 3;
    let mut d = LineDecoder::new(schema(), options).unwrap();
    let out = d
        .decode(&chunk("{\"ts\":\"2026-10-03T14:00:00Z\",\"a\":1}\n{\"ts\":\"2026-10-03T14:00:00Z\",\"b\":2}\n{\"ts\":\"2026-10-03T14:00:00Z\",\"c\":{}}\n"))
        .unwrap();
    assert_eq!(out.added, ["a"]);
    assert_eq!(out.batch.num_rows(), 2);
    assert_eq!(out.rejects.len(), 1);
    assert!(
        out.rejects[0]
            .reason
            .detail()
            .contains("fields the table does not have: b"),
        "{:?}",
        out.rejects
    );
    assert_eq!(out.ignored.get("c"), Some(&1));
}

/// A field that is always null, or `{}`, carries nothing: the chunk decodes in one pass,
/// every row kept, and `{}` (under `add`, nothing to store) is counted as left out.
#[test]
fn fields_with_nothing_to_store_do_not_stop_a_chunk() {
    let mut d = LineDecoder::new(schema(), DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap();
    let out = d
        .decode(&chunk(concat!(
            "{\"ts\":\"2026-10-03T14:00:00Z\",\"n\":1,\"gone\":null}\n",
            "{\"ts\":\"2026-10-03T14:00:01Z\",\"n\":2,\"gone\":null,\"meta\":{}}\n",
        )))
        .unwrap();
    assert_eq!(out.batch.num_rows(), 2);
    assert!(out.rejects.is_empty() && out.added.is_empty());
    assert_eq!(out.ignored_rows, 1);
    assert_eq!(out.ignored.get("meta"), Some(&1));
    assert_eq!(d.schema().fields().len(), 2);
}

/// A time field whose column was renamed (a record key no reader accepts, or one spelled
/// like a column sluice adds) is read by its records' own name, whichever name the option
/// gives: found by a CSV fuzz case whose header named a column " ".
#[test]
fn a_renamed_time_field_is_read_by_its_records_name() {
    let lines: [&[u8]; 1] = [br#"{"dt":"2026-10-03T14:00:00Z","a b":"2026-10-03T15:00:00Z"}"#];
    let reserved = ["dt".to_string()];
    let schema = crate::schema::infer(lines.iter().copied(), 10, &reserved).unwrap();
    let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["dt_2", "a_b"]);
    for (field, hour) in [("dt_2", 14), ("dt", 14), ("a_b", 15), ("a b", 15)] {
        let options = DecodeOptions::new(field, TimeFormat::Rfc3339);
        let mut d = LineDecoder::new(schema.clone(), options).unwrap();
        let out = d
            .decode(&chunk(&format!(
                "{}\n",
                std::str::from_utf8(lines[0]).unwrap()
            )))
            .unwrap();
        assert!(out.rejects.is_empty(), "{field}: {:?}", out.rejects);
        let expected =
            sluice_window::EventTime::from_micros(1_790_985_600_000_000 + hour * 3_600_000_000);
        assert_eq!(out.event_times, [expected], "{field}");
    }
}
