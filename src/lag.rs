//! A pipeline's lag read from its table and its source, without a live run (`sluice status
//! --source`, or the source of `--config`): of a file source, the files the table's resume
//! positions have not reached, their bytes and the oldest one's modification time; of a
//! Kafka topic, each partition's end offset minus the table's resume offset.

use std::collections::BTreeMap;

#[cfg(feature = "kafka")]
use anyhow::Context;
use serde::Serialize;
use sluice_source::SourceFile;

use crate::args::table_flags::TableTarget;

/// What a pipeline has not read of its source.
#[derive(Debug, Clone, Serialize)]
pub struct Lag {
    pub pipeline: String,
    pub source: String,
    #[serde(flatten)]
    pub waiting: Waiting,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Waiting {
    Files {
        files: usize,
        files_waiting: usize,
        bytes_waiting: u64,
        /// The oldest waiting file's modification time, and how long ago that was.
        oldest_waiting_modified_ms: Option<i64>,
        oldest_waiting_age_ms: Option<i64>,
    },
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    Records {
        records_waiting: i64,
        partitions: BTreeMap<i32, PartitionLag>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionLag {
    /// The table's resume offset; `None`: the pipeline has not published from it.
    pub resume_offset: Option<i64>,
    pub end_offset: i64,
    pub records_waiting: i64,
}

/// The options that name the source, given to `status`.
#[derive(Debug, Clone, Default)]
pub struct SourceFlags {
    pub source: Option<String>,
    pub source_options: Vec<String>,
    pub brokers: Option<String>,
    pub pipeline: Option<String>,
}

/// The lag of the pipeline reading the source the flags (or the config file) name; `None`
/// when none is named. `resume`: each pipeline's resume offsets by source partition.
pub async fn source_lag(
    target: &TableTarget,
    flags: SourceFlags,
    resume: &BTreeMap<String, BTreeMap<String, i64>>,
    now_ms: i64,
) -> anyhow::Result<Option<Lag>> {
    let mut run = target.file.clone();
    run.table = Some(target.table.clone());
    run.source = flags.source.or(run.source);
    if !flags.source_options.is_empty() {
        run.source_options = flags.source_options;
    }
    run.brokers = flags.brokers.or(run.brokers);
    run.pipeline = flags.pipeline.or(run.pipeline);
    let Some(source) = run.source.clone() else {
        return Ok(None);
    };
    let settings = run.settings()?;
    let empty = BTreeMap::new();
    let resume = resume.get(&settings.pipeline).unwrap_or(&empty);
    let waiting = match &settings.kafka {
        None => {
            let files = crate::open::open_source(&settings, false)?;
            of_files(files.files(), resume, now_ms)
        }
        #[cfg(feature = "kafka")]
        Some(kafka) => {
            let options = kafka.options();
            let bounds = tokio::task::spawn_blocking(move || {
                sluice_source::kafka::partition_bounds(&options)
            })
            .await?
            .with_context(|| format!("asking {} for the end of each partition", kafka.brokers))?;
            of_topic(&kafka.topic, &bounds, resume, kafka.start)
        }
        #[cfg(not(feature = "kafka"))]
        Some(k) => {
            return Err(crate::exit::usage(format!(
                "--source kafka:{}: this sluice was built without Kafka support",
                k.topic
            )))
        }
    };
    Ok(Some(Lag {
        pipeline: settings.pipeline,
        source,
        waiting,
    }))
}

/// The files of a source past `resume` (each file's offset, by name).
pub fn of_files(files: &[SourceFile], resume: &BTreeMap<String, i64>, now_ms: i64) -> Waiting {
    let waiting: Vec<(&SourceFile, u64)> = files
        .iter()
        .map(|f| {
            (
                f,
                f.bytes_after(resume.get(f.name.as_ref()).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, bytes)| *bytes > 0)
        .collect();
    let oldest = waiting.iter().filter_map(|(f, _)| f.modified_ms).min();
    Waiting::Files {
        files: files.len(),
        files_waiting: waiting.len(),
        bytes_waiting: waiting.iter().map(|(_, b)| b).sum(),
        oldest_waiting_modified_ms: oldest,
        oldest_waiting_age_ms: oldest.map(|t| now_ms.saturating_sub(t).max(0)),
    }
}

/// Each partition's records from the table's resume offset (else where a new pipeline starts)
/// to its end.
#[cfg(feature = "kafka")]
fn of_topic(
    topic: &str,
    bounds: &[sluice_source::kafka::PartitionBounds],
    resume: &BTreeMap<String, i64>,
    start: sluice_source::kafka::StartAt,
) -> Waiting {
    use sluice_source::kafka::{partition_name, StartAt};
    let partitions: BTreeMap<i32, PartitionLag> = bounds
        .iter()
        .map(|b| {
            let resume_offset = resume.get(&partition_name(topic, b.partition)).copied();
            let from = match (resume_offset, start) {
                (Some(offset), _) => offset.max(b.low),
                (None, StartAt::Earliest) => b.low,
                (None, StartAt::Latest) => b.high,
            };
            let lag = PartitionLag {
                resume_offset,
                end_offset: b.high,
                records_waiting: b.high.saturating_sub(from).max(0),
            };
            (b.partition, lag)
        })
        .collect();
    Waiting::Records {
        records_waiting: partitions.values().map(|p| p.records_waiting).sum(),
        partitions,
    }
}

/// The lag for people, in one line: `pipeline P of SOURCE: 2 of 3 files waiting (...)`.
pub fn text(lag: &Lag) -> String {
    let waiting = match &lag.waiting {
        Waiting::Files {
            files,
            files_waiting: 0,
            ..
        } => format!(
            "nothing waiting in {}",
            crate::words::counted(*files as u64, "file")
        ),
        Waiting::Files {
            files,
            files_waiting,
            bytes_waiting,
            oldest_waiting_modified_ms,
            oldest_waiting_age_ms,
        } => format!(
            "{files_waiting} of {} waiting ({}){}",
            crate::words::counted(*files as u64, "file"),
            crate::words::human_bytes(*bytes_waiting as i64),
            match (oldest_waiting_modified_ms, oldest_waiting_age_ms) {
                (Some(t), Some(age)) => format!(
                    ", the oldest written {} ({} ago)",
                    chrono::DateTime::from_timestamp_millis(*t)
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                        .unwrap_or_default(),
                    crate::words::duration_ms(*age)
                ),
                _ => String::new(),
            }
        ),
        Waiting::Records {
            records_waiting,
            partitions,
        } => format!(
            "{records_waiting} records waiting ({})",
            partitions
                .iter()
                .map(|(p, l)| format!("partition {p}: {}", l.records_waiting))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("pipeline {} of {}: {waiting}", lag.pipeline, lag.source)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_source::compression::{Compression, COMPRESSED_LEN};

    use super::*;

    fn file(name: &str, size: u64, compressed: bool, modified_ms: i64) -> SourceFile {
        SourceFile {
            name: Arc::from(name),
            path: name.into(),
            len: if compressed { COMPRESSED_LEN } else { size },
            size,
            compression: if compressed {
                Compression::Gzip
            } else {
                Compression::None
            },
            modified_ms: Some(modified_ms),
        }
    }

    #[test]
    fn files_past_their_resume_offsets_with_the_oldest_one_s_age() {
        let files = [
            file("a", 100, false, 1_000),
            file("b", 100, false, 2_000),
            file("c.gz", 50, true, 3_000),
            file("d.gz", 70, true, 4_000),
        ];
        let resume = BTreeMap::from([
            ("a".to_string(), 100),
            ("b".to_string(), 40),
            ("c.gz".to_string(), COMPRESSED_LEN as i64),
        ]);
        assert_eq!(
            of_files(&files, &resume, 10_000),
            Waiting::Files {
                files: 4,
                files_waiting: 2,
                bytes_waiting: 60 + 70,
                oldest_waiting_modified_ms: Some(2_000),
                oldest_waiting_age_ms: Some(8_000),
            }
        );
        let read = BTreeMap::from([
            ("a".to_string(), 100),
            ("b".to_string(), 100),
            ("c.gz".to_string(), COMPRESSED_LEN as i64),
            ("d.gz".to_string(), COMPRESSED_LEN as i64),
        ]);
        assert!(matches!(
            of_files(&files, &read, 10_000),
            Waiting::Files {
                files_waiting: 0,
                bytes_waiting: 0,
                oldest_waiting_age_ms: None,
                ..
            }
        ));
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn partitions_from_their_resume_offsets_or_where_a_new_pipeline_starts() {
        use sluice_source::kafka::{PartitionBounds, StartAt};
        let bounds = [
            PartitionBounds {
                partition: 0,
                low: 0,
                high: 100,
            },
            PartitionBounds {
                partition: 1,
                low: 50,
                high: 80,
            },
            // Retention deleted what the table had not read yet: counted from the low end.
            PartitionBounds {
                partition: 2,
                low: 30,
                high: 40,
            },
        ];
        let resume = BTreeMap::from([("t/0".to_string(), 90), ("t/2".to_string(), 10)]);
        let lag = |start| match of_topic("t", &bounds, &resume, start) {
            Waiting::Records {
                records_waiting,
                partitions,
            } => (
                records_waiting,
                partitions
                    .values()
                    .map(|p| p.records_waiting)
                    .collect::<Vec<_>>(),
            ),
            other => panic!("{other:?}"),
        };
        assert_eq!(lag(StartAt::Earliest), (10 + 30 + 10, vec![10, 30, 10]));
        assert_eq!(lag(StartAt::Latest), (10 + 10, vec![10, 0, 10]));
    }
}
