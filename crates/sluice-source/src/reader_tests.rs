use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use deltalake::arrow::array::{AsArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Int64Type};

use crate::compression::COMPRESSED_LEN;
use crate::log::ReplayLog;
use crate::{CsvOptions, DecodeOptions, FileFormat, LineDecoder, NdjsonSource};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

fn lines_text(n: std::ops::Range<u32>) -> String {
    n.map(|i| format!("{{\"i\":{i},\"ts\":\"2026-10-03T14:00:{:02}Z\"}}\n", i % 60))
        .collect()
}

/// What a reader read: each record (file ordinal, offset, line), the end of each file's last
/// chunk, the reader's dead letters (offset, reason).
type Read = (Vec<(u32, i64, String)>, Vec<(u32, i64)>, Vec<(i64, String)>);

/// Every record of the source from `resume`.
fn read_all(source: &NdjsonSource, resume: &HashMap<String, i64>, chunk_bytes: usize) -> Read {
    let mut reader = source.reader(resume, chunk_bytes).unwrap();
    let (mut lines, mut ends, mut bad) = (Vec::new(), Vec::<(u32, i64)>::new(), Vec::new());
    while let Some(c) = reader.next_chunk().unwrap() {
        for (offset, line) in c.as_lines().lines() {
            lines.push((c.file, offset, String::from_utf8_lossy(line).into_owned()));
        }
        for r in &c.bad {
            bad.push((r.offset, r.reason.as_str().to_string()));
        }
        match ends.last_mut() {
            Some(last) if last.0 == c.file => last.1 = c.end(),
            _ => ends.push((c.file, c.end())),
        }
    }
    (lines, ends, bad)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// gzip and zstd files are read as their decompressed lines, at decompressed offsets, in
/// chunks of any size; each ends at [`COMPRESSED_LEN`], which the table's offset then says,
/// and a restart re-enters one in the middle.
#[test]
fn compressed_files_read_as_their_lines_at_decompressed_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines_text(0..300);
    write(dir.path(), "a.ndjson", text.as_bytes());
    write(dir.path(), "b.ndjson.gz", &gzip(text.as_bytes()));
    write(dir.path(), "c.ndjson.zst", &zstd(text.as_bytes()));
    // No extension: the magic bytes say gzip.
    write(dir.path(), "d", &gzip(text.as_bytes()));
    let source = NdjsonSource::open(dir.path()).unwrap();
    let kinds: Vec<_> = source
        .files()
        .iter()
        .map(|f| f.compression.name())
        .collect();
    assert_eq!(kinds, ["none", "gzip", "zstd", "gzip"]);
    for chunk_bytes in [64, 1000, 1 << 20] {
        let (lines, ends, bad) = read_all(&source, &HashMap::new(), chunk_bytes);
        assert!(bad.is_empty());
        assert_eq!(lines.len(), 1200, "chunk {chunk_bytes}");
        for file in 0..4 {
            let of_file: Vec<_> = lines
                .iter()
                .filter(|(f, _, _)| *f == 2 * file + 1)
                .map(|(_, o, l)| (*o, l.clone()))
                .collect();
            let plain: Vec<_> = lines
                .iter()
                .filter(|(f, _, _)| *f == 1)
                .map(|(_, o, l)| (*o, l.clone()))
                .collect();
            assert_eq!(of_file, plain, "file {file}, chunk {chunk_bytes}");
        }
        let compressed_end = COMPRESSED_LEN as i64;
        assert_eq!(
            ends,
            [
                (1, text.len() as i64),
                (3, compressed_end),
                (5, compressed_end),
                (7, compressed_end)
            ]
        );
    }
    // A run counts the stored bytes it read, not the decompressed ones.
    let mut reader = source.reader(&HashMap::new(), 1000).unwrap();
    let mut read = 0;
    while let Some(c) = reader.next_chunk().unwrap() {
        read += c.bytes_read();
    }
    let stored: u64 = source.files().iter().map(|f| f.size).sum();
    assert_eq!(read, stored);
    // A restart: the plain file and the gzip done, the zstd file half read.
    let half = lines_text(0..150).len() as i64;
    let committed = HashMap::from([
        ("a.ndjson".to_string(), text.len() as i64),
        ("b.ndjson.gz".to_string(), COMPRESSED_LEN as i64),
        ("c.ndjson.zst".to_string(), half),
    ]);
    let at = source.resume_at(&committed);
    assert_eq!(source.partition_of(at).unwrap().as_ref(), "c.ndjson.zst");
    assert_eq!(at.offset, half);
    let (lines, _, _) = read_all(&source, &committed, 4096);
    assert_eq!(lines.len(), 150 + 300);
    assert_eq!((lines[0].0, lines[0].1), (5, half));
    assert!(source.check_resume(&committed).is_ok());
    // Publishing past the zstd file records it as read to its end.
    let moved = source.advances(&committed, source.position_of("d", 0));
    assert_eq!(moved, [("c.ndjson.zst".to_string(), COMPRESSED_LEN as i64)]);
}

