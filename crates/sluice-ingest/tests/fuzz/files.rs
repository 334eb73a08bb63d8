//! File formats against arbitrary bytes: a CSV file of any fields (quotes, delimiters and
//! line ends inside them, unbalanced quotes, ragged records) and compressed files of any
//! bytes (garbage, streams cut short, flipped bytes). Every record ends as a row or a dead
//! letter at its own offset, the same ones whatever the chunk size (E5), and no file stops
//! the run (E8).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use deltalake::arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;
use proptest::sample::select;
use sluice_source::compression::COMPRESSED_LEN;
use sluice_source::{CsvOptions, DecodeOptions, FileFormat, LineDecoder, NdjsonSource};
use sluice_window::TimeFormat;

use crate::runner::fuzz;

/// Every record's fate by offset: its JSON line, or a dead letter's reason.
type Fates = BTreeMap<i64, String>;

/// Reads the whole source in chunks of `chunk_bytes`: checks that the chunks follow each
/// other and each offset is one record's; decodes each chunk (the schema inferred from the
/// source, every field new to it added) and checks every record is a row or a dead letter.
fn read(source: &NdjsonSource, chunk_bytes: usize) -> Result<Fates, TestCaseError> {
    let head = source
        .head_lines(1000)
        .map_err(|e| TestCaseError::fail(format!("head: {e}")))?;
    // The inferred schema when it has a `ts` to read times from; else only `ts`, and every
    // other field added as it comes (schema evolution).
    let ts_only = || std::sync::Arc::new(Schema::new(vec![Field::new("ts", DataType::Utf8, true)]));
    let schema = sluice_source::schema::infer(head.iter().map(|l| l.as_slice()), 1000, &[])
        .ok()
        .filter(|s| s.field_with_name("ts").is_ok())
        .unwrap_or_else(ts_only);
    let mut decoder = LineDecoder::new(schema, DecodeOptions::new("ts", TimeFormat::Rfc3339))
        .or_else(|_| LineDecoder::new(ts_only(), DecodeOptions::new("ts", TimeFormat::Rfc3339)))
        .map_err(|e| TestCaseError::fail(format!("decoder: {e}")))?;
    let mut reader = source
        .reader(&HashMap::new(), chunk_bytes)
        .map_err(|e| TestCaseError::fail(format!("reader: {e}")))?;
    let mut fates = Fates::new();
    let mut ends: HashMap<u32, i64> = HashMap::new();
    loop {
        let chunk = match reader.next_chunk() {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => return Err(TestCaseError::fail(format!("a file stopped the read: {e}"))),
        };
        if let Some(end) = ends.get(&chunk.file) {
            prop_assert_eq!(chunk.start, *end, "chunks follow each other");
        }
        prop_assert!(chunk.end() >= chunk.start);
        ends.insert(chunk.file, chunk.end());
        // Rows of fields land as their JSON lines would (the reference path).
        let mut by_json = decoder.clone();
        let decoded = decoder
            .decode(&chunk)
            .map_err(|e| TestCaseError::fail(format!("a record failed the decode: {e}")))?;
        if chunk.text.is_some() {
            let reference = by_json
                .decode(&chunk.as_lines())
                .map_err(|e| TestCaseError::fail(format!("the JSON path failed: {e}")))?;
            prop_assert_eq!(&decoded.batch, &reference.batch, "rows as their JSON lines");
            prop_assert_eq!(&decoded.offsets, &reference.offsets);
            let fates = |d: &sluice_source::Decoded| -> Vec<(i64, String, String)> {
                d.rejects
                    .iter()
                    .map(|r| {
                        (
                            r.offset,
                            format!("{} {}", r.reason.as_str(), r.reason.detail()),
                            r.raw.clone(),
                        )
                    })
                    .collect()
            };
            prop_assert_eq!(fates(&decoded), fates(&reference));
            prop_assert_eq!(decoder.schema(), by_json.schema());
        }
        let key = |o: i64| (i64::from(chunk.file) << 48) + o;
        // (Records that arrived as rows of fields, as the JSON lines they mean.)
        let as_lines = chunk.as_lines();
        let lines: HashMap<i64, String> = as_lines
            .lines()
            .map(|(o, l)| (o, String::from_utf8_lossy(l).into_owned()))
            .collect();
        for o in &decoded.offsets {
            prop_assert!(*o >= chunk.start && *o < chunk.end());
            let line = lines.get(o).cloned().unwrap_or_default();
            prop_assert!(fates.insert(key(*o), line).is_none(), "offset {} twice", o);
        }
        for r in &decoded.rejects {
            prop_assert!(r.offset >= chunk.start && r.offset < chunk.end().max(chunk.start + 1));
            let fate = format!("dead letter {}", r.reason.as_str());
            prop_assert!(
                fates.insert(key(r.offset), fate).is_none(),
                "offset {} twice",
                r.offset
            );
        }
        prop_assert_eq!(
            decoded.offsets.len() + decoded.rejects.len(),
            lines.len() + chunk.bad.len() + usize::from(chunk.overlong.is_some()),
            "every record is a row or a dead letter"
        );
    }
    Ok(fates)
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 .:-]{0,8}",
        Just(String::new()),
        Just("2026-10-03T14:00:00Z".to_string()),
        "-?[0-9]{1,20}(\\.[0-9]{1,5})?",
        Just("true".to_string()),
        // Quoted: delimiters, doubled quotes, line ends inside.
        "[a-z,\n\" ]{0,10}".prop_map(|t| format!("\"{}\"", t.replace('"', "\"\""))),
        // Anything at all: stray quotes, CR, bytes of other scripts.
        "[\"\r\n,a-zé€\\\\]{0,6}",
    ]
}

