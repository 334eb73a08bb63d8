//! Expectations (`--expect`, `--expect-or-drop`, `--expect-or-fail`) through the real
//! binary, against a model of the events: a warn rule's rows land and are counted, a drop
//! rule's rows are dead letters that a replay lands once the rule is loosened (and a backfill
//! then recomputes the same table), a fail rule stops the run before the row's window is
//! published; the counts agree in the run's summary and in `status`; a rule that could fail
//! on a value is refused before anything is written.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::*;

/// One generated event: id, minute of 2026-10-03 from 14:00, amount (or none), country.
struct Event {
    id: String,
    minute: u32,
    amount: Option<i64>,
    country: &'static str,
}

fn events() -> Vec<Event> {
    let amounts = [5, -1, 7, -9, 3, 0, -3, 12, -20, 4, 8, -4];
    (0..36)
        .map(|i| Event {
            id: format!("e{i:02}"),
            minute: i * 4,
            amount: (i % 7 != 5).then(|| amounts[i as usize % amounts.len()]),
            country: ["DE", "US", "FR", "XX"][i as usize % 4],
        })
        .collect()
}

fn line(e: &Event) -> String {
    let ts = format!(
        "2026-10-03T{:02}:{:02}:00Z",
        14 + e.minute / 60,
        e.minute % 60
    );
    let amount = e
        .amount
        .map_or(String::new(), |a| format!(",\"amount\":{a}"));
    format!(
        "{{\"id\":\"{}\",\"ts\":\"{ts}\",\"country\":\"{}\"{amount}}}\n",
        e.id, e.country
    )
}

/// The events written under `dir` as NDJSON: the events, the `--source` and the table.
fn orders(dir: &Path) -> (Vec<Event>, String, std::path::PathBuf) {
    let events = events();
    let text: String = events.iter().map(line).collect();
    write_in(dir, "events.ndjson", &text);
    let source = format!("ndjson:{}", dir.join("events.ndjson").display());
    (events, source, dir.join("orders"))
}

/// A rule is broken when its condition is false; a missing amount passes (null).
fn below(e: &Event, floor: i64) -> bool {
    e.amount.is_some_and(|a| a < floor)
}

fn unknown_country(e: &Event) -> bool {
    !["DE", "US"].contains(&e.country)
}

fn ids_in(table: &Path) -> BTreeSet<String> {
    query_csv(&[("t", table)], "SELECT id FROM t")
        .into_iter()
        .collect()
}

fn ids_where(events: &[Event], keep: impl Fn(&Event) -> bool) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| keep(e))
        .map(|e| e.id.clone())
        .collect()
}

