//! The matrix's sources: where a cell's changes are written, how, and a file at a time, so
//! that a run can meet a source while it is still being written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::model::Event;
use super::Servers;
use crate::common::python;

/// Files (or groups of messages) the deliveries are cut into.
pub const FILES: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Ndjson,
    Gzip,
    Zstd,
    Csv,
    Parquet,
    /// NDJSON objects under an S3 prefix (moto).
    S3,
    KafkaJson,
    /// Avro through the schema registry.
    KafkaAvro,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Ndjson,
        Kind::Gzip,
        Kind::Zstd,
        Kind::Csv,
        Kind::Parquet,
        Kind::S3,
        Kind::KafkaJson,
        Kind::KafkaAvro,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ndjson => "ndjson",
            Kind::Gzip => "ndjson.gz",
            Kind::Zstd => "ndjson.zst",
            Kind::Csv => "csv",
            Kind::Parquet => "parquet",
            Kind::S3 => "s3",
            Kind::KafkaJson => "kafka-json",
            Kind::KafkaAvro => "kafka-avro",
        }
    }

    pub fn is_kafka(self) -> bool {
        matches!(self, Kind::KafkaJson | Kind::KafkaAvro)
    }
}

/// A cell's source: its changes cut into [`FILES`] parts (files, objects or groups of
/// messages), written a part at a time.
pub struct Source<'a> {
    pub kind: Kind,
    servers: &'a Servers,
    /// The local directory of a file source (and where S3 objects are written first).
    dir: PathBuf,
    /// The cell's name: its S3 prefix and Kafka topic.
    name: String,
    parts: Vec<Vec<Event>>,
    /// Parts written whole.
    written: usize,
    /// Messages produced so far (a Kafka source), in delivery order.
    produced: usize,
}

impl<'a> Source<'a> {
    pub fn new(
        kind: Kind,
        servers: &'a Servers,
        dir: &Path,
        name: &str,
        parts: Vec<Vec<Event>>,
    ) -> Self {
        let dir = dir.join("source");
        std::fs::create_dir_all(&dir).unwrap();
        if kind.is_kafka() {
            crate::servers::create_topic(servers.kafka(), name, 2);
        }
        Source {
            kind,
            servers,
            dir,
            name: name.to_string(),
            parts,
            written: 0,
            produced: 0,
        }
    }

    /// The options naming the source for `sluice run` (and backfill, rewrite).
    pub fn options(&self) -> Vec<String> {
        let dir = self.dir.display();
        let mut o = match self.kind {
            Kind::Ndjson | Kind::Gzip | Kind::Zstd => vec![format!("--source=ndjson:{dir}")],
            Kind::Csv => vec![format!("--source=csv:{dir}")],
            Kind::Parquet => vec![format!("--source=parquet:{dir}")],
            Kind::S3 => vec![format!("--source=ndjson:s3://matrix/{}/", self.name)],
            Kind::KafkaJson | Kind::KafkaAvro => vec![
                format!("--source=kafka:{}", self.name),
                format!("--brokers={}", self.servers.kafka().address),
            ],
        };
        if self.kind == Kind::KafkaAvro {
            o.push("--input-format=avro".into());
            o.push(format!("--schema-registry={}", self.servers.registry().url));
        }
        o
    }

