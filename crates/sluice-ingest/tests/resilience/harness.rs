//! A scripted pipeline over a real Delta table on disk, with its object store taken through
//! the library's one seam (`TableOptions::store`), and the checks every resilience test shares.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use sluice_ingest::{
    BackfillSummary, DeriveSpec, Deriver, FixedClock, Follow, IngestConfig, Ingester, KeySpec,
    LatePolicy, NdjsonBackfill, PublishMode, RawShape, RunSummary,
};
use sluice_publish::{
    active_files, open_table, DeadLetterTable, MergeScope, RetryPolicy, TableOptions, WindowTable,
};
use sluice_source::{LineDecoder, NdjsonSource};
use sluice_sql::{DerivedQuery, TableRef};
use sluice_stage::{read_parquet, StageOptions};
use sluice_window::{AddressLayout, EventTime, TimeFormat, Window, WindowSize};

pub const PIPELINE: &str = "crash";
/// 2099-10-03T14:00:30Z: the growing script's clock-skewed event.
const FUTURE_S: i64 = 4_094_719_230;
const T0_S: i64 = 1_791_036_000; // 2026-10-03T14:00:00Z
const LATENESS_MS: i64 = 20_000;

/// One good input line of the script.
#[derive(Debug, Clone)]
pub struct Line {
    pub offset: i64,
    pub event_id: String,
    pub t_s: i64,
    /// The watermark just before it had passed its window's end.
    pub late: bool,
}

/// The scripted input: 8 one-minute windows, events out of order within the lateness,
/// duplicate deliveries (some within their window, one after its window was published), one
/// late event and two bad lines.
pub struct Script {
    pub dir: PathBuf,
    pub lines: Vec<Line>,
    /// `(offset, reason)` of each bad line.
    pub bad: Vec<(i64, &'static str)>,
}

/// In a growing script, the line from which records carry `coupon` and `ctx.b`.
pub const GROWS_FROM: usize = 30;

/// The late policy a test runs with, and what it means for the expected rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Rewrite,
    Drop,
    Merge,
    /// `--mode merge` (upsert on event_id, window scope); late rows take the same path.
    Upsert,
}

impl Policy {
    pub fn late(self) -> LatePolicy {
        match self {
            Policy::Rewrite | Policy::Upsert => LatePolicy::Rewrite,
            Policy::Drop => LatePolicy::Drop,
            Policy::Merge => LatePolicy::Merge,
        }
    }

    pub fn mode(self) -> PublishMode {
        match self {
            Policy::Upsert => PublishMode::Merge(MergeScope::Window),
            _ => PublishMode::Swap,
        }
    }

    /// The policy whose final rows this one must equal: an upsert keeps each key's winner,
    /// as a rewrite does.
    fn rows_like(self) -> Policy {
        match self {
            Policy::Upsert => Policy::Rewrite,
            other => other,
        }
    }
}

impl Script {
    pub fn write(dir: &Path) -> Script {
        Self::write_with(dir, false)
    }

    /// The script whose records gain two fields mid-stream: from line [`GROWS_FROM`] on,
    /// `coupon` (a new column) and `ctx.b` (a new member of the struct `ctx`).
    pub fn write_growing(dir: &Path) -> Script {
        Self::write_with(dir, true)
    }

