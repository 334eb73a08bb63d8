//! Crash-point enumeration: run the script once to count its object-store operations K, then
//! for every N in 1..=K crash after operation N, restart with a fresh pipeline over the same
//! store, finish the input, and compare with the crash-free oracle.

use std::time::Instant;

use sluice_faults::{FaultPlan, FaultStore};
use sluice_publish::{CompactRule, TableOptions};

use crate::harness::{
    check_every_version, dead_letters, derived_from_raw, derived_rows, dlq_location, grown_values,
    local_root, rows_at, Policy, Run, Script, DERIVED, GROWS_FROM,
};
use crate::notified;

async fn enumerate(keyed: bool, policy: Policy) {
    enumerate_with(keyed, policy, false, false, None, None, false).await
}

async fn enumerate_with(
    keyed: bool,
    policy: Policy,
    derived: bool,
    grows: bool,
    compact_files_min: Option<usize>,
    retain_ms: Option<i64>,
    notify: bool,
) {
    let mode = format!(
        "{}, {}",
        if keyed {
            "keyed by event_id"
        } else {
            "keyed by position"
        },
        if policy == Policy::Upsert {
            "merge mode (upsert)".to_string()
        } else {
            format!("late policy {}", policy.late().name())
        }
    ) + if derived {
        ", with a derived table"
    } else {
        ""
    } + if grows {
        ", records gaining two fields mid-stream"
    } else {
        ""
    } + if compact_files_min.is_some() {
        ", compacting windows in the run"
    } else {
        ""
    } + if retain_ms.is_some() {
        ", expiring windows past the retention in the run"
    } else {
        ""
    } + if notify {
        ", telling a notify target"
    } else {
        ""
    };
    assert!(
        keyed || !grows,
        "the growing script has a record without its key"
    );
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let script = if grows {
        Script::write_growing(tmp.path())
    } else {
        Script::write(tmp.path())
    };
    let run = Run {
        policy,
        derived,
        grows,
        compact_files_min,
        retain_ms,
        notify,
        ..Run::new(keyed)
    };
    let mut dead_expected = script.expected_dead_letters(policy);

    // The oracle: one crash-free run, itself checked against the script's model.
    let oracle_dir = tmp.path().join("oracle");
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    let summary = run
        .run(
            &script.dir,
            &oracle_dir,
            std::sync::Arc::new(counting.clone()),
            "oracle",
        )
        .await
        .expect("the crash-free run succeeds");
    let k = counting.ops();
    let (oracle, _) = rows_at(&oracle_dir, None).await;
    // With a retention of 3 minutes, the watermark's last position (14:07:38) leaves the
    // windows from 14:04 on; the late event of 14:02 is too late, a dead letter.
    let kept = |w: &str| retain_ms.is_none() || w >= "window_start=20261003T1404Z";
    let model: Vec<_> = script
        .expected_final(keyed, policy)
        .into_iter()
        .filter(|r| kept(&r.0))
        .collect();
    assert_eq!(oracle, model, "the oracle run matches the model");
    if retain_ms.is_some() {
        assert_eq!(summary.windows_expired, 4, "{summary:?}");
        let dead = dead_letters(&oracle_dir).await;
        let too_late: Vec<_> = dead.iter().filter(|d| d.2 == "too_late").collect();
        assert_eq!(too_late.len(), 1, "{dead:?}");
        dead_expected = dead;
    }
    assert!(
        summary.windows_published >= 8 && summary.late >= 2,
        "{summary:?}"
    );
    assert_eq!(
        summary.windows_compacted > 0,
        compact_files_min.is_some(),
        "the run compacts windows when asked to: {summary:?}"
    );
    assert!(
        summary.parts_flushed > 0,
        "the script stages parts early: {summary:?}"
    );
    if policy != Policy::Upsert {
        // Windows sealed together are published by one commit: the enumeration crashes
        // after every store operation of a group commit too. (A MERGE commits alone.)
        assert!(
            summary.commits < summary.windows_published,
            "the script makes group commits: {summary:?}"
        );
    }
    check_every_version(&oracle_dir, &script, keyed, policy)
        .await
        .expect("the oracle is atomic per window");
    let oracle_grown = if grows {
        let values = grown_values(&oracle_dir).await;
        // Every row of a line from GROWS_FROM on holds its new values; earlier rows none.
        let lines: Vec<&str> = values.iter().map(String::as_str).collect();
        for row in &lines {
            let cells: Vec<&str> = row.split(',').collect();
            // The clock-skewed event carries neither new field (and no ctx).
            let v: usize = if cells[0] == "future" {
                0
            } else {
                cells[3].parse().expect("ctx.a")
            };
            let want = if v >= GROWS_FROM {
                (format!("c{v}"), format!("b{v}"))
            } else {
                ("-".to_string(), "-".to_string())
            };
            assert_eq!(
                (cells[1], cells[2]),
                (want.0.as_str(), want.1.as_str()),
                "{row}"
            );
        }
        values
    } else {
        Vec::new()
    };
    if notify {
        let changes = notified::implied(&oracle_dir).await;
        let reasons: std::collections::BTreeSet<_> =
            changes.values().map(|(r, _)| r.as_str()).collect();
        assert_eq!(
            reasons,
            ["complete", "rewritten"].into(),
            "the script both completes and rewrites windows: {changes:?}"
        );
        if let Some(e) =
            notified::notified_differs(&oracle_dir, &local_options(&run, &oracle_dir)).await
        {
            panic!("the oracle's notifications: {e}");
        }
    }
    let mut oracle_derived = Vec::new();
    if derived {
        for (name, _, _) in DERIVED {
            let rows = derived_rows(&oracle_dir, name).await;
            assert_eq!(
                rows,
                derived_from_raw(&oracle_dir, name).await,
                "the oracle's derived table {name} equals its query over the raw table"
            );
            assert!(!rows.is_empty());
            oracle_derived.push(rows);
        }
    }

    let mut passed = 0u64;
    let mut orphans = 0usize;
    let mut failures = Vec::new();
    for n in 1..=k {
        let dir = tmp.path().join(format!("crash-{n}"));
        let crashing = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: n });
        let first = run
            .run(
                &script.dir,
                &dir,
                std::sync::Arc::new(crashing.clone()),
                "a",
            )
            .await;
        let restarted = run.run(&script.dir, &dir, local_root(), "b").await;
        let outcome = match restarted {
            Err(e) => Err(format!("the restarted pipeline failed: {e}")),
            Ok(_) => {
                let (rows, _) = rows_at(&dir, None).await;
                let dead = dead_letters(&dir).await;
                if dead != dead_expected {
                    Err(format!(
                        "dead letters differ from one clean run's\n  got      {dead:?}\n  expected {dead_expected:?}"
                    ))
                } else if let Some(e) = derived_differs(&dir, &oracle_derived).await {
                    Err(e)
                } else if let Some(e) = match notify {
                    true => notified::notified_differs(&dir, &local_options(&run, &dir)).await,
                    false => None,
                } {
                    Err(e)
                } else if grows && grown_values(&dir).await != oracle_grown {
                    Err(format!(
                        "the new columns' values differ from the oracle's\n  got    {:?}\n  oracle {oracle_grown:?}",
                        grown_values(&dir).await
                    ))
                } else if rows != oracle {
                    Err(format!(
                        "final rows differ from the oracle ({} vs {} rows)\n  got    {rows:?}\n  oracle {oracle:?}",
                        rows.len(),
                        oracle.len()
                    ))
                } else {
                    match check_every_version(&dir, &script, keyed, policy).await {
                        Err(e) => Err(e),
                        // The crashed attempt's staged files are orphans: gc removes them and
                        // touches nothing any version reads.
                        Ok(_) => match collect_orphans(&dir).await {
                            Ok(n) => {
                                orphans += n;
                                let (after, _) = rows_at(&dir, None).await;
                                if after != oracle {
                                    Err("gc changed the table's rows".to_string())
                                } else {
                                    check_every_version(&dir, &script, keyed, policy)
                                        .await
                                        .map(|_| ())
                                        .map_err(|e| format!("after gc: {e}"))
                                }
                            }
                            Err(e) => Err(e),
                        },
                    }
                }
            }
        };
        match outcome {
            Ok(()) => passed += 1,
            Err(e) => failures.push(failure(n, &mode, &first, &crashing, &e)),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    conclude(&mode, k, passed, orphans, &failures, started);
}

