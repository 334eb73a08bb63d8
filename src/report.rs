//! `sluice query` and `sluice windows`: read-only views of tables.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use deltalake::arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, UInt64Array,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use sluice_sql::{Format, TableRef};

use crate::args::table_flags::TableFlags;
use crate::exit::usage;

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// A table to query, NAME=PATH, or PATH (named after its last segment: tables/temps is
    /// temps); repeatable.
    #[arg(
        long = "table",
        value_name = "[NAME=]PATH",
        required_unless_present = "config"
    )]
    pub tables: Vec<String>,
    /// A run's config file (docs/cli.md, "Options from a config file"): its table (named after its last
    /// segment) and derived tables (by their names) are queried too, with its storage options
    /// where none are given.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Read every table as of this version (time travel).
    #[arg(long)]
    pub version: Option<u64>,
    /// table, csv or json (lines).
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Object store option, KEY=VALUE (repeatable).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<String>,
    /// The SQL statement.
    pub sql: String,
}

#[derive(Debug, Args)]
pub struct WindowsArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// table, csv or json (lines).
    #[arg(long, default_value = "table")]
    pub format: String,
    /// List the table's column history instead (the versions that added columns, from the
    /// retained log).
    #[arg(long)]
    pub schema_history: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// Only list the orphans.
    #[arg(long)]
    pub dry_run: bool,
    /// Only files at least this old: keeps a running ingester's not-yet-published parts.
    #[arg(long, default_value = "1h")]
    pub older_than: String,
}

#[derive(Debug, Args)]
pub struct VacuumArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// Delete files removed longer ago than this, e.g. 30d. [default: the table's
    /// delta.deletedFileRetentionDuration, 7 days if unset]
    #[arg(long)]
    pub retention: Option<String>,
    /// Allow a --retention shorter than the table's delta.deletedFileRetentionDuration.
    #[arg(long)]
    pub force_retention: bool,
    /// Delete the files; without it, only list what would be deleted (a dry run).
    #[arg(long)]
    pub apply: bool,
}

pub async fn vacuum(args: VacuumArgs) -> anyhow::Result<()> {
    let retention_ms = match args.retention.as_deref() {
        None => None,
        Some(text) => Some(
            sluice_window::parse_duration_ms(text)
                .map_err(|e| usage(format!("--retention: {e}")))?,
        ),
    };
    let target = args.target.resolve()?;
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    let table = sluice_publish::open_table(&target.table, &storage, None).await?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let (_, vacuumed) = sluice_publish::vacuum(
        table,
        retention_ms,
        args.force_retention,
        !args.apply,
        now_ms,
    )
    .await
    .with_context(|| format!("vacuuming {}", target.table))?;
    for f in &vacuumed.files {
        println!(
            "{}{f}",
            if args.apply {
                "removed "
            } else {
                "would remove "
            }
        );
    }
    println!(
        "sluice vacuum: {} removed from the table longer ago than {} {}",
        crate::words::counted(vacuumed.files.len() as u64, "file"),
        args.retention.as_deref().unwrap_or("the table's retention"),
        if args.apply {
            "deleted"
        } else {
            "found (dry run, nothing deleted; --apply deletes them)"
        }
    );
    Ok(())
}

pub async fn gc(args: GcArgs) -> anyhow::Result<()> {
    let older_than_ms = sluice_window::parse_duration_ms(&args.older_than)
        .map_err(|e| usage(format!("--older-than: {e}")))?;
    let target = args.target.resolve()?;
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    let table = sluice_publish::open_table(&target.table, &storage, None).await?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let orphans = sluice_publish::find_orphans(&table, older_than_ms, now_ms).await?;
    let bytes: u64 = orphans.iter().map(|o| o.size_bytes).sum();
    for o in &orphans {
        println!(
            "{}{}\t{} bytes",
            if args.dry_run {
                "would remove "
            } else {
                "removing "
            },
            o.path,
            o.size_bytes
        );
    }
    if !args.dry_run {
        sluice_publish::delete_orphans(&table, &orphans).await?;
    }
    println!(
        "sluice gc: {} ({bytes} bytes) older than {} {}",
        crate::words::counted(orphans.len() as u64, "orphaned file"),
        args.older_than,
        if args.dry_run {
            "found (dry run, nothing removed)"
        } else {
            "removed"
        }
    );
    Ok(())
}

fn parse_format(name: &str) -> anyhow::Result<Format> {
    Format::parse_name(name)
        .ok_or_else(|| usage(format!("--format {name:?}: use table, csv or json")))
}

/// `--storage-option` pairs for the store of the table at `location`, checked
/// ([`crate::args::store_options`]).
pub fn parse_storage_options(
    location: &str,
    kvs: &[String],
) -> anyhow::Result<HashMap<String, String>> {
    crate::args::store_options("--storage-option", location, kvs)
}

pub async fn query(args: QueryArgs) -> anyhow::Result<()> {
    let format = parse_format(&args.format)?;
    let mut tables = Vec::new();
    let (from_file, file_storage) = match &args.config {
        Some(path) => crate::args::table_flags::config_tables(path)?,
        None => (Vec::new(), Vec::new()),
    };
    for t in &args.tables {
        let mut r = TableRef::parse(t)
            .ok_or_else(|| usage(format!("--table {t:?}: expected NAME=PATH or PATH")))?;
        r.version = args.version;
        tables.push(r);
    }
    // The config file's tables, but those a flag names.
    for mut r in from_file {
        if !tables.iter().any(|t| t.name == r.name) {
            r.version = args.version;
            tables.push(r);
        }
    }
    // The options go to every table's store: each checks them.
    let storage_options = if args.storage_options.is_empty() {
        &file_storage
    } else {
        &args.storage_options
    };
    let storage = parse_storage_options("", storage_options)?;
    for t in &tables {
        crate::args::check_store_options_at("--storage-option", &t.location, &storage)?;
    }
    let ctx = sluice_sql::session(&tables, &storage)
        .await
        .context("opening tables")?;
    let batches = sluice_sql::query_with_schema(&ctx, &args.sql)
        .await
        .with_context(|| {
            let names: Vec<String> = tables
                .iter()
                .map(|t| format!("{} ({})", t.name, t.location))
                .collect();
            format!("query failed: {} (tables: {})", args.sql, names.join(", "))
        })?;
    print(&sluice_sql::format(&batches, format)?)
}