    fn write_with(dir: &Path, grows: bool) -> Script {
        let mut events: Vec<(String, i64)> = Vec::new();
        for w in 0..8i64 {
            let mut window: Vec<(String, i64)> = (0..6i64)
                .map(|j| (format!("e{w}-{j}"), T0_S + w * 60 + 3 + j * 9))
                .collect();
            // Out of order: swap neighbours (at most 9 s apart, within the 20 s lateness).
            window.swap(1, 2);
            window.swap(4, 5);
            events.extend(window.iter().cloned());
            if w % 2 == 1 {
                // At-least-once: a re-delivery shortly after the original.
                events.push(window[3].clone());
            }
            if w == 6 {
                // Crosses into the next window before this one's stragglers.
                let last = events.pop().expect("an event");
                events.push((format!("e{w}-x"), T0_S + w * 60 + 58));
                events.push(last);
            }
        }
        // A late event for window 2 and a late re-delivery of a window-4 event.
        events.push(("e2-late".into(), T0_S + 2 * 60 + 30));
        events.push(("e4-1".into(), T0_S + 4 * 60 + 12));
        let mut text = String::new();
        let mut lines: Vec<Line> = Vec::new();
        let mut bad = Vec::new();
        let mut max_t: Option<i64> = None;
        for (i, (id, t)) in events.iter().enumerate() {
            if i == 20 {
                bad.push((text.len() as i64, "malformed_json"));
                text.push_str("{\"event_id\": \"torn\", \"ts\": \n");
            }
            if i == 40 {
                bad.push((text.len() as i64, "bad_time"));
                text.push_str("{\"event_id\":\"when\",\"ts\":\"yesterday\",\"v\":0}\n");
            }
            if grows && i == 25 {
                // A record without its key (the growing script runs keyed by event_id).
                bad.push((text.len() as i64, "missing_key"));
                text.push_str("{\"ts\":\"2026-10-03T14:03:00Z\",\"v\":0}\n");
            }
            if grows && i == 35 {
                // A device whose clock says 2099: a row in a window of its own, published on
                // its own, while the watermark stays with the stream.
                lines.push(Line {
                    offset: text.len() as i64,
                    event_id: "future".into(),
                    t_s: FUTURE_S,
                    late: false,
                });
                text.push_str(
                    "{\"event_id\":\"future\",\"ts\":\"2099-10-03T14:00:30Z\",\"v\":0}\n",
                );
            }
            let ts = chrono_like_rfc3339(*t);
            let window_end = *t - (*t).rem_euclid(60) + 60;
            lines.push(Line {
                offset: text.len() as i64,
                event_id: id.clone(),
                t_s: *t,
                late: max_t.is_some_and(|m| m - LATENESS_MS / 1000 >= window_end),
            });
            max_t = Some(max_t.map_or(*t, |m| m.max(*t)));
            if !grows {
                text.push_str(&format!(
                    "{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"v\":{i}}}\n"
                ));
            } else if i < GROWS_FROM {
                text.push_str(&format!(
                    "{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"v\":{i},\"ctx\":{{\"a\":{i}}}}}\n"
                ));
            } else {
                text.push_str(&format!(
                    "{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"v\":{i},\"ctx\":{{\"a\":{i},\"b\":\"b{i}\"}},\"coupon\":\"c{i}\"}}\n"
                ));
            }
        }
        assert_eq!(
            lines.iter().filter(|l| l.late).count(),
            2,
            "the script has two late lines"
        );
        let dir = dir.join("input");
        std::fs::create_dir_all(&dir).expect("input dir");
        std::fs::write(dir.join("events-0001.ndjson"), text).expect("input file");
        Script { dir, lines, bad }
    }

    /// `(source, offset, reason)` of every dead letter one clean run leaves, sorted.
    pub fn expected_dead_letters(&self, policy: Policy) -> Vec<(String, i64, String)> {
        let policy = policy.rows_like();
        let mut dead: Vec<(String, i64, String)> = self
            .bad
            .iter()
            .map(|(o, r)| ("events-0001.ndjson".to_string(), *o, r.to_string()))
            .collect();
        if policy == Policy::Drop {
            dead.extend(self.lines.iter().filter(|l| l.late).map(|l| {
                (
                    "events-0001.ndjson".to_string(),
                    l.offset,
                    "late".to_string(),
                )
            }));
        }
        dead.sort();
        dead
    }

    pub fn window_of(&self, line: &Line) -> String {
        let w = Window::containing(window_size(), EventTime::from_micros(line.t_s * 1_000_000));
        layout().address(w).hive_path()
    }

