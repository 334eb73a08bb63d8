//! File sources as production lands them, through the real binary: gzip and zstd files, a
//! CSV export, and an S3 prefix (moto) whose objects a boto3 client puts while a followed
//! run goes on and is SIGKILLed. Each ends as the rows an independent reader (Python
//! delta-rs, Polars, delta-kernel-rs) finds equal to its input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    compare_with_input, compare_with_oracle, ok, query_csv, run_args, seed, stream_slices, version,
    Rng, BIN,
};
use crate::servers::{moto, put_objects, s3_env};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// The `i`th slice as a file of a mixed landing zone: plain, gzip, zstd, or gzip under a
/// name without an extension (known by its first bytes).
fn landed(i: usize, name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    match i % 4 {
        0 => (name.to_string(), bytes.to_vec()),
        1 => (format!("{name}.gz"), gzip(bytes)),
        2 => (format!("{name}.zst"), zstd(bytes)),
        _ => (name.trim_end_matches(".ndjson").to_string(), gzip(bytes)),
    }
}

/// Plain, gzip and zstd files (one named without an extension) land exactly as their
/// decompressed lines: every line a row with every value, or a dead letter, at its
/// decompressed offset, as three independent readers read the table.
#[test]
fn compressed_files_land_as_their_lines_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("landing");
    std::fs::create_dir_all(&input).unwrap();
    for (i, (name, bytes)) in stream_slices(20_000, 4, 21, 8, 499).iter().enumerate() {
        let (name, bytes) = landed(i, name, bytes);
        std::fs::write(input.join(name), bytes).unwrap();
    }
    let table = dir.path().join("table");
    let source = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    ok(&run_args(&source, &t, &[]));
    let summary = compare_with_input(&table, &dir.path().join("table_dlq"), &input);
    eprintln!("compressed files: {summary}");
    let files = query_csv(
        &[("t", &table)],
        "SELECT count(DISTINCT _sluice_source) FROM t",
    );
    assert_eq!(files, ["8"]);
}