/// `status --format json`'s findings of pipeline `sluice`: rule → (on_violation,
/// rows_breaking, dead_letters).
fn status_rules(table: &Path) -> Vec<(String, String, i64, i64)> {
    let t = table.to_str().unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--table", t, "--format", "json"])).unwrap();
    status["expectations"]["sluice"]
        .as_array()
        .unwrap_or_else(|| panic!("no expectations in {status}"))
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["on_violation"].as_str().unwrap().to_string(),
                r["rows_breaking"].as_i64().unwrap(),
                r["dead_letters"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn warn_and_drop_land_what_the_rules_say_and_a_loosened_rule_replays() {
    let dir = tempfile::tempdir().unwrap();
    let (events, source, table) = orders(dir.path());
    let t = table.to_str().unwrap();
    let base = [
        "run", "--source", &source, "--table", t, "--window", "1h", "--key", "id",
    ];

    // Warn on an unknown country, drop a negative amount.
    let mut first = base.to_vec();
    first.extend([
        "--expect",
        "known_country=country IN ('DE', 'US')",
        "--expect-or-drop",
        "positive=amount >= 0",
        "--format",
        "json",
    ]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&first)).unwrap();
    let dropped = events.iter().filter(|e| below(e, 0)).count() as i64;
    let unknown = events.iter().filter(|e| unknown_country(e)).count() as i64;
    assert!(dropped >= 6 && unknown >= 12, "the model breaks both rules");
    assert_eq!(
        summary["expectations"],
        serde_json::json!({"known_country": unknown, "positive": dropped}),
        "{summary}"
    );
    assert_eq!(summary["rejected_by_reason"]["expectation"], dropped);
    assert_eq!(ids_in(&table), ids_where(&events, |e| !below(e, 0)));
    assert_eq!(dead_letters(&table), [format!("expectation,{dropped}")]);
    // The table's findings: the unknown countries that landed, the negative amounts dropped.
    let landed_unknown = events
        .iter()
        .filter(|e| unknown_country(e) && !below(e, 0))
        .count() as i64;
    let expected = vec![
        (
            "known_country".to_string(),
            "warn".to_string(),
            landed_unknown,
            0,
        ),
        ("positive".to_string(), "drop".to_string(), 0, dropped),
    ];
    assert_eq!(status_rules(&table), expected);
    let text_status = ok(&["status", "--table", t]);
    assert!(
        text_status.contains(&format!(
            "expect    positive (drop when false: amount >= 0): 0 rows in the table break it, {dropped} dropped as dead letters"
        )),
        "{text_status}"
    );
    assert_verified(&table);

    // A run that gives no rules keeps the table's: the contract records them.
    let again = ok(&base);
    assert!(again.contains("0 records"), "{again}");
    assert_eq!(status_rules(&table), expected);

    // Loosened in a config file (which replaces the rules given before), then replayed: the
    // amounts from -5 land, the others stay dead letters.
    let config = dir.path().join("pipeline.toml");
    std::fs::write(&config, "[expect_or_drop]\npositive = \"amount >= -5\"\n").unwrap();
    let cfg = config.to_str().unwrap();
    let mut loosen = base.to_vec();
    loosen.extend(["--config", cfg]);
    ok(&loosen);
    let replay = ok(&["dead-letters", "--table", t, "--replay"]);
    let relanded = events
        .iter()
        .filter(|e| below(e, 0) && !below(e, -5))
        .count();
    let still = events.iter().filter(|e| below(e, -5)).count();
    assert!(
        replay.contains(&format!("{relanded} landed"))
            && replay.contains(&format!("{still} still failing")),
        "{replay}"
    );
    let model = ids_where(&events, |e| !below(e, -5));
    assert_eq!(ids_in(&table), model);
    assert_eq!(
        status_rules(&table),
        [("positive".to_string(), "drop".to_string(), 0, dropped)],
        "the warn rule went with the config file's rules"
    );
    assert_verified(&table);

    // A backfill of the range recomputes the same rows under the table's rules.
    let backfill = [
        "backfill",
        "--source",
        &source,
        "--table",
        t,
        "--from",
        "2026-10-03T14:00Z",
        "--to",
        "2026-10-03T17:00Z",
        "--force",
        "--format",
        "json",
    ];
    let summary: serde_json::Value = serde_json::from_str(&ok(&backfill)).unwrap();
    assert_eq!(
        summary["expectations"],
        serde_json::json!({"positive": still})
    );
    assert_eq!(ids_in(&table), model);
    assert_verified(&table);
}

#[test]
fn a_fail_rule_stops_the_run_before_the_row_s_window_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let (events, source, table) = orders(dir.path());
    let t = table.to_str().unwrap();
    let hourly = |rule: &[&'static str]| {
        let mut args = vec![
            "run", "--source", &source, "--table", t, "--window", "1h", "--key", "id",
        ];
        args.extend_from_slice(rule);
        args
    };
    let out = sluice(&hourly(&["--expect-or-fail", "positive=amount >= 0"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let first = events.iter().position(|e| below(e, 0)).unwrap();
    let offset: usize = events[..first].iter().map(|e| line(e).len()).sum();
    assert!(
        stderr.contains("expectation positive failed")
            && stderr.contains(&format!("events.ndjson offset {offset}")),
        "{stderr}"
    );
    // The broken row's window (its hour) holds no row.
    let hour = 14 + events[first].minute / 60;
    let rows_then = scalar(
        &table,
        &format!("SELECT count(*) FROM t WHERE ts >= '2026-10-03T{hour:02}:00:00Z' AND ts < '2026-10-03T{:02}:00:00Z'", hour + 1),
    );
    assert_eq!(rows_then, "0");
    // Made a drop rule, the run lands everything else.
    ok(&hourly(&["--expect-or-drop", "positive=amount >= 0"]));
    assert_eq!(ids_in(&table), ids_where(&events, |e| !below(e, 0)));
}

#[test]
fn rules_that_cannot_be_checked_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_, source, table) = orders(dir.path());
    let t = table.to_str().unwrap();
    let run = |rule: &[&str]| {
        let mut args = vec!["run", "--source", &source, "--table", t, "--window", "1h"];
        args.extend_from_slice(rule);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    for (rule, says) in [
        (
            ["--expect-or-drop", "abs=abs(amount) > 0"],
            "no casts, no functions",
        ),
        (["--expect", "nope=missing > 0"], "missing"),
        (["--expect-or-fail", "positive"], "expected NAME=SQL"),
        (["--expect", "bad-name=amount > 0"], "expectation name"),
    ] {
        let args = run(&rule);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused(&args, says);
        assert!(!table.exists(), "{rule:?} wrote the table");
    }
    assert!(!dlq_of(&table).exists());
}

/// A mirror (MERGE across the table, ordered by a sequence) with a drop rule, loosened and
/// replayed: each key holds its highest-sequence change among those the rule lets through,
/// an older change replayed late does not overwrite a newer one, and a second replay changes
/// nothing. The model: the latest passing change per key.
#[test]
fn a_mirror_replays_loosened_rows_in_sequence_order() {
    let dir = tempfile::tempdir().unwrap();
    // (id, lsn, minute, balance)
    let changes: [(&str, i64, u32, i64); 8] = [
        ("a", 1, 0, 10),
        ("a", 2, 5, -5),
        ("a", 3, 10, 7),
        ("b", 1, 1, 4),
        ("b", 2, 6, -3),
        ("c", 1, 2, -20),
        ("d", 5, 3, -1),
        ("e", 1, 4, 0),
    ];
    let text: String = changes
        .iter()
        .map(|(id, lsn, minute, balance)| {
            format!(
                "{{\"id\":\"{id}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T14:{minute:02}:00Z\",\"balance\":{balance}}}\n"
            )
        })
        .collect();
    write_in(dir.path(), "changes.ndjson", &text);
    let source = format!("ndjson:{}", dir.path().join("changes.ndjson").display());
    let table = dir.path().join("accounts");
    let t = table.to_str().unwrap();
    let model = |floor: i64| -> Vec<String> {
        let mut latest: std::collections::BTreeMap<&str, (i64, i64)> = Default::default();
        for (id, lsn, _, balance) in changes.iter().filter(|c| c.3 >= floor) {
            let held = latest.entry(id).or_insert((*lsn, *balance));
            if *lsn >= held.0 {
                *held = (*lsn, *balance);
            }
        }
        latest
            .iter()
            .map(|(id, (lsn, balance))| format!("{id},{lsn},{balance}"))
            .collect()
    };
    let accounts = || {
        query_csv(
            &[("t", &table)],
            "SELECT id, lsn, balance FROM t ORDER BY id",
        )
    };
    let mut args = merge_args(&source, t, "id", "table");
    args.extend([
        "--sequence-field",
        "lsn",
        "--expect-or-drop",
        "solvent=balance >= 0",
    ]);
    ok(&args);
    assert_eq!(accounts(), model(0));
    assert_eq!(dead_letters(&table), ["expectation,4"]);

    let mut loosen = merge_args(&source, t, "id", "table");
    loosen.extend([
        "--sequence-field",
        "lsn",
        "--expect-or-drop",
        "solvent=balance >= -10",
    ]);
    ok(&loosen);
    let replay = ok(&["dead-letters", "--table", t, "--replay"]);
    assert!(
        replay.contains("3 landed") && replay.contains("1 still failing"),
        "{replay}"
    );
    assert_eq!(accounts(), model(-10));
    assert_verified(&table);
    let v = version(&table);
    let again = ok(&["dead-letters", "--table", t, "--replay"]);
    assert!(again.contains("still failing"), "{again}");
    assert_eq!(
        version(&table),
        v,
        "a second replay commits nothing to the table"
    );
    assert_eq!(accounts(), model(-10));
}
