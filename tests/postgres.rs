//! A mirror of real PostgreSQL tables through their change log. A private PostgreSQL 15 runs
//! a seeded script of inserts, updates, deletes, key changes and key reuse over three tables;
//! its logical decoding output (wal2json) becomes Debezium change events, as a connector
//! emits them (a snapshot first, then each change with its log position), delivered at least
//! once and partly out of order as NDJSON files into one landing directory per table while a
//! followed `sluice run --envelope debezium` per table is SIGKILLed and restarted. Each Delta
//! table must then equal `SELECT * FROM t` in PostgreSQL, row for row, as Python delta-rs
//! reads it; a replay of the whole change log must change nothing. The same events also go
//! through Debezium's Avro converter (the schema registry, a tansu topic per table) into
//! mirrors that take their columns from the registry.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::common::{
    debezium_mirror, dlq_of, interop, ok, query_csv, seed, version, write_in, Rng, BIN,
};
use crate::servers::{postgres, Postgres};

/// A table of the script: its DDL, its key, its columns, and the query a snapshot reads it
/// with (values in the text forms wal2json prints, as one connector keeps them).
struct Source {
    name: &'static str,
    ddl: &'static str,
    key: &'static [&'static str],
    columns: &'static [&'static str],
    /// The `timestamptz` columns, which Debezium sends as ISO-8601 text in UTC
    /// (`io.debezium.time.ZonedTimestamp`); other values keep the text wal2json prints.
    zoned: &'static [&'static str],
    snapshot: &'static str,
    /// The row's fields as Debezium's Avro converter declares them (every column but the
    /// key nullable: a delete's `before` holds the key alone), for
    /// tests/interop/produce_debezium.py.
    avro: &'static str,
}

const SOURCES: [Source; 3] = [
    Source {
        name: "accounts",
        ddl: "CREATE TABLE accounts (id integer PRIMARY KEY, owner text NOT NULL, \
              balance numeric(12,2), active boolean, opened date, score double precision)",
        key: &["id"],
        columns: &["id", "owner", "balance", "active", "opened", "score"],
        zoned: &[],
        snapshot: "SELECT row_to_json(a) FROM accounts a",
        avro: r#"[{"name": "id", "type": "int"},
            {"name": "owner", "type": ["null", "string"]},
            {"name": "balance", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                                  "precision": 12, "scale": 2}]},
            {"name": "active", "type": ["null", "boolean"]},
            {"name": "opened", "type": ["null", {"type": "int", "logicalType": "date"}]},
            {"name": "score", "type": ["null", "double"]}]"#,
    },
    Source {
        name: "orders",
        ddl: "CREATE TABLE orders (order_id text PRIMARY KEY, account_id integer, \
              amount bigint, placed timestamptz, note text)",
        key: &["order_id"],
        columns: &["order_id", "account_id", "amount", "placed", "note"],
        zoned: &["placed"],
        snapshot: "SELECT row_to_json(o) FROM (SELECT order_id, account_id, amount, \
                   placed::text AS placed, note FROM orders) o",
        avro: r#"[{"name": "order_id", "type": "string"},
            {"name": "account_id", "type": ["null", "int"]},
            {"name": "amount", "type": ["null", "long"]},
            {"name": "placed", "type": ["null", "string"]},
            {"name": "note", "type": ["null", "string"]},
            {"name": "email", "type": ["null", "string"], "default": null}]"#,
    },
    Source {
        name: "order_lines",
        ddl: "CREATE TABLE order_lines (order_id text, line integer, sku text, qty integer, \
              PRIMARY KEY (order_id, line))",
        key: &["order_id", "line"],
        columns: &["order_id", "line", "sku", "qty"],
        zoned: &[],
        snapshot: "SELECT row_to_json(l) FROM order_lines l",
        avro: r#"[{"name": "order_id", "type": "string"}, {"name": "line", "type": "int"},
            {"name": "sku", "type": ["null", "string"]},
            {"name": "qty", "type": ["null", "int"]}]"#,
    },
];

/// A SQL text literal.
fn text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

const NAMES: [&str; 8] = [
    "ada",
    "bob",
    "zoë",
    "o'brien",
    "a,b",
    "quote\"d",
    "line\nbreak",
    "名前",
];

