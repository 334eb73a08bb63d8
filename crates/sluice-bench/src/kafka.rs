//! The Kafka path against its ceiling (issue 21, item 4): the benchmark's flat input produced
//! to a local tansu topic (6 partitions, kept in memory), then, alternating, (k) `sluice run
//! --source kafka:` from the beginning to the end of the topic (`--max-events`: every message,
//! 1h windows, `--key event_id`, late rewrite, as (c)), and (p) a plain consumer (rdkafka, no
//! decoding, no writing) reading the topic to its end: the broker's own ceiling here, in the
//! same run. (kr) is (k) over a second topic holding the same lines with 30% of them bad
//! (issue 41): its memory against (k)'s. (ka) is (k) over a third topic holding the same lines
//! as Avro through a schema registry ([`crate::avro`]; issue 45), and (kpb) over a fourth as
//! Protobuf ([`crate::protobuf`]).
//!
//! Every message is a record batch of its own, as the Kafka tests produce them: tansu loses the
//! rest of a batch when a fetch starts inside it (`../shared/notes/test-servers.md`). Messages
//! carry the row key (`event_id`) as their key, as docs/kafka.md asks, so deliveries of one
//! row share a partition.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::alternatives::BenchError;

const TOPIC: &str = "events";
/// The topic of the lines with 30% bad.
const DIRTY_TOPIC: &str = "dirty";
pub const PARTITIONS: i32 = 6;

/// What [`kafka_case`] measured.
pub struct KafkaReport {
    pub messages: u64,
    /// Producing the topic (not a measured alternative: how long the setup took).
    pub produce: Duration,
    /// The plain consumer's wall time per run.
    pub plain: Vec<Duration>,
    /// `sluice run`'s wall time and peak RSS (KiB) per run.
    pub sluice: Vec<(Duration, u64)>,
    /// The same over the topic with bad lines.
    pub dirty: Vec<(Duration, u64)>,
    /// The same over the Avro topic (none without a registry).
    pub avro: Vec<(Duration, u64)>,
    /// The same over the Protobuf topic (none without a registry).
    pub protobuf: Vec<(Duration, u64)>,
    /// Decode busy seconds per run.
    pub decode_busy: Vec<DecodeBusy>,
}

/// The decode busy seconds of one run's (k), (ka) and (kpb).
pub struct DecodeBusy {
    json: f64,
    avro: Option<f64>,
    protobuf: Option<f64>,
}

/// A tansu broker, killed when dropped.
struct Broker {
    child: Child,
    address: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tansu binary `scripts/servers install` puts in the cache (or `SLUICE_TANSU`).
fn tansu_binary() -> Option<PathBuf> {
    crate::server::cached_binary("SLUICE_TANSU", "tansu/bin/tansu")
}

fn start_broker(tansu: &Path) -> Result<Broker, BenchError> {
    let port = crate::server::free_port()?;
    let url = format!("tcp://127.0.0.1:{port}");
    let mut child = Command::new(tansu)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    crate::server::wait_listening(&mut child, port, "tansu", Duration::from_secs(30))?;
    let broker = Broker {
        child,
        address: format!("127.0.0.1:{port}"),
    };
    for topic in [
        TOPIC,
        DIRTY_TOPIC,
        crate::avro::TOPIC,
        crate::protobuf::TOPIC,
    ] {
        let out = Command::new(tansu)
            .args(["topic", "create", "--broker", &url, "--partitions"])
            .arg(PARTITIONS.to_string())
            .arg(topic)
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "tansu topic create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    Ok(broker)
}

/// The `event_id` of an NDJSON line, if it has one.
fn event_id(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get("event_id")?.as_str().map(str::to_string)
}

/// Produces every line of the files in `input` (in name order) to `topic`, as `encode` makes
/// a message of it; returns how many.
fn produce(
    broker: &Broker,
    input: &Path,
    topic: &str,
    encode: fn(&str) -> Vec<u8>,
) -> Result<u64, BenchError> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("queue.buffering.max.messages", "200000")
        .create()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(input)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    let mut sent = 0u64;
    for file in files {
        for line in BufReader::new(std::fs::File::open(&file)?).lines() {
            let line = line?;
            let key = event_id(&line).unwrap_or_else(|| sent.to_string());
            let payload = encode(&line);
            let mut record = BaseRecord::to(topic).key(&key).payload(&payload);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((e, r))
                        if e.rdkafka_error_code()
                            == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                    {
                        record = r;
                        producer.poll(Duration::from_millis(20));
                    }
                    Err((e, _)) => return Err(format!("producing failed: {e}").into()),
                }
            }
            producer.poll(Duration::ZERO);
            sent += 1;
        }
    }
    producer.flush(Duration::from_secs(600))?;
    Ok(sent)
}

