//! The default of every run setting that has one, defined once. The binary resolves its
//! options with these (a flag, else the config file, else this), and its `--help` shows them:
//! a test of the binary checks each `[default: …]` of the help against this table. Values are
//! written as a user would write the flag, and parsed by the same parsers.

use sluice_window::SkewGuard;

/// `--pipeline`: the name a table's offsets and files are kept under.
pub const PIPELINE: &str = "sluice";
/// `--time-field`.
pub const TIME_FIELD: &str = "ts";
/// `--time-format`.
pub const TIME_FORMAT: &str = "rfc3339";
/// `--time-zone`: for times without an offset.
pub const TIME_ZONE: &str = "UTC";
/// `--max-time-ahead`: an event this far ahead of the stream does not move the watermark.
pub const MAX_TIME_AHEAD: &str = "1d";
/// `--time-jump-events`: ahead events in a row after which the stream is taken to have jumped.
pub const TIME_JUMP_EVENTS: u32 = SkewGuard::DEFAULT.jump_events;
/// `--columns-max`.
pub const COLUMNS_MAX: usize = sluice_source::COLUMNS_MAX_DEFAULT;
/// `--window`.
pub const WINDOW: &str = "1h";
/// `--lateness`.
pub const LATENESS: &str = "10m";
/// `--mode`.
pub const MODE: &str = "swap";
/// `--merge-scope` (with `--mode merge`).
pub const MERGE_SCOPE: &str = "window";
/// `--infer-lines`.
pub const INFER_LINES: usize = 1000;
/// `--late`.
pub const LATE: &str = "rewrite";
/// `--late-batch`: late rows of a window wait this long to be published together.
pub const LATE_BATCH: &str = "1m";
/// `--poll-interval` (with `--follow`).
pub const POLL_INTERVAL: &str = "1s";
/// `--flush-bytes-max`: the memory budget of open windows (bench/RESULTS.md measures it).
pub const FLUSH_BYTES_MAX: &str = "16MiB";
/// `--chunk-bytes`.
pub const CHUNK_BYTES: &str = "4MiB";
/// `--decode-threads`: threads decoding a file source. One: on two cores the reader's decode
/// and the stager's encode already keep both busy, and a second decode thread only competes
/// with the encode (bench/RESULTS.md, (t) against (c)).
pub const DECODE_THREADS: usize = 1;
/// `--compression`.
pub const COMPRESSION: &str = "snappy";
/// `--checkpoint-interval`.
pub const CHECKPOINT_INTERVAL: u64 = sluice_publish::CHECKPOINT_INTERVAL_DEFAULT;
/// `--store-attempts-max`.
pub const STORE_ATTEMPTS_MAX: u32 = 6;
/// `--restarts-max`.
pub const RESTARTS_MAX: u32 = 5;
/// `--group-windows-max`: the most windows one commit publishes.
pub const GROUP_WINDOWS_MAX: usize = 256;
/// `--start` (Kafka): where a partition the table has no position for starts.
pub const START: &str = "earliest";
/// `--pipelines` (for a new table).
pub const PIPELINES: &str = "one";
/// `--max-reject-ratio`: above this share of rejected records a run warns.
pub const MAX_REJECT_RATIO: &str = "10%";
/// `--notify-drain`: how long a run that ends goes on delivering its notifications.
pub const NOTIFY_DRAIN: &str = "30s";
