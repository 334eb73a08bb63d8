//! Decoding alone, no broker (issue 60): the flat input's lines as JSON, Avro and Protobuf
//! messages (the Confluent wire format of [`crate::avro`] and [`crate::protobuf`], their
//! schemas in the bench's registry), each turned into rows by sluice's own message decoding
//! in process: `Payloads::chunk` (the wire format and the schema, for Avro and Protobuf)
//! then `LineDecoder::decode` (event times, keys, exact conversions), in batches of
//! [`BATCH`] messages as a Kafka fetch hands them over. Rounds in alternation; rows/s of
//! each format from the median round.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_source::kafka::{MessageFormat, PayloadOptions, Payloads, RawMessage};
use sluice_source::registry::{RegistryAuth, RegistryOptions};
use sluice_source::{DecodeOptions, LineDecoder};
use sluice_window::TimeFormat;

use crate::alternatives::BenchError;

/// Messages per chunk (what one poll of a partition hands over at most).
pub const BATCH: usize = 10_000;

/// The formats measured, in the order of a round.
const FORMATS: [MessageFormat; 3] = [
    MessageFormat::Json,
    MessageFormat::Avro,
    MessageFormat::Protobuf,
];

/// Each format's decode time per round, and the rows each round decoded.
pub struct DecodeReport {
    pub messages: u64,
    /// Rows per round (the same for every format, or the report says which differ).
    pub rows: Vec<(MessageFormat, u64)>,
    pub times: Vec<(MessageFormat, Vec<Duration>)>,
}

/// Decodes the input's lines as each format, `runs` rounds; `None` when the registry cannot
/// be started (no Python).
pub fn decode_case(
    work: &Path,
    input: &Path,
    schema: &Path,
    runs: usize,
) -> Result<Option<DecodeReport>, BenchError> {
    let Some(registry) = crate::registry::start_registry(work)? else {
        return Ok(None);
    };
    let lines = lines_of(input)?;
    let messages =
        |encode: fn(&str) -> Vec<u8>| -> Vec<Vec<u8>> { lines.iter().map(|l| encode(l)).collect() };
    let by_format: Vec<(MessageFormat, Vec<Vec<u8>>)> = vec![
        (MessageFormat::Json, messages(|l| l.as_bytes().to_vec())),
        (MessageFormat::Avro, messages(crate::avro::encode)),
        (MessageFormat::Protobuf, messages(crate::protobuf::encode)),
    ];
    let record = sluice_source::RecordSchema::load(schema)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut times: Vec<(MessageFormat, Vec<Duration>)> =
        FORMATS.iter().map(|f| (*f, Vec::new())).collect();
    let mut rows: Vec<(MessageFormat, u64)> = Vec::new();
    for round in 0..runs {
        for (format, values) in &by_format {
            let registry = (*format != MessageFormat::Json)
                .then(|| RegistryOptions::new(&registry.url, RegistryAuth::None))
                .transpose()?;
            let options = PayloadOptions {
                format: *format,
                registry,
                meta: false,
            };
            let mut payloads = Payloads::new(&options)?;
            let mut decode_options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
            decode_options.key = vec!["event_id".into()];
            let mut decoder = LineDecoder::new(record.clone(), decode_options)?;
            // The schema is fetched before the clock starts (a run fetches it once).
            let warm = vec![RawMessage {
                offset: 0,
                value: values.first().cloned(),
                meta: None,
            }];
            runtime.block_on(payloads.chunk(warm))?;
            let started = Instant::now();
            let mut decoded_rows = 0u64;
            for (i, batch) in values.chunks(BATCH).enumerate() {
                let messages: Vec<RawMessage> = batch
                    .iter()
                    .enumerate()
                    .map(|(j, v)| RawMessage {
                        offset: (i * BATCH + j) as i64,
                        value: Some(v.clone()),
                        meta: None,
                    })
                    .collect();
                let (chunk, _) = runtime.block_on(payloads.chunk(messages))?;
                decoded_rows += decoder.decode(&chunk)?.batch.num_rows() as u64;
            }
            let took = started.elapsed();
            eprintln!(
                "decode round {} ({}): {:.2} s, {decoded_rows} rows",
                round + 1,
                format.name(),
                took.as_secs_f64()
            );
            if let Some((_, t)) = times.iter_mut().find(|(f, _)| f == format) {
                t.push(took);
            }
            if round == 0 {
                rows.push((*format, decoded_rows));
            }
        }
    }
    Ok(Some(DecodeReport {
        messages: lines.len() as u64,
        rows,
        times,
    }))
}

/// The input's lines (every file, in name order).
fn lines_of(input: &Path) -> Result<Vec<String>, BenchError> {
    let mut lines = Vec::new();
    for path in crate::alternatives::input_files(input)? {
        let text = std::fs::read_to_string(path)?;
        lines.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    Ok(lines)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn report(r: &mut String, d: &DecodeReport) {
    use std::fmt::Write as _;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(
        r,
        "\nDecoding alone, no broker: the flat input's {} lines as JSON, Avro and Protobuf messages (Confluent wire format, schemas from the bench's registry), decoded in process by `Payloads::chunk` + `LineDecoder::decode` in batches of {BATCH}; {} rounds in alternation, medians.\n",
        d.messages,
        d.times.first().map_or(0, |(_, t)| t.len())
    );
    let _ = writeln!(r, "| format | rows | decode | rows/s |");
    let _ = writeln!(r, "| --- | --- | --- | --- |");
    let rate = |format: MessageFormat| -> f64 {
        let rows = d
            .rows
            .iter()
            .find(|(f, _)| *f == format)
            .map_or(0, |(_, n)| *n);
        d.times
            .iter()
            .find(|(f, _)| *f == format)
            .map_or(f64::NAN, |(_, t)| {
                rows as f64 / median(t.clone()).as_secs_f64()
            })
    };
    for (format, t) in &d.times {
        let rows = d
            .rows
            .iter()
            .find(|(f, _)| f == format)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(
            r,
            "| {} | {rows} | {:.2} s | {:.2} M |",
            format.name(),
            median(t.clone()).as_secs_f64(),
            rate(*format) / 1e6
        );
    }
    let _ = writeln!(r, "\n| ratio (same run) | value | target | |");
    let _ = writeln!(r, "| --- | --- | --- | --- |");
    for format in [MessageFormat::Avro, MessageFormat::Protobuf] {
        let ratio = rate(format) / rate(MessageFormat::Json);
        let _ = writeln!(
            r,
            "| decode rows/s {} / JSON | {ratio:.2} | ≥ 1.5 | {} |",
            format.name(),
            verdict(ratio >= 1.5)
        );
    }
}