/// Reads every partition from its beginning until `messages` arrived; the wall time.
fn plain_consumer(broker: &Broker, messages: u64, group: &str) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let mut got = 0u64;
    let mut last = Instant::now();
    while got < messages {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => {
                got += 1;
                last = Instant::now();
            }
            Some(Err(e)) => return Err(format!("plain consumer: {e}").into()),
            None if last.elapsed() > Duration::from_secs(60) => {
                return Err(format!(
                    "plain consumer: {got} of {messages} messages, then 60 s of none"
                )
                .into())
            }
            None => {}
        }
    }
    Ok(started.elapsed())
}

/// Produces `input` (and `dirty`, the same lines 30% bad) to new local topics and measures
/// (k), (p) and (kr) `runs` times each, alternating; `None` when tansu is not installed
/// (`scripts/servers install`).
pub fn kafka_case(
    work: &Path,
    (input, dirty): (&Path, &Path),
    schema: &Path,
    sluice: &Path,
    runs: usize,
) -> Result<Option<KafkaReport>, BenchError> {
    let Some(tansu) = tansu_binary() else {
        eprintln!("kafka: tansu not installed (scripts/servers install); skipped");
        return Ok(None);
    };
    let broker = start_broker(&tansu)?;
    let started = Instant::now();
    let as_text = |line: &str| line.as_bytes().to_vec();
    let messages = produce(&broker, input, TOPIC, as_text)?;
    let produce_took = started.elapsed();
    eprintln!(
        "kafka: produced {messages} messages to {PARTITIONS} partitions in {:.1} s",
        produce_took.as_secs_f64()
    );
    let dirty_messages = produce(&broker, dirty, DIRTY_TOPIC, as_text)?;
    let registry = crate::registry::start_registry(work)?;
    if registry.is_some() {
        produce(&broker, input, crate::avro::TOPIC, crate::avro::encode)?;
        produce(
            &broker,
            input,
            crate::protobuf::TOPIC,
            crate::protobuf::encode,
        )?;
    }
    let mut report = KafkaReport {
        messages,
        produce: produce_took,
        plain: Vec::new(),
        sluice: Vec::new(),
        dirty: Vec::new(),
        avro: Vec::new(),
        protobuf: Vec::new(),
        decode_busy: Vec::new(),
    };
    for run in 1..=runs {
        let plain = plain_consumer(&broker, messages, &format!("bench-plain-{run}"))?;
        eprintln!("run {run} (p): {:.2} s", plain.as_secs_f64());
        report.plain.push(plain);
        let (clean, decode) = sluice_run(
            work,
            (&broker, None),
            (TOPIC, messages),
            schema,
            sluice,
            run,
        )?;
        eprintln!(
            "run {run} (k): {:.2} s, peak RSS {} MiB, decode busy {decode:.2} s",
            clean.0.as_secs_f64(),
            clean.1 / 1024
        );
        report.sluice.push(clean);
        let mut busy = DecodeBusy {
            json: decode,
            avro: None,
            protobuf: None,
        };
        if let Some(registry) = &registry {
            for (format, topic, name) in [
                ("avro", crate::avro::TOPIC, "ka"),
                ("protobuf", crate::protobuf::TOPIC, "kpb"),
            ] {
                let (measured, decode) = sluice_run(
                    work,
                    (&broker, Some((&registry.url, format))),
                    (topic, messages),
                    schema,
                    sluice,
                    run,
                )?;
                eprintln!(
                    "run {run} ({name}): {:.2} s, peak RSS {} MiB, decode busy {decode:.2} s",
                    measured.0.as_secs_f64(),
                    measured.1 / 1024
                );
                if format == "avro" {
                    report.avro.push(measured);
                    busy.avro = Some(decode);
                } else {
                    report.protobuf.push(measured);
                    busy.protobuf = Some(decode);
                }
            }
        }
        report.decode_busy.push(busy);
        let (bad, _) = sluice_run(
            work,
            (&broker, None),
            (DIRTY_TOPIC, dirty_messages),
            schema,
            sluice,
            run,
        )?;
        eprintln!(
            "run {run} (kr): {:.2} s, peak RSS {} MiB",
            bad.0.as_secs_f64(),
            bad.1 / 1024
        );
        report.dirty.push(bad);
    }
    Ok(Some(report))
}

