//! `sluice status` over a table with late windows and dead letters (the sharded case is in
//! tests/kafka.rs): every figure it prints agrees with the table read another way.

use crate::common::{assert_refused, ok, run_args, sorted_rows, stream_slices};

#[test]
fn status_agrees_with_the_table_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let mut sizes = std::collections::BTreeMap::new();
    // Two slices of one stream, a torn line every 400: the second slice's late rows are
    // appended to published windows (keyed by position), so windows hold several files.
    for (name, bytes) in stream_slices(6_000, 4, 31, 2, 400) {
        std::fs::write(input.join(&name), &bytes).unwrap();
        sizes.insert(name, bytes.len() as u64);
        let source = format!("ndjson:{}", input.display());
        ok(&run_args(
            &source,
            t,
            &["--late", "rewrite", "--checkpoint-interval", "3"],
        ));
    }
    let status = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["status", "--table", t, "--format", "json"];
        all.extend(args);
        serde_json::from_str(&ok(&all)).expect("one JSON object")
    };
    let s = status(&[]);
    let p = &s["pipelines"][0];
    // Resume positions: the end of each file, where a restart reads on.
    let positions: std::collections::BTreeMap<String, u64> = p["positions"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            // `version` is the same number under the txn field's name (the first format).
            assert_eq!(v["version"], v["offset"], "{v}");
            (k.clone(), v["offset"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(positions, sizes, "{s}");
    // Options the table records; one not set is null, never "".
    let contract = p["contract"].as_object().unwrap();
    assert!(contract["window"].is_string(), "{s}");
    assert!(contract.values().all(|v| v != ""), "{s}");
    assert!(contract["key"].is_null(), "keyed by position: {s}");
    assert_eq!(p["rows"], sorted_rows(&table).len(), "{s}");
    assert_eq!(s["rows"], p["rows"]);
    let windows = ok(&["windows", "--table", t, "--format", "json"]);
    let files: Vec<u64> = windows
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["files"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(p["windows"], files.len(), "{s}");
    assert_eq!(p["files"], files.iter().sum::<u64>(), "{s}");
    // The first and last window by address, as `windows` lists them (in time order).
    let addresses: Vec<String> = windows
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["window"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(p["first_address"], addresses[0], "{s}");
    assert_eq!(p["last_address"], addresses[addresses.len() - 1], "{s}");
    let several = files.iter().filter(|n| **n > 1).count();
    assert!(several > 0, "late rows left windows of several files");
    assert_eq!(p["windows_of_several_files"], several, "{s}");
    assert!(p["windows_complete"].is_null(), "not a sharded table: {s}");
    // Dead letters by reason: the torn lines.
    let torn: usize = stream_slices(6_000, 4, 31, 2, 400)
        .iter()
        .map(|(_, b)| {
            b.split(|c| *c == b'\n')
                .filter(|l| l.starts_with(b"{\"event_id\": \"torn"))
                .count()
        })
        .sum();
    let pipeline = p["pipeline"].as_str().unwrap();
    assert_eq!(s["dead_letters"][pipeline]["malformed_json"], torn, "{s}");
    assert_eq!(s["last_commit"]["sluice"], "publish", "{s}");
    assert!(s["checkpoint"]["version"].as_u64().is_some(), "{s}");
    assert_eq!(s["log"]["oldest_commit"], 0, "{s}");
    assert_eq!(
        s["log"]["commits"].as_u64(),
        s["version"].as_u64().map(|v| v + 1),
        "{s}"
    );
    assert!(s["log"]["objects"].is_null(), "{s}");
    let sized: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        "--table",
        t,
        "--format",
        "json",
        "--log-size",
    ]))
    .expect("one JSON object");
    assert!(sized["log"]["objects"].as_u64().unwrap() > 2, "{sized}");
    assert!(sized["log"]["bytes"].as_u64().unwrap() > 0, "{sized}");

    // For people: the same figures, a line each.
    let text = ok(&["status", "--table", t]);
    assert!(text.contains(&format!("pipeline  {pipeline}")), "{text}");
    assert!(text.contains(&format!("malformed_json {torn}")), "{text}");
    assert!(
        text.contains(&format!(
            "  windows   {} from {} to {}\n",
            p["windows"],
            addresses[0],
            addresses[addresses.len() - 1]
        )),
        "{text}"
    );
    for name in sizes.keys() {
        assert!(
            text.contains(&format!("resume    {name} at offset")),
            "{text}"
        );
    }

    // After a compaction: its commit is the last, and no window has several files.
    ok(&["compact", "--table", t]);
    let s = status(&[]);
    assert_eq!(s["last_commit"]["sluice"], "compact", "{s}");
    assert_eq!(s["pipelines"][0]["windows_of_several_files"], 0, "{s}");
    assert_eq!(
        s["pipelines"][0]["positions"].as_object().unwrap().len(),
        sizes.len()
    );
}

/// A table whose first run published nothing yet (a followed run stopped before its window
/// sealed) shows its pipeline, with the options it records and its dead letters.
#[test]
fn status_of_a_table_with_nothing_published_shows_its_pipeline_and_dead_letters() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(
        input.join("a.ndjson"),
        "{\"id\": 1, \"ts\": \"2026-10-03T14:00:05Z\"}\ntorn {\n{\"id\": 2, \"ts\": \"2026-10-03T14:10:00Z\"}\n",
    )
    .unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let mut child = Command::new(crate::common::BIN)
        .args(["run", "--source", &format!("ndjson:{}", input.display())])
        .args(["--table", t, "--follow", "--poll-interval", "50ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The dead letter is committed once read; the hour stays open while the run follows.
    let dlq = dir.path().join("t_dlq/_delta_log");
    let started = std::time::Instant::now();
    while !dlq.join("00000000000000000001.json").exists() {
        assert!(started.elapsed().as_secs() < 60, "no dead letter committed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let text = ok(&["status", "--table", t]);
    assert!(text.contains("data      0 rows in 0 files"), "{text}");
    assert!(text.contains("pipeline  sluice\n"), "{text}");
    assert!(text.contains("  options   address=dt_hour "), "{text}");
    assert!(text.contains("  windows   0\n"), "{text}");
    assert!(text.contains("  dead      1 in "), "{text}");
    let s: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--table", t, "--format", "json"])).unwrap();
    assert_eq!(s["pipelines"][0]["pipeline"], "sluice", "{s}");
    assert_eq!(s["dead_letters"]["sluice"]["not_one_object"], 1, "{s}");
}

/// `status --source` (or the source of `--config`): what the table has not read of its
/// source, files and bytes and the oldest waiting file's age, without a live run.
#[test]
fn status_shows_the_lag_of_a_file_source_from_the_table_and_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let source = format!("ndjson:{}", input.display());
    let slices = stream_slices(3_000, 3, 17, 3, 0);
    for (name, bytes) in &slices[..2] {
        std::fs::write(input.join(name), bytes).unwrap();
    }
    ok(&run_args(&source, t, &[]));
    let (third, bytes) = &slices[2];
    std::fs::write(input.join(third), bytes).unwrap();
    let modified_ms = std::fs::metadata(input.join(third))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let lag = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["status", "--table", t, "--format", "json"];
        args.extend(extra);
        let status: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
        status["lag"].clone()
    };
    let waiting = lag(&["--source", &source]);
    assert_eq!(waiting["pipeline"], "sluice", "{waiting}");
    assert_eq!(waiting["files"], 3, "{waiting}");
    assert_eq!(waiting["files_waiting"], 1, "{waiting}");
    assert_eq!(waiting["bytes_waiting"], bytes.len(), "{waiting}");
    assert_eq!(
        waiting["oldest_waiting_modified_ms"], modified_ms,
        "{waiting}"
    );
    assert!(waiting["oldest_waiting_age_ms"].as_i64().unwrap() >= 0);
    let text = ok(&["status", "--table", t, "--source", &source]);
    assert!(
        text.contains(&format!(
            "lag       pipeline sluice of {source}: 1 of 3 files waiting"
        )),
        "{text}"
    );
    // Without a source: no lag.
    assert_eq!(lag(&[]), serde_json::Value::Null);
    // The source of a config file; once read, nothing waits.
    ok(&run_args(&source, t, &[]));
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        format!("source = {source:?}\ntable = {t:?}\nwindow = \"15m\"\n"),
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--config", c, "--format", "json"])).unwrap();
    assert_eq!(status["lag"]["files_waiting"], 0, "{status}");
    assert_eq!(status["lag"]["bytes_waiting"], 0, "{status}");
    let text = ok(&["status", "--config", c]);
    assert!(text.contains("nothing waiting in 3 files"), "{text}");
    // Another pipeline has read nothing of it.
    let other = lag(&["--source", &source, "--pipeline", "other"]);
    assert_eq!(other["files_waiting"], 3, "{other}");
    // Options of another source are refused as a run refuses them.
    assert_refused(
        &[
            "status",
            "--table",
            t,
            "--source",
            &source,
            "--brokers",
            "localhost:9092",
        ],
        "--brokers: only with a kafka:TOPIC source",
    );
}