    /// The environment the source needs (an S3 endpoint's).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match self.kind {
            Kind::S3 => crate::servers::s3_env(self.servers.s3()),
            _ => Vec::new(),
        }
    }

    /// Writes the parts up to `parts` whole; with `partial`, the part after them is written
    /// in part: a file cut inside a record (a compressed stream half written, a Parquet file
    /// without its footer), or half of its messages.
    pub fn write_to(&mut self, parts: usize, partial: bool) {
        let parts = parts.min(self.parts.len());
        let partial = partial && parts < self.parts.len();
        if self.kind.is_kafka() {
            let whole: usize = self.parts[..parts].iter().map(Vec::len).sum();
            let target = whole
                + if partial {
                    self.parts[parts].len() / 2
                } else {
                    0
                };
            if target > self.produced {
                let flat: Vec<&Event> = self.parts.iter().flatten().collect();
                self.produce(&flat[self.produced..target]);
                self.produced = target;
            }
        } else {
            for i in self.written..parts {
                self.write_file(i, false);
            }
            if partial {
                self.write_file(parts, true);
            }
        }
        self.written = self.written.max(parts);
    }

    fn write_file(&self, i: usize, partial: bool) {
        let name = format!("part-{i}.{}", self.extension());
        let whole = self.encode(&self.parts[i], &name);
        let bytes = if partial {
            cut(&whole, self.kind)
        } else {
            whole
        };
        let path = self.dir.join(&name);
        std::fs::write(&path, &bytes).unwrap();
        if self.kind == Kind::S3 {
            let key = format!("{}/{name}", self.name);
            crate::servers::put_objects(self.servers.s3(), "matrix", &[(key, path)]);
        }
    }

    fn extension(&self) -> &'static str {
        match self.kind {
            Kind::Gzip => "ndjson.gz",
            Kind::Zstd => "ndjson.zst",
            Kind::Csv => "csv",
            Kind::Parquet => "parquet",
            _ => "ndjson",
        }
    }

    fn encode(&self, events: &[Event], name: &str) -> Vec<u8> {
        let lines: String = events.iter().map(|e| e.json() + "\n").collect();
        match self.kind {
            Kind::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(lines.as_bytes()).unwrap();
                e.finish().unwrap()
            }
            Kind::Zstd => zstd::encode_all(lines.as_bytes(), 3).unwrap(),
            Kind::Csv => {
                let rows: String = events.iter().map(|e| e.csv() + "\n").collect();
                format!("id,seq,op,v,ts\n{rows}").into_bytes()
            }
            Kind::Parquet => {
                let path = self.dir.join(format!(".{name}.tmp"));
                pipe(&["parquet", path.to_str().unwrap()], &lines, &[]);
                let bytes = std::fs::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                bytes
            }
            _ => lines.into_bytes(),
        }
    }

    fn produce(&self, events: &[&Event]) {
        if events.is_empty() {
            return;
        }
        match self.kind {
            Kind::KafkaJson => {
                let messages: Vec<(String, Vec<u8>)> = events
                    .iter()
                    .map(|e| (e.id.to_string(), e.json().into_bytes()))
                    .collect();
                crate::servers::produce(self.servers.kafka(), &self.name, &messages);
            }
            _ => {
                let lines: String = events.iter().map(|e| e.json() + "\n").collect();
                let broker = &self.servers.kafka().address;
                let registry = &self.servers.registry().url;
                pipe(&["avro", broker, &self.name, registry], &lines, &[]);
            }
        }
    }
}

/// `bytes` of a file of `kind` as it is half way through being written: a compressed
/// stream or Parquet file cut (no footer yet), a text file cut inside a record.
fn cut(bytes: &[u8], kind: Kind) -> Vec<u8> {
    match kind {
        Kind::Gzip | Kind::Zstd => bytes[..bytes.len() / 2].to_vec(),
        Kind::Parquet => bytes[..bytes.len() * 3 / 4].to_vec(),
        _ => {
            let mid = bytes.len() * 3 / 5;
            let line_start = bytes[..mid]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            // Inside the record that starts there: a few bytes into it.
            bytes[..(line_start + 7).min(bytes.len())].to_vec()
        }
    }
}

fn interop(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script)
}

/// Runs `matrix.py args` with `input` on its standard input; its standard output.
pub fn pipe(args: &[&str], input: &str, env: &[(&str, String)]) -> String {
    let mut child = Command::new(python())
        .arg(interop("matrix.py"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "matrix.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Reads `tables` with Python delta-rs: per table, its version and rows (the columns the
/// matrix compares).
pub fn read_tables(
    tables: &[PathBuf],
) -> Vec<(i64, Vec<serde_json::Map<String, serde_json::Value>>)> {
    if tables.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["read".to_string()];
    args.extend(tables.iter().map(|t| t.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    pipe(&args, "", &[])
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let rows = v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_object().unwrap().clone())
                .collect();
            (v["version"].as_i64().unwrap(), rows)
        })
        .collect()
}
