//! Notifications (`--notify-url`, `--notify-command`, `[[notify]]`): every window that
//! became complete or was rewritten reaches each target at least once with its idempotency
//! key, through SIGKILLs and failing receivers; the set of keys received equals the set the
//! table's log implies; a failing receiver holds back only its own notifications.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::*;

/// One notification as the receiver got it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub key: String,
    pub body: serde_json::Value,
    /// Wall clock, milliseconds since the epoch.
    at_ms: i64,
}

/// A loopback HTTP server: answers 503 while `failing`, else 200, and records every request
/// it accepted.
pub(crate) struct Receiver {
    pub url: String,
    failing: Arc<AtomicBool>,
    accepted: Arc<Mutex<Vec<Received>>>,
    refused: Arc<Mutex<u64>>,
}

impl Receiver {
    pub(crate) fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let failing = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(0));
        let (f, a, r) = (failing.clone(), accepted.clone(), refused.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (f, a, r) = (f.clone(), a.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &f, &a, &r));
            }
        });
        Receiver {
            url,
            failing,
            accepted,
            refused,
        }
    }

    pub(crate) fn accepted(&self) -> Vec<Received> {
        self.accepted.lock().unwrap().clone()
    }

    fn keys(&self) -> BTreeSet<String> {
        self.accepted().into_iter().map(|r| r.key).collect()
    }
}

