//! Kafka source and scale-out, end to end: real `sluice run` processes of one consumer group
//! on a real Kafka-protocol broker (tansu), writing one table locally or on S3 (moto).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{stream_slices, stream_slices_of, Rng, BIN};
use crate::servers::{create_topic, moto, produce, s3_env, tansu, Registry, Server};
use sluice_source::generate::{GeneratorSpec, Shape};

const PARTITIONS: u32 = 6;
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/schema.toml");
/// The record columns and the window address: what must equal the oracle.
const COLUMNS: &str = "event_id, ts, user_id, country, kind, amount, dt, hour";

/// The schema nested events start with: their two later fields (`coupon`, `actor.plan`)
/// are added by schema evolution while the processes run.
const NESTED_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/kafka/github-events.toml"
);
const NESTED_COLUMNS: &str = "event_id, ts, type, actor, repo, payload, labels, coupon, dt, hour";

/// What a scale-out produces to the topic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Events {
    /// Flat events, the bundled schema.
    Flat,
    /// Nested events that gain two fields half-way (schema evolution across shards).
    NestedGrowing,
    /// The nested events as Avro (confluent-kafka's AvroSerializer), the schema gaining the
    /// two fields as a second version in the registry half-way.
    NestedGrowingAvro,
    /// The nested events as Protobuf (its ProtobufSerializer, examples/kafka/proto), the
    /// schema and the file it imports gaining the two fields as second versions half-way.
    NestedGrowingProtobuf,
}

impl Events {
    /// The registry format the events are produced in (`None`: JSON text).
    fn registry_format(self) -> Option<&'static str> {
        match self {
            Events::Flat | Events::NestedGrowing => None,
            Events::NestedGrowingAvro => Some("avro"),
            Events::NestedGrowingProtobuf => Some("protobuf"),
        }
    }
}

/// One scale-out scenario: where the table lives and how the processes reach it.
struct Scenario<'a> {
    dir: &'a Path,
    table: String,
    env: Vec<(&'static str, String)>,
    broker: &'a Server,
    events: Events,
    /// A loopback HTTP receiver every process notifies (`--notify-url hook=…`), if any.
    hook: Option<&'a crate::notify::Receiver>,
    /// Every process keeps the derived table `revenue` (`dir/revenue`).
    derived: bool,
    /// The schema registry of events in a registry format.
    registry: Option<&'a Registry>,
}

/// The derived table of the scale-out: revenue per country and window.
const REVENUE_SQL: &str = "SELECT country, count(*) AS orders, \
     sum(CAST(round(amount * 100) AS BIGINT)) AS revenue_cents \
     FROM window WHERE kind = 'purchase' GROUP BY country";

