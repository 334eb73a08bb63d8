//! A run's config file names a table once: every command that reads or maintains the table
//! takes `--config` in place of `--table` (with the file's dead-letter and tombstone tables,
//! pipeline and storage options), from any working directory, and a flag wins over the file.

use std::path::Path;

use crate::common::{assert_verified, ok_in, scalar, sluice_in};

fn json_in(cwd: &Path, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok_in(cwd, args)).expect("one JSON object")
}

#[test]
fn every_table_command_takes_the_run_s_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["conf", "data", "elsewhere"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    // Three hours of events, a line with a time that is not one (a dead letter).
    let mut lines = Vec::new();
    for i in 0..30 {
        lines.push(format!(
            r#"{{"ts":"2026-10-03T{:02}:{:02}:00Z","id":{i},"amount":{}.5}}"#,
            10 + i % 3,
            i,
            i * 2
        ));
    }
    lines.insert(7, r#"{"ts":"yesterday","id":99,"amount":1.0}"#.to_string());
    std::fs::write(root.join("data/in.ndjson"), lines.join("\n") + "\n").unwrap();
    // Non-default locations for the dead letters, a pipeline name: the file is the only
    // place they are written down.
    let config = root.join("conf/shop.toml");
    std::fs::write(
        &config,
        r#"source = "ndjson:../data/in.ndjson"
table = "../tables/orders"
dlq = "../tables/orders_rejected"
pipeline = "shop"
window = "1h"
key = "id"

[[derive]]
name = "hourly"
table = "../tables/hourly"
sql = "SELECT count(*) AS orders, sum(amount) AS revenue FROM window"
"#,
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let elsewhere = root.join("elsewhere");
    ok_in(&elsewhere, &["run", "--config", c]);
    let table = root.join("tables/orders");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "30");
    assert_verified(&table);

    // Each command from another directory than the file's: its paths are the file's.
    let status = json_in(&elsewhere, &["status", "--config", c, "--format", "json"]);
    let named = |v: &serde_json::Value, end: &str| v.as_str().is_some_and(|s| s.ends_with(end));
    assert!(named(&status["table"], "/tables/orders/"), "{status}");
    assert!(
        named(&status["dead_letter_table"], "/tables/orders_rejected"),
        "{status}"
    );
    assert_eq!(status["dead_letters"]["shop"]["bad_time"], 1, "{status}");

    let windows = ok_in(&elsewhere, &["windows", "--config", c, "--format", "csv"]);
    assert_eq!(windows.lines().count(), 1 + 3, "{windows}");

    let verify = json_in(&elsewhere, &["verify", "--config", c, "--format", "json"]);
    assert_eq!(verify["holds"], true, "{verify}");

    let letters = json_in(
        &elsewhere,
        &["dead-letters", "--config", c, "--format", "json"],
    );
    assert_eq!(
        letters["by_reason"]["bad_time"]["dead_letters"], 1,
        "{letters}"
    );
    assert!(letters["dead_letters"][0]["raw"]
        .as_str()
        .unwrap()
        .contains("yesterday"));

    // The file's table by its last segment, its derived table by its name.
    let q = ok_in(
        &elsewhere,
        &[
            "query",
            "--config",
            c,
            "--format",
            "csv",
            "SELECT (SELECT count(*) FROM orders) AS o, (SELECT sum(orders) FROM hourly) AS h",
        ],
    );
    assert_eq!(q.lines().nth(1), Some("30,30"), "{q}");

    let compact = ok_in(&elsewhere, &["compact", "--config", c]);
    assert!(compact.contains("sluice compact:"), "{compact}");
    let expire = ok_in(
        &elsewhere,
        &["expire", "--config", c, "--older-than", "100000d"],
    );
    assert!(expire.contains("sluice expire: 0 windows"), "{expire}");
    let vacuum = ok_in(&elsewhere, &["vacuum", "--config", c]);
    assert!(vacuum.contains("sluice vacuum:"), "{vacuum}");
    let gc = ok_in(&elsewhere, &["gc", "--config", c, "--dry-run"]);
    assert!(gc.contains("sluice gc: 0 orphaned files"), "{gc}");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "30");

    // A flag wins over the file: --table names another table (with no dead letters there).
    let other = root.join("tables/hourly");
    let status = json_in(
        &elsewhere,
        &[
            "status",
            "--config",
            c,
            "--table",
            other.to_str().unwrap(),
            "--dlq",
            root.join("none").to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert!(named(&status["table"], "/tables/hourly/"), "{status}");
    assert_eq!(status["dead_letter_table"], serde_json::Value::Null);

    // Neither a table nor a file naming one: exit 2, saying what to give.
    let empty = root.join("conf/empty.toml");
    std::fs::write(&empty, "window = \"1h\"\n").unwrap();
    for command in [
        "status",
        "windows",
        "verify",
        "dead-letters",
        "compact",
        "vacuum",
        "gc",
    ] {
        let out = sluice_in(&elsewhere, &[command, "--config", empty.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("the file names no table"),
            "{command}: {stderr}"
        );
        let out = sluice_in(&elsewhere, &[command]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("--table: give the table"),
            "{command}: {stderr}"
        );
    }
}