/// A compressed file cut short is still being written, wherever it is in the source and in
/// any run: its whole lines are read, no dead letter, and nothing after it (the next file's
/// records come after its); once complete, it is read on from there, then the next file.
#[test]
fn a_compressed_file_cut_short_is_waited_for_in_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines_text(0..2000);
    let full = gzip(text.as_bytes());
    for following in [false, true] {
        write(dir.path(), "a.gz", &full[..full.len() / 2]);
        write(dir.path(), "b.ndjson", b"{\"i\":1}\n");
        let open = |dir: &Path| match following {
            true => NdjsonSource::open_following(dir).unwrap(),
            false => NdjsonSource::open(dir).unwrap(),
        };
        let source = open(dir.path());
        let (first, ends, bad) = read_all(&source, &HashMap::new(), 4096);
        assert!(bad.is_empty(), "{bad:?}");
        assert!(first.iter().all(|(f, _, _)| *f == 1), "b waits");
        let (_, end) = ends[0];
        assert!(end > 0 && end < text.len() as i64, "{end}");
        write(dir.path(), "a.gz", &full);
        let source = open(dir.path());
        let resume = HashMap::from([("a.gz".to_string(), end)]);
        let (rest, _, bad) = read_all(&source, &resume, 4096);
        assert!(bad.is_empty());
        assert_eq!(first.len() + rest.len(), 2001);
        assert_eq!(rest[0].1, end);
        assert_eq!(rest.last().unwrap().2, "{\"i\":1}");
    }
}

/// A damaged compressed file (corrupt data, not cut short): its lines before the damage are
/// read, the rest is one dead letter `unreadable` at the offset it starts, and the next
/// file is read. Nothing stops the run.
#[test]
fn a_damaged_compressed_file_is_read_to_the_damage_then_a_dead_letter() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines_text(0..2000);
    // A whole gzip member of half the lines, then a second member that is no gzip at all.
    let mut corrupt = gzip(lines_text(0..1000).as_bytes());
    corrupt.extend_from_slice(b"\x1f\x8b\x08\xffthis is no gzip member at all, and never will be");
    write(dir.path(), "a.gz", &corrupt);
    write(dir.path(), "b.ndjson", b"{\"i\":1}\n");
    for following in [false, true] {
        let source = if following {
            NdjsonSource::open_following(dir.path()).unwrap()
        } else {
            NdjsonSource::open(dir.path()).unwrap()
        };
        let (lines, ends, bad) = read_all(&source, &HashMap::new(), 4096);
        let from_a: Vec<_> = lines.iter().filter(|(f, _, _)| *f == 1).collect();
        assert!(
            from_a.len() > 100 && from_a.len() < 2000,
            "{}",
            from_a.len()
        );
        // Every line read is a whole line of the file, at its offset.
        for (_, offset, line) in &from_a {
            let at = *offset as usize;
            assert_eq!(&text[at..at + line.len() + 1], format!("{line}\n"));
        }
        let (_, last_offset, last_line) = from_a.last().unwrap();
        let damage = last_offset + last_line.len() as i64 + 1;
        assert_eq!(bad, [(damage, "unreadable".to_string())]);
        assert_eq!(ends[0], (1, COMPRESSED_LEN as i64));
        assert_eq!(lines.last().unwrap().2, "{\"i\":1}");
    }
}

/// The last file of a followed source is waited for while its compressed stream is cut
/// short (it is being written): its whole lines are read, no dead letter; once complete,
/// the rest is read from where the first pass ended.
#[test]
fn a_followed_compressed_file_cut_short_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines_text(0..2000);
    let full = gzip(text.as_bytes());
    write(dir.path(), "a.gz", &full[..full.len() / 2]);
    let mut source = NdjsonSource::open_following(dir.path()).unwrap();
    let (first, ends, bad) = read_all(&source, &HashMap::new(), 4096);
    assert!(bad.is_empty(), "{bad:?}");
    let (_, end) = ends[0];
    assert!(end > 0 && end < text.len() as i64, "{end}");
    write(dir.path(), "a.gz", &full);
    assert!(source.refresh().unwrap());
    let resume = HashMap::from([("a.gz".to_string(), end)]);
    let (rest, ends, bad) = read_all(&source, &resume, 4096);
    assert!(bad.is_empty());
    assert_eq!(first.len() + rest.len(), 2000);
    assert_eq!(rest[0].1, end);
    assert_eq!(ends, [(1, COMPRESSED_LEN as i64)]);
}