impl Scenario<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("sluice runs");
        assert!(
            out.status.success(),
            "sluice {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A `sluice run` process in `group`, its output in `dir/<name>.out|.err`.
    fn spawn(&self, name: &str, group: &str, until_idle: &str) -> Child {
        let out = std::fs::File::create(self.dir.join(format!("{name}.out"))).unwrap();
        let err = std::fs::File::create(self.dir.join(format!("{name}.err"))).unwrap();
        let mut command = self.command(&[
            "run",
            "--source",
            "kafka:events",
            "--brokers",
            &self.broker.address,
            "--group",
            group,
            "--table",
            &self.table,
            "--schema",
            &self.schema(),
            "--key",
            "event_id",
            "--until-idle",
            until_idle,
        ]);
        if let Some(hook) = self.hook {
            command.args(["--notify-url", &format!("hook={}", hook.url)]);
        }
        if let (Some(registry), Some(format)) = (self.registry, self.events.registry_format()) {
            command.args(["--input-format", format, "--schema-registry", &registry.url]);
        }
        if self.derived {
            let table = format!("revenue={}", self.dir.join("revenue").display());
            let sql = format!("revenue={REVENUE_SQL}");
            command.args(["--derive", &table, "--derive-sql", &sql]);
        }
        command
            // Assignments, revocations and publications in the log, for a look after a failure.
            .env(
                "SLUICE_LOG",
                std::env::var("SLUICE_TEST_LOG")
                    .unwrap_or_else(|_| "warn,sluice_ingest=info,sluice_source=info".into()),
            )
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("sluice run starts")
    }

    /// The schema file the processes and the oracle start from.
    fn schema(&self) -> String {
        match self.events {
            Events::Flat => SCHEMA.to_string(),
            _ => NESTED_SCHEMA.to_string(),
        }
    }

    fn columns(&self) -> &'static str {
        match self.events {
            Events::Flat => COLUMNS,
            _ => NESTED_COLUMNS,
        }
    }

    fn output(&self, name: &str) -> String {
        let read = |ext| std::fs::read_to_string(self.dir.join(format!("{name}.{ext}")));
        format!(
            "{}{}",
            read("out").unwrap_or_default(),
            read("err").unwrap_or_default()
        )
    }

    /// `sluice windows` of the sharded table: per window (address without the shard), its
    /// rows' `sealed` flags and their `shards_sealed` and `complete` columns.
    fn seals(&self) -> std::collections::BTreeMap<String, Vec<(bool, String, bool)>> {
        let out = self.ok(&["windows", "--table", &self.table, "--format", "csv"]);
        let mut lines = out.lines();
        // (a notified_<target> column follows when the processes notify a target)
        let header = lines.next().unwrap_or_default();
        assert!(
            header.starts_with(
                "window,files,rows,version,publications,published_at,sealed,shards_sealed,complete"
            ),
            "{header}"
        );
        let mut seals: std::collections::BTreeMap<String, Vec<_>> = Default::default();
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            let (window, _shard) = f[0].rsplit_once("/shard=").expect("a sharded address");
            seals.entry(window.to_string()).or_default().push((
                f[6] == "true",
                f[7].to_string(),
                f[8] == "true",
            ));
        }
        seals
    }

    /// Windows published so far (0 before the table exists).
    fn windows(&self) -> usize {
        let out = self
            .command(&["windows", "--table", &self.table, "--format", "csv"])
            .output()
            .expect("sluice windows runs");
        if !out.status.success() {
            return 0;
        }
        String::from_utf8_lossy(&out.stdout).lines().skip(1).count()
    }

    fn count(&self, oracle: &Path, sql: &str) -> u64 {
        let o = format!("o={}", oracle.display());
        let t = format!("t={}", self.table);
        let out = self.ok(&[
            "query", "--table", &o, "--table", &t, "--format", "csv", sql,
        ]);
        out.lines()
            .nth(1)
            .unwrap_or_default()
            .parse()
            .unwrap_or_else(|e| panic!("{sql}: {e}: {out}"))
    }

    /// The newest version in the table's log (read from the store, not through sluice).
    fn version(&self) -> i64 {
        let Some(path) = self.table.strip_prefix("s3://") else {
            return crate::common::version(Path::new(&self.table));
        };
        let (bucket, prefix) = path.split_once('/').unwrap();
        let endpoint = &self
            .env
            .iter()
            .find(|(k, _)| *k == "AWS_ENDPOINT_URL")
            .unwrap()
            .1;
        let out = Command::new("curl")
            .args([
                "-sf",
                &format!("{endpoint}/{bucket}?list-type=2&prefix={prefix}/_delta_log/"),
            ])
            .output()
            .expect("curl runs");
        assert!(out.status.success(), "listing the log on S3 failed");
        String::from_utf8_lossy(&out.stdout)
            .split("<Key>")
            .skip(1)
            .filter_map(|k| k.split('<').next())
            .filter_map(|k| k.rsplit('/').next()?.strip_suffix(".json")?.parse().ok())
            .max()
            .unwrap_or(-1)
    }
}