/// What a failed crash point says: N, the run crashed, the operation it crashed after.
fn failure<T>(
    n: u64,
    mode: &str,
    first: &Result<T, String>,
    crashing: &FaultStore,
    error: &str,
) -> String {
    let op = crashing.log().into_iter().find(|r| r.n == n);
    format!(
        "crash point N={n} ({mode}; crashed run: {}; operation N: {op:?}): {error}",
        match first {
            Ok(_) => "finished".to_string(),
            Err(e) => e.clone(),
        }
    )
}

/// Prints an enumeration's figures and fails the test if any point failed.
fn conclude(
    mode: &str,
    k: u64,
    passed: u64,
    orphans: usize,
    failures: &[String],
    started: Instant,
) {
    println!(
        "crash points ({mode}): K = {k} object-store operations, {passed} of {k} points passed, {orphans} orphaned staged files collected by gc, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {k} crash points failed; reproduce with the N shown:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Crash-point enumeration of `backfill`: the script's day recomputed into a new table,
/// crashed after every object-store operation N, then backfilled again. The end must equal
/// the crash-free backfill (which equals one clean stream run), every version must show whole
/// publications only, gc must remove only orphans, and a stream run over the same input
/// afterwards must recognise every event and change no row.
async fn enumerate_backfill(keyed: bool) {
    let mode = format!(
        "backfill, keyed by {}",
        if keyed { "event_id" } else { "position" }
    );
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let run = Run::new(keyed);
    let oracle_dir = tmp.path().join("oracle");
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    let summary = run
        .backfill(
            &script.dir,
            &oracle_dir,
            std::sync::Arc::new(counting.clone()),
            "oracle",
        )
        .await
        .expect("the crash-free backfill succeeds");
    let k = counting.ops();
    let (oracle, _) = rows_at(&oracle_dir, None).await;
    assert_eq!(
        oracle,
        script.expected_final(keyed, Policy::Rewrite),
        "the backfill equals one clean stream run"
    );
    assert!(summary.windows_published >= 8, "{summary:?}");
    check_every_version(&oracle_dir, &script, keyed, Policy::Rewrite)
        .await
        .expect("the oracle is atomic per window");

    let mut passed = 0u64;
    let mut orphans = 0usize;
    let mut failures = Vec::new();
    for n in 1..=k {
        let dir = tmp.path().join(format!("crash-{n}"));
        let crashing = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: n });
        let first = run
            .backfill(
                &script.dir,
                &dir,
                std::sync::Arc::new(crashing.clone()),
                "a",
            )
            .await;
        let outcome = async {
            run.backfill(&script.dir, &dir, local_root(), "b")
                .await
                .map_err(|e| format!("the second backfill failed: {e}"))?;
            let (rows, _) = rows_at(&dir, None).await;
            if rows != oracle {
                return Err(format!(
                    "final rows differ from the oracle ({} vs {} rows)\n  got    {rows:?}\n  oracle {oracle:?}",
                    rows.len(),
                    oracle.len()
                ));
            }
            check_every_version(&dir, &script, keyed, Policy::Rewrite).await?;
            orphans += collect_orphans(&dir).await?;
            let stream = run
                .run(&script.dir, &dir, local_root(), "c")
                .await
                .map_err(|e| format!("the stream run after the backfill failed: {e}"))?;
            let (after, _) = rows_at(&dir, None).await;
            if after != oracle || stream.windows_published != 0 {
                return Err(format!(
                    "the stream run after the backfill changed the table: {stream:?}"
                ));
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => passed += 1,
            Err(e) => failures.push(failure(n, &mode, &first, &crashing, &e)),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    conclude(&mode, k, passed, orphans, &failures, started);
}

/// A maintenance job over a finished stream's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// `sluice compact`: every window of several files becomes one.
    Compact,
    /// `sluice expire --dlq`: the windows that ended before 14:03 are removed (the first
    /// two; the 14:02 window ends at 14:03 exactly and stays), and every dead letter (all
    /// detected before the job's clock).
    Expire,
}

impl Job {
    /// Runs the job over the table at `dir` through `store`; returns how many windows it
    /// changed.
    async fn run(
        self,
        dir: &std::path::Path,
        store: std::sync::Arc<dyn object_store::ObjectStore>,
        retry: sluice_publish::RetryPolicy,
        attempt: &str,
    ) -> Result<usize, String> {
        let options = TableOptions {
            store: Some(store),
            retry,
            ..TableOptions::new(dir.to_str().unwrap())
        };
        let at_ms = 1_900_000_000_000;
        match self {
            Job::Compact => {
                sluice_publish::compact(&options, &CompactRule::default(), attempt, at_ms)
                    .await
                    .map(|r| r.compacted.len())
                    .map_err(|e| e.to_string())
            }
            Job::Expire => {
                let rule = sluice_publish::ExpireRule {
                    ended_before: sluice_window::TimeFormat::Rfc3339
                        .parse_str("2026-10-03T14:03:00Z")
                        .unwrap(),
                    // The script's tables record no options: the size is given.
                    window: Some(crate::harness::window_size()),
                    dry_run: false,
                };
                let windows = sluice_publish::expire(&options, &rule, at_ms)
                    .await
                    .map(|r| r.expired.len())
                    .map_err(|e| e.to_string())?;
                let dlq_options = TableOptions {
                    location: dlq_location(dir),
                    ..options
                };
                let mut dlq = sluice_publish::DeadLetterTable::open(&dlq_options)
                    .await
                    .map_err(|e| e.to_string())?;
                let rule = sluice_publish::DeadLetterExpiryRule {
                    detected_before_ms: at_ms,
                    pipeline: None,
                    meant_for: sluice_publish::MeantFor::Any,
                    dry_run: false,
                };
                let letters = dlq.expire(&rule, at_ms).await.map_err(|e| e.to_string())?;
                Ok(windows + letters.files)
            }
        }
    }

    /// Whether the dead letters stay.
    fn keeps_dead_letters(self) -> bool {
        self == Job::Compact
    }

    /// Whether a row of window `w` (its address) stays in the table.
    fn keeps(self, w: &str) -> bool {
        self == Job::Compact || w >= "window_start=20261003T1402Z"
    }
}

/// Crash-point enumeration of a maintenance job (`sluice compact`, `sluice expire`): the
/// script's clean stream run leaves windows of several files (flushed parts, late rows); the
/// job over that table is crashed after every object-store operation N, then run again. The
/// rows must equal the crash-free job's, every version must show whole windows, every window
/// must end in as many files as the crash-free job left, gc must remove only orphans, and a
/// stream run over the same input afterwards must recognise every event (a compaction keeps
/// the coverage) and change nothing.
async fn enumerate_maintenance(keyed: bool, policy: Policy, job: Job) {
    let mode = format!(
        "{job:?} of a table {}, {}",
        if keyed {
            "keyed by event_id"
        } else {
            "keyed by position"
        },
        if policy == Policy::Upsert {
            "merge mode (upsert)".to_string()
        } else {
            format!("late policy {}", policy.late().name())
        }
    );
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let run = Run {
        policy,
        ..Run::new(keyed)
    };
    let streamed = tmp.path().join("streamed");
    run.run(&script.dir, &streamed, local_root(), "s")
        .await
        .expect("the stream run succeeds");
    let (rows, _) = rows_at(&streamed, None).await;
    assert_eq!(rows, script.expected_final(keyed, policy));
    let oracle: Vec<_> = rows.into_iter().filter(|r| job.keeps(&r.0)).collect();
    let dead_streamed = dead_letters(&streamed).await;
    assert!(!dead_streamed.is_empty(), "the script has dead letters");
    let dead_oracle = if job.keeps_dead_letters() {
        dead_streamed
    } else {
        Vec::new()
    };

    // The crash-free job.
    let oracle_dir = tmp.path().join("oracle");
    copy_table(&streamed, &oracle_dir);
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    let changed = job
        .run(
            &oracle_dir,
            std::sync::Arc::new(counting.clone()),
            run.retry,
            "oracle",
        )
        .await
        .expect("the crash-free job succeeds");
    let k = counting.ops();
    assert!(changed > 0, "the job changes windows of the script");
    let (rows, _) = rows_at(&oracle_dir, None).await;
    assert_eq!(rows, oracle, "the job leaves the rows it should");
    assert_eq!(dead_letters(&oracle_dir).await, dead_oracle);
    check_every_version(&oracle_dir, &script, keyed, policy)
        .await
        .expect("every version after the job is whole");
    let files_oracle = files_per_window(&oracle_dir).await;
    let again = job.run(&oracle_dir, local_root(), run.retry, "again").await;
    assert_eq!(again, Ok(0), "twice changes nothing");

    let mut passed = 0u64;
    let mut orphans = 0usize;
    let mut failures = Vec::new();
    for n in 1..=k {
        let dir = tmp.path().join(format!("crash-{n}"));
        copy_table(&streamed, &dir);
        let crashing = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: n });
        let first = job
            .run(&dir, std::sync::Arc::new(crashing.clone()), run.retry, "a")
            .await;
        let outcome = async {
            job.run(&dir, local_root(), run.retry, "b")
                .await
                .map_err(|e| format!("the second {job:?} failed: {e}"))?;
            let (rows, _) = rows_at(&dir, None).await;
            if rows != oracle {
                return Err(format!(
                    "final rows differ from the crash-free job's ({} vs {} rows)\n  got    {rows:?}\n  oracle {oracle:?}",
                    rows.len(),
                    oracle.len()
                ));
            }
            let dead = dead_letters(&dir).await;
            if dead != dead_oracle {
                return Err(format!(
                    "dead letters differ from the crash-free job's\n  got    {dead:?}\n  oracle {dead_oracle:?}"
                ));
            }
            let files = files_per_window(&dir).await;
            if files != files_oracle {
                return Err(format!(
                    "files per window differ from the crash-free job's\n  got    {files:?}\n  oracle {files_oracle:?}"
                ));
            }
            check_every_version(&dir, &script, keyed, policy).await?;
            orphans += collect_orphans(&dir).await?;
            if rows_at(&dir, None).await.0 != oracle {
                return Err("gc changed the table's rows".to_string());
            }
            let stream = run
                .run(&script.dir, &dir, local_root(), "c")
                .await
                .map_err(|e| format!("the stream run after the job failed: {e}"))?;
            if rows_at(&dir, None).await.0 != oracle || stream.windows_published != 0 {
                return Err(format!(
                    "the stream run after the job changed the table: {stream:?}"
                ));
            }
            // Expired dead letters stay expired: the dead-letter offsets outlive them.
            if dead_letters(&dir).await != dead_oracle || stream.dead_letter_commits != 0 {
                return Err(format!(
                    "the stream run after the job changed the dead letters: {stream:?}"
                ));
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => passed += 1,
            Err(e) => failures.push(failure(n, &mode, &first, &crashing, &e)),
        }
        std::fs::remove_dir_all(&dir).ok();
        std::fs::remove_dir_all(dlq_location(&dir)).ok();
    }
    conclude(&mode, k, passed, orphans, &failures, started);
}

/// Options that reach the table at `dir` through the local store, as the restarted run does.
fn local_options(run: &Run, dir: &std::path::Path) -> TableOptions {
    TableOptions {
        store: Some(local_root()),
        retry: run.retry,
        ..TableOptions::new(dir.to_str().expect("utf-8 path"))
    }
}

/// A copy of the table at `from` and of its dead-letter table.
fn copy_table(from: &std::path::Path, to: &std::path::Path) {
    copy_dir(from, to);
    copy_dir(
        std::path::Path::new(&dlq_location(from)),
        std::path::Path::new(&dlq_location(to)),
    );
}

/// The number of files at each address of the table at `dir`.
async fn files_per_window(dir: &std::path::Path) -> std::collections::BTreeMap<String, usize> {
    let table = sluice_publish::open_table(dir.to_str().unwrap(), &Default::default(), None)
        .await
        .expect("open");
    let mut out = std::collections::BTreeMap::new();
    for f in sluice_publish::active_files(&table).await.expect("files") {
        *out.entry(format!("{:?}", f.partition_values)).or_insert(0) += 1;
    }
    out
}

/// A copy of the directory tree at `from` (a table and its dead-letter table beside it).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
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

/// How the derived tables at `dir` differ from the oracle's, if they do.
async fn derived_differs(dir: &std::path::Path, oracle: &[Vec<String>]) -> Option<String> {
    for ((name, _, _), expected) in DERIVED.iter().zip(oracle) {
        let got = derived_rows(dir, name).await;
        if &got != expected {
            return Some(format!(
                "derived table {name} differs from the oracle's\n  got      {got:?}\n  expected {expected:?}"
            ));
        }
    }
    None
}

/// Runs gc with no age threshold; returns how many files it removed.
async fn collect_orphans(dir: &std::path::Path) -> Result<usize, String> {
    let table = sluice_publish::open_table(dir.to_str().unwrap(), &Default::default(), None)
        .await
        .map_err(|e| e.to_string())?;
    let found = sluice_publish::find_orphans(&table, 0, i64::MAX)
        .await
        .map_err(|e| format!("gc: {e}"))?;
    sluice_publish::delete_orphans(&table, &found)
        .await
        .map_err(|e| format!("gc: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_keyed_by_position() {
    enumerate(false, Policy::Rewrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_late_dropped_to_the_dead_letter_table() {
    enumerate(false, Policy::Drop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_late_merged_by_key() {
    enumerate(true, Policy::Merge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_keyed_by_event_id_with_derived_tables() {
    enumerate_with(true, Policy::Rewrite, true, false, None, None, false).await;
}

/// The notification bookkeeping inside the enumeration: the target's mark carried by every
/// writer commit, its delivery after the run and the commit that records it, each crashed
/// after every store operation. The receiver must end up with exactly the changes the log
/// implies (each at least once, the same body every time), the record must cover them, and
/// a drain afterwards must deliver and commit nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_telling_a_notify_target() {
    enumerate_with(true, Policy::Rewrite, false, false, None, None, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_while_the_schema_grows() {
    enumerate_with(true, Policy::Rewrite, false, true, None, None, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_while_the_schema_grows_in_merge_mode() {
    enumerate_with(true, Policy::Upsert, false, true, None, None, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_upserted_in_merge_mode() {
    enumerate(true, Policy::Upsert).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_backfill_ends_as_the_clean_run() {
    enumerate_backfill(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_compaction_ends_as_the_clean_run() {
    enumerate_maintenance(false, Policy::Rewrite, Job::Compact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_compaction_in_merge_mode_ends_as_the_clean_run() {
    enumerate_maintenance(true, Policy::Upsert, Job::Compact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_ends_as_the_clean_run_compacting_and_expiring_windows_in_the_run() {
    // Keyed by position, late rows are appended to their windows (files of their own), so
    // the run compacts those windows; a retention of 3 minutes removes the first four.
    enumerate_with(
        false,
        Policy::Rewrite,
        false,
        false,
        Some(1),
        Some(180_000),
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_an_expiry_ends_as_the_clean_run() {
    enumerate_maintenance(false, Policy::Rewrite, Job::Expire).await;
}