fn csv_source(dir: &Path) -> NdjsonSource {
    NdjsonSource::open(dir)
        .unwrap()
        .with_format(FileFormat::Csv(CsvOptions::default()))
}

/// CSV files (plain and gzipped) are read as JSON lines named by their header, at each
/// record's byte offset; a quoted field may hold line ends, in chunks of any size; a
/// restart in the middle of a file reads its header again.
#[test]
fn csv_records_are_read_at_their_offsets_with_their_header() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("\u{feff}id,ts,note\n");
    for i in 0..200 {
        text.push_str(&format!(
            "{i},2026-10-03T14:00:{:02}Z,\"line {i}\nwith \"\"quotes\"\", a comma\"\n",
            i % 60
        ));
    }
    write(dir.path(), "a.csv", text.as_bytes());
    write(dir.path(), "b.csv.gz", &gzip(text.as_bytes()));
    let source = csv_source(dir.path());
    let header_len = "\u{feff}id,ts,note\n".len() as i64;
    for chunk_bytes in [16, 333, 1 << 20] {
        let (lines, _, bad) = read_all(&source, &HashMap::new(), chunk_bytes);
        assert!(bad.is_empty());
        assert_eq!(lines.len(), 400, "chunk {chunk_bytes}");
        assert_eq!(lines[0].1, header_len);
        assert_eq!(
            lines[7].2,
            r#"{"id":7,"ts":"2026-10-03T14:00:07Z","note":"line 7\nwith \"quotes\", a comma"}"#
        );
        for (_, offset, line) in &lines[..200] {
            let id = line[6..].split(',').next().unwrap();
            assert!(text[*offset as usize..].starts_with(&format!("{id},")));
        }
    }
    let (lines, _, _) = read_all(&source, &HashMap::new(), 4096);
    let resume = HashMap::from([("a.csv".to_string(), lines[150].1)]);
    let (rest, _, _) = read_all(&source, &resume, 4096);
    assert_eq!(rest.len(), 50 + 200);
    assert_eq!(rest[0], lines[150]);
}

/// A CSV file's rows decode through the JSON decoder: types inferred from the records
/// (numbers, booleans, text, times), empty fields null, a record with the wrong field count
/// a dead letter with its line and offset.
#[test]
fn csv_rows_decode_with_inferred_types_and_bad_records_are_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let text = "id,ts,amount,ok,zip\n1,2026-10-03T14:00:00Z,2.5,true,007\n2,2026-10-03T14:00:01Z,,false,10001\n3,2026-10-03T14:00:02Z,4\n";
    write(dir.path(), "a.csv", text.as_bytes());
    let source = csv_source(dir.path());
    let head = source.head_lines(1000).unwrap();
    let schema = crate::schema::infer(head.iter().map(|l| l.as_slice()), 1000, &[]).unwrap();
    let types: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.data_type().clone()))
        .collect();
    assert_eq!(types[0], ("id", DataType::Int64));
    assert_eq!(types[2], ("amount", DataType::Float64));
    assert_eq!(types[3], ("ok", DataType::Boolean));
    assert_eq!(
        types[4],
        ("zip", DataType::Utf8),
        "007 is text, not a number"
    );
    let mut decoder = LineDecoder::new(
        schema,
        DecodeOptions::new("ts", sluice_window::TimeFormat::Rfc3339),
    )
    .unwrap();
    let mut reader = source.reader(&HashMap::new(), 4096).unwrap();
    let chunk = reader.next_chunk().unwrap().unwrap();
    let decoded = decoder.decode(&chunk).unwrap();
    let batch: &RecordBatch = &decoded.batch;
    let ids: Vec<_> = batch.column(0).as_primitive::<Int64Type>().iter().collect();
    assert_eq!(ids, [Some(1), Some(2)]);
    assert!(batch.column(2).is_null(1), "an empty field is null");
    let zips: Vec<_> = batch.column(4).as_string::<i32>().iter().collect();
    assert_eq!(zips, [Some("007"), Some("10001")]);
    let third = text.find("3,2026").unwrap() as i64;
    let bad: Vec<_> = decoded
        .rejects
        .iter()
        .map(|r| (r.offset, r.reason.as_str(), r.raw.as_str()))
        .collect();
    assert_eq!(
        bad,
        [(third, "wrong_field_count", "3,2026-10-03T14:00:02Z,4")]
    );
    assert_eq!(chunk.end(), text.len() as i64);
}