/// One `sluice run` over `topic` from its beginning to its `messages`th message, into a new
/// table; its wall time and peak RSS (KiB), and its decode busy seconds. With `registry`
/// (its URL and a format), the topic is read in that format (`--input-format`) through it.
fn sluice_run(
    work: &Path,
    (broker, registry): (&Broker, Option<(&str, &str)>),
    (topic, messages): (&str, u64),
    schema: &Path,
    sluice: &Path,
    run: usize,
) -> Result<((Duration, u64), f64), BenchError> {
    let table = work.join(format!("out-{topic}-{run}"));
    let mut command = Command::new(sluice);
    command
        .args(["run", "--source", &format!("kafka:{topic}")])
        .args(["--brokers", &broker.address])
        .args(["--group", &format!("bench-{topic}-{run}")])
        .arg("--table")
        .arg(&table)
        .arg("--schema")
        .arg(schema)
        .args(["--key", "event_id", "--late", "rewrite", "--window", "1h"])
        .args(["--max-events", &messages.to_string(), "--format", "json"]);
    if let Some((url, format)) = registry {
        command.args(["--input-format", format, "--schema-registry", url]);
    }
    let log = work.join(format!("{topic}-{run}.log"));
    let measured = crate::usage::run_measured(command, &log)?;
    // The run read every message (a bench that lost some would be fast for nothing).
    let text = std::fs::read_to_string(&log)?;
    let summary: serde_json::Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or("sluice run printed no JSON summary")?;
    if summary["messages"].as_u64() != Some(messages) {
        return Err(format!("sluice run read {} of {messages}", summary["messages"]).into());
    }
    let decode = summary["busy_seconds"]["decode"]
        .as_f64()
        .unwrap_or_default();
    std::fs::remove_dir_all(&table).ok();
    std::fs::remove_dir_all(format!("{}_dlq", table.display())).ok();
    Ok((measured, decode))
}

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

