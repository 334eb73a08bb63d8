//! Table maintenance with the real binary: `sluice vacuum` deletes exactly the files that
//! republications removed longer ago than the retention, and the table's rows stay the same.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::{commits, ok, python, run_args, sluice, sorted_rows, stream_slices};

/// Every data file a `remove` action of the log names, relative to the table root.
fn removed_files(table: &Path) -> BTreeSet<String> {
    commits(table)
        .values()
        .flatten()
        .filter_map(|a| a.get("remove")?.get("path")?.as_str().map(str::to_string))
        .collect()
}

/// The `would remove`/`removed` lines of a vacuum's output.
fn listed(out: &str, prefix: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix).map(str::to_string))
        .collect()
}

#[test]
fn vacuum_deletes_only_files_removed_longer_ago_than_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    // Two slices of one stream: the second has late events for windows the first published,
    // which are republished by swap (their old files removed from the table).
    for (i, (name, bytes)) in stream_slices(4_000, 6, 11, 2, 0).into_iter().enumerate() {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let source = format!("ndjson:{}", file.display());
        // A checkpoint every 2 versions: vacuum and the readers below go through one.
        ok(&run_args(
            &source,
            t,
            &["--key", "event_id", "--checkpoint-interval", "2"],
        ));
        if i == 0 {
            assert!(removed_files(&table).is_empty());
        }
    }
    let removed = removed_files(&table);
    assert!(!removed.is_empty(), "the second slice republished windows");
    let rows = sorted_rows(&table);

    // The table's retention (7 days): nothing was removed that long ago.
    let out = ok(&["vacuum", "--table", t]);
    assert!(listed(&out, "would remove ").is_empty(), "{out}");
    assert!(out.contains("0 files"), "{out}");

    // A shorter retention than the table's is refused unless forced.
    let refused = sluice(&["vacuum", "--table", t, "--retention", "0s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--force-retention"), "{stderr}");

    // A dry run lists exactly the removed files and deletes nothing.
    let forced = [
        "vacuum",
        "--table",
        t,
        "--retention",
        "0s",
        "--force-retention",
    ];
    let out = ok(&forced);
    assert_eq!(listed(&out, "would remove "), removed, "{out}");
    for f in &removed {
        assert!(table.join(f).exists(), "a dry run deleted {f}");
    }

    // --apply deletes them, and only them: the table reads the same rows.
    let applied: Vec<&str> = forced.iter().copied().chain(["--apply"]).collect();
    let out = ok(&applied);
    assert_eq!(listed(&out, "removed "), removed, "{out}");
    for f in &removed {
        assert!(!table.join(f).exists(), "{f} is still there");
    }
    assert_eq!(sorted_rows(&table), rows);
    // Twice changes nothing.
    let out = ok(&applied);
    assert!(listed(&out, "removed ").is_empty(), "{out}");
    assert_eq!(sorted_rows(&table), rows);
    assert!(
        std::fs::read_dir(table.join("_delta_log"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains(".checkpoint.")),
        "the table has a checkpoint"
    );
    // Independent readers after checkpoint and vacuum: Python delta-rs and Polars read the
    // same rows (count and distinct event ids).
    let read = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, polars as pl\n\
             from deltalake import DeltaTable\n\
             t = DeltaTable(sys.argv[1]).to_pyarrow_table()\n\
             p = pl.read_delta(sys.argv[1])\n\
             print(t.num_rows, len(set(t.column('event_id').to_pylist())), p.height, p['event_id'].n_unique())",
            t,
        ])
        .output()
        .expect("python runs");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let distinct = crate::common::scalar(&table, "SELECT count(DISTINCT event_id) FROM t");
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        format!("{n} {distinct} {n} {distinct}", n = rows.len())
    );
}
