//! `sluice dead-letters` (issue 42): list a pipeline's dead letters by reason and position,
//! and replay them once their cause is fixed: exactly once (a replay twice, or after a crash
//! between the table's commit and the dead-letter table's, lands one row), recorded in the
//! dead-letter table, and kept by the stream's later rewrites of the window.

use std::io::Write;
use std::path::Path;

use crate::common::{copy_dir, ok, scalar, sluice, version};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// 10 readings an hour apart; two of them (offsets of lines 4 and 8) written day-first.
fn readings(file: &Path) {
    let mut text = String::new();
    for i in 0..10 {
        if i == 3 || i == 7 {
            text += &format!("{{\"id\":{i},\"ts\":\"03/10/2026 {:02}:30\"}}\n", 10 + i);
        } else {
            text += &format!(
                "{{\"id\":{i},\"ts\":\"2026-10-03T{:02}:30:00Z\"}}\n",
                10 + i
            );
        }
    }
    std::fs::write(file, text).unwrap();
}

#[test]
fn dead_letters_are_listed_and_replayed_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readings.ndjson");
    readings(&file);
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{}", file.display());
    let out = ok(&["run", "--source", &src, "--table", t]);
    assert!(out.contains("8 records"), "{out}");
    assert!(out.contains("2 rejected"), "{out}");
    let listed = ok(&["dead-letters", "--table", t]);
    assert!(listed.contains("2 dead letters in"), "{listed}");
    assert!(listed.contains("bad_time"), "{listed}");
    assert!(listed.contains("(0 replayed)"), "{listed}");
    assert!(listed.contains("readings.ndjson:111  bad_time"), "{listed}");
    // The time format is part of the table's contract; the replay reads with another.
    let dlq = dir.path().join("t_dlq");
    let before_replay = dir.path().join("dlq_before");
    copy_dir(&dlq, &before_replay);
    let replay = |dlq: &Path| {
        ok(&[
            "dead-letters",
            "--table",
            t,
            "--dlq",
            dlq.to_str().unwrap(),
            "--replay",
            "--time-format",
            "%d/%m/%Y %H:%M",
        ])
    };
    let first = replay(&dlq);
    assert!(
        first.contains(
            "2 dead letters replayed: 2 landed (2 rows changed in 2 windows), 0 still failing"
        ),
        "{first}"
    );
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "10");
    assert_eq!(scalar(&table, "SELECT count(DISTINCT id) FROM t"), "10");
    let v = version(&table);
    // Again: nothing is pending.
    let second = replay(&dlq);
    assert!(
        second.contains("0 dead letters replayed: 0 landed"),
        "{second}"
    );
    // As after a crash before the dead-letter table recorded the replay: the rows are in the
    // table already, so nothing is committed to it.
    let again = replay(&before_replay);
    assert!(
        again.contains("2 dead letters replayed: 2 landed (0 rows changed in 0 windows)"),
        "{again}"
    );
    assert_eq!(version(&table), v);
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "10");
    let listed = ok(&["dead-letters", "--table", t]);
    assert!(listed.contains("(2 replayed)"), "{listed}");
    assert!(listed.contains("[replayed]"), "{listed}");
    // A late reading for a replayed row's hour: the stream rewrites the window and keeps it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{{\"id\":10,\"ts\":\"2026-10-03T13:45:00Z\"}}").unwrap();
    drop(f);
    ok(&["run", "--source", &src, "--table", t]);
    assert_eq!(
        scalar(&table, "SELECT count(*) FROM t WHERE hour = '13'"),
        "2"
    );
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "11");
}

#[test]
fn a_replay_that_still_fails_lands_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readings.ndjson");
    readings(&file);
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    ok(&[
        "run",
        "--source",
        &format!("ndjson:{}", file.display()),
        "--table",
        t,
    ]);
    let v = version(&table);
    let out = sluice(&[
        "dead-letters",
        "--table",
        t,
        "--replay",
        "--time-format",
        "%Y",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("0 landed"), "{stdout}");
    assert!(stdout.contains("2 still failing"), "{stdout}");
    assert!(stderr(&out).contains("bad_time"), "{}", stderr(&out));
    assert_eq!(version(&table), v);
    let out = sluice(&["dead-letters", "--table", t, "--time-format", "%Y"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A CSV record that is not the header's fields (`wrong_field_count`) is kept as its text: a
/// replay says it is not replayable and why, not that its text is no JSON object; the CSV
/// record with a time the corrected format reads lands.
#[test]
fn a_csv_record_of_the_wrong_field_count_is_not_replayable_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(
        input.join("a.csv"),
        "id,ts,amount\n1,2026-10-03 14:00,2.5\n2,2026-10-03T14:05:00Z\n3,2026/10/03 14:06,1\n",
    )
    .unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let src = format!("csv:{}", input.display());
    let out = sluice(&["run", "--source", &src, "--table", t, "--window", "1h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sluice(&[
        "dead-letters",
        "--table",
        t,
        "--replay",
        "--time-format",
        "%Y/%m/%d %H:%M",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 landed"), "{stdout}");
    assert!(stdout.contains("1 still failing"), "{stdout}");
    let err = stderr(&out);
    assert!(
        err.contains("a.csv:36 not_replayable: wrong_field_count: a CSV record that is not the header's fields is kept as its text"),
        "{err}"
    );
    assert!(!err.contains("not_one_object"), "{err}");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "2");
}
