use super::*;

fn row(line: &str) -> Result<String, String> {
    Envelope::Debezium
        .unwrap_line(line.as_bytes())
        .map(|r| String::from_utf8(r).unwrap())
}

/// A change's row: `after`'s fields (a delete's `before`), the operation, the source block,
/// whether it was streamed (not a snapshot's read); numbers keep their text; the converter's
/// `schema`/`payload` form reads the same.
#[test]
fn a_change_becomes_its_row() {
    let source = r#"{"lsn":24023128,"txId":555,"ts_ms":1791036000000}"#;
    let update = format!(
        r#"{{"before":{{"id":1,"n":1}},"after":{{"id":1,"big":9007199254740993,"price":1.50,"name":"ad\u00e9"}},"op":"u","source":{source},"ts_ms":1}}"#
    );
    assert_eq!(
        row(&update).unwrap(),
        format!(
            r#"{{"id":1,"big":9007199254740993,"price":1.50,"name":"ad\u00e9","__op":"u","__source":{source},"__streamed":true}}"#
        )
    );
    let delete =
        format!(r#"{{"before":{{"id":7,"name":null}},"after":null,"op":"d","source":{source}}}"#);
    assert_eq!(
        row(&delete).unwrap(),
        format!(r#"{{"id":7,"name":null,"__op":"d","__source":{source},"__streamed":true}}"#)
    );
    let read = r#"{"after":{"id":2},"op":"r"}"#;
    assert_eq!(
        row(read).unwrap(),
        r#"{"id":2,"__op":"r","__source":null,"__streamed":false}"#
    );
    let wrapped = format!(r#"{{"schema":{{"type":"struct"}},"payload":{update}}}"#);
    assert_eq!(row(&wrapped).unwrap(), row(&update).unwrap());
    // A row already: as it is.
    let unwrapped = row(&update).unwrap();
    assert_eq!(row(&unwrapped).unwrap(), unwrapped);
}

/// What is not a change is refused with its reason, never read as a row.
#[test]
fn what_is_not_a_change_is_refused() {
    for (line, says) in [
        ("[1,2]", "the record is not a JSON object"),
        ("{\"after\":{\"id\":1}}", "no \"op\""),
        ("{\"op\":1,\"after\":{}}", "\"op\" is 1, not a string"),
        ("{\"op\":\"x\",\"after\":{}}", "unknown op \"x\""),
        ("{\"op\":\"t\",\"source\":{}}", "names no row"),
        (
            "{\"op\":\"c\",\"after\":null}",
            "without its \"after\" object",
        ),
        (
            "{\"op\":\"d\",\"after\":null}",
            "without its \"before\" object",
        ),
        ("{\"op\":\"u\",\"after\":[1]}", "after is not a JSON object"),
        ("{\"op\":\"c\",\"after\":{\"__op\":1}}", "sluice adds"),
        ("{\"op\":\"c\",\"after\":{\"__streamed\":1}}", "sluice adds"),
        (
            "{\"op\":\"c\",\"after\":{\"id\":1}",
            "the record is not a JSON object",
        ),
        ("\u{0}", "not a JSON object"),
    ] {
        let e = row(line).expect_err(line);
        assert!(e.contains(says), "{line}: {e}");
    }
    assert!(Envelope::Debezium.unwrap_line(&[0xff, b'{']).is_err());
}

/// A file's chunk: each record's row at the record's own byte offset, blank lines skipped,
/// bad records rejects at theirs; the chunk still ends where the file's bytes did.
#[test]
fn a_chunk_keeps_each_record_at_its_offset() {
    let lines = "{\"op\":\"c\",\"after\":{\"id\":1}}\n\n{\"op\":\"z\"}\n{\"op\":\"d\",\"before\":{\"id\":1}}\n";
    let chunk = Chunk {
        file: 3,
        start: 100,
        data: lines.as_bytes().to_vec(),
        ..Chunk::default()
    };
    let (rows, _) = Envelope::Debezium.unwrap_chunk(&chunk);
    let got: Vec<(i64, String)> = rows
        .lines()
        .map(|(o, l)| (o, String::from_utf8(l.to_vec()).unwrap()))
        .collect();
    let at = |text: &str| 100 + lines.find(text).unwrap() as i64;
    assert_eq!(
        got,
        [
            (
                100,
                r#"{"id":1,"__op":"c","__source":null,"__streamed":true}"#.to_string()
            ),
            (
                at("{\"op\":\"d\""),
                r#"{"id":1,"__op":"d","__source":null,"__streamed":true}"#.to_string()
            ),
        ]
    );
    assert_eq!(rows.bad.len(), 1);
    assert_eq!(rows.bad[0].offset, at("{\"op\":\"z\"}"));
    assert_eq!(rows.bad[0].reason.as_str(), "bad_envelope");
    assert_eq!(rows.end(), chunk.end());
    assert_eq!(rows.bytes_read(), chunk.bytes_read());
}

/// Kafka messages: a tombstone (a message without a value, or a registry format's
/// `null_value` reject) is neither a row nor a reject of the unwrapped chunk, and is counted;
/// the chunk still ends after the last message.
#[test]
fn kafka_tombstones_are_left_out_and_counted() {
    let create = r#"{"op":"c","after":{"id":1}}"#.as_bytes();
    let delete = r#"{"op":"d","before":{"id":1}}"#.as_bytes();
    let mut chunk = Chunk::messages(
        1,
        [(10, create), (11, delete), (12, &b""[..]), (14, create)],
    );
    chunk.bad.push(Reject {
        file: 1,
        offset: 13,
        reason: RejectReason::NullValue,
        raw: String::new(),
    });
    let (rows, tombstones) = Envelope::Debezium.unwrap_chunk(&chunk);
    assert_eq!(tombstones, 2);
    let offsets: Vec<i64> = rows.lines().map(|(o, _)| o).collect();
    assert_eq!(offsets, [10, 11, 14]);
    assert!(rows.bad.is_empty(), "{:?}", rows.bad);
    assert_eq!(rows.end(), 15);
    // Files have no tombstones: an empty line is not a record.
    let file = Chunk {
        data: b"\n\n".to_vec(),
        ..Chunk::default()
    };
    assert_eq!(Envelope::Debezium.unwrap_chunk(&file).1, 0);
}

/// Debezium changes as Arrow rows (as arrow-avro reads them from Confluent's Avro converter,
/// or a Parquet file of them): a create, an update, a delete, a snapshot read, then a truncate,
/// a create without `after`, an unknown op; a tombstone among them.
fn arrow_changes() -> crate::Chunk {
    use std::sync::Arc;

    use deltalake::arrow::array::{
        Array, ArrayRef, BooleanBufferBuilder, Int64Array, RecordBatch, StringArray, StructArray,
        TimestampMillisecondArray,
    };
    use deltalake::arrow::buffer::NullBuffer;
    use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};

    let image = Fields::from(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
    ]);
    let t0 = 1_791_036_000_000;
    let struct_of = |ids: [i64; 7], names: [Option<&str>; 7], valid: [bool; 7]| {
        let mut nulls = BooleanBufferBuilder::new(7);
        nulls.append_slice(&valid);
        let ts = TimestampMillisecondArray::from(ids.map(|i| t0 + i * 1000).to_vec())
            .with_timezone("UTC");
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(names.to_vec())),
            Arc::new(ts),
        ];
        StructArray::new(
            image.clone(),
            columns,
            Some(NullBuffer::new(nulls.finish())),
        )
    };
    let before = struct_of(
        [0, 1, 2, 0, 0, 0, 0],
        [None, Some("one"), Some("two"), None, None, None, None],
        [false, true, true, false, false, false, false],
    );
    let after = struct_of(
        [1, 1, 0, 3, 0, 0, 4],
        [
            Some("one"),
            Some("uno"),
            None,
            Some("drei"),
            None,
            None,
            Some("x"),
        ],
        [true, true, false, true, false, false, true],
    );
    let op = StringArray::from(vec!["c", "u", "d", "r", "t", "c", "z"]);
    let source_fields = Fields::from(vec![
        Field::new("lsn", DataType::Int64, true),
        Field::new("db", DataType::Utf8, false),
    ]);
    let source = StructArray::new(
        source_fields,
        vec![
            Arc::new(Int64Array::from((100..107).collect::<Vec<i64>>())),
            Arc::new(StringArray::from(vec!["shop"; 7])),
        ],
        None,
    );
    let schema = Schema::new(vec![
        Field::new("before", before.data_type().clone(), true),
        Field::new("after", after.data_type().clone(), true),
        Field::new("source", source.data_type().clone(), false),
        Field::new("op", DataType::Utf8, false),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(before),
            Arc::new(after),
            Arc::new(source),
            Arc::new(op),
        ],
    )
    .unwrap();
    let tombstone = crate::Reject {
        file: 1,
        offset: 13,
        reason: crate::RejectReason::NullValue,
        raw: String::new(),
    };
    crate::Chunk {
        file: 1,
        start: 10,
        message_offsets: Some(Vec::new()),
        end_at: Some(18),
        bad: vec![tombstone],
        arrow: vec![crate::chunk::ArrowRows {
            batch,
            offsets: vec![10, 11, 12, 14, 15, 16, 17],
        }],
        ..crate::Chunk::default()
    }
}