    /// The rows a window holds when its publications covered every line below `coverage`:
    /// `(window, event_id, offset)`, sorted. Keyed by position: every line; keyed by
    /// `event_id`: the winner of each key (latest event time, then highest offset). Under
    /// the drop policy late lines are not rows; under merge a late line is a row only if its
    /// key is absent.
    pub fn expected(
        &self,
        window: &str,
        coverage: i64,
        keyed: bool,
        policy: Policy,
    ) -> Vec<(String, String, i64)> {
        let policy = policy.rows_like();
        let mut rows: Vec<(String, String, i64)> = Vec::new();
        let mut winners: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        let in_window: Vec<&Line> = self
            .lines
            .iter()
            .filter(|l| l.offset < coverage && self.window_of(l) == window)
            .collect();
        for l in &in_window {
            if l.late && policy == Policy::Drop {
                continue;
            }
            if l.late && policy == Policy::Merge && keyed {
                continue; // below
            }
            if keyed {
                let entry = winners.entry(&l.event_id).or_insert((l.t_s, l.offset));
                if (l.t_s, l.offset) > *entry {
                    *entry = (l.t_s, l.offset);
                }
            } else {
                rows.push((window.to_string(), l.event_id.clone(), l.offset));
            }
        }
        if keyed && policy == Policy::Merge {
            // Late lines, in arrival order, insert their key only if it is absent.
            for l in in_window.iter().filter(|l| l.late) {
                if !winners.contains_key(l.event_id.as_str()) {
                    winners.insert(&l.event_id, (l.t_s, l.offset));
                }
            }
        }
        rows.extend(
            winners
                .into_iter()
                .map(|(id, (_, offset))| (window.to_string(), id.to_string(), offset)),
        );
        rows.sort();
        rows
    }

    /// Every row one clean run must produce.
    pub fn expected_final(&self, keyed: bool, policy: Policy) -> Vec<(String, String, i64)> {
        let windows: std::collections::BTreeSet<String> =
            self.lines.iter().map(|l| self.window_of(l)).collect();
        let mut rows: Vec<_> = windows
            .iter()
            .flat_map(|w| self.expected(w, i64::MAX, keyed, policy))
            .collect();
        rows.sort();
        rows
    }
}

fn chrono_like_rfc3339(t_s: i64) -> String {
    let day_s = t_s.rem_euclid(86_400);
    // The script stays within 2026-10-03.
    assert_eq!(
        t_s - day_s,
        T0_S - (T0_S.rem_euclid(86_400)),
        "script left its day"
    );
    format!(
        "2026-10-03T{:02}:{:02}:{:02}Z",
        day_s / 3600,
        day_s / 60 % 60,
        day_s % 60
    )
}

pub fn window_size() -> WindowSize {
    WindowSize::parse("1m").expect("1m")
}

pub fn layout() -> AddressLayout {
    AddressLayout::default_for(window_size())
}

/// A store rooted at `/` of the local file system, as the table URL expects.
pub fn local_root() -> Arc<dyn ObjectStore> {
    Arc::new(LocalFileSystem::new())
}

pub struct Run {
    pub keyed: bool,
    pub policy: Policy,
    pub chunk_bytes: usize,
    pub flush_bytes_max: usize,
    pub checkpoint_interval: u64,
    pub restarts_max: u32,
    pub retry: RetryPolicy,
    /// Keep the two derived tables of [`derived_specs`].
    pub derived: bool,
    /// The table starts with the growing script's first schema (`ctx` with member `a`).
    pub grows: bool,
    /// Compact, in the run, each window it publishes that holds more files than this.
    pub compact_files_min: Option<usize>,
    /// Remove, in the run, windows that ended this long before the watermark.
    pub retain_ms: Option<i64>,
    /// Tell a notify target (see [`crate::notified`]) about every window change: registered
    /// before the writer's first commit, drained and recorded after the run.
    pub notify: bool,
    /// Follow the input (`sluice run --follow`) until it stayed idle for a moment (sealing
    /// every window once idle), instead of reading it to its end once.
    pub follow: bool,
}

/// Derived tables of the script: one row per window, published by swap, at `<table>_sum`.
/// (A MERGE-published derived table ran through this enumeration too, 384 of 384 points,
/// but deltalake's MERGE makes it ~7 minutes; the SIGKILL test of `tests/derive.rs` keeps
/// one in CI.)
pub const DERIVED: [(&str, &str, &[&str]); 1] = [(
    "sum",
    "SELECT count(*) AS n, sum(v) AS total, min(event_id) AS first_id FROM window",
    &[],
)];

