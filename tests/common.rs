//! Helpers for end-to-end tests of the real `sluice` binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice_source::generate::{generate, GeneratorSpec};

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice");

pub fn sluice(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the sluice binary runs")
}

/// Runs sluice with `args` in directory `cwd`.
pub fn sluice_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("the sluice binary runs")
}

pub fn ok(args: &[&str]) -> String {
    succeeded(args, sluice(args))
}

/// Runs sluice with `args` in directory `cwd`, asserts it succeeded, and returns its stdout.
pub fn ok_in(cwd: &Path, args: &[&str]) -> String {
    succeeded(args, sluice_in(cwd, args))
}

fn succeeded(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "sluice {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs sluice with `args`, asserts it succeeded, and returns what it printed on stderr.
pub fn ok_stderr(args: &[&str]) -> String {
    let out = sluice(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sluice {args:?} failed: {stderr}");
    stderr
}

/// Writes a generated stream as `files` NDJSON files under `dir/input`.
pub fn input(dir: &Path, events: u64, hours: u32, seed: u64, files: usize) -> PathBuf {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    for (name, bytes) in stream_slices(events, hours, seed, files, 0) {
        std::fs::write(input.join(name), bytes).unwrap();
    }
    input
}

/// A generated stream cut into `slices` files (`part-00000.ndjson`, ...) in arrival order;
/// with `bad_every` > 0, a malformed line follows every `bad_every`-th line.
pub fn stream_slices(
    events: u64,
    hours: u32,
    seed: u64,
    slices: usize,
    bad_every: usize,
) -> Vec<(String, Vec<u8>)> {
    stream_slices_of(
        &GeneratorSpec {
            seed,
            events,
            hours,
            ..Default::default()
        },
        slices,
        bad_every,
    )
}

/// Like [`stream_slices`], for any generator spec (shapes, null keys, new fields, ...).
pub fn stream_slices_of(
    spec: &GeneratorSpec,
    slices: usize,
    bad_every: usize,
) -> Vec<(String, Vec<u8>)> {
    let mut all = Vec::new();
    generate(spec, &mut all).unwrap();
    let mut lines: Vec<&[u8]> = all.split_inclusive(|b| *b == b'\n').collect();
    const BAD: &[u8] = b"{\"event_id\": \"torn\", \"ts\": \n";
    if bad_every > 0 {
        lines = lines
            .chunks(bad_every)
            .flat_map(|c| c.iter().copied().chain(std::iter::once(BAD)))
            .collect();
    }
    lines
        .chunks(lines.len().div_ceil(slices.max(1)))
        .enumerate()
        .map(|(i, part)| (format!("part-{i:05}.ndjson"), part.concat()))
        .collect()
}

/// `sluice verify` of the table: its findings, or `Ok` when it keeps every promise checked
/// (files, windows' row counts, keys, history, tombstones, offsets).
pub fn verified(table: &Path) -> Result<(), String> {
    let out = sluice(&["verify", "--table", &table.display().to_string()]);
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "sluice verify --table {} exited {:?}:\n{}{}",
        table.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Fails the test unless `sluice verify` finds the table keeps every promise.
pub fn assert_verified(table: &Path) {
    if let Err(e) = verified(table) {
        panic!("{e}");
    }
}

/// Every row of the table as CSV lines, sorted: the table's content, order-free. The table
/// is verified first ([`assert_verified`]).
pub fn sorted_rows(table: &Path) -> Vec<String> {
    assert_verified(table);
    let out = ok(&[
        "query",
        "--table",
        &format!("t={}", table.display()),
        "--format",
        "csv",
        "SELECT * FROM t",
    ]);
    let mut lines: Vec<String> = out.lines().skip(1).map(str::to_string).collect();
    lines.sort();
    lines
}

/// The first value of `sql` over the table (registered as `t`), as CSV text.
pub fn scalar(table: &Path, sql: &str) -> String {
    scalar_at(table, None, sql)
}

/// Like [`scalar`], reading the table as of `version` (time travel).
pub fn scalar_at(table: &Path, version: Option<u64>, sql: &str) -> String {
    let named = format!("t={}", table.display());
    let version = version.map(|v| v.to_string());
    let mut args = vec!["query", "--table", &named, "--format", "csv"];
    if let Some(v) = &version {
        args.extend(["--version", v]);
    }
    args.push(sql);
    ok(&args).lines().nth(1).unwrap_or_default().to_string()
}

/// The newest version in the table's log.
pub fn version(table: &Path) -> i64 {
    commits(table).keys().next_back().copied().unwrap_or(-1)
}

/// Every commit file: version -> parsed actions.
pub fn commits(table: &Path) -> BTreeMap<i64, Vec<serde_json::Value>> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(table.join("_delta_log")) else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let Ok(v) = stem.parse::<i64>() else { continue };
        let text = std::fs::read_to_string(entry.path()).unwrap();
        out.insert(
            v,
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        );
    }
    out
}

/// For each version, the rows of each window as the commits' metadata says they must be.
pub fn published_rows_by_version(table: &Path) -> BTreeMap<i64, BTreeMap<String, i64>> {
    let mut state: BTreeMap<String, i64> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (v, actions) in commits(table) {
        for a in &actions {
            if let Some(s) = a.get("commitInfo").and_then(|c| c.get("sluice")) {
                // One window, or a group commit's several.
                for w in s["windows"].as_array().cloned().unwrap_or(vec![s.clone()]) {
                    state.insert(
                        w["window"].as_str().unwrap().to_string(),
                        w["window_rows"].as_i64().unwrap(),
                    );
                }
            }
        }
        out.insert(v, state.clone());
    }
    out
}

/// A tiny seeded RNG for kill timings (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A seed from `SLUICE_TEST_SEED`, or a fresh one; printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SLUICE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: seed {seed} (rerun with SLUICE_TEST_SEED={seed})");
    seed
}