/// Serves the requests of one connection (keep-alive), one at a time.
fn serve(
    stream: std::net::TcpStream,
    failing: &AtomicBool,
    accepted: &Mutex<Vec<Received>>,
    refused: &Mutex<u64>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        let mut key = None;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "idempotency-key" => key = Some(value.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let status = if failing.load(Ordering::SeqCst) {
            *refused.lock().unwrap() += 1;
            "503 Service Unavailable"
        } else {
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let key = key.expect("every notification carries an Idempotency-Key header");
            assert_eq!(
                body["idempotency_key"],
                key.as_str(),
                "header and body agree"
            );
            accepted.lock().unwrap().push(Received {
                key,
                body,
                at_ms: now_ms(),
            });
            "200 OK"
        };
        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The table's id, the same in every metadata action of the log (a second CREATE of a table
/// two writers raced to create once gave it another from version 1 on).
fn table_id(commits: &BTreeMap<i64, Vec<serde_json::Value>>) -> String {
    let ids: BTreeSet<String> = commits
        .values()
        .flatten()
        .filter_map(|a| {
            a.get("metaData")
                .map(|m| m["id"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(ids.len(), 1, "the table's ids in its log: {ids:?}");
    ids.into_iter().next().unwrap()
}

/// What the table's log implies: for every commit that published windows, one key per
/// window (`<table id>/<address>/<version>`) with its reason (the window's first publication
/// in the log is `complete`, every later one `rewritten`) and its rows.
fn implied_by_the_log(table: &Path) -> BTreeMap<String, (String, i64)> {
    let commits = commits(table);
    let table_id = table_id(&commits);
    let mut seen = BTreeSet::new();
    let mut out = BTreeMap::new();
    for (version, actions) in &commits {
        for a in actions {
            let Some(info) = a.get("commitInfo").and_then(|c| c.get("sluice")) else {
                continue;
            };
            let windows = info["windows"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![info.clone()]);
            for w in windows {
                let (Some(window), Some(_)) = (w["window"].as_str(), w["window_end"].as_str())
                else {
                    continue;
                };
                let reason = if seen.insert(window.to_string()) {
                    "complete"
                } else {
                    "rewritten"
                };
                out.insert(
                    format!("{table_id}/{window}/{version}"),
                    (reason.to_string(), w["window_rows"].as_i64().unwrap_or(-1)),
                );
            }
        }
    }
    out
}

/// What the log of a sharded table implies (written apart from sluice's feed, from the raw
/// log): a window is complete at a version when it has files and every shard holding files
/// in the table has sealed (`txn` `<pipeline>/.shard/<n>/sealed_through_us`) through its
/// end; it is `complete` at each version where that becomes true, and `rewritten` at each
/// version whose commit publishes it while it stays complete. Keys name the window without
/// its shard; rows are the window's over every shard.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
pub(crate) fn implied_by_a_sharded_log(table: &Path) -> BTreeMap<String, (String, i64)> {
    let commits = commits(table);
    let table_id = table_id(&commits);
    let unsharded = |path: &str| {
        path.split('/')
            .filter(|s| !s.starts_with("shard="))
            .collect::<Vec<_>>()
            .join("/")
    };
    // path -> (window, shard, rows)
    let mut files: BTreeMap<String, (String, String, i64)> = BTreeMap::new();
    let mut sealed: BTreeMap<String, i64> = BTreeMap::new();
    // Windows with files (-> end), and those complete at the version before.
    let mut windows: BTreeMap<String, i64> = BTreeMap::new();
    let mut complete: BTreeSet<String> = BTreeSet::new();
    let mut out = BTreeMap::new();
    for (version, actions) in &commits {
        let mut published: BTreeMap<String, i64> = BTreeMap::new();
        for a in actions {
            if let Some(info) = a.get("commitInfo").and_then(|c| c.get("sluice")) {
                let windows = info["windows"]
                    .as_array()
                    .cloned()
                    .unwrap_or_else(|| vec![info.clone()]);
                for w in windows {
                    let (Some(window), Some(end)) =
                        (w["window"].as_str(), w["window_end"].as_str())
                    else {
                        continue;
                    };
                    let end = chrono::DateTime::parse_from_rfc3339(end)
                        .unwrap()
                        .timestamp_micros();
                    published.insert(unsharded(window), end);
                }
            }
            if let Some(add) = a.get("add") {
                let values = add["partitionValues"].as_object().unwrap();
                let shard = values["shard"].as_str().unwrap().to_string();
                let path = add["path"].as_str().unwrap().to_string();
                let window = unsharded(path.rsplit_once('/').unwrap().0);
                let stats: serde_json::Value =
                    serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
                files.insert(path, (window, shard, stats["numRecords"].as_i64().unwrap()));
            }
            if let Some(path) = a.get("remove").and_then(|r| r["path"].as_str()) {
                files.remove(path);
            }
            if let Some(txn) = a.get("txn") {
                let app = txn["appId"].as_str().unwrap();
                if let Some(rest) = app.split_once("/.shard/").map(|(_, r)| r) {
                    if let Some(shard) = rest.strip_suffix("/sealed_through_us") {
                        sealed.insert(shard.to_string(), txn["version"].as_i64().unwrap());
                    }
                }
            }
        }
        let rows_of = |window: &str| -> (usize, i64) {
            files
                .values()
                .filter(|(w, _, _)| w == window)
                .fold((0, 0), |(n, r), (_, _, rows)| (n + 1, r + rows))
        };
        windows.extend(published.iter().map(|(w, end)| (w.clone(), *end)));
        windows.retain(|w, _| rows_of(w).0 > 0);
        let shards: BTreeSet<&String> = files.values().map(|(_, s, _)| s).collect();
        let threshold = shards
            .iter()
            .map(|s| sealed.get(*s).copied())
            .collect::<Option<Vec<i64>>>()
            .and_then(|v| v.into_iter().min());
        let now: BTreeSet<String> = windows
            .iter()
            .filter(|(_, end)| threshold.is_some_and(|t| **end <= t))
            .map(|(w, _)| w.clone())
            .collect();
        for window in published.keys() {
            if complete.contains(window) && now.contains(window) {
                let key = format!("{table_id}/{window}/{version}");
                out.insert(key, ("rewritten".to_string(), rows_of(window).1));
            }
        }
        for window in now.difference(&complete) {
            let key = format!("{table_id}/{window}/{version}");
            out.insert(key, ("complete".to_string(), rows_of(window).1));
        }
        complete = now;
    }
    out
}

/// Every received notification is one the log implies, with the same reason and rows, and
/// every implied one was received (at least once).
fn assert_received_exactly_the_log(table: &Path, receiver: &Receiver) {
    let implied = implied_by_the_log(table);
    assert!(!implied.is_empty());
    let received = receiver.accepted();
    for r in &received {
        let Some((reason, rows)) = implied.get(&r.key) else {
            panic!("received {} for a version that never published it", r.key);
        };
        assert_eq!(r.body["reason"], reason.as_str(), "{}", r.key);
        assert_eq!(r.body["rows"], *rows, "{}", r.key);
        assert_eq!(r.body["pipeline"], "sluice", "{}", r.key);
        assert!(r.body["window_start"].as_str().unwrap() < r.body["window_end"].as_str().unwrap());
    }
    let keys = receiver.keys();
    let missing: Vec<&String> = implied.keys().filter(|k| !keys.contains(*k)).collect();
    assert!(missing.is_empty(), "never received: {missing:?}");
}

/// `sluice status --format json`: the pipeline's notified versions.
fn notified(table: &Path) -> serde_json::Value {
    let status: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        "--table",
        table.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    status["pipelines"][0]["notified"].clone()
}

/// The stream arrives a slice per run, and each run is SIGKILLed at a random moment (before,
/// during or after its commits and deliveries); the last run finishes. Every change the log
/// holds was received with its key, and no key of a version that never committed.
#[test]
fn every_change_is_received_through_sigkills_and_nothing_that_never_committed() {
    let seed = seed("notifications through SIGKILLs");
    let mut rng = Rng(seed);
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let slices = stream_slices(20_000, 6, 7, 12, 0);
    let arriving = dir.path().join("arriving");
    std::fs::create_dir_all(&arriving).unwrap();
    let src = format!("ndjson:{}", arriving.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let hook = format!("hook={}", receiver.url);
    let extra = [
        "--key",
        "event_id",
        "--late-batch",
        "0s",
        "--notify-url",
        &hook,
    ];
    let mut kills = 0;
    // Kills land uniformly within 1.2x the last unkilled run's length (mid-work).
    let mut expected_ms = 600u64;
    for (name, bytes) in &slices {
        std::fs::write(arriving.join(name), bytes).unwrap();
        let mut child = Command::new(BIN)
            .args(run_args(&src, &t, &extra))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(rng.below(expected_ms * 6 / 5 + 1)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        } else {
            expected_ms = started.elapsed().as_millis() as u64;
        }
        child.wait().unwrap();
    }
    let out = ok(&run_args(&src, &t, &extra));
    assert!(out.contains("notifications delivered to 1 target"), "{out}");
    eprintln!(
        "{kills} SIGKILLs; {} notifications accepted, {} distinct keys, {} implied by the log",
        receiver.accepted().len(),
        receiver.keys().len(),
        implied_by_the_log(&table).len()
    );
    assert!(kills > 0, "seed {seed}: no run was killed");
    assert_received_exactly_the_log(&table, &receiver);
    assert!(
        implied_by_the_log(&table)
            .values()
            .any(|(reason, _)| reason == "rewritten"),
        "the stream's late rows rewrote windows"
    );
    // The delivered version is recorded: a rerun sends nothing again and commits nothing.
    let last_publication = implied_by_the_log(&table)
        .keys()
        .map(|k| k.rsplit('/').next().unwrap().parse::<i64>().unwrap())
        .max()
        .unwrap();
    assert!(notified(&table)["hook"].as_i64().unwrap() >= last_publication);
    let before = receiver.accepted().len();
    let last = version(&table);
    ok(&run_args(&src, &t, &extra));
    assert_eq!(receiver.accepted().len(), before, "seed {seed}");
    assert_eq!(version(&table), last, "seed {seed}: the rerun committed");
}

/// A receiver that fails for its first 30 s: the run publishes everything meanwhile, then
/// delivers once the receiver is back (the drain), and the table records it.
#[test]
fn a_failing_receiver_delays_only_its_own_notifications() {
    let receiver = Receiver::start();
    receiver.failing.store(true, Ordering::SeqCst);
    let failing = receiver.failing.clone();
    let recovers_at = Instant::now() + Duration::from_secs(30);
    std::thread::spawn(move || {
        std::thread::sleep(recovers_at - Instant::now());
        failing.store(false, Ordering::SeqCst);
    });
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 5_000, 4, 3, 2).display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let hook = format!("hook={}", receiver.url);
    let out = ok(&run_args(
        &src,
        &t,
        &[
            "--notify-url",
            &hook,
            "--notify-drain",
            "2m",
            "--format",
            "json",
        ],
    ));
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Every data commit landed while the receiver was refusing.
    let first_accepted = receiver.accepted().iter().map(|r| r.at_ms).min().unwrap();
    let data_commits: Vec<i64> = commits(&table)
        .values()
        .flatten()
        .filter_map(|a| a.get("commitInfo"))
        .filter(|c| c["sluice"].get("window").is_some() || c["sluice"].get("windows").is_some())
        .map(|c| c["timestamp"].as_i64().unwrap())
        .collect();
    assert!(!data_commits.is_empty());
    assert!(
        data_commits.iter().all(|t| *t < first_accepted),
        "a publication waited for the receiver: {data_commits:?} vs {first_accepted}"
    );
    assert!(*receiver.refused.lock().unwrap() > 0);
    assert_received_exactly_the_log(&table, &receiver);
    let n = &summary["notifications"][0];
    assert_eq!(n["target"], "hook");
    assert_eq!(n["delivered"], receiver.accepted().len() as u64);
    assert!(n["failed_attempts"].as_u64().unwrap() > 0);
    assert_eq!(notified(&table)["hook"], n["through_version"]);
}

/// A receiver still failing when the drain ends: the run exits 0 and says what is left; the
/// next run (no new input) delivers it, with the same keys.
#[test]
fn undelivered_notifications_wait_for_the_next_run() {
    let receiver = Receiver::start();
    receiver.failing.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 3_000, 3, 5, 1).display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let hook = format!("hook={}", receiver.url);
    let args = run_args(&src, &t, &["--notify-url", &hook, "--notify-drain", "1s"]);
    let out = sluice(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("notify target hook: changes after table version")
            && stderr.contains("the next run delivers them"),
        "{stderr}"
    );
    assert!(receiver.accepted().is_empty());
    // Registered at the table's creation (version 0): nothing after it is delivered.
    assert_eq!(notified(&table)["hook"], 0);
    receiver.failing.store(false, Ordering::SeqCst);
    ok(&args);
    assert_received_exactly_the_log(&table, &receiver);
    assert_eq!(
        receiver.accepted().len(),
        receiver.keys().len(),
        "one delivery per key without failures"
    );
    // `sluice windows`: every window's publishing version has been told to the target.
    let windows = ok(&["windows", "--table", &t, "--format", "json"]);
    assert!(!windows.is_empty());
    for line in windows.lines() {
        let w: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(w["notified_hook"], w["version"], "{line}");
    }
}

/// A command target from a config file, told only about rewrites: the JSON on stdin, the key
/// in SLUICE_IDEMPOTENCY_KEY; a failing command is retried.
#[test]
fn a_command_target_gets_the_json_on_stdin_and_only_its_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 5_000, 4, 9, 2).display());
    let table = dir.path().join("t");
    let log = dir.path().join("notified.ndjson");
    let flaky = dir.path().join("first-failed");
    // Fails its first call (a retry follows), then appends the key and the body.
    let script = format!(
        "if [ ! -e {flaky} ]; then touch {flaky}; exit 7; fi; \
         printf '%s ' \"$SLUICE_IDEMPOTENCY_KEY\" >> {log}; cat >> {log}; echo >> {log}",
        flaky = flaky.display(),
        log = log.display()
    );
    let config = dir.path().join("pipeline.toml");
    std::fs::write(
        &config,
        format!(
            "[[notify]]\nname = \"rewrites\"\ncommand = [\"sh\", \"-c\", {script:?}]\non = [\"rewritten\"]\n"
        ),
    )
    .unwrap();
    let t = table.display().to_string();
    ok(&run_args(
        &src,
        &t,
        &["--config", config.to_str().unwrap(), "--late-batch", "0s"],
    ));
    let implied: BTreeMap<String, (String, i64)> = implied_by_the_log(&table)
        .into_iter()
        .filter(|(_, (reason, _))| reason == "rewritten")
        .collect();
    assert!(!implied.is_empty(), "late rows rewrote windows");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut got = BTreeMap::new();
    for line in text.lines() {
        let (key, body) = line.split_once(' ').unwrap();
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["idempotency_key"], key);
        assert_eq!(body["reason"], "rewritten");
        got.insert(key.to_string(), body["rows"].as_i64().unwrap());
    }
    let want: BTreeMap<String, i64> = implied
        .into_iter()
        .map(|(k, (_, rows))| (k, rows))
        .collect();
    assert_eq!(got, want);
}

/// Targets are checked before anything is written.
#[test]
fn invalid_targets_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 100, 1, 1, 1).display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    for (flag, value, says) in [
        (
            "--notify-url",
            "hook=ftp://x",
            "not an http:// or https:// URL",
        ),
        ("--notify-url", "bad/name=http://x", "use 1 to 64 letters"),
        ("--notify-url", "nokeyvalue", "expected KEY=VALUE"),
        ("--notify-drain", "soon", "--notify-drain"),
    ] {
        let out = sluice(&run_args(&src, &t, &[flag, value]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
        assert!(!table.exists(), "nothing is written");
    }
}
