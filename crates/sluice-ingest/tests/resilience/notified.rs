//! A notify target inside the crash enumeration: a receiver that appends every key it is
//! given to a file beside the table (it outlives the crashed process, as a real receiver
//! would), the target's registration before the writer's first commit and its drain after
//! the run (as `sluice run` does, minus the timing: the drain knows where to stop before it
//! reads, so the store operations of a run are the same every time), and the check of what
//! the receiver got against what the table's log implies.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sluice_notify::{
    starting_version, DeliveryError, Notifier, NotifierOptions, Target, TargetReport, TargetSpec,
};
use sluice_publish::{
    notified_through, open_table, open_table_with, ChangeFeed, ChangeReason, TableOptions,
};

use crate::harness::PIPELINE;

pub const TARGET: &str = "hook";
/// The clock of the record commits' `lastUpdated`.
const NOW_MS: i64 = 1_800_000_000_000;

/// Where the receiver of the table at `table_dir` keeps what it got: one line per delivery,
/// `<key> <reason> <rows>`.
pub fn received_path(table_dir: &Path) -> PathBuf {
    PathBuf::from(format!("{}.notified", table_dir.display()))
}

#[derive(Debug)]
struct FileReceiver {
    path: PathBuf,
}

#[async_trait]
impl Target for FileReceiver {
    async fn deliver(&self, body: &[u8], key: &str) -> Result<(), DeliveryError> {
        let change: serde_json::Value = serde_json::from_slice(body).expect("a JSON body");
        assert_eq!(change["idempotency_key"].as_str(), Some(key), "{change}");
        let line = format!(
            "{key} {} {}\n",
            change["reason"].as_str().expect("a reason"),
            change["rows"].as_i64().expect("rows")
        );
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .expect("the receiver's file");
        Ok(())
    }
}

/// Before the writer's first commit: the target's mark as `Notifier::start` sets it (the
/// recorded version, or the table's current one for a target never told anything), so every
/// commit of the writer records it.
pub async fn register(options: &TableOptions) -> Result<(), String> {
    let table = open_table_with(options, None)
        .await
        .map_err(|e| format!("open for the notify target: {e}"))?;
    let through = starting_version(&table, PIPELINE, TARGET)
        .await
        .map_err(|e| format!("the notify target's record: {e}"))?;
    options.notified.deliver(TARGET, through);
    Ok(())
}

/// After the writer: delivers what the receiver was not told yet and records it.
pub async fn drain(options: &TableOptions, table_dir: &Path) -> Result<TargetReport, String> {
    let notifier = NotifierOptions {
        table: options.clone(),
        pipeline: PIPELINE.to_string(),
        poll_ms: 10,
        retry_initial_ms: 1,
        retry_max_ms: 10,
        marks: options.notified.clone(),
        recording: sluice_notify::Recording::WithWriter,
    };
    let spec = TargetSpec {
        name: TARGET.to_string(),
        on: [ChangeReason::Complete, ChangeReason::Rewritten].into(),
        target: Box::new(FileReceiver {
            path: received_path(table_dir),
        }),
    };
    let mut reports = Notifier::drain(notifier, vec![spec], 60_000, NOW_MS)
        .await
        .map_err(|e| format!("notify: {e}"))?;
    let report = reports.pop().expect("one target, one report");
    match &report.error {
        Some(e) => Err(format!("notify target {TARGET}: {e}")),
        None => Ok(report),
    }
}

/// Every change of the pipeline's windows the log of the table at `table_dir` holds, by
/// key: (reason, rows).
pub async fn implied(table_dir: &Path) -> BTreeMap<String, (String, i64)> {
    let location = table_dir.to_str().expect("utf-8 path");
    let first = open_table(location, &Default::default(), Some(0))
        .await
        .expect("version 0");
    let latest = open_table(location, &Default::default(), None)
        .await
        .expect("the table");
    let mut feed = ChangeFeed::after(&first, PIPELINE).await.expect("a feed");
    feed.read(&latest)
        .await
        .expect("the log reads")
        .into_iter()
        .map(|c| (c.idempotency_key, (c.reason.as_str().to_string(), c.rows)))
        .collect()
}

/// How what the receiver got differs from what the table's log implies, if it does: every
/// change must have been received (at least once, always with the same body), nothing else
/// may have been (no key of a version that never committed), the target's record must
/// cover the last change, and a drain over the finished table must deliver and commit
/// nothing.
pub async fn notified_differs(table_dir: &Path, options: &TableOptions) -> Option<String> {
    let text = std::fs::read_to_string(received_path(table_dir)).unwrap_or_default();
    let mut received: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for line in text.lines() {
        let mut cells = line.split(' ');
        let (Some(key), Some(reason), Some(rows)) = (cells.next(), cells.next(), cells.next())
        else {
            return Some(format!("the receiver's line {line:?}"));
        };
        let got = (reason.to_string(), rows.parse::<i64>().unwrap_or(-1));
        if let Some(before) = received.insert(key.to_string(), got.clone()) {
            if before != got {
                return Some(format!(
                    "key {key} was delivered as {before:?} and again as {got:?}"
                ));
            }
        }
    }
    let implied = implied(table_dir).await;
    if received != implied {
        let missing: Vec<_> = implied
            .keys()
            .filter(|k| !received.contains_key(*k))
            .collect();
        let extra: Vec<_> = received
            .keys()
            .filter(|k| !implied.contains_key(*k))
            .collect();
        return Some(format!(
            "the receiver's keys differ from the log's\n  never received {missing:?}\n  not in the log {extra:?}\n  received {received:?}\n  log      {implied:?}"
        ));
    }
    let location = table_dir.to_str().expect("utf-8 path");
    let table = open_table(location, &Default::default(), None)
        .await
        .expect("the table");
    let before = table.version().unwrap_or(0);
    let recorded = notified_through(&table, PIPELINE, TARGET)
        .await
        .expect("the record");
    let last = implied
        .keys()
        .filter_map(|k| k.rsplit('/').next()?.parse::<u64>().ok())
        .max();
    if recorded < last {
        return Some(format!(
            "the target's record {recorded:?} is behind the last change {last:?}"
        ));
    }
    let again = TableOptions {
        notified: Default::default(),
        ..options.clone()
    };
    if let Err(e) = register(&again).await {
        return Some(e);
    }
    match drain(&again, table_dir).await {
        Err(e) => Some(format!("a drain over the finished table: {e}")),
        Ok(r) if r.delivered + r.skipped > 0 => Some(format!(
            "a drain over the finished table delivered again: {r:?}"
        )),
        Ok(_) => {
            let after = open_table(location, &Default::default(), None)
                .await
                .expect("the table")
                .version()
                .unwrap_or(0);
            (after != before)
                .then(|| format!("a drain over the finished table committed ({before} -> {after})"))
        }
    }
}
