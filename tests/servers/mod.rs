//! Real servers for end-to-end tests, one private instance per test on a free loopback port,
//! stopped when dropped: a Kafka-protocol broker (tansu), an S3 server (moto), and a schema
//! registry (the suite's own, tests/servers/registry.py: none is installable here).
//!
//! `scripts/servers install` puts both under `~/.cache/sluice` (the test command runs it);
//! `SLUICE_TANSU` / `SLUICE_MOTO` name other binaries.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    pub address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cache() -> PathBuf {
    PathBuf::from(std::env::var("HOME").expect("HOME is set")).join(".cache/sluice")
}

fn binary(env: &str, default: PathBuf) -> PathBuf {
    let path = std::env::var_os(env).map(PathBuf::from).unwrap_or(default);
    assert!(
        path.exists(),
        "{} not found: run `scripts/servers install` (the test command does), or set {env}",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn wait_listening(port: u16, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The suite's schema registry (tests/servers/registry.py), its schemas kept in a file so it
/// can be stopped and started again on its port with the same ids.
pub struct Registry {
    server: Option<Server>,
    port: u16,
    state: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Registry {
    pub fn start(state: PathBuf) -> Registry {
        let port = free_port();
        let mut registry = Registry {
            server: None,
            port,
            state,
            url: format!("http://127.0.0.1:{port}"),
        };
        registry.restart();
        registry
    }

    /// Stops it (requests are refused until [`Registry::restart`]).
    pub fn stop(&mut self) {
        self.server = None;
    }

    pub fn restart(&mut self) {
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/registry.py");
        let mut child = Command::new(crate::common::python())
            .arg(script)
            .args(["--port", &self.port.to_string(), "--state"])
            .arg(&self.state)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the registry starts");
        wait_listening(self.port, "the schema registry", &mut child);
        self.server = Some(Server {
            child,
            address: format!("127.0.0.1:{}", self.port),
        });
    }
}

pub fn tansu_binary() -> PathBuf {
    binary("SLUICE_TANSU", cache().join("tansu/bin/tansu"))
}

/// A tansu broker keeping everything in memory.
pub fn tansu() -> Server {
    let port = free_port();
    let url = format!("tcp://127.0.0.1:{port}");
    let mut child = Command::new(tansu_binary())
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
            "--storage-engine",
            "memory://tansu/",
        ])
        // SLUICE_TANSU_LOG=<file> keeps the broker's own log (group membership, missed
        // heartbeats; `SLUICE_TANSU_RUST_LOG` sets its filter) for a look after a failure.
        .stdout(tansu_log())
        .stderr(tansu_log())
        .envs(std::env::var_os("SLUICE_TANSU_LOG").map(|_| {
            let filter = std::env::var("SLUICE_TANSU_RUST_LOG")
                .unwrap_or_else(|_| "warn,tansu_broker::coordinator=info".into());
            ("RUST_LOG", filter)
        }))
        .spawn()
        .expect("tansu starts");
    wait_listening(port, "tansu", &mut child);
    Server {
        child,
        address: format!("127.0.0.1:{port}"),
    }
}

fn tansu_log() -> Stdio {
    match std::env::var_os("SLUICE_TANSU_LOG") {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("tansu log file"),
        ),
        None => Stdio::null(),
    }
}

/// Creates `topic` with `partitions` partitions on the broker.
pub fn create_topic(broker: &Server, topic: &str, partitions: u32) {
    let out = Command::new(tansu_binary())
        .args([
            "topic",
            "create",
            "--broker",
            &format!("tcp://{}", broker.address),
            "--partitions",
            &partitions.to_string(),
            topic,
        ])
        .output()
        .expect("tansu topic create runs");
    assert!(
        out.status.success(),
        "tansu topic create failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Produces `messages` (key, payload) in order, each in a record batch of its own: tansu
/// loses the rest of a batch when a fetch starts inside it (../shared/notes/test-servers.md),
/// which a resumed consumer does.
pub fn produce(broker: &Server, topic: &str, messages: &[(String, Vec<u8>)]) {
    produce_values(
        broker,
        topic,
        messages
            .iter()
            .map(|(k, p)| (k.as_str(), Some(p.as_slice()))),
    );
}

/// [`produce`], of messages that may have no value (`None`: a tombstone).
pub fn produce_values<'m>(
    broker: &Server,
    topic: &str,
    messages: impl IntoIterator<Item = (&'m str, Option<&'m [u8]>)>,
) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("a producer");
    for (key, payload) in messages {
        let mut record = BaseRecord::<str, [u8]>::to(topic).key(key);
        if let Some(p) = payload {
            record = record.payload(p);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, r)) => {
                    // A full local queue: let deliveries drain, then retry.
                    assert!(
                        matches!(
                            e.rdkafka_error_code(),
                            Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "producing failed: {e}"
                    );
                    record = r;
                    producer.poll(Duration::from_millis(50));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer
        .flush(Duration::from_secs(120))
        .expect("every message delivered");
}

/// A moto S3 server with one bucket.
pub fn moto(bucket: &str) -> Server {
    let port = free_port();
    let mut child = Command::new(binary("SLUICE_MOTO", cache().join("venv/bin/moto_server")))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    wait_listening(port, "moto", &mut child);
    // Create the bucket (moto takes unsigned requests).
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("moto answers");
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "creating bucket {bucket}: {reply}"
    );
    Server {
        child,
        address: format!("http://127.0.0.1:{port}"),
    }
}

/// Puts `files` (key, local path) into `bucket` of `s3` with boto3, keys exactly as given.
pub fn put_objects(s3: &Server, bucket: &str, files: &[(String, PathBuf)]) {
    let script = "import sys, boto3\n\
                  s3 = boto3.client('s3')\n\
                  b = sys.argv[1]\n\
                  for key, path in zip(sys.argv[2::2], sys.argv[3::2]):\n    \
                      s3.upload_file(path, b, key)\n";
    let mut cmd = Command::new(crate::common::python());
    cmd.args(["-c", script, bucket]);
    for (key, path) in files {
        cmd.arg(key).arg(path);
    }
    for (k, v) in s3_env(s3) {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python runs");
    assert!(
        out.status.success(),
        "boto3 put: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The environment that points object_store and deltalake at a moto server.
pub fn s3_env(moto: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", moto.address.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}

/// Every message of `topic` as the broker serves it now, as `(key, partition, offset)`: each
/// partition read from its beginning until nothing arrives for 3 s (tansu under-reports high
/// watermarks, so the end is never taken from them). For a look after a failed comparison.
pub fn topic_contents(broker: &Server, topic: &str, partitions: u32) -> Vec<(String, i32, i64)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("group.id", "sluice-test-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition");
    }
    consumer.assign(&tpl).expect("assigned");
    let mut found = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(3) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                found.push((key, m.partition(), m.offset()));
                last = Instant::now();
            }
            Some(Err(e)) => panic!("reading {topic} back: {e}"),
            None => {}
        }
    }
    found
}

/// A private PostgreSQL 15 cluster with logical decoding (wal2json), in a temporary data
/// directory, listening on a free loopback port; stopped (fast shutdown) when dropped.
/// `scripts/servers install` installs Debian's `postgresql-15` and `postgresql-15-wal2json`;
/// `SLUICE_PG_BIN` names another directory of PostgreSQL binaries.
pub struct Postgres {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

fn pg_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("SLUICE_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    binary("SLUICE_PG_BIN", dir.join(name))
}

/// PostgreSQL refuses to run as root: as root, its processes run as the `postgres` user.
fn as_pg_user(cmd: &mut Command, dir: &std::path::Path) {
    use std::os::unix::process::CommandExt;
    if effective_uid() != 0 {
        return;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "no `postgres` user to run PostgreSQL as"
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let (uid, gid) = (id("-u"), id("-g"));
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
    cmd.uid(uid).gid(gid);
}

fn effective_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

pub fn postgres() -> Postgres {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut initdb = Command::new(pg_bin("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-A", "trust", "-U", "sluice", "--no-sync", "-E", "UTF8"])
        .args(["--locale", "C"]);
    as_pg_user(&mut initdb, dir.path());
    let out = initdb.output().expect("initdb runs");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let mut cmd = Command::new(pg_bin("postgres"));
    cmd.arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir.path())
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "wal_level=logical",
        ])
        .args(["-c", "max_replication_slots=4", "-c", "max_wal_senders=4"])
        .args(["-c", "fsync=off", "-c", "TimeZone=UTC"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    as_pg_user(&mut cmd, dir.path());
    let mut child = cmd.spawn().expect("postgres starts");
    wait_listening(port, "postgres", &mut child);
    let pg = Postgres {
        child,
        port,
        _dir: dir,
    };
    // Listening comes before accepting connections: wait for a query to answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while pg.try_sql("SELECT 1").is_err() {
        assert!(Instant::now() < deadline, "postgres did not answer in 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    pg
}

impl Postgres {
    fn try_sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(pg_bin("psql"))
            .args([
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "sluice",
                "-d",
                "postgres",
            ])
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                child.stdin.take().unwrap().write_all(sql.as_bytes())?;
                child.wait_with_output()
            })
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs `sql` (any number of statements) with psql; what it printed, one row a line,
    /// columns separated by `|`.
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql)
            .unwrap_or_else(|e| panic!("psql failed: {e}\n{sql}"))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT: a fast shutdown, which ends the backends too.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