/// A table compared with the oracle (one clean run), row by row.
#[derive(Debug)]
pub struct OracleComparison {
    pub oracle_rows: u64,
    pub rows: u64,
    /// Rows whose row key (source position) appears more than once.
    pub duplicates: u64,
    /// Oracle rows the table lacks.
    pub lost: u64,
    /// Table rows the oracle lacks.
    pub extra: u64,
}

/// Compares every row (all columns) of `table` with `oracle`, in SQL over both tables; both
/// are verified first ([`assert_verified`]).
pub fn compare_with_oracle(oracle: &Path, table: &Path) -> OracleComparison {
    assert_verified(oracle);
    assert_verified(table);
    let o = format!("o={}", oracle.display());
    let t = format!("t={}", table.display());
    let q = |sql: &str| -> u64 {
        ok(&[
            "query", "--table", &o, "--table", &t, "--format", "csv", sql,
        ])
        .lines()
        .nth(1)
        .unwrap_or_default()
        .parse()
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    OracleComparison {
        oracle_rows: q("SELECT count(*) FROM o"),
        rows: q("SELECT count(*) FROM t"),
        duplicates: q("SELECT count(*) - count(DISTINCT _sluice_source || ':' || CAST(_sluice_offset AS VARCHAR)) FROM t"),
        lost: q("SELECT count(*) FROM (SELECT * FROM o EXCEPT ALL SELECT * FROM t)"),
        extra: q("SELECT count(*) FROM (SELECT * FROM t EXCEPT ALL SELECT * FROM o)"),
    }
}

/// `sluice run` arguments with 15-minute windows and 5 minutes of lateness.
pub fn run_args<'a>(input: &'a str, table: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--source",
        input,
        "--table",
        table,
        "--lateness",
        "5m",
    ];
    // 15-minute windows unless `extra` names another size.
    if !extra.contains(&"--window") {
        args.extend(["--window", "15m"]);
    }
    args.extend_from_slice(extra);
    args
}

/// The data lines of `sluice query --format csv` over `tables` (name, path).
pub fn query_csv(tables: &[(&str, &Path)], sql: &str) -> Vec<String> {
    let named: Vec<String> = tables
        .iter()
        .map(|(n, p)| format!("{n}={}", p.display()))
        .collect();
    let mut args = vec!["query", "--format", "csv"];
    for n in &named {
        args.extend(["--table", n.as_str()]);
    }
    args.push(sql);
    ok(&args).lines().skip(1).map(str::to_string).collect()
}

