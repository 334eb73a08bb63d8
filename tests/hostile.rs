//! Hostile input through the real binary (invariant E8: no record stops a pipeline): a
//! corpus of the records production streams carry and that once stopped a run, panicked, or
//! changed a value without a word, on NDJSON files (schema inferred) and on a Kafka topic
//! (schema declared, grown by schema evolution). Each record must end as a row holding its
//! values exactly, read back by Python delta-rs, Polars and polars-deltalake, or as a dead
//! letter with the reason this corpus expects of it; the run exits 0, and again on a rerun.

use std::path::Path;

use crate::common::{compare_with_input, ok, query_csv, sluice, version};

/// What must become of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Row,
    Dead(&'static str),
}

use Fate::{Dead, Row};

/// One record of the corpus: what it is, its bytes, and its fate on NDJSON (a schema
/// inferred from the corpus itself) and on Kafka (the schema `tests/data/hostile.toml`).
struct Record {
    what: &'static str,
    bytes: Vec<u8>,
    ndjson: Fate,
    kafka: Fate,
}

fn t(i: usize) -> String {
    format!("2026-10-03T0{}:{:02}:00Z", i % 3, i % 60)
}

fn record(what: &'static str, text: &str, ndjson: Fate, kafka: Fate) -> Record {
    Record {
        what,
        bytes: text.as_bytes().to_vec(),
        ndjson,
        kafka,
    }
}