pub fn derived_location(table_dir: &Path, name: &str) -> String {
    format!("{}_{name}", table_dir.display())
}

fn derived_specs(table_dir: &Path, options: &TableOptions) -> Vec<DeriveSpec> {
    DERIVED
        .iter()
        .map(|(name, sql, key)| DeriveSpec {
            query: DerivedQuery {
                name: name.to_string(),
                sql: sql.to_string(),
                key: key.iter().map(|k| k.to_string()).collect(),
            },
            options: TableOptions {
                location: derived_location(table_dir, name),
                ..options.clone()
            },
        })
        .collect()
}

/// Every row of derived table `name`, as text, sorted.
pub async fn derived_rows(table_dir: &Path, name: &str) -> Vec<String> {
    sql_lines(
        &[(name, derived_location(table_dir, name))],
        &format!("SELECT * FROM {name}"),
    )
    .await
}

/// The derived table's query run over the whole raw table, grouped by window, in the derived
/// table's column order: what every derived window must equal.
pub async fn derived_from_raw(table_dir: &Path, name: &str) -> Vec<String> {
    let sql = match name {
        "sum" => "SELECT count(*) AS n, sum(v) AS total, min(event_id) AS first_id, window_start FROM raw GROUP BY window_start",
        other => panic!("no derived table {other}"),
    };
    sql_lines(&[("raw", table_dir.display().to_string())], sql).await
}