/// Changes that arrive as Arrow are unwrapped column by column, into the same rows, dead
/// letters (reasons and raw text) and tombstone counts as their JSON lines are.
#[test]
fn arrow_changes_land_as_their_json_lines_land() {
    use crate::{DecodeOptions, LineDecoder};
    use sluice_window::TimeFormat;

    let chunk = arrow_changes();
    let (unwrapped, tombstones) = Envelope::Debezium.unwrap_chunk(&chunk);
    assert_eq!(tombstones, 1);
    assert_eq!(unwrapped.arrow.len(), 1, "unwrapped as columns");
    assert_eq!(unwrapped.arrow[0].offsets, [10, 11, 12, 14]);
    let rows = Envelope::Debezium
        .row_schema(&chunk.arrow[0].batch.schema())
        .unwrap();
    let names: Vec<&str> = rows.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["id", "name", "ts", OP_FIELD, SOURCE_FIELD, STREAMED_FIELD]
    );

    let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
    options.envelope = Some(Envelope::Debezium);
    let decoder = LineDecoder::new(crate::rows::table_schema(&rows), options).unwrap();
    let direct = decoder.clone().decode(&chunk).unwrap();
    let by_json = decoder.clone().decode(&chunk.as_lines()).unwrap();
    assert_eq!(direct.batch, by_json.batch);
    assert_eq!(direct.offsets, by_json.offsets);
    assert_eq!(direct.tombstones, 1);
    assert_eq!(by_json.tombstones, 1);
    let rejects = |d: &crate::decode::Decoded| -> Vec<(i64, String, String)> {
        d.rejects
            .iter()
            .map(|r| (r.offset, r.reason.detail(), r.raw.clone()))
            .collect()
    };
    assert_eq!(rejects(&direct), rejects(&by_json));
    let reasons: Vec<String> = rejects(&direct).into_iter().map(|r| r.1).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("truncate"), "{reasons:?}");
    assert!(reasons[1].contains("without its \"after\""), "{reasons:?}");
    assert!(reasons[2].contains("unknown op \"z\""), "{reasons:?}");
    let json = crate::rows::json_lines(&direct.batch).unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(r#""id":2,"name":"two""#),
        "a delete's row is its before: {json}"
    );
    assert!(
        json.contains(r#""__op":"r""#) && json.contains(r#""__streamed":false"#),
        "{json}"
    );
}

/// The table a change batch's columns make holds the image's columns, then sluice's.
#[test]
fn a_change_schema_without_after_is_no_change() {
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    let flat = Schema::new(vec![Field::new("op", DataType::Utf8, false)]);
    let err = Envelope::Debezium.row_schema(&flat).unwrap_err();
    assert!(err.contains("not a Debezium change"), "{err}");
}
