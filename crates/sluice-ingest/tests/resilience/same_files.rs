//! A backfill and a stream route rows the same way: over the same input, a backfill of the
//! script's day into an empty table writes, for every window, the same data files, byte for
//! byte, as a clean stream run (the same rows in the same order, the same row keys and
//! positions, the same encoding). Only the files' names, which carry the attempt, differ.
//!
//! The exception is a window the stream published more than once: its late rows went into a
//! file of their own beside the first publication's files, where a backfill, which sees the
//! whole input first, writes one file. Those windows hold the same rows (checked).
//!
//! And the buffer's budget: under a `flush_bytes_max` too small for the windows, both stage
//! a window in parts (per key bucket), but at different points: the stream holds only the
//! windows not yet sealed, a backfill every window of its range until the end of its input,
//! so the largest buffer, the one staged, is not the same one. The rows are the same.

use crate::harness::{local_root, rows_at, window_files, Run, Script};

async fn same_files(keyed: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    // Every window fits the buffer (see the module's documentation).
    let run = Run {
        flush_bytes_max: 1 << 20,
        ..Run::new(keyed)
    };
    let streamed = tmp.path().join("streamed");
    run.run(&script.dir, &streamed, local_root(), "s")
        .await
        .unwrap();
    let backfilled = tmp.path().join("backfilled");
    run.backfill(&script.dir, &backfilled, local_root(), "b")
        .await
        .unwrap();
    assert_eq!(
        rows_at(&streamed, None).await.0,
        rows_at(&backfilled, None).await.0
    );
    let (streamed, backfilled) = (
        window_files(&streamed).await,
        window_files(&backfilled).await,
    );
    assert_eq!(
        streamed.keys().collect::<Vec<_>>(),
        backfilled.keys().collect::<Vec<_>>()
    );
    let sizes = |f: &[Vec<u8>]| f.iter().map(Vec::len).collect::<Vec<_>>();
    let mut compared = 0;
    for (window, files) in &streamed {
        if files.len() > 1 {
            // Published again with late rows.
            continue;
        }
        assert!(
            *files == backfilled[window],
            "window {window}: streamed files of {:?} bytes, backfilled {:?}",
            sizes(files),
            sizes(&backfilled[window])
        );
        compared += 1;
    }
    println!(
        "same files: {compared} of {} windows byte for byte (the others had late rows)",
        streamed.len()
    );
    assert!(compared >= 6, "windows published once: {compared}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_writes_the_streams_files_byte_for_byte_keyed_by_position() {
    same_files(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_writes_the_streams_files_byte_for_byte_keyed_by_event_id() {
    same_files(true).await;
}
