//! Long histories (E4): after checkpoints and log cleanup (every commit file older than the
//! last checkpoint deleted), a restart still resumes from the table state alone.

use std::path::Path;
use std::sync::Arc;

use sluice_faults::{FaultPlan, FaultStore};

use crate::harness::{dead_letters, latest_version, local_root, rows_at, Policy, Run, Script};

/// Deletes every commit and checkpoint older than the newest checkpoint, as log cleanup
/// (`delta.logRetentionDuration`) does; returns the checkpoint version.
fn clean_log(table_dir: &Path) -> u64 {
    let log = table_dir.join("_delta_log");
    let last: serde_json::Value = serde_json::from_slice(
        &std::fs::read(log.join("_last_checkpoint")).expect("a checkpoint was written"),
    )
    .unwrap();
    let checkpoint = last["version"].as_u64().unwrap();
    let mut deleted = 0;
    for entry in std::fs::read_dir(&log).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let version: Option<u64> = name.split('.').next().and_then(|v| v.parse().ok());
        if let Some(v) = version {
            if v < checkpoint {
                std::fs::remove_file(log.join(&name)).unwrap();
                deleted += 1;
            }
        }
    }
    assert!(deleted > 0, "cleanup removed old commits");
    assert!(!log.join(format!("{:020}.json", 0)).exists());
    checkpoint
}

async fn resume_after_cleanup(keyed: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let expected = script.expected_final(keyed, Policy::Rewrite);
    let run = Run {
        checkpoint_interval: 2,
        ..Run::new(keyed)
    };

    // A process stops half way (crash), the log is cleaned, a new process finishes.
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    let probe = tmp.path().join("probe");
    run.run(&script.dir, &probe, Arc::new(counting.clone()), "k")
        .await
        .unwrap();
    let half = counting.ops() * 3 / 4;
    let dir = tmp.path().join("table");
    let crashing = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: half });
    assert!(run
        .run(&script.dir, &dir, Arc::new(crashing), "a")
        .await
        .is_err());
    let checkpoint = clean_log(&dir);
    assert!(checkpoint >= 2, "several commits before the cleanup");
    run.run(&script.dir, &dir, local_root(), "b").await.unwrap();
    assert_eq!(rows_at(&dir, None).await.0, expected);

    // Cleaned again after the end: a full replay is recognised from the table state alone.
    clean_log(&dir);
    let before = latest_version(&dir).await;
    let replay = run.run(&script.dir, &dir, local_root(), "c").await.unwrap();
    assert_eq!(replay.commits, 0, "nothing to publish: {replay:?}");
    assert_eq!(latest_version(&dir).await, before);
    assert_eq!(rows_at(&dir, None).await.0, expected);
    assert_eq!(
        dead_letters(&dir).await,
        script.expected_dead_letters(Policy::Rewrite)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_checkpoint_and_log_cleanup_keyed_by_position() {
    resume_after_cleanup(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_checkpoint_and_log_cleanup_keyed_by_event_id() {
    resume_after_cleanup(true).await;
}