/// The Python with delta-rs and Polars that the test command installs
/// (`~/.cache/sluice/venv`), or `SLUICE_PYTHON`.
pub fn python() -> PathBuf {
    let path = std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").expect("HOME is set"))
                .join(".cache/sluice/venv/bin/python")
        });
    assert!(
        path.exists(),
        "{} not found: ./scripts/test installs Python delta-rs and Polars there, or set SLUICE_PYTHON",
        path.display()
    );
    path
}

/// Runs the Python script `tests/interop/<script>` with `args`; asserts it succeeds and
/// returns what it printed.
pub fn interop(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let mut command = Command::new(python());
    command.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/interop")
            .join(script),
    );
    python_output(command.args(args), script)
}

/// What `command` (a Python script, `what`) printed; asserts it succeeded.
fn python_output(command: &mut Command, what: &str) -> String {
    let out = command.output().expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Produces the NDJSON events of `events` to `topic` with confluent-kafka
/// (examples/kafka/produce.py) in `format` (json; avro, protobuf, json-schema: with
/// `registry`), with `extra` arguments (`--sent PATH`); returns what it printed.
pub fn produce_with_python(
    format: &str,
    registry: Option<&str>,
    extra: &[String],
    brokers: &str,
    topic: &str,
    events: &Path,
) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kafka/produce.py");
    let mut command = Command::new(python());
    command.arg(script).args(["--format", format]);
    if let Some(url) = registry {
        command.args(["--registry", url]);
    }
    command.args(extra);
    python_output(command.args([brokers, topic]).arg(events), "produce.py")
}

/// Runs `tests/interop/compare_json.py` over a table, its dead-letter table and its input:
/// every input line a row (with every field's value) or a dead letter, as Python delta-rs
/// and Polars read the table. Returns its summary line.
pub fn compare_with_input(table: &Path, dlq: &Path, input: &Path) -> String {
    let text = interop(
        "compare_json.py",
        &[table.as_os_str(), dlq.as_os_str(), input.as_os_str()],
    );
    text.lines().next().unwrap_or_default().to_string()
}

/// Copies a directory tree (a table, to read or write a copy of it as it was).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The dead-letter table beside `table` (the default `--dlq`).
pub fn dlq_of(table: &Path) -> std::path::PathBuf {
    table.with_file_name(format!(
        "{}_dlq",
        table.file_name().unwrap().to_str().unwrap()
    ))
}

/// `(reason, count)` of the dead-letter table, sorted.
pub fn dead_letters(table: &Path) -> Vec<String> {
    query_csv(
        &[("d", &dlq_of(table))],
        "SELECT reason, count(*) FROM d GROUP BY reason ORDER BY reason",
    )
}

/// Writes `text` to `dir/name`, creating `dir`.
pub fn write_in(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// `sluice run` of `source` into `table` in merge mode on `key`, in 1h windows with 10m of
/// lateness.
pub fn merge_args<'a>(
    source: &'a str,
    table: &'a str,
    key: &'a str,
    scope: &'a str,
) -> Vec<&'a str> {
    vec![
        "run",
        "--source",
        source,
        "--table",
        table,
        "--window",
        "1h",
        "--lateness",
        "10m",
        "--key",
        key,
        "--mode",
        "merge",
        "--merge-scope",
        scope,
    ]
}

/// `sluice args` is refused as a usage error (exit 2) whose message contains `says`.
pub fn assert_refused(args: &[&str], says: &str) {
    let out = sluice(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

/// The options of a Debezium mirror on `key` (`--envelope debezium`), its events timed by
/// their commit times (`source.ts_ms`) in 1h windows.
pub fn debezium_mirror(key: &str) -> Vec<&str> {
    vec![
        "--envelope",
        "debezium",
        "--key",
        key,
        "--mode",
        "merge",
        "--merge-scope",
        "table",
        "--time-field",
        "__source.ts_ms",
        "--time-format",
        "epoch_ms",
        "--window",
        "1h",
    ]
}