/// The seeded script: what each statement writes, as SQL. Keeps the live and deleted keys of
/// each table so updates and deletes hit rows that exist and deleted keys come back.
struct Script {
    rng: Rng,
    live: [Vec<String>; 3],
    deleted: [Vec<String>; 3],
    next_id: i64,
    /// Whether `orders` has its column added mid-script (`email`, after the others).
    altered: bool,
}

impl Script {
    fn new(seed: u64) -> Script {
        Script {
            rng: Rng(seed),
            live: Default::default(),
            deleted: Default::default(),
            next_id: 1,
            altered: false,
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n as u64) as usize
    }

    fn maybe_null(&mut self, value: String, nulls: bool) -> String {
        if nulls && self.rng.below(6) == 0 {
            "NULL".into()
        } else {
            value
        }
    }

    /// The values of a row of table `t` with key `key`, as SQL literals in column order
    /// after the key; no NULL in a snapshot row (a stream's first rows name every type).
    fn values(&mut self, t: usize, nulls: bool) -> Vec<String> {
        let name = format!("{} {}", NAMES[self.pick(NAMES.len())], self.rng.below(100));
        match t {
            0 => {
                let cents = self.rng.below(2_000_000) as i64 - 500_000;
                let balance = format!(
                    "{}{}.{:02}",
                    if cents < 0 { "-" } else { "" },
                    cents.abs() / 100,
                    cents.abs() % 100
                );
                let active = ["true", "false"][self.pick(2)].to_string();
                let opened = format!(
                    "'2026-{:02}-{:02}'",
                    1 + self.rng.below(12),
                    1 + self.rng.below(28)
                );
                let score = format!("{}", self.rng.below(1 << 20) as f64 / 64.0);
                vec![
                    text(&name),
                    self.maybe_null(balance, nulls),
                    self.maybe_null(active, nulls),
                    self.maybe_null(opened, nulls),
                    self.maybe_null(score, nulls),
                ]
            }
            1 => {
                let account = (1 + self.rng.below(50)).to_string();
                let amount = (self.rng.below(2_000_000_000_000) as i64 - 10_000_000).to_string();
                let placed = format!(
                    "'2026-10-{:02} {:02}:{:02}:{:02}.{:06}+00'",
                    1 + self.rng.below(28),
                    self.rng.below(24),
                    self.rng.below(60),
                    self.rng.below(60),
                    self.rng.below(1_000_000)
                );
                let mut values = vec![
                    self.maybe_null(account, nulls),
                    self.maybe_null(amount, nulls),
                    self.maybe_null(placed, nulls),
                    self.maybe_null(text(&name), nulls),
                ];
                if self.altered {
                    let email = text(&format!("{}@example.org", self.rng.below(1000)));
                    values.push(self.maybe_null(email, nulls));
                }
                values
            }
            _ => {
                let sku = text(&format!("SKU-{:03}", self.rng.below(1000)));
                let qty = (1 + self.rng.below(20)).to_string();
                vec![self.maybe_null(sku, nulls), self.maybe_null(qty, nulls)]
            }
        }
    }

    /// A fresh key of table `t`, as SQL literals.
    fn fresh_key(&mut self, t: usize) -> Vec<String> {
        self.next_id += 1;
        let id = self.next_id;
        match t {
            0 => vec![id.to_string()],
            1 => vec![text(&format!("o-{id}"))],
            _ => vec![text(&format!("o-{}", self.rng.below(40))), id.to_string()],
        }
    }

    fn insert(&mut self, t: usize, key: Vec<String>, nulls: bool) -> String {
        let s = &SOURCES[t];
        let mut values = key.clone();
        values.extend(self.values(t, nulls));
        self.live[t].push(key.join(","));
        format!("INSERT INTO {} VALUES ({});", s.name, values.join(", "))
    }

