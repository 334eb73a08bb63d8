//! The alternatives sluice is compared with, each run as its own process.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use deltalake::arrow::array::{Array, AsArray, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::json::reader::ReaderBuilder;
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::parquet::basic::Compression;
use deltalake::parquet::file::properties::WriterProperties;

pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// Rows per decoded batch (arrow-json's default).
const BATCH_ROWS: usize = 8192;
/// Bytes read from a file at a time.
const READ_BYTES: usize = 4 << 20;

/// The input's files, in name order.
pub(crate) fn input_files(dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.is_file());
    files.sort();
    Ok(files)
}

/// The record schema, inferred from the first lines as `sluice run` does.
pub(crate) fn schema_of(files: &[PathBuf]) -> Result<SchemaRef, BenchError> {
    let first = files.first().ok_or("the input has no files")?;
    let mut head = vec![0u8; 1 << 20];
    let n = File::open(first)?.read(&mut head)?;
    head.truncate(n);
    let lines = head.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    Ok(sluice_source::schema::infer(lines, 1000, &[])?)
}

/// Decodes every file in `READ_BYTES` reads, handing each batch to `each`.
pub(crate) fn decode_all(
    files: &[PathBuf],
    schema: &SchemaRef,
    mut each: impl FnMut(RecordBatch) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let mut buf = vec![0u8; READ_BYTES];
    for path in files {
        let mut decoder = ReaderBuilder::new(schema.clone())
            .with_batch_size(BATCH_ROWS)
            .build_decoder()?;
        let mut file = File::open(path)?;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let mut at = 0;
            while at < n {
                let used = decoder.decode(&buf[at..n])?;
                at += used;
                if used == 0 || decoder.len() >= BATCH_ROWS {
                    if let Some(batch) = decoder.flush()? {
                        each(batch)?;
                    }
                }
            }
        }
        if let Some(batch) = decoder.flush()? {
            each(batch)?;
        }
    }
    Ok(())
}

/// `(dt, hour)` of each row from its rfc3339 `ts` (`2026-10-03T14:...Z`): the floor reads the
/// address off the text, cheaper than sluice's full time parsing.
fn hours_of(batch: &RecordBatch) -> Result<Vec<(String, String)>, BenchError> {
    let ts = batch
        .column_by_name("ts")
        .ok_or("the input has no ts field")?
        .as_string_opt::<i32>()
        .ok_or("ts is not a string")?;
    Ok((0..ts.len())
        .map(|i| {
            let t = ts.value(i);
            (
                t.get(..10).unwrap_or("").to_string(),
                t.get(11..13).unwrap_or("").to_string(),
            )
        })
        .collect())
}

/// The rows of `batch` per `(dt, hour)`.
fn split_by_hour(
    batch: &RecordBatch,
) -> Result<BTreeMap<(String, String), RecordBatch>, BenchError> {
    let hours = hours_of(batch)?;
    let mut rows: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (i, h) in hours.into_iter().enumerate() {
        rows.entry(h).or_default().push(i as u32);
    }
    let mut out = BTreeMap::new();
    for (h, idx) in rows {
        out.insert(h, take_record_batch(batch, &UInt32Array::from(idx))?);
    }
    Ok(out)
}

/// (a) The floor: decode, then one snappy Parquet file per hour; with `overlap`, decoding and
/// encoding run on two threads joined by a bounded channel.
pub fn floor(input: &Path, out: &Path, overlap: bool) -> Result<(), BenchError> {
    let files = input_files(input)?;
    let schema = schema_of(&files)?;
    std::fs::create_dir_all(out)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writers: BTreeMap<(String, String), ArrowWriter<File>> = BTreeMap::new();
    let mut encode = |h: (String, String), b: RecordBatch| -> Result<(), BenchError> {
        let w = match writers.entry(h) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let (dt, hour) = e.key();
                let file = File::create(out.join(format!("dt={dt}-hour={hour}.parquet")))?;
                e.insert(ArrowWriter::try_new(
                    file,
                    schema.clone(),
                    Some(props.clone()),
                )?)
            }
        };
        w.write(&b)?;
        Ok(())
    };
    if overlap {
        let (tx, rx) = mpsc::sync_channel::<RecordBatch>(4);
        let decode_schema = schema.clone();
        let decoder = std::thread::spawn(move || -> Result<(), BenchError> {
            decode_all(&files, &decode_schema, |b| {
                tx.send(b).map_err(|_| "the encoder stopped".into())
            })
        });
        for batch in rx {
            for (h, b) in split_by_hour(&batch)? {
                encode(h, b)?;
            }
        }
        decoder.join().map_err(|_| "the decoder panicked")??;
    } else {
        decode_all(&files, &schema, |batch| {
            for (h, b) in split_by_hour(&batch)? {
                encode(h, b)?;
            }
            Ok(())
        })?;
    }
    for (_, w) in writers {
        w.close()?;
    }
    Ok(())
}

/// (b) deltalake's own write: the same batches with `dt` and `hour` columns, one append into
/// an hour-partitioned table.
pub fn delta_write(input: &Path, table: &Path) -> Result<(), BenchError> {
    let files = input_files(input)?;
    let schema = schema_of(&files)?;
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("dt", DataType::Utf8, false));
    fields.push(Field::new("hour", DataType::Utf8, false));
    let with_address = Arc::new(Schema::new(fields));
    let mut batches = Vec::new();
    decode_all(&files, &schema, |batch| {
        let hours = hours_of(&batch)?;
        let mut columns = batch.columns().to_vec();
        columns.push(Arc::new(StringArray::from_iter_values(
            hours.iter().map(|(d, _)| d.as_str()),
        )));
        columns.push(Arc::new(StringArray::from_iter_values(
            hours.iter().map(|(_, h)| h.as_str()),
        )));
        batches.push(RecordBatch::try_new(with_address.clone(), columns)?);
        Ok(())
    })?;
    std::fs::create_dir_all(table)?;
    let url = url::Url::from_directory_path(std::fs::canonicalize(table)?)
        .map_err(|_| "the table path is not absolute")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let t = deltalake::DeltaTable::try_from_url(url).await?;
        t.write(batches)
            .with_partition_columns(["dt", "hour"])
            .await?;
        Ok::<(), BenchError>(())
    })
}