pub async fn sql_lines(tables: &[(&str, String)], sql: &str) -> Vec<String> {
    let refs: Vec<TableRef> = tables
        .iter()
        .map(|(name, location)| TableRef {
            name: name.to_string(),
            location: location.clone(),
            version: None,
        })
        .collect();
    let ctx = sluice_sql::session(&refs, &HashMap::new())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = sluice_sql::query(&ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let text = sluice_sql::format(&batches, sluice_sql::Format::Csv).expect("csv");
    let mut lines: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    lines.sort();
    lines
}

impl Run {
    pub fn new(keyed: bool) -> Run {
        Run {
            keyed,
            policy: Policy::Rewrite,
            chunk_bytes: 700,
            flush_bytes_max: 2_000,
            checkpoint_interval: 4,
            restarts_max: 3,
            // No waiting in tests: faults are injected, not waited out.
            retry: RetryPolicy {
                attempts_max: 1,
                backoff_ms_base: 0,
                backoff_ms_max: 0,
                jitter_seed: 1,
            },
            derived: false,
            grows: false,
            compact_files_min: None,
            retain_ms: None,
            notify: false,
            follow: false,
        }
    }

    pub fn config(&self) -> IngestConfig {
        IngestConfig {
            expectations: Default::default(),
            pipeline: PIPELINE.into(),
            window: window_size(),
            layout: layout(),
            lateness_ms: LATENESS_MS,
            key: self.keyed.then(|| KeySpec {
                columns: vec!["event_id".into()],
                time_field: "ts".into(),
                time: TimeFormat::Rfc3339.into(),
                sequence: Vec::new(),
            }),
            flush_bytes_max: self.flush_bytes_max,
            chunk_bytes: self.chunk_bytes,
            chunks_in_flight_max: 2,
            decode_threads: 2,
            group_windows_max: 256,
            late_batch_ms: 0,
            stage: StageOptions::default(),
            restart: sluice_ingest::RestartPolicy::immediate(self.restarts_max),
            compact: self
                .compact_files_min
                .map(|files_min| sluice_publish::CompactRule {
                    files_min,
                    ..Default::default()
                }),
            retain_ms: self.retain_ms,
            deletes: None,
            history: false,
            late: self.policy.late(),
            mode: self.policy.mode(),
            max_rewrite_age_ms: None,
            skew: sluice_window::SkewGuard::DEFAULT,
        }
    }

    /// Creates the data and dead-letter tables (as a first run would), without ingesting.
    pub async fn create_tables(&self, table_dir: &Path) {
        let options = TableOptions {
            checkpoint_interval: self.checkpoint_interval,
            ..TableOptions::new(table_dir.to_str().expect("utf-8 path"))
        };
        WindowTable::open_or_create(
            &options,
            Some(&record_schema(self.grows)),
            layout(),
            window_size(),
        )
        .await
        .expect("create the table");
        DeadLetterTable::open_or_create(&TableOptions {
            location: dlq_location(table_dir),
            ..options
        })
        .await
        .expect("create the dead-letter table");
    }

    /// One pipeline process: open the table through `store`, recover, read to the end.
    pub async fn run(
        &self,
        input: &Path,
        table_dir: &Path,
        store: Arc<dyn ObjectStore>,
        attempt: &str,
    ) -> Result<RunSummary, String> {
        let record_schema = record_schema(self.grows);
        let options = TableOptions {
            checkpoint_interval: self.checkpoint_interval,
            store: Some(store),
            retry: self.retry,
            ..TableOptions::new(table_dir.to_str().expect("utf-8 path"))
        };

        let mut table =
            WindowTable::open_or_create(&options, Some(&record_schema), layout(), window_size())
                .await
                .map_err(|e| format!("open: {e}"))?;
        if self.notify {
            crate::notified::register(&options).await?;
        }
        let dlq = DeadLetterTable::open_or_create(&TableOptions {
            location: dlq_location(table_dir),
            notified: Default::default(),
            ..options.clone()
        })
        .await
        .map_err(|e| format!("open the dead-letter table: {e}"))?;
        let deriver = if self.derived {
            Some(
                Deriver::open(
                    derived_specs(table_dir, &options),
                    &mut table,
                    PIPELINE,
                    attempt,
                    StageOptions::default(),
                )
                .await
                .map_err(|e| format!("open the derived tables: {e}"))?,
            )
        } else {
            None
        };
        let source = if self.follow {
            NdjsonSource::open_following(input)
        } else {
            NdjsonSource::open(input)
        }
        .map_err(|e| e.to_string())?;
        let decoder = LineDecoder::new(
            table.record_schema(),
            sluice_source::DecodeOptions::new("ts", TimeFormat::Rfc3339),
        )
        .map_err(|e| e.to_string())?;
        // A followed run ends once idle for a while by its clock: that one moves.
        let clock = Ticking(FixedClock(1_800_000_000_000), std::time::Instant::now());
        let ingester = Ingester::recover(
            self.config(),
            source,
            decoder,
            table,
            dlq,
            attempt.into(),
            &clock,
        )
        .await
        .map_err(|e| format!("recover: {e}"))?;
        let ingester = if let Some(deriver) = deriver {
            ingester
                .with_deriver(deriver)
                .await
                .map_err(|e| format!("catch up the derived tables: {e}"))?
        } else {
            ingester
        };
        let ran = if self.follow {
            let (_stop, stop) = tokio::sync::watch::channel(false);
            // Idle, the open windows seal (as the end of a bounded input seals them), then
            // the run ends.
            let follow = Follow {
                poll_ms: 5,
                idle_timeout_ms: Some(100),
                until_idle_ms: Some(300),
                stop,
            };
            ingester.follow(follow).await
        } else {
            ingester.run().await
        };
        let (summary, _) = ran.map_err(|e| format!("run: {e}"))?;
        if self.notify {
            crate::notified::drain(&options, table_dir).await?;
        }
        Ok(summary)
    }

    /// One `sluice backfill` process over the script's whole day: open the table through
    /// `store` and recompute every window from `input` (left unchanged where a publication
    /// already covers the whole input).
    pub async fn backfill(
        &self,
        input: &Path,
        table_dir: &Path,
        store: Arc<dyn ObjectStore>,
        attempt: &str,
    ) -> Result<BackfillSummary, String> {
        let options = TableOptions {
            checkpoint_interval: self.checkpoint_interval,
            store: Some(store),
            retry: self.retry,
            ..TableOptions::new(table_dir.to_str().expect("utf-8 path"))
        };
        let table = WindowTable::open_or_create(
            &options,
            Some(&record_schema(self.grows)),
            layout(),
            window_size(),
        )
        .await
        .map_err(|e| format!("open: {e}"))?;
        let source = NdjsonSource::open(input).map_err(|e| e.to_string())?;
        let decoder = LineDecoder::new(
            table.record_schema(),
            sluice_source::DecodeOptions::new("ts", TimeFormat::Rfc3339),
        )
        .map_err(|e| e.to_string())?;
        let day_us = 86_400 * 1_000_000;
        let from = T0_S.div_euclid(86_400) * day_us;
        let config = self.config();
        let backfill = NdjsonBackfill {
            config: &config,
            source: &source,
            decoder: &decoder,
            table: &options,
            attempt,
        };
        let (summary, _) = backfill
            .run(
                table,
                (
                    EventTime::from_micros(from),
                    EventTime::from_micros(from + day_us),
                ),
                false,
                &FixedClock(1_800_000_000_000),
                &mut |_| {},
            )
            .await
            .map_err(|e| format!("backfill: {e}"))?;
        Ok(summary)
    }
}

/// How `sluice derive` runs over the raw table: a range, or following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeriveMode {
    /// The script's whole day, once (`sluice derive --from --to`).
    Range,
    /// Following the raw table (`sluice derive --follow`) until every derived table equals
    /// its query over the raw table.
    Follow,
}