    fn key_predicate(t: usize, key: &str) -> String {
        let parts: Vec<&str> = key.split(',').collect();
        SOURCES[t]
            .key
            .iter()
            .zip(parts)
            .map(|(c, v)| format!("{c} = {v}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// One statement of the script.
    fn statement(&mut self) -> String {
        let t = self.pick(3);
        let roll = self.rng.below(100);
        if self.live[t].is_empty() || roll < 35 {
            let key = self.fresh_key(t);
            return self.insert(t, key, true);
        }
        if roll < 45 && !self.deleted[t].is_empty() {
            // Key reuse: a deleted key comes back.
            let i = self.pick(self.deleted[t].len());
            let key = self.deleted[t].swap_remove(i);
            return self.insert(t, key.split(',').map(str::to_string).collect(), true);
        }
        let i = self.pick(self.live[t].len());
        let key = self.live[t][i].clone();
        let at = Self::key_predicate(t, &key);
        if roll < 62 {
            self.live[t].swap_remove(i);
            self.deleted[t].push(key);
            return format!("DELETE FROM {} WHERE {at};", SOURCES[t].name);
        }
        if t == 0 && roll < 66 {
            // A key change: Debezium emits a delete of the old key and a create of the new.
            self.next_id += 1;
            self.live[t][i] = self.next_id.to_string();
            self.deleted[t].push(key);
            return format!("UPDATE accounts SET id = {} WHERE {at};", self.next_id);
        }
        let s = &SOURCES[t];
        let values = self.values(t, true);
        let mut columns = s.columns[s.key.len()..].to_vec();
        if t == 1 && self.altered {
            columns.push("email");
        }
        let sets: Vec<String> = columns
            .iter()
            .zip(values)
            .filter(|_| self.rng.below(2) == 0)
            .map(|(c, v)| format!("{c} = {v}"))
            .collect();
        let sets = if sets.is_empty() {
            format!("{} = {}", s.columns[s.key.len()], self.values(t, false)[0])
        } else {
            sets.join(", ")
        };
        format!("UPDATE {} SET {sets} WHERE {at};", s.name)
    }
}

/// An LSN (`0/1527580`) as the number Debezium puts in `source.lsn`.
fn lsn(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').expect("an LSN is HI/LO");
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// Milliseconds since the epoch of a wal2json commit time (`2026-12-06 13:09:01.216431+00`).
fn epoch_ms(time: &str) -> i64 {
    let (date, rest) = time.split_once(' ').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let clock = rest.trim_end_matches("+00");
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, "0"));
    let t: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let ms = format!("{fraction:0<3}")[..3].parse::<i64>().unwrap();
    ((days * 24 + t[0]) * 60 + t[1]) * 60_000 + t[2] * 1000 + ms
}

/// The Debezium connector of this test: wal2json (format 2) changes and snapshot rows into
/// change events, one list per table in log order.
struct Connector {
    events: [Vec<String>; 3],
}

impl Connector {
    fn event(
        t: usize,
        op: &str,
        before: Value,
        after: Value,
        lsn: u64,
        xid: u64,
        ts_ms: i64,
    ) -> String {
        let source = json!({
            "version": "2.7.0.Final", "connector": "postgresql", "name": "pg",
            "ts_ms": ts_ms, "snapshot": if op == "r" { "true" } else { "false" },
            "db": "postgres", "schema": "public", "table": SOURCES[t].name,
            "txId": xid, "lsn": lsn,
        });
        let event =
            json!({"before": before, "after": after, "op": op, "source": source, "ts_ms": ts_ms});
        event.to_string()
    }

    /// The row of a wal2json column list, every column of the table present (null where the
    /// list has none: a delete names only the key).
    fn row(t: usize, columns: &Value) -> Value {
        let mut row = Map::new();
        for c in SOURCES[t].columns {
            row.insert(c.to_string(), Value::Null);
        }
        for c in columns.as_array().unwrap() {
            row.insert(c["name"].as_str().unwrap().into(), c["value"].clone());
        }
        Self::zoned(t, Value::Object(row))
    }

    /// `row` with its `timestamptz` values (`2026-10-03 12:00:00.5+00`, the server in UTC)
    /// as Debezium sends them (`2026-10-03T12:00:00.5Z`).
    fn zoned(t: usize, mut row: Value) -> Value {
        for c in SOURCES[t].zoned {
            if let Some(text) = row[*c].as_str() {
                let utc = text.strip_suffix("+00").expect("the server runs in UTC");
                row[*c] = Value::String(utc.replacen(' ', "T", 1) + "Z");
            }
        }
        row
    }

    fn key_of(t: usize, row: &Value) -> Vec<Value> {
        SOURCES[t].key.iter().map(|k| row[*k].clone()).collect()
    }

    fn snapshot(&mut self, t: usize, rows: &str, at_lsn: u64, ts_ms: i64) {
        for line in rows.lines() {
            let after = Self::zoned(t, serde_json::from_str(line).unwrap());
            self.events[t].push(Self::event(t, "r", Value::Null, after, at_lsn, 0, ts_ms));
        }
    }

    fn change(&mut self, line: &str) {
        let change: Value = serde_json::from_str(line).unwrap();
        let action = change["action"].as_str().unwrap();
        if !matches!(action, "I" | "U" | "D") {
            return;
        }
        // A connector captures the script's tables only.
        let Some(t) = SOURCES.iter().position(|s| change["table"] == s.name) else {
            return;
        };
        let (at, xid) = (
            lsn(change["lsn"].as_str().unwrap()),
            change["xid"].as_u64().unwrap(),
        );
        let ts_ms = epoch_ms(change["timestamp"].as_str().unwrap());
        let mut push = |op: &str, before: Value, after: Value| {
            self.events[t].push(Self::event(t, op, before, after, at, xid, ts_ms));
        };
        match action {
            "I" => push("c", Value::Null, Self::row(t, &change["columns"])),
            "D" => push("d", Self::row(t, &change["identity"]), Value::Null),
            _ => {
                let after = Self::row(t, &change["columns"]);
                let old = change.get("identity").map(|i| Self::row(t, i));
                match old {
                    Some(old) if Self::key_of(t, &old) != Self::key_of(t, &after) => {
                        push("d", old, Value::Null);
                        push("c", Value::Null, after);
                    }
                    _ => push("u", Value::Null, after),
                }
            }
        }
    }
}

/// Runs the script on `pg`: the tables and their first rows, a replication slot, a snapshot,
/// then `statements` statements in transactions of 1 to 4; returns the change events.
fn capture(pg: &Postgres, seed: u64, statements: usize) -> Connector {
    let mut script = Script::new(seed);
    let mut setup = String::new();
    for (t, s) in SOURCES.iter().enumerate() {
        setup += s.ddl;
        setup += ";\n";
        for _ in 0..10 {
            let key = script.fresh_key(t);
            setup += &script.insert(t, key, false);
            setup += "\n";
        }
    }
    pg.sql(&setup);
    let slot = pg.sql("SELECT lsn FROM pg_create_logical_replication_slot('sluice', 'wal2json');");
    // WAL of another table first: the first change of the script's tables must not start at
    // the slot's consistent point, the position the snapshot's rows carry (a delete of a
    // snapshot row at that same position would not order after it: see docs/cdc.md).
    pg.sql("CREATE TABLE spacer (n integer); INSERT INTO spacer VALUES (1);");
    let mut connector = Connector {
        events: Default::default(),
    };
    let now_ms: i64 = pg
        .sql("SELECT (extract(epoch FROM now()) * 1000)::bigint;")
        .trim()
        .parse()
        .unwrap();
    for (t, s) in SOURCES.iter().enumerate() {
        connector.snapshot(
            t,
            &pg.sql(&format!("{};", s.snapshot)),
            lsn(slot.trim()),
            now_ms,
        );
    }
    let mut sql = String::new();
    let mut written = 0;
    while written < statements {
        if !script.altered && written >= statements / 2 {
            // The source's schema changes mid-stream: later changes of orders carry a column
            // the mirror has not seen.
            sql += "ALTER TABLE orders ADD COLUMN email text;\n";
            script.altered = true;
        }
        let n = 1 + script.pick(4);
        sql += "BEGIN;\n";
        for _ in 0..n {
            sql += &script.statement();
            sql += "\n";
        }
        sql += "COMMIT;\n";
        written += n;
    }
    pg.sql(&sql);
    let changes = pg.sql(
        "SELECT data FROM pg_logical_slot_get_changes('sluice', NULL, NULL, 'format-version', '2', \
         'include-lsn', '1', 'include-xids', '1', 'include-timestamp', '1');",
    );
    for line in changes.lines() {
        connector.change(line);
    }
    connector
}

/// At-least-once, partly out-of-order delivery of `events` as NDJSON files: chunks shuffled
/// inside, some events delivered again in a later file, and twice a connector restart that
/// sends the last events again.
fn deliveries(events: &[String], rng: &mut Rng) -> Vec<String> {
    let mut files: Vec<Vec<String>> = Vec::new();
    let mut at = 0;
    while at < events.len() {
        let n = (5 + rng.below(30) as usize).min(events.len() - at);
        let mut chunk: Vec<String> = events[at..at + n].to_vec();
        for i in (1..chunk.len()).rev() {
            chunk.swap(i, rng.below(i as u64 + 1) as usize);
        }
        if rng.below(4) == 0 {
            // A connector restart: the last events sent again.
            let back = rng.below(40) as usize;
            chunk.extend(events[at.saturating_sub(back)..at].iter().cloned());
        }
        files.push(chunk);
        at += n;
    }
    for f in 1..files.len() {
        for _ in 0..rng.below(3) {
            let from = rng.below(f as u64) as usize;
            let again = files[from][rng.below(files[from].len() as u64) as usize].clone();
            files[f].push(again);
        }
    }
    files.into_iter().map(|f| f.join("\n") + "\n").collect()
}

fn spawn(args: &[String]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The versions a table's change log implies, as `sluice query` prints them in CSV (key
/// values, start, end; sorted): each change that is not a delete, from its log position to
/// the next change of its key (empty: current).
fn implied_versions(source: &Source, events: &[String]) -> Vec<String> {
    let mut by_key: std::collections::BTreeMap<String, Vec<(u64, bool)>> = Default::default();
    for e in events {
        let e: Value = serde_json::from_str(e).unwrap();
        let delete = e["op"] == "d";
        let row = if delete { &e["before"] } else { &e["after"] };
        let key: Vec<String> = source
            .key
            .iter()
            .map(|k| match &row[*k] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            })
            .collect();
        let at = e["source"]["lsn"].as_u64().unwrap();
        by_key.entry(key.join(",")).or_default().push((at, delete));
    }
    let mut out = Vec::new();
    for (key, mut changes) in by_key {
        changes.sort();
        changes.dedup();
        let positions = changes.len();
        changes.dedup_by_key(|c| c.0);
        assert_eq!(
            changes.len(),
            positions,
            "{key}: two changes at one log position"
        );
        for (j, (at, delete)) in changes.iter().enumerate() {
            if !delete {
                let end = changes
                    .get(j + 1)
                    .map(|n| n.0.to_string())
                    .unwrap_or_default();
                out.push(format!("{key},{at},{end}"));
            }
        }
    }
    out.sort();
    out
}

/// `SELECT * FROM t` in PostgreSQL, with the column types and the key, as a JSON file for
/// tests/interop/compare_pg.py.
fn expected(pg: &Postgres, s: &Source, path: &Path) {
    let columns = pg.sql(&format!(
        "SELECT column_name || '|' || data_type FROM information_schema.columns \
         WHERE table_name = '{}' ORDER BY ordinal_position;",
        s.name
    ));
    let columns: Vec<Value> = columns
        .lines()
        .map(|l| {
            let (n, t) = l.split_once('|').unwrap();
            json!([n, t])
        })
        .collect();
    let rows: Vec<Value> = pg
        .sql(&format!("SELECT row_to_json(t) FROM {} t;", s.name))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let doc = json!({"key": s.key, "columns": columns, "rows": rows});
    std::fs::write(path, doc.to_string()).unwrap();
}

/// Where a connector delivers a table's change events: NDJSON files in a landing directory,
/// or Avro messages (Debezium's Avro converter, through the schema registry) on a Kafka topic.
enum Landing {
    Files,
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    Avro {
        brokers: String,
        registry: String,
        topic: String,
    },
}

/// A consumer group no run has used: each run joins its own (tansu 0.6 can keep a SIGKILLed
/// member in a group past a new member's `--until-idle`, or leave a group stuck with no
/// member, so that the new one is never handed a partition; sluice resumes from the table's
/// positions, whatever the group).
fn fresh_group(topic: &str) -> String {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{topic}-run-{n}")
}

/// One table's pipeline: its landing (and scratch) directory, its Delta table, and the
/// deliveries a connector makes (a file each), the first `delivered` of them made.
struct Lane {
    source: &'static Source,
    /// `--scd 2`: the table keeps every version.
    history: bool,
    landing: Landing,
    input: PathBuf,
    table: PathBuf,
    files: Vec<String>,
    delivered: usize,
}

impl Lane {
    fn deliver(&mut self, n: usize) {
        let end = (self.delivered + n).min(self.files.len());
        match &self.landing {
            Landing::Files => {
                for i in self.delivered..end {
                    write_in(&self.input, &format!("{i:04}.ndjson"), &self.files[i]);
                }
            }
            Landing::Avro { .. } => self.produce(&self.files[self.delivered..end].concat()),
        }
        self.delivered = end;
    }

    /// The whole change log delivered again.
    fn redeliver(&self, events: &[String]) {
        let log = events.join("\n") + "\n";
        match &self.landing {
            Landing::Files => write_in(&self.input, "9999-replay.ndjson", &log),
            Landing::Avro { .. } => self.produce(&log),
        }
    }

    /// `changes` (NDJSON) produced to the lane's topic as Avro.
    fn produce(&self, changes: &str) {
        let Landing::Avro {
            brokers,
            registry,
            topic,
        } = &self.landing
        else {
            unreachable!("a lane of files is written, not produced")
        };
        if changes.is_empty() {
            return;
        }
        write_in(&self.input, "changes.ndjson", changes);
        let file = self.input.join("changes.ndjson");
        let key = self.source.key.join(",");
        let args: [&std::ffi::OsStr; 11] = [
            "--format".as_ref(),
            "avro".as_ref(),
            "--registry".as_ref(),
            registry.as_ref(),
            "--row".as_ref(),
            self.source.avro.as_ref(),
            "--key".as_ref(),
            key.as_ref(),
            brokers.as_ref(),
            topic.as_ref(),
            file.as_os_str(),
        ];
        interop("produce_debezium.py", &args);
    }

    fn args(&self, follow: bool) -> Vec<String> {
        let key = self.source.key.join(",");
        let mut args: Vec<String> = match &self.landing {
            Landing::Files => {
                let source = format!("ndjson:{}", self.input.display());
                vec!["run".into(), "--source".into(), source]
            }
            Landing::Avro {
                brokers,
                registry,
                topic,
            } => [
                "run",
                "--source",
                &format!("kafka:{topic}"),
                "--brokers",
                brokers,
                "--input-format",
                "avro",
                "--schema-registry",
                registry,
                "--until-idle",
                "3s",
                "--group",
                &fresh_group(topic),
            ]
            .map(String::from)
            .into(),
        };
        args.extend(
            ["--lateness", "1h", "--table", self.table.to_str().unwrap()]
                .into_iter()
                .chain(debezium_mirror(&key))
                .map(String::from),
        );
        if self.history {
            args.extend(["--scd", "2"].map(String::from));
        }
        if follow && matches!(self.landing, Landing::Avro { .. }) {
            // A Kafka source is always followed; a pause of 1 s publishes the open window.
            args.extend(["--idle-timeout", "1s"].map(String::from));
        } else if follow {
            // A pause of 1 s publishes the open window: kills land between commits, and the
            // window's later changes take the late path.
            args.extend(
                [
                    "--follow",
                    "--poll-interval",
                    "200ms",
                    "--idle-timeout",
                    "1s",
                    "--until-idle",
                    "3s",
                ]
                .map(String::from),
            );
        }
        args
    }

    fn run_to_end(&self) {
        let args = self.args(false);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The reasons and details of the first dead letters, if any.
    fn dead_letters(&self) -> Vec<String> {
        let dlq = dlq_of(&self.table);
        if !dlq.exists() {
            return Vec::new();
        }
        query_csv(&[("d", &dlq)], "SELECT reason, detail, raw FROM d LIMIT 5")
    }
}

#[test]
fn postgres_tables_mirror_through_sigkills() {
    mirror_through_sigkills("postgres mirror", &[false, true], |_| Landing::Files);
}

/// The same through Debezium's Avro converter: each table's change events produced as Avro
/// (confluent-kafka's AvroSerializer with the suite's registry: `numeric` a decimal, `date` a
/// date, the key a record of its own, a tombstone after each delete) to a tansu topic of its
/// own, mirrored by followed runs that take the new tables' columns from the registry.
#[cfg(feature = "kafka")]
#[test]
fn postgres_tables_mirror_through_avro_and_sigkills() {
    use crate::servers::{create_topic, tansu, Registry};
    let broker = tansu();
    let state = tempfile::tempdir().unwrap();
    let registry = Registry::start(state.path().join("registry.json"));
    mirror_through_sigkills("postgres avro mirror", &[false], |name| {
        let topic = format!("pg.public.{name}");
        create_topic(&broker, &topic, 1);
        Landing::Avro {
            brokers: broker.address.clone(),
            registry: registry.url.clone(),
            topic,
        }
    });
}

/// A mirror (and a history where `histories` holds true) of each table of the script, each
/// fed its own deliveries to the landing `landing_of(table name)` gives, through followed
/// runs SIGKILLed and restarted; then each equals its PostgreSQL table and a replay of the
/// whole change log changes nothing.
fn mirror_through_sigkills(what: &str, histories: &[bool], landing_of: impl Fn(&str) -> Landing) {
    let seed = seed(what);
    let mut rng = Rng(seed ^ 0x5eed);
    let pg = postgres();
    let connector = capture(&pg, seed, 1500);
    let dir = tempfile::tempdir().unwrap();
    let mut lanes: Vec<Lane> = Vec::new();
    for &history in histories {
        for (source, events) in SOURCES.iter().zip(&connector.events) {
            let name = format!("{}{}", source.name, if history { "_history" } else { "" });
            lanes.push(Lane {
                source,
                history,
                landing: landing_of(&name),
                input: dir.path().join(format!("in-{name}")),
                table: dir.path().join(name),
                files: deliveries(events, &mut rng),
                delivered: 0,
            });
        }
    }
    for lane in &mut lanes {
        lane.deliver(2);
    }
    // Five rounds: a followed run per table, files arriving, then a SIGKILL of each run
    // still going.
    let (mut kills, mut progressed) = (0, 0);
    for _ in 0..5 {
        let before: Vec<i64> = lanes.iter().map(|l| version(&l.table)).collect();
        let runs: Vec<Child> = lanes.iter().map(|l| spawn(&l.args(true))).collect();
        std::thread::sleep(Duration::from_millis(300 + rng.below(1500)));
        for lane in &mut lanes {
            let n = 1 + rng.below(lane.files.len() as u64 / 4) as usize;
            lane.deliver(n);
        }
        std::thread::sleep(Duration::from_millis(rng.below(2500)));
        for ((mut run, lane), before) in runs.into_iter().zip(&lanes).zip(before) {
            if run.try_wait().unwrap().is_none() {
                run.kill().unwrap();
                kills += 1;
                progressed += usize::from(version(&lane.table) > before);
            }
            let out = run.wait_with_output().unwrap();
            assert!(
                out.status.success() || out.status.code().is_none(),
                "a followed run failed on its own (seed {seed}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert!(
        progressed > 0,
        "no kill landed after a commit (seed {seed})"
    );
    let mut summary = Vec::new();
    for (lane, events) in lanes.iter_mut().zip(connector.events.iter().cycle()) {
        lane.deliver(lane.files.len());
        lane.run_to_end();
        let name = lane
            .table
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let dead = lane.dead_letters();
        assert!(
            dead.is_empty(),
            "{name}: dead letters (seed {seed}): {dead:?}"
        );
        let want = dir.path().join(format!("{name}.expected.json"));
        expected(&pg, lane.source, &want);
        let mut args = vec![lane.table.as_os_str(), want.as_os_str()];
        if lane.history {
            args.push("--current".as_ref());
            let sql = format!(
                "SELECT {}, __start_at, __end_at FROM t",
                lane.source.key.join(", ")
            );
            let mut versions = query_csv(&[("t", &lane.table)], &sql);
            versions.sort();
            let implied = implied_versions(lane.source, events);
            assert_eq!(versions, implied, "{name}: versions (seed {seed})");
            summary.push(format!(
                "{name}: {} versions as the log implies",
                versions.len()
            ));
        }
        let said = interop("compare_pg.py", &args);
        summary.push(format!(
            "{} ({} events in {} files)",
            said.trim(),
            events.len(),
            lane.files.len()
        ));
    }
    eprintln!(
        "{what}: {}; {kills} SIGKILLs ({progressed} after the killed run had committed; seed {seed})",
        summary.join("; ")
    );

    // A replay of the whole change log changes nothing.
    for (lane, events) in lanes.iter().zip(connector.events.iter().cycle()) {
        let v = version(&lane.table);
        lane.redeliver(events);
        lane.run_to_end();
        let name = lane.source.name;
        assert_eq!(
            version(&lane.table),
            v,
            "{name}: a replay committed (seed {seed})"
        );
    }
}