fn csv_text() -> impl Strategy<Value = String> {
    let header = prop::collection::vec("[a-z]{0,3}", 1..5).prop_map(|n| n.join(","));
    let record = prop::collection::vec(field(), 1..6).prop_map(|f| f.join(","));
    let eol = select(vec!["\n", "\r\n", "\n\n"]);
    (
        header,
        prop::collection::vec((record, eol), 0..40),
        any::<bool>(),
    )
        .prop_map(|(header, records, ts_first)| {
            let mut text = if ts_first {
                format!("ts,{header}\n")
            } else {
                format!("{header}\n")
            };
            for (r, eol) in records {
                text.push_str(&r);
                text.push_str(eol);
            }
            text
        })
}

#[test]
fn csv_files_of_any_fields_end_as_rows_or_dead_letters_whatever_the_chunks() {
    fuzz(
        "csv files",
        96,
        (csv_text(), select(vec![1usize, 7, 64, 333])),
        |(text, chunk_bytes)| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("a.csv"), &text).unwrap();
            let source = NdjsonSource::open(dir.path())
                .unwrap()
                .with_format(FileFormat::Csv(CsvOptions::default()));
            let whole = read(&source, 1 << 20)?;
            let cut = read(&source, chunk_bytes)?;
            prop_assert_eq!(whole, cut, "the same records whatever the chunk size");
            Ok(())
        },
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A compressed file's bytes: garbage, or a real stream cut short or with a byte flipped.
fn compressed() -> impl Strategy<Value = (Vec<u8>, &'static str)> {
    let lines = prop::collection::vec("[a-z]{0,12}", 0..300).prop_map(|words| {
        words
            .iter()
            .enumerate()
            .map(|(i, w)| format!("{{\"ts\":\"2026-10-03T14:00:00Z\",\"i\":{i},\"w\":\"{w}\"}}\n"))
            .collect::<String>()
    });
    prop_oneof![
        (
            prop::collection::vec(any::<u8>(), 0..200),
            select(vec!["x.gz", "x.zst"])
        ),
        (lines.clone(), any::<prop::sample::Index>()).prop_map(|(text, cut)| {
            let g = gzip(text.as_bytes());
            let at = cut.index(g.len() + 1);
            (g[..at].to_vec(), "x.gz")
        }),
        (lines.clone(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(text, at, flip)| {
            let mut z = zstd::encode_all(text.as_bytes(), 1).unwrap();
            let at = at.index(z.len());
            z[at] ^= flip | 1;
            (z, "x.zst")
        }),
        (lines, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(text, at, flip)| {
            let mut g = gzip(text.as_bytes());
            let at = at.index(g.len());
            g[at] ^= flip | 1;
            (g, "x.gz")
        }),
    ]
}

/// Whether a compressed file's stream is cut short (it may still be being written), told by
/// decompressing it whole: the stream ends before its end of stream, where a corrupt one
/// fails otherwise (or reads whole).
fn cut_short(bytes: &[u8], name: &str) -> bool {
    let mut sink = Vec::new();
    let read = if name.ends_with(".gz") {
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(bytes), &mut sink)
    } else {
        zstd::stream::read::Decoder::new(bytes)
            .and_then(|mut d| std::io::Read::read_to_end(&mut d, &mut sink))
    };
    read.is_err_and(|e| e.kind() == std::io::ErrorKind::UnexpectedEof)
}

/// No compressed file stops the read (E8). A damaged one is read to the damage and the file
/// after it is read whole; one cut short is still being written: it is left at its last
/// whole record, and the files after it wait (their records come after its).
#[test]
fn compressed_files_of_any_bytes_never_stop_the_read() {
    fuzz(
        "compressed files",
        128,
        (compressed(), select(vec![16usize, 4096])),
        |((bytes, name), chunk_bytes)| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(name), &bytes).unwrap();
            std::fs::write(
                dir.path().join("y.ndjson"),
                b"{\"ts\":\"2026-10-03T14:00:00Z\",\"last\":true}\n",
            )
            .unwrap();
            let source = NdjsonSource::open(dir.path()).unwrap();
            let fates = read(&source, chunk_bytes)?;
            let waits = cut_short(&bytes, name);
            let next_read = fates.values().any(|l| l.contains("\"last\":true"));
            prop_assert_eq!(
                next_read,
                !waits,
                "the next file is read unless this one waits"
            );
            let mut reader = source.reader(&HashMap::new(), chunk_bytes).unwrap();
            let mut end = 0;
            while let Some(c) = reader.next_chunk().unwrap() {
                if c.file == 1 {
                    end = c.end();
                }
            }
            prop_assert_eq!(
                end == COMPRESSED_LEN as i64,
                !waits,
                "the compressed file ends closed unless it waits"
            );
            Ok(())
        },
    );
}
