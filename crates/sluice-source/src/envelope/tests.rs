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