/// Events as JSON lines, and as the CSV file an export of them would be.
fn csv_of(ndjson: &[u8]) -> Vec<u8> {
    let mut out = String::from("event_id,ts,user_id,country,kind,amount\n");
    for line in ndjson.split(|b| *b == b'\n') {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let field = |k: &str| match &v[k] {
            serde_json::Value::String(s) if s.contains([',', '"', '\n']) => {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        };
        let fields = ["event_id", "ts", "user_id", "country", "kind", "amount"].map(field);
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out.into_bytes()
}

/// A CSV export (plain and gzipped) lands as the same rows as the JSON lines it was made
/// of, value for value; a record with a field too many is a dead letter with its line.
#[test]
fn a_csv_export_lands_as_the_rows_of_its_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (json_dir, csv_dir) = (dir.path().join("json"), dir.path().join("csv"));
    std::fs::create_dir_all(&json_dir).unwrap();
    std::fs::create_dir_all(&csv_dir).unwrap();
    for (i, (name, bytes)) in stream_slices(10_000, 3, 22, 2, 0).iter().enumerate() {
        std::fs::write(json_dir.join(name), bytes).unwrap();
        let mut csv = csv_of(bytes);
        let stem = name.trim_end_matches(".ndjson");
        if i == 0 {
            csv.extend_from_slice(b"e-ragged,2026-10-03T00:00:00Z,u1,NG,view,1.5,extra\n");
            std::fs::write(csv_dir.join(format!("{stem}.csv")), csv).unwrap();
        } else {
            std::fs::write(csv_dir.join(format!("{stem}.csv.gz")), gzip(&csv)).unwrap();
        }
    }
    let (json_table, csv_table) = (dir.path().join("from_json"), dir.path().join("from_csv"));
    let extra = ["--key", "event_id"];
    let j = format!("ndjson:{}", json_dir.display());
    ok(&run_args(&j, &json_table.display().to_string(), &extra));
    let c = format!("csv:{}", csv_dir.display());
    ok(&run_args(&c, &csv_table.display().to_string(), &extra));
    let columns = "event_id, ts, user_id, country, kind, amount, window_start";
    let differ = |a: &str, b: &str| {
        query_csv(
            &[("j", &json_table), ("c", &csv_table)],
            &format!("SELECT count(*) FROM (SELECT {columns} FROM {a} EXCEPT ALL SELECT {columns} FROM {b})"),
        )
    };
    assert_eq!(differ("j", "c"), ["0"], "rows of the JSON lines missing");
    assert_eq!(differ("c", "j"), ["0"], "rows not in the JSON lines");
    let rows = query_csv(&[("c", &csv_table)], "SELECT count(*) FROM c");
    assert_ne!(rows, ["0"]);
    let dead = query_csv(
        &[("d", &dir.path().join("from_csv_dlq"))],
        "SELECT reason, raw FROM d",
    );
    assert_eq!(
        dead,
        ["wrong_field_count,\"e-ragged,2026-10-03T00:00:00Z,u1,NG,view,1.5,extra\""]
    );
}

/// Puts files into a bucket with boto3 (a client of its own, as a producer would).
/// The files of a landing zone, put into an S3 prefix (moto) by a boto3 client in shuffled
/// name order while a followed run reads it, SIGKILLed 5 times and restarted; then the rest
/// put and one last run to the end; the table must then equal one clean run over the same
/// files on local disk (same names: the same source positions) in name order. `scheme`:
/// `ndjson`, `csv` or `parquet`.
struct Landing {
    dir: tempfile::TempDir,
    table: PathBuf,
    local: PathBuf,
}

fn follow_a_prefix_through_sigkills(
    test: &str,
    scheme: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Landing {
    let seed = seed(test);
    let mut rng = Rng(seed);
    let s3 = moto("landing");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let mut names = Vec::new();
    for (name, bytes) in &files {
        std::fs::write(local.join(name), bytes).unwrap();
        names.push(name.clone());
    }
    // Arrival in shuffled name order: most files sort before some already read.
    for i in (1..names.len()).rev() {
        names.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let table = dir.path().join("table");
    let t = table.display().to_string();
    let source = format!("{scheme}:s3://landing/events/2026/10/03/");
    let follow = ["--follow", "--poll-interval", "200ms", "--until-idle", "3s"];
    let env = s3_env(&s3);
    let start = |extra: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(run_args(&source, &t, extra))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    };
    let put = |names: &[String]| {
        let objects: Vec<(String, PathBuf)> = names
            .iter()
            .map(|n| (format!("events/2026/10/03/{n}"), local.join(n)))
            .collect();
        put_objects(&s3, "landing", &objects);
    };
    let mut arriving = names.chunks(names.len().div_ceil(8));
    put(arriving.next().unwrap());
    let (mut kills, mut progressed) = (0, 0);
    while kills < 5 {
        let before = version(&table);
        let mut child = start(&follow);
        std::thread::sleep(Duration::from_millis(300 + rng.below(1500)));
        if let Some(batch) = arriving.next() {
            put(batch);
        }
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        match child.try_wait().unwrap() {
            None => {
                child.kill().unwrap();
                kills += 1;
                progressed += usize::from(version(&table) > before);
            }
            Some(status) => {
                let out = child.wait_with_output().unwrap();
                assert!(
                    status.success(),
                    "a followed run failed on its own (seed {seed}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                continue;
            }
        }
        child.wait().unwrap();
    }
    for batch in arriving {
        put(batch);
    }
    // The last run reads what is left, to the end of the prefix.
    let out = start(&[]).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the last run (seed {seed}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let clean = dir.path().join("clean");
    let l = format!("{scheme}:{}", local.display());
    ok(&run_args(&l, &clean.display().to_string(), &[]));
    let cmp = compare_with_oracle(&clean, &table);
    if (cmp.rows, cmp.duplicates, cmp.lost, cmp.extra) != (cmp.oracle_rows, 0, 0, 0) {
        let differing = |a: &str, b: &str| {
            query_csv(
                &[("o", &clean), ("t", &table)],
                &format!("SELECT * FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) LIMIT 5"),
            )
        };
        let kept = dir.keep();
        panic!(
            "{cmp:?} (seed {seed}; kept in {})\nlost: {:?}\nextra: {:?}",
            kept.display(),
            differing("o", "t"),
            differing("t", "o"),
        );
    }
    assert!(cmp.rows > 0);
    eprintln!(
        "{test}: {} files, {kills} SIGKILLs ({progressed} after the killed run had committed; seed {seed})",
        files.len()
    );
    assert!(
        progressed > 0,
        "no kill landed after a commit (seed {seed})"
    );
    Landing { table, local, dir }
}

/// A followed run over an S3 prefix (moto) while a boto3 client puts 100 NDJSON files
/// (plain, gzip, zstd, gzip without an extension) into it in shuffled name order, SIGKILLed 5
/// times and restarted: the table ends equal to one clean run over the same files, row for
/// row, and every line is a row or a dead letter as three independent readers (Python
/// delta-rs, Polars, delta-kernel-rs) read it.
#[test]
fn an_s3_prefix_followed_through_sigkills_ends_as_one_clean_run() {
    let files = stream_slices(30_000, 4, 23, 100, 997)
        .iter()
        .enumerate()
        .map(|(i, (name, bytes))| landed(i, name, bytes))
        .collect();
    let landing =
        follow_a_prefix_through_sigkills("s3 prefix followed through sigkills", "ndjson", files);
    let dlq = landing.dir.path().join("table_dlq");
    let summary = compare_with_input(&landing.table, &dlq, &landing.local);
    eprintln!("s3 prefix: {summary}");
}

/// The same for 60 CSV files (plain and gzipped, each with a ragged record): the table ends
/// equal to one clean run, and holds the rows of the JSON lines the files were made of,
/// value for value, as Python delta-rs reads both; each ragged record is a dead letter.
#[test]
fn an_s3_prefix_of_csv_files_followed_through_sigkills_ends_as_one_clean_run() {
    let slices = stream_slices(20_000, 4, 24, 60, 0);
    let mut files = Vec::new();
    for (i, (name, bytes)) in slices.iter().enumerate() {
        let stem = name.trim_end_matches(".ndjson");
        let mut csv = csv_of(bytes);
        csv.extend_from_slice(
            format!("ragged-{i},2026-10-03T00:00:00Z,u1,NG,view,1.5,extra\n").as_bytes(),
        );
        files.push(match i % 2 {
            0 => (format!("{stem}.csv"), csv),
            _ => (format!("{stem}.csv.gz"), gzip(&csv)),
        });
    }
    let landing =
        follow_a_prefix_through_sigkills("s3 csv prefix followed through sigkills", "csv", files);
    same_rows_as_json(&landing, &slices);
    let dead = query_csv(
        &[("d", &landing.dir.path().join("table_dlq"))],
        "SELECT count(*) FROM d WHERE reason = 'wrong_field_count' AND raw LIKE 'ragged-%'",
    );
    assert_eq!(dead, ["60"]);
    let clean_dead = query_csv(
        &[("d", &landing.dir.path().join("clean_dlq"))],
        "SELECT count(*) FROM d",
    );
    assert_eq!(clean_dead, ["60"]);
}

/// Checks with Python delta-rs that the landing's table holds exactly the rows of the JSON
/// lines `slices` (which its files were made of), value for value.
fn same_rows_as_json(landing: &Landing, slices: &[(String, Vec<u8>)]) {
    let json = landing.dir.path().join("json");
    std::fs::create_dir_all(&json).unwrap();
    for (name, bytes) in slices {
        std::fs::write(json.join(name), bytes).unwrap();
    }
    let table = std::ffi::OsString::from(&landing.table);
    let same = crate::common::interop("same_rows.py", &[&table, json.as_os_str()]);
    eprintln!("{}", same.trim());
}

/// The same for 40 Parquet files written by pyarrow (row groups of 100 rows, `ts` a
/// timestamp column) and one file that is not Parquet: the table ends equal to one clean
/// run, takes its column types from the footers, and holds the rows of the JSON lines the
/// files were made of, value for value; the broken file is one dead letter `unreadable`.
#[test]
fn an_s3_prefix_of_parquet_files_followed_through_sigkills_ends_as_one_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let (json, parquet) = (dir.path().join("json"), dir.path().join("parquet"));
    std::fs::create_dir_all(&json).unwrap();
    let slices = stream_slices(20_000, 4, 25, 40, 0);
    for (name, bytes) in &slices {
        std::fs::write(json.join(name), bytes).unwrap();
    }
    crate::common::interop(
        "to_parquet.py",
        &[json.as_os_str(), parquet.as_os_str(), "100".as_ref()],
    );
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&parquet)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.push((
        "part-broken.parquet".into(),
        b"PAR1 not a footer PAR1".to_vec(),
    ));
    let landing = follow_a_prefix_through_sigkills(
        "s3 parquet prefix followed through sigkills",
        "parquet",
        files,
    );
    same_rows_as_json(&landing, &slices);
    let types = query_csv(
        &[("t", &landing.table)],
        "SELECT arrow_typeof(ts) LIKE 'Timestamp(%UTC%', arrow_typeof(amount) FROM t LIMIT 1",
    );
    assert_eq!(types, ["true,Float64"], "the footer's types");
    let dead = query_csv(
        &[("d", &landing.dir.path().join("table_dlq"))],
        "SELECT source_partition, source_offset, reason FROM d",
    );
    assert_eq!(dead, ["part-broken.parquet,0,unreadable"]);
}
