//! The benchmark's events as files land in production: gzipped NDJSON, a CSV export, a
//! Parquet export, and NDJSON objects under an S3 prefix (moto). Same rows as the plain
//! input, so the rows/s of each compare with (c)'s in one run.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::alternatives::BenchError;
use crate::moto::Moto;

/// The columns of the flat generated events, in the CSV's order.
const CSV_COLUMNS: [&str; 6] = ["event_id", "ts", "user_id", "country", "kind", "amount"];

/// Each file of `input` gzipped (default level, as `gzip` writes it) into `out`.
pub fn write_gzip(input: &Path, out: &Path) -> Result<(), BenchError> {
    fresh_dir(out)?;
    for (name, bytes) in files(input)? {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&bytes)?;
        std::fs::write(out.join(format!("{name}.gz")), e.finish()?)?;
    }
    Ok(())
}

/// Each file of `input` as the CSV export of its events into `out` (a header, one record
/// per line, text quoted only where it must be).
pub fn write_csv(input: &Path, out: &Path) -> Result<(), BenchError> {
    fresh_dir(out)?;
    for (name, bytes) in files(input)? {
        let mut csv = CSV_COLUMNS.join(",");
        csv.push('\n');
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(line)?;
            let fields = CSV_COLUMNS.map(|k| match &v[k] {
                serde_json::Value::String(s) if s.contains([',', '"', '\n']) => {
                    format!("\"{}\"", s.replace('"', "\"\""))
                }
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            });
            csv.push_str(&fields.join(","));
            csv.push('\n');
        }
        let stem = name.trim_end_matches(".ndjson");
        std::fs::write(out.join(format!("{stem}.csv")), csv)?;
    }
    Ok(())
}

/// Each file of `input` as a Parquet file of its events into `out`, as an export writes one:
/// the columns typed (`ts` a UTC timestamp in microseconds, numbers as the lines infer),
/// snappy, the writer's default row groups (up to 1M rows).
pub fn write_parquet(input: &Path, out: &Path) -> Result<(), BenchError> {
    use deltalake::arrow::compute::cast;
    use deltalake::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use deltalake::parquet::arrow::ArrowWriter;
    use deltalake::parquet::basic::Compression;
    use deltalake::parquet::file::properties::WriterProperties;
    fresh_dir(out)?;
    let files = crate::alternatives::input_files(input)?;
    let schema = crate::alternatives::schema_of(&files)?;
    let ts_type = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let ts = schema.index_of("ts")?;
    let typed: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match i == ts {
            true => f.as_ref().clone().with_data_type(ts_type.clone()),
            false => f.as_ref().clone(),
        })
        .collect();
    let typed = Arc::new(Schema::new(typed));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    for path in &files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let stem = name.trim_end_matches(".ndjson");
        let file = std::fs::File::create(out.join(format!("{stem}.parquet")))?;
        let mut writer = ArrowWriter::try_new(file, typed.clone(), Some(props.clone()))?;
        crate::alternatives::decode_all(std::slice::from_ref(path), &schema, |batch| {
            let mut columns = batch.columns().to_vec();
            columns[ts] = cast(&columns[ts], &ts_type)?;
            writer.write(&deltalake::arrow::array::RecordBatch::try_new(
                typed.clone(),
                columns,
            )?)?;
            Ok(())
        })?;
        writer.close()?;
    }
    Ok(())
}

/// Puts each file of `input` under `prefix` in the moto bucket; the source URL.
pub fn upload(moto: &Moto, input: &Path, prefix: &str) -> Result<String, BenchError> {
    let url = url::Url::parse(&format!("s3://{}/{prefix}/", moto.bucket))?;
    let options = moto.options().into_iter().collect();
    let store = sluice_source::source_store(&url, &options, Default::default())?;
    let runtime = tokio::runtime::Runtime::new()?;
    for (name, bytes) in files(input)? {
        let location = object_store::path::Path::from(format!("{prefix}/{name}"));
        let store: Arc<dyn object_store::ObjectStore> = store.clone();
        runtime.block_on(async move {
            use object_store::ObjectStoreExt;
            store.put(&location, bytes.into()).await
        })?;
    }
    Ok(url.to_string())
}

fn files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, BenchError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && !name.starts_with('.') {
            out.push((name, std::fs::read(entry.path())?));
        }
    }
    out.sort();
    Ok(out)
}

fn fresh_dir(dir: &Path) -> Result<(), BenchError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    Ok(())
}

/// The script of case (y): Polars `read_parquet` + `write_delta`.
pub const POLARS_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/py/polars_delta.py");

/// A Python that imports Polars and deltalake: `python`, else the venv `just test` installs
/// (`~/.cache/sluice/venv`); `None` if neither does.
pub fn polars(python: Option<&Path>) -> Option<std::path::PathBuf> {
    let venv =
        std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/sluice/venv/bin/python"));
    let python = python.map(Path::to_path_buf).or(venv)?;
    let imports = std::process::Command::new(&python)
        .args(["-c", "import polars, deltalake"])
        .output()
        .ok()?;
    imports.status.success().then_some(python)
}