fn wait_for(child: &mut Child, name: &str, scenario: &Scenario, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait().unwrap() {
            Some(status) => {
                assert!(
                    status.success(),
                    "{name} failed ({status}):\n{}",
                    scenario.output(name)
                );
                return true;
            }
            None if Instant::now() > deadline => {
                let _ = child.kill();
                panic!(
                    "{name} did not end within {limit:?}:\n{}",
                    scenario.output(name)
                );
            }
            None => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The consumer group of the scale-out's processes.
const GROUP: &str = "landers";

/// 3 processes on one group, a 6-partition topic, `events` generated events (3% delivered
/// twice), one process SIGKILLed mid-run and restarted later; the table must equal one clean
/// NDJSON run of the same events (the oracle); then a restart with no new events must
/// commit nothing.
fn scale_out(scenario: &Scenario, events: u64, seed: u64) {
    let dir = scenario.dir;
    let mut rng = Rng(seed);
    let (_, bytes) = match scenario.events {
        Events::Flat => stream_slices(events, 24, seed, 1, 0).remove(0),
        _ => stream_slices_of(
            &GeneratorSpec {
                seed,
                events,
                hours: 24,
                shape: Shape::Nested,
                new_fields_from: Some(events / 2),
                ..Default::default()
            },
            1,
            0,
        )
        .remove(0),
    };
    let lines: Vec<&[u8]> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let messages: Vec<(String, Vec<u8>)> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            (v["event_id"].as_str().unwrap().to_string(), l.to_vec())
        })
        .collect();
    let distinct = {
        let mut ids: Vec<&str> = messages.iter().map(|(k, _)| k.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    let duplicates = messages.len() - distinct;
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("events.ndjson"), &bytes).unwrap();
    create_topic(scenario.broker, "events", PARTITIONS);
    let started = Instant::now();
    // What the topic holds, as events: the input, or (Protobuf) what proto3 carries of it.
    let mut sent = input.clone();
    match (scenario.registry, scenario.events.registry_format()) {
        (Some(registry), Some(format)) => {
            let mut extra = Vec::new();
            if format == "protobuf" {
                sent = dir.join("sent");
                std::fs::create_dir_all(&sent).unwrap();
                extra = vec![
                    "--sent".to_string(),
                    sent.join("events.ndjson").display().to_string(),
                ];
            }
            let produced = crate::common::produce_with_python(
                format,
                Some(&registry.url),
                &extra,
                &scenario.broker.address,
                "events",
                &input.join("events.ndjson"),
            );
            eprint!("{produced}");
        }
        _ => produce(scenario.broker, "events", &messages),
    }
    eprintln!(
        "produced {} messages ({distinct} events, {duplicates} duplicate deliveries) in {:.1} s",
        messages.len(),
        started.elapsed().as_secs_f64()
    );

    // The oracle: one clean run over the same events as a file.
    let oracle = dir.join("oracle");
    crate::common::ok(&[
        "run",
        "--source",
        &format!("ndjson:{}", sent.display()),
        "--table",
        oracle.to_str().unwrap(),
        "--schema",
        &scenario.schema(),
        "--key",
        "event_id",
    ]);

    let started = Instant::now();
    let mut procs: Vec<(String, Child)> = (0..3)
        .map(|i| {
            (
                format!("p{i}"),
                scenario.spawn(&format!("p{i}"), GROUP, "15s"),
            )
        })
        .collect();
    // SIGKILL a running process that has had partitions, once a seeded number of windows is
    // in the table.
    let kill_at = 20 + rng.below(40) as usize;
    let deadline = Instant::now() + Duration::from_secs(300);
    let victim = loop {
        assert!(
            Instant::now() < deadline,
            "no progress:\n{}",
            scenario.output("p0")
        );
        if scenario.windows() >= kill_at {
            let candidates: Vec<usize> = (0..procs.len())
                .filter(|i| {
                    let (name, child) = &mut procs[*i];
                    child.try_wait().unwrap().is_none()
                        && scenario.output(name).contains("assigned partitions")
                })
                .collect();
            if !candidates.is_empty() {
                break candidates[rng.below(candidates.len() as u64) as usize];
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    procs[victim].1.kill().unwrap();
    procs[victim].1.wait().unwrap();
    eprintln!(
        "SIGKILLed p{victim} (it held partitions) with {}+ windows in the table after {:.1} s",
        scenario.windows(),
        started.elapsed().as_secs_f64()
    );
    // Restart it after the group has moved its partitions to the others.
    std::thread::sleep(Duration::from_secs(8 + rng.below(5)));
    let restarted = format!("p{victim}-restarted");
    procs.push((restarted.clone(), scenario.spawn(&restarted, GROUP, "15s")));
    for (i, (name, child)) in procs.iter_mut().enumerate() {
        if i != victim {
            wait_for(child, name, scenario, Duration::from_secs(600));
        }
    }
    eprintln!(
        "all processes ended after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for (i, (name, _)) in procs.iter().enumerate() {
        if i != victim {
            let out = scenario.output(name);
            let summary = out
                .lines()
                .find(|l| l.starts_with("sluice run:"))
                .unwrap_or("?");
            eprintln!("{name}: {summary}");
        }
    }

    let q = |sql: &str| scenario.count(&oracle, sql);
    // `--until-idle` cannot tell a drained topic from partitions the group has not handed to
    // anyone yet: tansu's coordinator can keep a SIGKILLed member (and its partitions) in the
    // group past the survivors' idle time. What they left is still behind the table's
    // positions, not lost; a process started afterwards gets every partition and lands it.
    // Counted and printed: a catch-up run that changes rows means the group ended early.
    // Later runs join groups of their own: tansu 0.6.0 can leave a group with no member
    // stuck for good (a leader that leaves while the group is forming stays its leader, so a
    // new member is never given an assignment: `leave` of `Inner<_, Forming>` in
    // tansu-broker's coordinator/group/administrator.rs), and sluice resumes from the table,
    // whatever the group.
    let mut catch_up_runs = 0;
    while q("SELECT count(*) FROM t") < distinct as u64 && catch_up_runs < 2 {
        catch_up_runs += 1;
        let name = format!("catch-up-{catch_up_runs}");
        let mut child = scenario.spawn(&name, &name, "15s");
        wait_for(&mut child, &name, scenario, Duration::from_secs(300));
        eprintln!(
            "{name}: {}",
            scenario
                .output(&name)
                .lines()
                .find(|l| l.starts_with("sluice run:"))
                .unwrap_or("?")
        );
    }
    let rows = q("SELECT count(*) FROM t");
    let columns = scenario.columns();
    let lost = q(&format!(
        "SELECT count(*) FROM (SELECT {columns} FROM o EXCEPT ALL SELECT {columns} FROM t)"
    ));
    let extra = q(&format!(
        "SELECT count(*) FROM (SELECT {columns} FROM t EXCEPT ALL SELECT {columns} FROM o)"
    ));
    let dup_rows = q("SELECT count(*) - count(DISTINCT event_id) FROM t");
    let shards = q("SELECT count(DISTINCT shard) FROM t");
    eprintln!(
        "scale-out: {} messages, 3 processes, 1 SIGKILL, {catch_up_runs} catch-up runs; table {rows} rows in {shards} shards, oracle {distinct}; duplicates {dup_rows}, lost {lost}, extra {extra}",
        messages.len()
    );
    if (dup_rows, lost, extra) != (0, 0, 0) {
        where_lost(scenario, &oracle);
    }
    if !scenario.table.starts_with("s3://") {
        // No data file name is ever added twice: a second file of a published name would
        // replace that file's rows (a writer of a partition assigned again once numbered its
        // files from 1 again, and its late rows replaced a published hour).
        let mut added = std::collections::BTreeMap::new();
        for (version, actions) in crate::common::commits(Path::new(&scenario.table)) {
            for a in actions {
                if let Some(path) = a["add"]["path"].as_str() {
                    if let Some(first) = added.insert(path.to_string(), version) {
                        panic!("{path} added at version {first} and again at {version}");
                    }
                }
            }
        }
    }
    assert_eq!((dup_rows, lost, extra), (0, 0, 0));
    assert_eq!(rows, distinct as u64);
    assert_eq!(shards, PARTITIONS as u64);
    if let Some(format) = scenario.events.registry_format() {
        // What the producer sent, as Python delta-rs reads the table: nested values and all.
        let same = crate::common::interop(
            "same_events.py",
            &[
                scenario.table.as_ref(),
                sent.join("events.ndjson").as_os_str(),
                "event_id".as_ref(),
            ],
        );
        eprint!("{format} scale-out, read back with Python delta-rs: {same}");
    }
    if scenario.events != Events::Flat {
        // Every shard's writers grew the one table by both fields: old rows null in them.
        let grown = q("SELECT count(*) - count(coupon) FROM t WHERE t.actor.plan IS NULL");
        let with = q("SELECT count(coupon) FROM t WHERE t.actor.plan IS NOT NULL");
        eprintln!(
            "schema evolution across shards: {grown} rows before the new fields, {with} after"
        );
        assert!(grown > 0 && with > 0);
        assert_eq!(q("SELECT count(*) FROM t"), grown + with);
    }

    // Each shard has sealed every hour its input has moved 10 minutes (the lateness) past:
    // all but the last hour, whose end no event reaches.
    let seals = scenario.seals();
    let last = seals.keys().next_back().cloned().unwrap();
    for (window, rows) in &seals {
        let complete = *window != last;
        let expected = if complete { PARTITIONS } else { 0 };
        assert_eq!(rows.len(), PARTITIONS as usize, "{window}: {rows:?}");
        assert!(
            rows.iter()
                .all(|r| *r == (complete, format!("{expected}/{PARTITIONS}"), complete)),
            "{window}: {rows:?}"
        );
    }
    eprintln!(
        "sluice windows: {} of {} windows complete (sealed by all {PARTITIONS} shards); {last} sealed by none",
        seals.len() - 1,
        seals.len()
    );

    // `sluice status` says the same from the snapshot: one pipeline in every shard, its
    // windows complete but the last, a resume position per partition, every row.
    let status: serde_json::Value = serde_json::from_str(&scenario.ok(&[
        "status",
        "--table",
        &scenario.table,
        "--format",
        "json",
    ]))
    .expect("one JSON object");
    let p = &status["pipelines"][0];
    assert_eq!(p["shards"], PARTITIONS, "{status}");
    assert_eq!(p["windows"], seals.len(), "{status}");
    assert_eq!(p["windows_complete"], seals.len() - 1, "{status}");
    assert_eq!(p["windows_incomplete"], 1, "{status}");
    assert_eq!(
        p["positions"].as_object().map(|o| o.len()),
        Some(PARTITIONS as usize),
        "{status}"
    );
    assert_eq!(p["rows"], rows, "{status}");
    // The status docs/kafka.md shows is this one's.
    let text = scenario.ok(&["status", "--table", &scenario.table]);
    eprintln!("sluice status:\n{text}");
    for shown in crate::docs::blocks::shown_of("docs/kafka.md", "tests/kafka.rs") {
        crate::docs::blocks::check(&shown, &text).unwrap_or_else(|e| panic!("{e}"));
    }

    // A restart with no new events commits nothing (to the derived table either).
    let revenue = dir.join("revenue");
    let derived_before = scenario.derived.then(|| crate::common::version(&revenue));
    let before = scenario.version();
    let mut again = scenario.spawn("again", "again", "5s");
    wait_for(&mut again, "again", scenario, Duration::from_secs(120));
    assert_eq!(scenario.version(), before, "{}", scenario.output("again"));
    if let Some(v) = derived_before {
        let after = crate::common::version(&revenue);
        assert_eq!(after, v, "{}", scenario.output("again"));
    }
    eprintln!("restart with no new events: table version unchanged ({before})");

    if scenario.derived {
        derived_as_the_batch_job(scenario, &seals);
    }

    if let Some(hook) = scenario.hook {
        notified_as_the_log_implies(scenario, hook, &seals);
    }
}

/// The derived table every process kept beside its writers equals a batch `sluice derive`
/// of the final raw table, window by window, for every complete window; the last window,
/// which no shard sealed, is not derived.
fn derived_as_the_batch_job(
    scenario: &Scenario,
    seals: &std::collections::BTreeMap<String, Vec<(bool, String, bool)>>,
) {
    let dir = scenario.dir;
    let batch = dir.join("batch_revenue");
    let out = scenario.ok(&[
        "derive",
        "--table",
        &scenario.table,
        "--derive",
        &format!("revenue={}", batch.display()),
        "--derive-sql",
        &format!("revenue={REVENUE_SQL}"),
        "--from",
        "2000-01-01",
        "--to",
        "2100-01-01",
    ]);
    let last = seals.keys().next_back().unwrap();
    let (dt, hour) = last
        .split_once('/')
        .map(|(d, h)| (&d[3..], &h[5..]))
        .unwrap();
    let rows = |table: &Path, filter: &str| {
        let mut rows = crate::common::query_csv(
            &[("d", table)],
            &format!("SELECT dt, hour, country, orders, revenue_cents FROM d WHERE {filter}"),
        );
        rows.sort();
        rows
    };
    let complete = format!("NOT (dt = '{dt}' AND hour = '{hour}')");
    let streamed = rows(&dir.join("revenue"), "true");
    let batched = rows(&batch, &complete);
    assert!(!batched.is_empty(), "{out}");
    assert_eq!(
        streamed, batched,
        "the stream's derived table equals the batch job's"
    );
    let last_batched = rows(&batch, &format!("NOT ({complete})"));
    eprintln!(
        "derived: {} rows over {} complete windows equal the batch job's; the last window ({} rows in the batch) not derived while incomplete",
        streamed.len(),
        seals.len() - 1,
        last_batched.len()
    );
}

/// Every process notified the receiver beside its writers (one of them SIGKILLed): the keys
/// received are exactly those the sharded log implies, each with the same body every time
/// it was sent; every window but the last (which no shard sealed) was told `complete`, with
/// the rows of all its shards.
fn notified_as_the_log_implies(
    scenario: &Scenario,
    hook: &crate::notify::Receiver,
    seals: &std::collections::BTreeMap<String, Vec<(bool, String, bool)>>,
) {
    let implied = crate::notify::implied_by_a_sharded_log(Path::new(&scenario.table));
    let mut received: std::collections::BTreeMap<String, (String, i64)> = Default::default();
    let accepted = hook.accepted();
    for r in &accepted {
        let body = (
            r.body["reason"].as_str().unwrap().to_string(),
            r.body["rows"].as_i64().unwrap(),
        );
        if let Some(before) = received.insert(r.key.clone(), body.clone()) {
            assert_eq!(before, body, "{}: the same key with another body", r.key);
        }
    }
    let missing: Vec<_> = implied
        .keys()
        .filter(|k| !received.contains_key(*k))
        .collect();
    let unexpected: Vec<_> = received
        .keys()
        .filter(|k| !implied.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "never received: {missing:?}; received but not in the log: {unexpected:?}"
    );
    assert_eq!(received, implied);
    let complete: Vec<&String> = implied
        .iter()
        .filter(|(_, (reason, _))| reason == "complete")
        .map(|(k, _)| k)
        .collect();
    // (Twice if a partition that was behind published its first rows after the window was
    // complete: incomplete again until that shard sealed past it.)
    for window in seals.keys().take(seals.len() - 1) {
        let told = complete
            .iter()
            .filter(|k| k.contains(&format!("/{window}/")))
            .count();
        assert!(told >= 1, "{window} never told complete");
    }
    eprintln!(
        "notifications: {} deliveries of {} keys ({} complete, {} rewritten), as the log implies",
        accepted.len(),
        received.len(),
        complete.len(),
        received.len() - complete.len()
    );
}

/// After a failed comparison: where the events missing from the table sit in the topic, as
/// the broker serves it now (per partition: how many, their offset ranges, the partition's
/// last offset), to tell messages the broker lost from positions the table got wrong.
fn where_lost(scenario: &Scenario, oracle: &Path) {
    let o = format!("o={}", oracle.display());
    let t = format!("t={}", scenario.table);
    let out = scenario.ok(&[
        "query",
        "--table",
        &o,
        "--table",
        &t,
        "--format",
        "csv",
        "SELECT event_id FROM o EXCEPT SELECT event_id FROM t",
    ]);
    let lost: std::collections::HashSet<&str> = out.lines().skip(1).collect();
    let contents = crate::servers::topic_contents(scenario.broker, "events", PARTITIONS);
    let mut ends: std::collections::BTreeMap<i32, (i64, usize)> = Default::default();
    let mut at: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    let mut served = std::collections::HashSet::new();
    for (key, p, offset) in &contents {
        let end = ends.entry(*p).or_default();
        end.0 = end.0.max(*offset);
        end.1 += 1;
        served.insert(key.as_str());
        if lost.contains(key.as_str()) {
            at.entry(*p).or_default().push(*offset);
        }
    }
    let never_served = lost.iter().filter(|k| !served.contains(*k)).count();
    eprintln!(
        "lost events: {} (event ids), {never_served} of them not served by the broker now",
        lost.len()
    );
    for (p, (last, count)) in &ends {
        let mut offsets = at.remove(p).unwrap_or_default();
        offsets.sort_unstable();
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for o in offsets {
            match runs.last_mut() {
                Some((_, hi)) if *hi + 1 == o => *hi = o,
                _ => runs.push((o, o)),
            }
        }
        eprintln!("partition {p}: {count} messages, last offset {last}; lost at {runs:?}");
    }
}

/// A scale-out over a local table, in a directory kept with `SLUICE_KEEP_DIR=1` (the tables
/// and the processes' logs, for a look after a failure).
fn scale_out_locally(what: &str, events: Events, count: u64, notify: bool) {
    let seed = crate::common::seed(what);
    let hook = notify.then(crate::notify::Receiver::start);
    let mut dir = tempfile::tempdir().unwrap();
    dir.disable_cleanup(std::env::var_os("SLUICE_KEEP_DIR").is_some());
    eprintln!("working in {}", dir.path().display());
    let broker = tansu();
    let registry = events
        .registry_format()
        .map(|_| Registry::start(dir.path().join("registry.json")));
    let scenario = Scenario {
        dir: dir.path(),
        table: dir.path().join("events").to_str().unwrap().to_string(),
        env: Vec::new(),
        broker: &broker,
        events,
        hook: hook.as_ref(),
        derived: notify,
        registry: registry.as_ref(),
    };
    scale_out(&scenario, count, seed);
}

/// The processes also notify a loopback receiver (`--notify-url`): a window of the sharded
/// table is told `complete` once every shard holding files has sealed it.
#[test]
fn three_processes_on_six_partitions_equal_one_clean_run_through_a_sigkill() {
    scale_out_locally("kafka scale-out", Events::Flat, events(), true);
}

/// The scale-out with nested events that gain two fields half-way (one top-level, one a new
/// struct member): the shards add the columns as they meet them, a commit that finds the
/// schema changed by another shard re-reads the table and resumes, and the table ends with
/// the union schema and the clean run's rows.
#[test]
fn three_processes_grow_the_schema_of_one_sharded_table_through_a_sigkill() {
    scale_out_locally(
        "kafka scale-out, schema growing",
        Events::NestedGrowing,
        events() / 4,
        false,
    );
}

/// The scale-out with the nested events as Avro in the Confluent wire format, produced by
/// confluent-kafka's AvroSerializer against the suite's schema registry: the second half
/// carries schema version 2 (two more fields), interleaved with duplicates of version 1.
/// The table ends equal to the clean NDJSON run of the same events, and Python delta-rs
/// reads every event back as the producer sent it, nested values included.
#[test]
fn three_processes_land_avro_whose_schema_gains_fields_through_a_sigkill() {
    scale_out_locally(
        "kafka scale-out, Avro",
        Events::NestedGrowingAvro,
        events() / 4,
        false,
    );
}

/// The scale-out with the nested events as Protobuf in the Confluent wire format (message
/// indexes after the id), produced by confluent-kafka's ProtobufSerializer: events.proto
/// imports common.proto (a reference sluice fetches) and google/protobuf/timestamp.proto
/// (built in); the second half carries version 2 of both files, interleaved with
/// duplicates of version 1. The table ends equal to the clean NDJSON run of the events as
/// proto3 carries them (a null list or map is empty), and Python delta-rs reads every event
/// back as the producer sent it.
#[test]
fn three_processes_land_protobuf_whose_schema_gains_fields_through_a_sigkill() {
    scale_out_locally(
        "kafka scale-out, Protobuf",
        Events::NestedGrowingProtobuf,
        events() / 4,
        false,
    );
}

/// 100k events, or `SLUICE_KAFKA_EVENTS` (quicker local runs).
fn events() -> u64 {
    std::env::var("SLUICE_KAFKA_EVENTS")
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(100_000)
}

#[test]
fn three_processes_on_six_partitions_equal_one_clean_run_on_s3() {
    let seed = crate::common::seed("kafka scale-out on S3");
    let mut dir = tempfile::tempdir().unwrap();
    dir.disable_cleanup(std::env::var_os("SLUICE_KEEP_DIR").is_some());
    eprintln!("working in {}", dir.path().display());
    let broker = tansu();
    let s3 = moto("lake");
    let scenario = Scenario {
        dir: dir.path(),
        table: "s3://lake/events".to_string(),
        env: s3_env(&s3),
        broker: &broker,
        events: Events::Flat,
        hook: None,
        derived: false,
        registry: None,
    };
    scale_out(&scenario, events(), seed);
}

/// `status --source kafka:TOPIC --brokers`: each partition's end offset (the broker's high
/// watermark) minus the table's resume offset, the same offsets `status` reports as the
/// pipeline's positions, without a live run.
#[test]
fn status_shows_each_partition_s_lag_from_the_broker_and_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::servers::tansu();
    crate::servers::create_topic(&broker, "lagged", 2);
    let messages: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| {
            let value = format!("{{\"id\":{i},\"ts\":\"2026-10-03T10:{:02}:00Z\"}}", i % 60);
            (format!("k{i}"), value.into_bytes())
        })
        .collect();
    crate::servers::produce(&broker, "lagged", &messages);
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "[[fields]]\nname = \"id\"\ntype = \"int64\"\n\n[[fields]]\nname = \"ts\"\ntype = \"string\"\n",
    )
    .unwrap();
    let kafka = ["--source", "kafka:lagged", "--brokers", &broker.address];
    let mut run = vec!["run", "--table", t, "--window", "1h", "--key", "id"];
    run.extend(["--schema", schema.to_str().unwrap()]);
    run.extend(kafka);
    run.extend(["--max-events", "25", "--until-idle", "3s"]);
    crate::common::ok(&run);
    let mut args = vec!["status", "--table", t, "--format", "json"];
    args.extend(kafka);
    let status: serde_json::Value = serde_json::from_str(&crate::common::ok(&args)).unwrap();
    let lag = &status["lag"];
    let partitions = lag["partitions"].as_object().expect("partitions");
    assert_eq!(partitions.len(), 2, "{status}");
    let positions = &status["pipelines"][0]["positions"];
    let (mut resumed, mut waiting) = (0, 0);
    for (partition, p) in partitions {
        let resume = p["resume_offset"].as_i64();
        assert_eq!(
            resume,
            positions[format!("lagged/{partition}")]["offset"].as_i64(),
            "{status}"
        );
        let (end, from) = (p["end_offset"].as_i64().unwrap(), resume.unwrap_or(0));
        assert_eq!(p["records_waiting"].as_i64().unwrap(), (end - from).max(0));
        resumed += from;
        waiting += p["records_waiting"].as_i64().unwrap();
    }
    // The run read 25 messages and published them all; the broker's high watermarks may
    // lag behind what it holds (tansu's do), never ahead.
    assert_eq!(resumed, 25, "{status}");
    assert_eq!(lag["records_waiting"].as_i64().unwrap(), waiting);
    assert!(waiting <= 15, "{status}");
    let mut args = vec!["status", "--table", t];
    args.extend(kafka);
    let text = crate::common::ok(&args);
    assert!(
        text.contains(&format!(
            "lag       pipeline sluice of kafka:lagged: {waiting} records waiting"
        )),
        "{text}"
    );
}