fn corpus() -> Vec<Record> {
    let mut out: Vec<Record> = (0..20)
        .map(|i| {
            let line = format!(
                r#"{{"ts":"{}","id":"g{i}","Amount":{i},"v":1.5,"note":"n{i}","tags":["a","b"],"user":{{"Name":"u{i}"}}}}"#,
                t(i)
            );
            record("a good record", &line, Row, Row)
        })
        .collect();
    let ts = t(7);
    let deep = format!(
        r#"{{"ts":"{ts}","id":"h12","deep":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let long_text = "é".repeat(100_000);
    out.extend([
        record("byte 11 of the time inside a character", r#"{"ts":"2026-10-03é0:00:00","id":"h1"}"#, Dead("bad_time"), Dead("bad_time")),
        record("a column in another case", &format!(r#"{{"ts":"{ts}","id":"h2","amount":7}}"#), Row, Row),
        record("a struct and its member in other cases", &format!(r#"{{"ts":"{ts}","id":"h3","USER":{{"name":"m"}}}}"#), Row, Row),
        record("two spellings of one column", &format!(r#"{{"ts":"{ts}","id":"h4","Amount":1,"amount":2}}"#), Dead("field_name_clash"), Dead("field_name_clash")),
        record("2^53 + 1 beside 1.5", &format!(r#"{{"ts":"{ts}","id":"h5","v":9007199254740993}}"#), Row, Dead("wrong_type")),
        record("i64::MAX beside 1.5", &format!(r#"{{"ts":"{ts}","id":"h5b","v":9223372036854775807}}"#), Row, Dead("wrong_type")),
        record("i64::MAX", &format!(r#"{{"ts":"{ts}","id":"h6","big":9223372036854775807}}"#), Row, Row),
        record("beyond i64", &format!(r#"{{"ts":"{ts}","id":"h7","big":92233720368547758070}}"#), Row, Dead("wrong_type")),
        record("a mixed array", &format!(r#"{{"ts":"{ts}","id":"h8","mixed":[1,"a",{{"x":1}}]}}"#), Row, Row),
        record("names readers refuse, and the columns sluice adds", &format!(r#"{{"ts":"{ts}","id":"h9","a b":1,"x,y":2,"p(q)":3,"k=":4,"tab\there":5,"":6,"dt":"d","_sluice_offset":9,"line\nbreak":10}}"#), Row, Row),
        record("a number no double holds", &format!(r#"{{"ts":"{ts}","id":"h10","huge":1e400}}"#), Row, Row),
        record("negative zero and a long fraction", &format!(r#"{{"ts":"{ts}","id":"h11","z":-0,"frac":0.1000000000000000000001}}"#), Row, Row),
        record("200 levels of nesting", &deep, Dead("malformed_json"), Dead("malformed_json")),
        Record {
            what: "bytes that are not UTF-8",
            bytes: [
                format!(r#"{{"ts":"{ts}","id":"h13","s":""#).as_bytes(),
                &[0xff, 0xfe],
                br#""}"#,
            ]
            .concat(),
            ndjson: Dead("malformed_json"),
            kafka: Dead("malformed_json"),
        },
        record("an array", "[1,2,3]", Dead("not_one_object"), Dead("not_one_object")),
        record("a number", "42", Dead("not_one_object"), Dead("not_one_object")),
        record("a string", r#""text""#, Dead("not_one_object"), Dead("not_one_object")),
        record("null", "null", Dead("not_one_object"), Dead("not_one_object")),
        record("an empty object", "{}", Dead("missing_time"), Dead("missing_time")),
        record("a time that is a number", r#"{"ts":1791072000,"id":"h17"}"#, Dead("bad_time"), Dead("bad_time")),
        record("a time that is an object", r#"{"ts":{"a":1},"id":"h18"}"#, Dead("bad_time"), Dead("bad_time")),
        record("a key twice", &format!(r#"{{"ts":"{ts}","id":"h19","note":"first","note":"second"}}"#), Row, Row),
        record("a null id", &format!(r#"{{"ts":"{ts}","id":null}}"#), Row, Row),
        record("two keys one column in Unicode lowercase", &format!(r#"{{"ts":"{ts}","id":"h21","İ":1,"i̇":2}}"#), Dead("field_name_clash"), Dead("field_name_clash")),
        record("year 0", r#"{"ts":"0000-01-01T00:00:00Z","id":"h23"}"#, Dead("bad_time"), Dead("bad_time")),
        record("an offset of +14:00", r#"{"ts":"2026-10-03T14:00:00+14:00","id":"h24"}"#, Row, Row),
        record("1e30 for an integer column", &format!(r#"{{"ts":"{ts}","id":"h25","Amount":1e30}}"#), Row, Dead("wrong_type")),
        // A file's lines must be JSON objects; a message may start with one (as a file may).
        record("a byte-order mark before a record", &format!("\u{feff}{{\"ts\":\"{ts}\",\"id\":\"h27\"}}"), Dead("not_one_object"), Row),
        record("a quote and a backslash in a key", &format!(r#"{{"ts":"{ts}","id":"h28","we\"ird\\key":1}}"#), Row, Row),
        record("NUL and a surrogate pair, escaped", &format!(r#"{{"ts":"{ts}","id":"h29","s":"a\u0000b\ud83d\ude00"}}"#), Row, Row),
        record("200 KB of text", &format!(r#"{{"ts":"{ts}","id":"h30","note":"{long_text}"}}"#), Row, Row),
        record("keys that are data", &format!(r#"{{"ts":"{ts}","id":"h31","attrs":{{"user123":1,"user456":{{"x":[1]}}}}}}"#), Row, Row),
        record("cut short", r#"{"ts":"2026-10-03T00:00:00Z","id":"h32","#, Dead("malformed_json"), Dead("malformed_json")),
    ]);
    out
}

/// The fate of every record, by its position in `positions`: a row of `table`, or a dead
/// letter of `dlq` with its reason.
fn fates(table: &Path, dlq: &Path, positions: &[i64]) -> Vec<Option<String>> {
    let rows = query_csv(&[("t", table)], "SELECT _sluice_offset FROM t");
    let dead = query_csv(&[("d", dlq)], "SELECT source_offset, reason FROM d");
    positions
        .iter()
        .map(|p| {
            let at = p.to_string();
            let mut found: Vec<String> = rows
                .iter()
                .filter(|r| **r == at)
                .map(|_| "row".to_string())
                .collect();
            found.extend(dead.iter().filter_map(|d| {
                let (o, reason) = d.split_once(',')?;
                (o == at).then(|| reason.to_string())
            }));
            assert!(found.len() <= 1, "record at {p} is {found:?}");
            found.pop()
        })
        .collect()
}

fn check_fates(corpus: &[Record], found: &[Option<String>], kafka: bool) {
    let mut wrong = Vec::new();
    for (r, got) in corpus.iter().zip(found) {
        let want = match if kafka { r.kafka } else { r.ndjson } {
            Row => "row",
            Dead(reason) => reason,
        };
        if got.as_deref() != Some(want) {
            wrong.push(format!("{}: expected {want}, got {got:?}", r.what));
        }
    }
    assert!(
        wrong.is_empty(),
        "records with another fate:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_hostile_corpus_lands_every_record_as_a_row_or_a_dead_letter_on_ndjson() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let corpus = corpus();
    let mut bytes = Vec::new();
    let mut positions = Vec::new();
    for r in &corpus {
        positions.push(bytes.len() as i64);
        bytes.extend_from_slice(&r.bytes);
        bytes.push(b'\n');
    }
    std::fs::write(input.join("hostile.ndjson"), &bytes).unwrap();
    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    let args = [
        "run",
        "--source",
        &format!("ndjson:{}", input.display()),
        "--table",
        table.to_str().unwrap(),
        "--window",
        "1h",
    ];
    let first = ok(&args);
    eprintln!("hostile corpus (ndjson): {first}");
    check_fates(&corpus, &fates(&table, &dlq, &positions), false);
    let summary = compare_with_input(&table, &dlq, &input);
    eprintln!("hostile corpus (ndjson): {summary}");
    assert!(summary.ends_with(" 0 problems"), "{summary}");
    // A rerun: nothing new, nothing fails.
    let again = ok(&args);
    assert!(again.contains(" 0 records"), "{again}");
    // Every dead letter replayed with the table's own options fails again the same way:
    // nothing lands, nothing is committed, and a second replay does the same (E8).
    let v = version(&table);
    for _ in 0..2 {
        let out = ok(&[
            "dead-letters",
            "--table",
            table.to_str().unwrap(),
            "--replay",
        ]);
        eprintln!("hostile corpus (ndjson), replayed: {out}");
        assert!(out.contains(" replayed: 0 landed (0 rows changed"), "{out}");
    }
    assert_eq!(version(&table), v);

    // Merge mode by `id`: the same fates, but a record without its id is `missing_key`; the
    // MERGE names every column as it is (`a b`, `we"ird\key`, renamed ones).
    let merged = dir.path().join("m");
    let merged_dlq = dir.path().join("m_dlq");
    let mut merge_args = args.to_vec();
    let m = merged.to_str().unwrap().to_string();
    merge_args[4] = &m;
    merge_args.extend(["--key", "id", "--mode", "merge"]);
    ok(&merge_args);
    let found = fates(&merged, &merged_dlq, &positions);
    let keyed: Vec<Record> = corpus
        .iter()
        .map(|r| Record {
            what: r.what,
            bytes: r.bytes.clone(),
            ndjson: match (r.ndjson, r.what) {
                (Row, "a null id") => Dead("missing_key"),
                (fate, _) => fate,
            },
            kafka: r.kafka,
        })
        .collect();
    check_fates(&keyed, &found, false);
    let summary = compare_with_input(&merged, &merged_dlq, &input);
    assert!(summary.ends_with(" 0 problems"), "{summary}");

    // A run whose every record is rejected exits 3, its records dead letters.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("bad.ndjson"), "[1]\n{\"ts\":\"yesterday\"}\n{\n").unwrap();
    let out = sluice(&[
        "run",
        "--source",
        &format!("ndjson:{}", bad.display()),
        "--table",
        table.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(feature = "kafka")]
#[test]
fn a_hostile_corpus_lands_every_record_as_a_row_or_a_dead_letter_on_kafka() {
    use crate::servers::{create_topic, produce, tansu};

    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus();
    let broker = tansu();
    create_topic(&broker, "hostile", 1);
    let messages: Vec<(String, Vec<u8>)> = corpus
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("k{i}"), r.bytes.clone()))
        .collect();
    produce(&broker, "hostile", &messages);
    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    let schema = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hostile.toml");
    let args = [
        "run",
        "--source",
        "kafka:hostile",
        "--brokers",
        &broker.address,
        "--group",
        "hostile",
        "--table",
        table.to_str().unwrap(),
        "--schema",
        schema,
        "--window",
        "1h",
        "--until-idle",
        "3s",
    ];
    let first = ok(&args);
    eprintln!("hostile corpus (kafka): {first}");
    let positions: Vec<i64> = (0..corpus.len() as i64).collect();
    check_fates(&corpus, &fates(&table, &dlq, &positions), true);
    // The messages as compare_json.py reads them: (partition, offset, text).
    let listed: Vec<serde_json::Value> = corpus
        .iter()
        .enumerate()
        .map(|(i, r)| serde_json::json!(["hostile/0", i, String::from_utf8_lossy(&r.bytes)]))
        .collect();
    let manifest = dir.path().join("hostile.messages.json");
    std::fs::write(&manifest, serde_json::to_vec(&listed).unwrap()).unwrap();
    let summary = compare_with_input(&table, &dlq, &manifest);
    eprintln!("hostile corpus (kafka): {summary}");
    assert!(summary.ends_with(" 0 problems"), "{summary}");
    let again = ok(&args);
    assert!(again.contains(" 0 records"), "{again}");
}

/// Dead letters do not wait for the next data commit past a quarter of `--flush-bytes-max`:
/// a window full of bad records (its data commit comes only at its end) commits them as they
/// pile up, and every one of them lands, beside every good row.
#[test]
fn dead_letters_are_committed_before_they_pass_their_share_of_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let mut text = String::new();
    for i in 0..3000 {
        let ts = format!("2026-10-03T10:{:02}:{:02}Z", i / 60 % 60, i % 60);
        text += &format!(
            r#"{{"ts":"{ts}","id":"g{i}","note":"{}"}}"#,
            "x".repeat(200)
        );
        text.push('\n');
        text += &format!(r#"{{"ts":"{ts}","id":"b{i}","note":"{}""#, "y".repeat(200));
        text.push('\n');
    }
    std::fs::write(input.join("a.ndjson"), text).unwrap();
    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    ok(&[
        "run",
        "--source",
        &format!("ndjson:{}", input.display()),
        "--table",
        table.to_str().unwrap(),
        "--flush-bytes-max",
        "512KiB",
        "--chunk-bytes",
        "64KiB",
    ]);
    // 3000 dead letters of ~0.5 KB each against a 128 KiB share: several commits (the
    // table's creation aside), where waiting for the window's only data commit makes one.
    let appends = crate::common::commits(&dlq).len() - 1;
    assert!(appends >= 5, "{appends} dead-letter commits");
    assert_eq!(
        query_csv(
            &[("d", &dlq)],
            "SELECT count(*), count(DISTINCT source_offset) FROM d"
        ),
        ["3000,3000"]
    );
    assert_eq!(
        query_csv(&[("t", &table)], "SELECT count(*) FROM t"),
        ["3000"]
    );
}

/// A followed run into a new table, on a new empty file, waits for the file's first records
/// (an empty file is a stream that has not started), then lands what arrives.
#[test]
fn a_followed_run_on_an_empty_file_waits_for_its_first_records() {
    use std::io::Write;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.ndjson");
    std::fs::write(&file, "").unwrap();
    let table = dir.path().join("t");
    let run = std::process::Command::new(crate::common::BIN)
        .args(["run", "--source", &format!("ndjson:{}", file.display())])
        .args(["--table", table.to_str().unwrap()])
        .args(["--follow", "--poll-interval", "100ms"])
        .args(["--idle-timeout", "1s", "--until-idle", "3s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    for i in 0..10 {
        writeln!(f, r#"{{"ts":"2026-10-03T10:00:{i:02}Z","n":{i}}}"#).unwrap();
    }
    drop(f);
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("10 records"), "{stdout}");
    assert_eq!(query_csv(&[("t", &table)], "SELECT sum(n) FROM t"), ["45"]);
}