/// The Kafka section of the report.
pub fn report(r: &mut String, k: &KafkaReport) {
    use std::fmt::Write as _;
    let n = k.messages as f64;
    let plain = median(k.plain.clone()).as_secs_f64();
    let wall = median(k.sluice.iter().map(|s| s.0).collect()).as_secs_f64();
    let rss_mib = median(k.sluice.iter().map(|s| s.1).collect()) as f64 / 1024.0;
    let (plain_rate, sluice_rate) = (n / plain, n / wall);
    let target = (0.8 * plain_rate).min(117_000.0);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(
        r,
        "\nKafka: the flat input's {} lines produced to a local tansu 0.6.0 topic ({PARTITIONS} \
         partitions, in memory, one message per record batch, keyed by `event_id`; producing \
         took {:.1} s), then read from the beginning to the end of the topic, {} times each in \
         alternation; medians.\n",
        k.messages,
        k.produce.as_secs_f64(),
        k.plain.len()
    );
    let _ = writeln!(r, "| | what | wall | rows/s | peak RSS |");
    let _ = writeln!(r, "| --- | --- | --- | --- | --- |");
    let _ = writeln!(
        r,
        "| (p) | plain consumer (rdkafka, no decoding, no writing): the broker's ceiling | {plain:.2} s | {:.0} k | |",
        plain_rate / 1e3
    );
    let _ = writeln!(
        r,
        "| (k) | `sluice run --source kafka:` to the end (`--max-events`), 1h windows, `--key event_id`, late rewrite | {wall:.2} s | {:.0} k | {rss_mib:.0} MiB |",
        sluice_rate / 1e3
    );
    if !k.avro.is_empty() {
        let wall = median(k.avro.iter().map(|s| s.0).collect()).as_secs_f64();
        let rss = median(k.avro.iter().map(|s| s.1).collect()) as f64 / 1024.0;
        let _ = writeln!(
            r,
            "| (ka) | (k) over the same lines as Avro (Confluent wire format, schema registry) | {wall:.2} s | {:.0} k | {rss:.0} MiB |",
            n / wall / 1e3
        );
    }
    if !k.protobuf.is_empty() {
        let wall = median(k.protobuf.iter().map(|s| s.0).collect()).as_secs_f64();
        let rss = median(k.protobuf.iter().map(|s| s.1).collect()) as f64 / 1024.0;
        let _ = writeln!(
            r,
            "| (kpb) | (k) over the same lines as Protobuf (Confluent wire format, schema registry) | {wall:.2} s | {:.0} k | {rss:.0} MiB |",
            n / wall / 1e3
        );
    }
    let _ = writeln!(r, "\n| ratio (same run) | value | target | |");
    let _ = writeln!(r, "| --- | --- | --- | --- |");
    let _ = writeln!(
        r,
        "| rows/s (k) | {:.0} k | ≥ {:.0} k (117 k, 3x kafka-delta-ingest here, or 0.8x (p), whichever is lower) | {} |",
        sluice_rate / 1e3,
        target / 1e3,
        verdict(sluice_rate >= target)
    );
    let _ = writeln!(
        r,
        "| rows/s (k)/(p) | {:.2} | (share of the broker's ceiling) | |",
        sluice_rate / plain_rate
    );
    let _ = writeln!(
        r,
        "| peak RSS (k) | {rss_mib:.0} MiB | ≤ 256 MiB | {} |",
        verdict(rss_mib <= 256.0)
    );
    if !k.avro.is_empty() {
        avro_report(r, k, (plain_rate, sluice_rate));
    }
    let dirty_mib = median(k.dirty.iter().map(|s| s.1).collect()) as f64 / 1024.0;
    let _ = writeln!(
        r,
        "| peak RSS (kr), the same lines 30% bad, / (k) | {:.2} ({dirty_mib:.0} MiB) | ≤ 1.2 | {} |",
        dirty_mib / rss_mib,
        verdict(dirty_mib / rss_mib <= 1.2)
    );
}

/// The Avro ratios of the Kafka section: (ka) against (k) and (p), and decode busy seconds
/// per million rows.
fn avro_report(r: &mut String, k: &KafkaReport, (plain_rate, json_rate): (f64, f64)) {
    use std::fmt::Write as _;
    let n = k.messages as f64;
    let wall = median(k.avro.iter().map(|s| s.0).collect()).as_secs_f64();
    let rate = n / wall;
    let per_million = |secs: Vec<f64>| {
        let mut secs = secs;
        secs.sort_by(f64::total_cmp);
        secs[secs.len() / 2] / n * 1e6
    };
    let json_busy = per_million(k.decode_busy.iter().map(|d| d.json).collect());
    let avro_busy = per_million(k.decode_busy.iter().filter_map(|d| d.avro).collect());
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(
        r,
        "| rows/s (ka)/(k) | {:.2} | ≥ 1 | {} |",
        rate / json_rate,
        verdict(rate >= json_rate)
    );
    let _ = writeln!(
        r,
        "| rows/s (ka)/(p) | {:.2} | ≥ 0.9 | {} |",
        rate / plain_rate,
        verdict(rate >= 0.9 * plain_rate)
    );
    let _ = writeln!(
        r,
        "| decode busy s per million rows, (ka) / (k) | {avro_busy:.2} / {json_busy:.2} = {:.2} | ≤ 0.5 | {} |",
        avro_busy / json_busy,
        verdict(avro_busy <= 0.5 * json_busy)
    );
    if k.protobuf.is_empty() {
        return;
    }
    // Protobuf has no target: read as proto3 JSON, it costs what JSON costs and more.
    let wall = median(k.protobuf.iter().map(|s| s.0).collect()).as_secs_f64();
    let protobuf_busy = per_million(k.decode_busy.iter().filter_map(|d| d.protobuf).collect());
    let _ = writeln!(
        r,
        "| rows/s (kpb)/(k) | {:.2} | (no target) | |",
        n / wall / json_rate
    );
    let _ = writeln!(
        r,
        "| decode busy s per million rows, (kpb) / (k) | {protobuf_busy:.2} / {json_busy:.2} = {:.2} | (no target) | |",
        protobuf_busy / json_busy
    );
}
