//! The values of single flags: durations, byte sizes, shares, `KEY=VALUE` pairs,
//! `--source` and a `--from`/`--to` range, each with its usage error.

use std::path::PathBuf;

use sluice_window::{parse_duration_ms, parse_instant, EventTime};

use crate::exit::usage;

/// An optional duration option.
pub(super) fn duration_option(flag: &str, text: Option<&str>) -> anyhow::Result<Option<i64>> {
    text.map(|t| parse_duration_ms(t).map_err(|e| usage(format!("{flag}: {e}"))))
        .transpose()
}

/// A duration flag's milliseconds: as given, else its default (from [`sluice_ingest::defaults`]).
pub(crate) fn duration_or_default(
    flag: &str,
    given: &Option<String>,
    default: &str,
) -> anyhow::Result<i64> {
    parse_duration_ms(given.as_deref().unwrap_or(default))
        .map_err(|e| usage(format!("{flag}: {e}")))
}

/// `--source`: `ndjson:PATH`, `csv:PATH` or `parquet:PATH` (the path, and the format its
/// prefix names) or `kafka:TOPIC` (the topic).
pub(super) type Source = (PathBuf, Option<String>, Option<&'static str>);

pub(super) fn parse_source(source: Option<&str>) -> anyhow::Result<Source> {
    let source = source.ok_or_else(|| usage("--source is required (ndjson:PATH)"))?;
    match source.split_once(':') {
        Some(("ndjson", path)) if !path.is_empty() => {
            Ok((PathBuf::from(path), None, Some("ndjson")))
        }
        Some(("csv", path)) if !path.is_empty() => Ok((PathBuf::from(path), None, Some("csv"))),
        Some(("parquet", path)) if !path.is_empty() => {
            Ok((PathBuf::from(path), None, Some("parquet")))
        }
        Some(("kafka", topic)) if valid_topic(topic) => {
            Ok((PathBuf::new(), Some(topic.to_string()), None))
        }
        Some(("kafka", _)) => Err(usage(format!(
            "--source {source:?}: a Kafka topic name has 1 to 249 letters, digits, '.', '_' or '-'"
        ))),
        _ => Err(usage(format!(
            "--source {source:?}: expected ndjson:PATH, csv:PATH, parquet:PATH or kafka:TOPIC"
        ))),
    }
}

/// The URL a file source's location is, if it is one (`s3://bucket/prefix/`,
/// `file:///data/in`); a local path is not.
pub fn source_url(location: &std::path::Path) -> Option<url::Url> {
    let text = location.to_str()?;
    // `C:\data` parses as a URL of scheme `c`: a scheme is at least two letters here.
    let (scheme, _) = text.split_once("://")?;
    if scheme.len() < 2 {
        return None;
    }
    url::Url::parse(text).ok()
}

/// Kafka's rule for topic names.
fn valid_topic(topic: &str) -> bool {
    (1..=249).contains(&topic.len())
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `10%` or `0.1`: a share from 0 to 1.
pub fn parse_ratio(text: &str) -> Option<f64> {
    let text = text.trim();
    let share = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok()? / 100.0,
        None => text.parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&share).then_some(share)
}

/// `256MiB`, `64MB`, `4KiB`, `1048576`.
pub fn parse_bytes(text: &str) -> Option<usize> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let n: usize = text[..digits].parse().ok()?;
    let unit: usize = match text[digits..].trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// The one parser of `KEY=VALUE` flag values (`--storage-option`, `--kafka-option`,
/// `--derive`, `--derive-sql`, `--derive-key`): the key trimmed and not empty, the value as
/// given (it may hold `=`).
pub fn key_value(flag: &str, text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(usage(format!("{flag} {text:?}: expected KEY=VALUE"))),
    }
}

/// The range `[from, to)` given as `--from` and `--to`.
pub fn parse_range_of(from: &str, to: &str) -> anyhow::Result<(EventTime, EventTime)> {
    let from = parse_instant(from).map_err(|e| usage(format!("--from: {e}")))?;
    let to = parse_instant(to).map_err(|e| usage(format!("--to: {e}")))?;
    if to <= from {
        return Err(usage("--to: must be after --from"));
    }
    Ok((from, to))
}