/// A compressed file read to its end records its stored size with the commit that moves its
/// offset there; a later change of that size (gzip members appended, a damaged file
/// rewritten whole) is refused, never passed over (its offset only says "at its end").
#[test]
fn a_compressed_file_that_changes_after_its_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines_text(0..100);
    let first = gzip(text.as_bytes());
    write(dir.path(), "a.gz", &first);
    write(dir.path(), "b.ndjson", b"{\"i\":1}\n");
    let source = NdjsonSource::open(dir.path()).unwrap();
    let advanced = source.advances(&HashMap::new(), source.end());
    let ends = source.ends_to_store(&HashMap::new(), &advanced);
    assert_eq!(ends, [("a.gz".to_string(), first.len() as i64)]);
    let committed: HashMap<String, i64> = advanced.into_iter().collect();
    let stored: HashMap<String, i64> = ends.into_iter().collect();
    assert!(source
        .ends_to_store(&stored, &[("a.gz".into(), COMPRESSED_LEN as i64)])
        .is_empty());
    let mut again = NdjsonSource::open(dir.path()).unwrap();
    again.adopt_ends(&stored);
    assert!(again.check_resume(&committed).is_ok(), "unchanged");
    let mut grown = first.clone();
    grown.extend(gzip(lines_text(100..110).as_bytes()));
    write(dir.path(), "a.gz", &grown);
    let mut changed = NdjsonSource::open(dir.path()).unwrap();
    changed.adopt_ends(&stored);
    let err = changed.check_resume(&committed).unwrap_err();
    assert!(
        err.to_string()
            .contains("changed after it was read to its end"),
        "{err}"
    );
    // Followed: a file read to its end in this run that changes is refused at the refresh.
    write(dir.path(), "a.gz", &first);
    let mut followed = NdjsonSource::open_following(dir.path()).unwrap();
    write(dir.path(), "a.gz", &grown);
    let read = HashMap::from([("a.gz".to_string(), COMPRESSED_LEN as i64)]);
    let err = followed.refresh_after(&read).unwrap_err();
    assert!(
        err.to_string()
            .contains("changed after it was read to its end"),
        "{err}"
    );
}

/// A bounded run's last file may still be written: its last record without a line end is
/// read only if it is whole (a complete JSON value; a CSV record with its quotes closed and
/// at least the header's fields); otherwise it is left, and the run's position stays at its
/// start. A file that is not the last is read whole.
#[test]
fn the_last_files_incomplete_last_record_is_left_for_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let read = |source: &NdjsonSource| {
        let (lines, ends, bad) = read_all(source, &HashMap::new(), 4096);
        let lines: Vec<String> = lines.into_iter().map(|(_, _, l)| l).collect();
        (lines, ends.last().map(|e| e.1), bad.len())
    };
    write(dir.path(), "a.ndjson", b"{\"i\":1}\n{\"i\":2}\n{\"i\":");
    let (lines, end, _) = read(&NdjsonSource::open(dir.path()).unwrap());
    assert_eq!((lines.len(), end), (2, Some(16)), "the torn line waits");
    write(dir.path(), "a.ndjson", b"{\"i\":1}\n{\"i\":2}\n{\"i\":3}");
    let (lines, end, _) = read(&NdjsonSource::open(dir.path()).unwrap());
    assert_eq!(
        (lines.len(), end),
        (3, Some(23)),
        "a whole value is a record"
    );
    write(dir.path(), "b.ndjson", b"{\"j\":1}\n");
    let (lines, _, _) = read(&NdjsonSource::open(dir.path()).unwrap());
    assert_eq!(lines.len(), 4, "not the last: read whole");
    let csv = tempfile::tempdir().unwrap();
    for (tail, records) in [("3,x", 3), ("3", 2), ("3,\"x", 2), ("3,x,y", 3)] {
        write(
            csv.path(),
            "a.csv",
            format!("id,v\n1,a\n2,b\n{tail}").as_bytes(),
        );
        let (lines, _, bad) = read(&csv_source(csv.path()));
        assert_eq!(lines.len() + bad, records, "{tail}");
    }
}
