//! `--metrics-addr`: a real HTTP client scrapes the Prometheus endpoint of a running `sluice
//! run` (a followed file run, and a Kafka run on tansu), and the counters must agree with the
//! tables read back: rows published = rows in the table, dead letters = rows in the
//! dead-letter table, and the source's lag falls to 0 once every window is published.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{scalar, seed, stream_slices, BIN};

const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/schema.toml");

/// A local address nobody listens on (bound and released; the run binds it again).
fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// One scrape of the endpoint, in Prometheus's text format.
struct Scrape(String);

impl Scrape {
    /// `GET http://addr/metrics` with reqwest; `None` while the endpoint does not answer.
    fn get(addr: &str) -> Option<Scrape> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap();
            let response = client
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .ok()?;
            assert!(
                response.status().is_success(),
                "GET /metrics: {}",
                response.status()
            );
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            assert!(
                content_type.starts_with("text/plain"),
                "content type {content_type:?}"
            );
            Some(Scrape(response.text().await.unwrap()))
        })
    }

    /// The samples of metric `name` whose labels contain every one of `labels`
    /// (`key="value"`), as (labels, value).
    fn samples(&self, name: &str, labels: &[&str]) -> Vec<(String, f64)> {
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (metric, labelset) = match series.split_once('{') {
                    Some((m, rest)) => (m, rest.trim_end_matches('}')),
                    None => (series, ""),
                };
                (metric == name && labels.iter().all(|want| labelset.contains(want)))
                    .then(|| (labelset.to_string(), value.parse::<f64>().unwrap()))
            })
            .collect()
    }

    /// The sum of metric `name` over its label sets that contain `labels`.
    fn sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.samples(name, labels).iter().map(|(_, v)| v).sum()
    }
}

/// The `sluice_…` metric names `text` mentions.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("sluice_") && w.len() > "sluice_".len())
        .map(str::to_string)
        .collect()
}

/// `sluice run` following `source` into `table` (polled every 200 ms, idle after 1 s) with
/// its metrics served at `addr`, and `extra` options.
fn followed<'a>(source: &'a str, table: &'a str, addr: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--source",
        source,
        "--table",
        table,
        "--follow",
        "--poll-interval",
        "200ms",
        "--idle-timeout",
        "1s",
        "--metrics-addr",
        addr,
    ];
    args.extend_from_slice(extra);
    args
}

/// Rows of a table (registered as `t`), 0 if it does not exist yet.
fn rows(table: &Path) -> u64 {
    if !table.join("_delta_log").exists() {
        return 0;
    }
    scalar(table, "SELECT count(*) FROM t").parse().unwrap()
}

/// A running `sluice run`; killed when dropped (a failed assertion must not leave it).
struct Running {
    child: Child,
    log: std::path::PathBuf,
}