pub async fn windows(args: WindowsArgs) -> anyhow::Result<()> {
    let format = parse_format(&args.format)?;
    let target = args.target.resolve()?;
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    let table = sluice_publish::open_table(&target.table, &storage, None).await?;
    if args.schema_history {
        let history = sluice_publish::schema_history(&table).await?;
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("version", DataType::UInt64, false),
                Field::new("change", DataType::Utf8, false),
                Field::new("columns", DataType::UInt64, false),
                Field::new("fields", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    history.iter().map(|h| h.version),
                )),
                Arc::new(StringArray::from_iter_values(history.iter().map(
                    |h| match (h.baseline, h.version) {
                        (true, 0) => "created",
                        (true, _) => "as of (older log cleaned up)",
                        (false, _) => "added",
                    },
                ))),
                Arc::new(UInt64Array::from_iter_values(
                    history.iter().map(|h| h.columns as u64),
                )),
                Arc::new(StringArray::from_iter_values(
                    history.iter().map(|h| h.added.join(", ")),
                )),
            ],
        )?;
        return print(&sluice_sql::format(&[batch], format)?);
    }
    let listing = sluice_publish::list_windows(&table).await?;
    let mut batch = listing_batch(&listing)?;
    let version = table.version().unwrap_or(0);
    let (txns, _) = sluice_publish::read_txns(table.object_store().as_ref(), version).await?;
    let notified: Vec<(&str, &str, i64)> = txns
        .iter()
        .filter_map(|(id, txn)| {
            let (pipeline, target) = id.split_once("/.notify/")?;
            Some((pipeline, target, txn.version))
        })
        .collect();
    // Named by target alone unless targets of several pipelines share the table.
    let several = notified.iter().any(|(p, _, _)| *p != notified[0].0);
    let targets: Vec<(String, i64)> = notified
        .iter()
        .map(|(pipeline, target, version)| {
            let name = if several {
                format!("notified_{pipeline}.{target}")
            } else {
                format!("notified_{target}")
            };
            (name, *version)
        })
        .collect();
    if !targets.is_empty() {
        batch = with_notified(batch, &listing, &targets)?;
    }
    print(&sluice_sql::format(&[batch], format)?)
}

/// One column per notify target: the window's publishing version when the target has been
/// told about it (its recorded version is at or past it), else null (not told yet, or the
/// publishing version is no longer in the log).
fn with_notified(
    batch: RecordBatch,
    listing: &[sluice_publish::WindowListing],
    targets: &[(String, i64)],
) -> anyhow::Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for (name, through) in targets {
        fields.push(Field::new(name, DataType::UInt64, true));
        columns.push(Arc::new(UInt64Array::from_iter(
            listing
                .iter()
                .map(|w| w.version.filter(|v| *v as i64 <= *through)),
        )));
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The listing as a record batch, so it prints like query results. A sharded table's listing
/// (one row per window and shard) also says whether the row's shard has sealed the window and
/// how many of the table's shards have: the window is complete when all of them have.
pub fn listing_batch(listing: &[sluice_publish::WindowListing]) -> anyhow::Result<RecordBatch> {
    let mut fields = vec![
        Field::new("window", DataType::Utf8, false),
        Field::new("files", DataType::UInt64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("version", DataType::UInt64, true),
        Field::new("publications", DataType::UInt64, false),
        Field::new("published_at", DataType::Utf8, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            listing.iter().map(|w| w.address.as_str()),
        )),
        Arc::new(UInt64Array::from_iter_values(
            listing.iter().map(|w| w.files as u64),
        )),
        Arc::new(Int64Array::from_iter_values(listing.iter().map(|w| w.rows))),
        Arc::new(UInt64Array::from_iter(listing.iter().map(|w| w.version))),
        Arc::new(UInt64Array::from_iter_values(
            listing.iter().map(|w| w.publications as u64),
        )),
        Arc::new(StringArray::from_iter_values(listing.iter().map(|w| {
            chrono::DateTime::from_timestamp_millis(w.published_at_ms)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_default()
        }))),
    ];
    if listing.iter().any(|w| w.seal.is_some()) {
        fields.push(Field::new("sealed", DataType::Boolean, true));
        fields.push(Field::new("shards_sealed", DataType::Utf8, true));
        fields.push(Field::new("complete", DataType::Boolean, true));
        columns.push(Arc::new(BooleanArray::from_iter(
            listing.iter().map(|w| w.seal.map(|s| s.sealed)),
        )));
        columns.push(Arc::new(StringArray::from_iter(listing.iter().map(|w| {
            w.seal.map(|s| format!("{}/{}", s.shards_sealed, s.shards))
        }))));
        columns.push(Arc::new(BooleanArray::from_iter(
            listing.iter().map(|w| w.seal.map(|s| s.complete())),
        )));
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    // No rows in JSON Lines: no output at all (a lone newline is not a line of JSON).
    if !text.is_empty() && !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