impl Run {
    /// One `sluice derive` process over the raw table at `table_dir` (written before), its
    /// tables read and written through `store`: the derived tables of [`DERIVED`] computed.
    pub async fn derive(
        &self,
        table_dir: &Path,
        store: Arc<dyn ObjectStore>,
        mode: DeriveMode,
        attempt: &str,
    ) -> Result<(), String> {
        let options = TableOptions {
            checkpoint_interval: self.checkpoint_interval,
            store: Some(store),
            retry: self.retry,
            ..TableOptions::new(table_dir.to_str().expect("utf-8 path"))
        };
        let mut raw = WindowTable::open_or_create(&options, None, layout(), window_size())
            .await
            .map_err(|e| format!("open: {e}"))?;
        let mut deriver = Deriver::open(
            derived_specs(table_dir, &options),
            &mut raw,
            PIPELINE,
            attempt,
            StageOptions::default(),
        )
        .await
        .map_err(|e| format!("open the derived tables: {e}"))?;
        let policy = self.config().restart;
        let clock = FixedClock(1_800_000_000_000);
        match mode {
            DeriveMode::Range => {
                let day_us = 86_400 * 1_000_000;
                let from = T0_S.div_euclid(86_400) * day_us;
                let range = (
                    EventTime::from_micros(from),
                    EventTime::from_micros(from + day_us),
                );
                deriver
                    .derive_range_restarting(&mut raw, range, policy, &clock, &mut |_, _| {})
                    .await
                    .map_err(|e| format!("derive: {e}"))
            }
            DeriveMode::Follow => {
                let (stop_tx, stop) = tokio::sync::watch::channel(false);
                let dir = table_dir.to_path_buf();
                let watcher = tokio::spawn(async move {
                    for _ in 0..600 {
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        if derived_rows(&dir, "sum").await == derived_from_raw(&dir, "sum").await {
                            break;
                        }
                    }
                    let _ = stop_tx.send(true);
                });
                let followed = deriver
                    .follow(&mut raw, RawShape::Whole, 5, policy, &clock, stop)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("derive --follow: {e}"));
                watcher.abort();
                followed
            }
        }
    }
}

/// The harness's fixed instant, moved on by the time that really passed since `.1`.
struct Ticking(FixedClock, std::time::Instant);

impl sluice_ingest::Clock for Ticking {
    fn now_ms(&self) -> i64 {
        self.0 .0 + self.1.elapsed().as_millis() as i64
    }
}

fn record_schema(grows: bool) -> deltalake::arrow::datatypes::SchemaRef {
    let mut fields = vec![
        Field::new("event_id", DataType::Utf8, true),
        Field::new("ts", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ];
    if grows {
        fields.push(Field::new(
            "ctx",
            DataType::Struct(vec![Field::new("a", DataType::Int64, true)].into()),
            true,
        ));
    }
    Arc::new(Schema::new(fields))
}

mod read_back;
pub use read_back::*;