impl Running {
    fn start(args: &[&str], log: std::path::PathBuf) -> Running {
        let err = std::fs::File::create(&log).unwrap();
        let child = Command::new(BIN)
            .args(args)
            .env("SLUICE_LOG", "warn,sluice_ingest=info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(err))
            .spawn()
            .expect("sluice run starts");
        Running { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Scrapes every 200 ms until `done` holds for a scrape (returned) or `limit` passes
    /// (a failure that shows the last scrape and the run's log).
    fn scrape_until(
        &mut self,
        addr: &str,
        limit: Duration,
        what: &str,
        mut seen: impl FnMut(&Scrape),
        mut done: impl FnMut(&Scrape) -> bool,
    ) -> Scrape {
        let started = Instant::now();
        let mut last = None;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("sluice run ended ({status}) before {what}:\n{}", self.log());
            }
            if let Some(s) = Scrape::get(addr) {
                seen(&s);
                if done(&s) {
                    return s;
                }
                last = Some(s);
            }
            assert!(
                started.elapsed() < limit,
                "no scrape showed {what} within {limit:?}; the last one:\n{}\nthe run's log:\n{}",
                last.map(|s| s.0).unwrap_or_default(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Scrapes until every one of `sources` lag series (`lag_metric`) is at 0 and the
    /// counters agree with the tables; returns that scrape and the largest total lag seen
    /// before it.
    fn settle(
        &mut self,
        addr: &str,
        table: &Path,
        dlq: &Path,
        lag_metric: &str,
        sources: usize,
    ) -> (Scrape, f64) {
        let mut lag_seen = 0.0f64;
        let settled = self.scrape_until(
            addr,
            Duration::from_secs(180),
            "the lag at 0 and the counters equal to the tables",
            |s| lag_seen = lag_seen.max(s.sum(lag_metric, &[])),
            |s| {
                s.samples(lag_metric, &[]).len() == sources
                    && agrees_with_tables(s, table, dlq, lag_metric)
            },
        );
        (settled, lag_seen)
    }
}

/// What a scrape must agree with: the rows of the table and of the dead-letter table.
fn agrees_with_tables(s: &Scrape, table: &Path, dlq: &Path, lag_metric: &str) -> bool {
    let lag = s.samples(lag_metric, &[]);
    !lag.is_empty()
        && lag.iter().all(|(_, v)| *v == 0.0)
        && s.sum("sluice_open_windows", &[]) == 0.0
        && s.sum("sluice_rows_published_total", &[]) == rows(table) as f64
        && s.sum("sluice_dead_letters_total", &[]) == rows(dlq) as f64
}

#[test]
fn metrics_of_a_followed_file_run_agree_with_the_tables() {
    let seed = seed("metrics_of_a_followed_file_run_agree_with_the_tables");
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = stream_slices(3_000, 6, seed, 1, 300).remove(0);
    let source = dir.path().join("events.ndjson");
    std::fs::write(&source, &bytes).unwrap();
    let table = dir.path().join("table");
    let dlq = dir.path().join("table_dlq");
    let addr = free_addr();
    let mut run = Running::start(
        &[
            "run",
            "--source",
            &format!("ndjson:{}", source.display()),
            "--table",
            table.to_str().unwrap(),
            "--schema",
            SCHEMA,
            "--key",
            "event_id",
            "--follow",
            "--poll-interval",
            "200ms",
            "--idle-timeout",
            "3s",
            "--late-batch",
            "1s",
            "--metrics-addr",
            &addr,
        ],
        dir.path().join("run.err"),
    );
    // The last windows stay open until the idle timeout: the table's resume position is
    // behind the file's end meanwhile, and a scrape shows it.
    let (first, lag_seen) = run.settle(&addr, &table, &dlq, "sluice_source_lag_bytes", 1);
    assert!(
        lag_seen > 0.0,
        "no scrape showed the unpublished bytes before the idle seal"
    );
    let dead = rows(&dlq);
    assert!(dead > 0, "the input has malformed lines");
    assert_eq!(
        first.sum("sluice_dead_letters_total", &["reason=\"malformed_json\""]),
        dead as f64,
        "every dead letter of this input is a torn line"
    );
    assert_eq!(first.sum("sluice_records_rejected_total", &[]), dead as f64);
    assert_eq!(
        first.sum("sluice_source_bytes_read_total", &[]),
        bytes.len() as f64
    );
    assert!(first.sum("sluice_commits_total", &[]) >= 1.0);
    assert!(first.sum("sluice_windows_published_total", &["kind=\"first\""]) >= 6.0);
    assert!(first.sum("sluice_seal_to_visible_seconds_count", &[]) >= 6.0);
    assert_eq!(
        first.sum("sluice_buffer_budget_bytes", &[]),
        16.0 * 1024.0 * 1024.0
    );
    assert!(first.sum("sluice_watermark_seconds", &[]) > 1.0e9);
    // Every metric docs/metrics.md documents is served (but the Kafka lag and the store's
    // retries, which a file run on a healthy disk has none of), and the Grafana dashboard
    // uses only documented ones.
    let documented = metric_names(include_str!("../docs/metrics.md"));
    for name in &documented {
        // Nor expectations, which this run has none of.
        let absent = [
            "sluice_source_lag_records",
            "sluice_store_retries_total",
            "sluice_expectation_violations_total",
        ];
        if absent.contains(&name.as_str()) {
            continue;
        }
        assert!(
            first.0.lines().any(|l| l.starts_with(name.as_str())),
            "{name} is documented but not served:\n{}",
            first.0
        );
    }
    for name in metric_names(include_str!("../examples/grafana-dashboard.json")) {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        assert!(
            documented.iter().any(|d| d == base),
            "the dashboard uses {name}, which docs/metrics.md does not document"
        );
    }
    let labels = &first.samples("sluice_rows_published_total", &[])[0].0;
    assert!(
        labels.contains("pipeline=\"sluice\"")
            && labels.contains("table=\"file://")
            && labels.contains("source=\"events.ndjson\""),
        "labels {labels}"
    );

    // Late rows for published windows: the windows are republished (rewrite), and the
    // published rows still equal the table's, not the sum of every publication's rows.
    let before = rows(&table);
    // The generated stream has late events of its own.
    let late_before = first.sum("sluice_late_rows_total", &["outcome=\"republished\""]);
    let late: Vec<String> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .take(25)
        .enumerate()
        .map(|(i, mut v)| {
            v["event_id"] = format!("late-{i}").into();
            format!("{v}\n")
        })
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&source)
        .unwrap();
    std::io::Write::write_all(&mut file, late.concat().as_bytes()).unwrap();
    drop(file);
    let second = run.scrape_until(
        &addr,
        Duration::from_secs(120),
        "the late rows published and the counters equal to the tables",
        |_| {},
        |s| {
            rows(&table) == before + 25
                && s.sum("sluice_late_rows_total", &["outcome=\"republished\""])
                    == late_before + 25.0
                && agrees_with_tables(s, &table, &dlq, "sluice_source_lag_bytes")
        },
    );
    assert!(second.sum("sluice_windows_published_total", &["kind=\"republish\""]) >= 1.0);
    assert_eq!(
        second.sum("sluice_late_rows_total", &["policy=\"rewrite\""]),
        late_before + 25.0
    );
}

/// Each expectation's broken rows are counted in `sluice_expectation_violations_total`, by
/// rule: a warn rule's as the model of the input says, a drop rule's as many as the
/// dead letters it made.
#[test]
fn expectation_violations_are_counted_by_rule() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..300)
        .map(|i| {
            let country = if i % 3 == 0 { "XX" } else { "DE" };
            format!(
                "{{\"id\":{i},\"ts\":\"2026-10-03T{:02}:{:02}:00Z\",\"amount\":{},\"country\":\"{country}\"}}\n",
                14 + i / 60,
                i % 60,
                i % 5 - 1
            )
        })
        .collect();
    std::fs::write(dir.path().join("events.ndjson"), lines).unwrap();
    let table = dir.path().join("table");
    let dlq = dir.path().join("table_dlq");
    let addr = free_addr();
    let source = format!("ndjson:{}", dir.path().join("events.ndjson").display());
    let rules = [
        "--window",
        "1h",
        "--expect",
        "known=country <> 'XX'",
        "--expect-or-drop",
        "positive=amount >= 0",
    ];
    let args = followed(&source, table.to_str().unwrap(), &addr, &rules);
    let mut run = Running::start(&args, dir.path().join("run.err"));
    let violations = |s: &Scrape, rule: &str| {
        s.sum(
            "sluice_expectation_violations_total",
            &[&format!("rule=\"{rule}\"")],
        )
    };
    let settled = run.scrape_until(
        &addr,
        Duration::from_secs(120),
        "every row in the table or the dead-letter table",
        |_| {},
        |s| rows(&table) + rows(&dlq) == 300 && violations(s, "positive") == rows(&dlq) as f64,
    );
    assert_eq!(rows(&dlq), 60, "one in five amounts is -1");
    assert_eq!(violations(&settled, "known"), 100.0, "{}", settled.0);
    assert_eq!(
        scalar(&table, "SELECT count(*) FROM t WHERE country = 'XX'"),
        "80",
        "the warn rule's rows landed, but for those the drop rule took"
    );
}

/// A followed directory labels its series `source="*"`, also while it holds one file: the
/// label does not change (a new series) when a second file arrives, and the lag of the
/// directory is one series.
#[test]
fn a_followed_directory_labels_its_series_with_a_star() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let slices = stream_slices(2_000, 4, 5, 2, 0);
    std::fs::write(input.join(&slices[0].0), &slices[0].1).unwrap();
    let table = dir.path().join("table");
    let dlq = dir.path().join("table_dlq");
    let addr = free_addr();
    let source = format!("ndjson:{}", input.display());
    let args = followed(&source, table.to_str().unwrap(), &addr, &[]);
    let mut run = Running::start(&args, dir.path().join("run.err"));
    let only_star = |s: &Scrape| {
        s.0.lines()
            .filter(|l| l.starts_with("sluice_") && l.contains("source=\""))
            .all(|l| l.contains("source=\"*\""))
    };
    let (first, _) = run.settle(&addr, &table, &dlq, "sluice_source_lag_bytes", 1);
    assert!(only_star(&first), "{}", first.0);
    let before = rows(&table);
    std::fs::write(input.join(&slices[1].0), &slices[1].1).unwrap();
    let second = run.scrape_until(
        &addr,
        Duration::from_secs(120),
        "the second file's rows published",
        |_| {},
        |s| rows(&table) > before && agrees_with_tables(s, &table, &dlq, "sluice_source_lag_bytes"),
    );
    assert!(only_star(&second), "{}", second.0);
    assert_eq!(
        second.samples("sluice_source_lag_bytes", &[]).len(),
        1,
        "{}",
        second.0
    );
}

#[cfg(feature = "kafka")]
#[test]
fn metrics_of_a_kafka_run_agree_with_the_tables() {
    use crate::servers::{create_topic, produce, tansu};

    let seed = seed("metrics_of_a_kafka_run_agree_with_the_tables");
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let (_, bytes) = stream_slices(3_000, 6, seed, 1, 250).remove(0);
    let messages: Vec<(String, Vec<u8>)> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| (format!("k{i}"), l.to_vec()))
        .collect();
    create_topic(&broker, "events", 3);
    produce(&broker, "events", &messages);
    let table = dir.path().join("table");
    let dlq = dir.path().join("table_dlq");
    let addr = free_addr();
    let mut run = Running::start(
        &[
            "run",
            "--source",
            "kafka:events",
            "--brokers",
            &broker.address,
            "--group",
            "metrics",
            "--table",
            table.to_str().unwrap(),
            "--schema",
            SCHEMA,
            "--key",
            "event_id",
            "--idle-timeout",
            "4s",
            "--metrics-addr",
            &addr,
        ],
        dir.path().join("run.err"),
    );
    let (done, lag_seen) = run.settle(&addr, &table, &dlq, "sluice_source_lag_records", 3);
    assert!(
        lag_seen > 0.0,
        "no scrape showed a partition's unpublished records before the idle seal"
    );
    let dead = rows(&dlq);
    assert!(dead > 0, "the topic has malformed messages");
    assert_eq!(
        done.sum("sluice_records_read_total", &[]),
        messages.len() as f64,
        "every message read once (no restart in this run)"
    );
    assert!(rows(&table) > 0);
    for p in 0..3 {
        let source = format!("source=\"events/{p}\"");
        assert_eq!(
            done.samples("sluice_source_lag_records", &[&source]).len(),
            1,
            "one lag series per partition"
        );
    }
}

#[test]
fn a_metrics_address_in_use_ends_the_run_before_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = stream_slices(100, 1, 7, 1, 0).remove(0);
    let source = dir.path().join("events.ndjson");
    std::fs::write(&source, bytes).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let table = dir.path().join("table");
    let out = crate::common::sluice(&[
        "run",
        "--source",
        &format!("ndjson:{}", source.display()),
        "--table",
        table.to_str().unwrap(),
        "--metrics-addr",
        &addr,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--metrics-addr {addr}: cannot serve metrics there"
        )),
        "{stderr}"
    );
    assert!(
        !table.exists(),
        "nothing is written before the endpoint is up"
    );
}

/// `--format json` says where the run's time went (`busy_seconds`): every phase by name; the
/// phases this run did took time, the ones it did not (no rewrite read anything
/// back) took none; and a phase that runs on one thread (decode on the reader's, route and
/// commit on the runner's) cannot have been busy longer than the run lasted.
#[test]
fn a_json_summary_says_where_the_run_spent_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let input = crate::common::input(dir.path(), 20_000, 3, seed("busy"), 2);
    let source = format!("ndjson:{}", input.display());
    let table = dir.path().join("table");
    let t = table.to_str().unwrap();
    // In order, without late rows: no window is republished, so nothing is read back.
    let args = crate::common::run_args(
        &source,
        t,
        &["--key", "event_id", "--late", "drop", "--format", "json"],
    );
    let out = crate::common::ok(&args);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let seconds = summary["seconds"].as_f64().unwrap();
    let busy = summary["busy_seconds"].as_object().unwrap();
    let mut phases: Vec<&str> = busy.keys().map(String::as_str).collect();
    phases.sort_unstable();
    assert_eq!(
        phases,
        [
            "commit",
            "decode",
            "dedupe",
            "encode",
            "read_back",
            "route",
            "stats",
            "upload"
        ],
        "{summary}"
    );
    let of = |phase: &str| busy[phase].as_f64().unwrap();
    for phase in [
        "decode", "route", "dedupe", "encode", "stats", "upload", "commit",
    ] {
        assert!(of(phase) > 0.0, "{phase}: {summary}");
    }
    for phase in ["decode", "route", "commit"] {
        assert!(
            of(phase) <= seconds,
            "{phase} longer than the run: {summary}"
        );
    }
    // Late rows were dead-lettered, no part was flushed: no publication read anything back.
    assert_eq!(of("read_back"), 0.0, "{summary}");
    let rows: u64 = scalar(&table, "SELECT COUNT(*) FROM t").parse().unwrap();
    assert!(rows > 0, "{summary}");
}
