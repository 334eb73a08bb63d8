//! `sluice demo`: the whole promise in one command. Generate a stream with duplicate, out-of-
//! order and late deliveries; ingest it; SIGKILL the ingest mid-run; run the same command
//! again; show the windows, an hourly aggregate, and the duplicate count measured by SQL.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::datatypes::Int64Type;
use deltalake::datafusion::prelude::SessionContext;
use sluice_source::generate::{generate, GeneratorSpec};
use sluice_sql::{Format, TableRef};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Working directory (its input/, table/ and table_dlq/ are replaced).
    #[arg(long, default_value = "demo")]
    pub dir: PathBuf,
    /// Distinct events to generate.
    #[arg(long, default_value_t = 200_000)]
    pub events: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

const FILES: u64 = 4;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Output directory (created; files in it are replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// Distinct events.
    #[arg(long, default_value_t = 100_000)]
    pub events: u64,
    /// Hours of event time the stream spans, from 2026-10-03T00:00Z.
    #[arg(long, default_value_t = 24)]
    pub hours: u32,
    /// Number of files (the stream is split in order).
    #[arg(long, default_value_t = 1)]
    pub files: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// flat, or nested (GitHub-event-like: objects three levels deep, arrays of objects, a
    /// map of labels, nulls at every level, non-ASCII text).
    #[arg(long, default_value = "flat")]
    pub shape: String,
    /// Per mille of events without their key (event_id null or missing).
    #[arg(long, default_value_t = 0)]
    pub null_keys_per_mille: u32,
    /// From this event on, events carry two new fields (coupon, and actor.plan in the nested
    /// shape or geo in the flat one): a stream whose schema grows mid-run.
    #[arg(long)]
    pub new_fields_from: Option<u64>,
    /// Events dated 73 years ahead (a device clock saying 2099), spread over the stream.
    #[arg(long, default_value_t = 0)]
    pub far_future: u64,
}

pub fn generate_files(args: GenerateArgs) -> anyhow::Result<()> {
    if args.files == 0 || args.events == 0 || args.hours == 0 {
        return Err(crate::exit::usage(
            "--files, --events and --hours must be at least 1",
        ));
    }
    let shape = sluice_source::generate::Shape::parse_name(&args.shape)
        .ok_or_else(|| crate::exit::usage("--shape: use flat or nested"))?;
    if args.null_keys_per_mille > 1000 {
        return Err(crate::exit::usage("--null-keys-per-mille: at most 1000"));
    }
    let spec = GeneratorSpec {
        seed: args.seed,
        events: args.events,
        hours: args.hours,
        shape,
        null_key_per_mille: args.null_keys_per_mille,
        new_fields_from: args.new_fields_from,
        far_future_events: args.far_future,
        ..GeneratorSpec::default()
    };
    let stats = write_stream(&spec, &args.out, args.files, false)?;
    println!(
        "sluice generate: {} events + {} duplicate deliveries, {:.1} MB in {} files under {}{}{}",
        stats.events,
        stats.duplicates,
        stats.bytes as f64 / 1e6,
        args.files,
        args.out.display(),
        if stats.null_keys > 0 {
            format!("; {} without their key", stats.null_keys)
        } else {
            String::new()
        },
        if stats.far_future > 0 {
            format!("; {} far in the future", stats.far_future)
        } else {
            String::new()
        },
    );
    Ok(())
}

/// Writes one generated stream split in order into `files` files named `events-NN.ndjson`;
/// with `bad_lines`, three malformed records go into the second file.
fn write_stream(
    spec: &GeneratorSpec,
    dir: &Path,
    files: usize,
    bad_lines: bool,
) -> anyhow::Result<sluice_source::generate::GeneratorSummary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut all = Vec::new();
    let stats = generate(spec, &mut all)?;
    let lines: Vec<&[u8]> = all.split_inclusive(|b| *b == b'\n').collect();
    let per_file = lines.len().div_ceil(files).max(1);
    for (i, part) in lines.chunks(per_file).enumerate() {
        let path = dir.join(format!("events-{i:02}.ndjson"));
        let mut f = BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?,
        );
        for l in part {
            f.write_all(l)?;
        }
        if bad_lines && i == 1 {
            f.write_all(
                b"{\"event_id\":\"broken\",\"ts\":\"2026-10-03T25:61:00Z\",\"kind\":\"view\"}\n",
            )?;
            f.write_all(b"{\"event_id\":\"truncated\",\"ts\":\"2026-10-03T10:00\n")?;
            f.write_all(b"{\"event_id\":\"no-time\",\"kind\":\"view\",\"amount\":1.0}\n")?;
        }
        f.flush()?;
    }
    Ok(stats)
}

/// The demo's derived table: the hourly aggregate a batch job would write.
const HOURLY_COLUMNS: &str = "count(*) AS events, count(DISTINCT user_id) AS users, \
     sum(CASE WHEN kind = 'purchase' THEN 1 ELSE 0 END) AS purchases, \
     sum(CAST(round(amount * 100) AS BIGINT)) AS revenue_cents";
fn hourly_sql() -> String {
    format!("SELECT {HOURLY_COLUMNS} FROM window")
}

/// Where the demo writes, under `--dir`.
struct DemoPaths {
    input: PathBuf,
    table: PathBuf,
    dlq: PathBuf,
    hourly: PathBuf,
}

impl DemoPaths {
    /// The paths under `dir`, cleared of an earlier demo's.
    fn cleared(dir: &Path) -> anyhow::Result<DemoPaths> {
        let paths = DemoPaths {
            input: dir.join("input"),
            table: dir.join("table"),
            dlq: dir.join("table_dlq"),
            hourly: dir.join("hourly"),
        };
        for p in [&paths.input, &paths.table, &paths.dlq, &paths.hourly] {
            if p.exists() {
                std::fs::remove_dir_all(p).with_context(|| format!("clearing {}", p.display()))?;
            }
        }
        Ok(paths)
    }

    /// The `sluice run` arguments of the demo's runs.
    fn run_args(&self, attempt: &str) -> Vec<String> {
        let flags = [
            ("--source", format!("ndjson:{}", self.input.display())),
            ("--table", self.table.display().to_string()),
            ("--pipeline", "demo".into()),
            ("--window", "1h".into()),
            ("--lateness", "10m".into()),
            ("--key", "event_id".into()),
            ("--attempt", attempt.into()),
            ("--derive", format!("hourly={}", self.hourly.display())),
            ("--derive-sql", format!("hourly={}", hourly_sql())),
        ];
        let pairs = flags.into_iter().flat_map(|(f, v)| [f.to_string(), v]);
        std::iter::once("run".to_string()).chain(pairs).collect()
    }
}

pub async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let paths = DemoPaths::cleared(&args.dir)?;
    // One deterministic stream, split into files read in name order, plus three bad lines.
    let spec = GeneratorSpec {
        seed: args.seed,
        events: args.events,
        ..GeneratorSpec::default()
    };
    let stats = write_stream(&spec, &paths.input, FILES as usize, true)?;
    println!(
        "demo: generated {} events + {} duplicate deliveries + 3 bad lines in {FILES} files ({:.1} MB) under {}",
        stats.events,
        stats.duplicates,
        stats.bytes as f64 / 1e6,
        paths.input.display()
    );
    run_killed_then_again(&paths)?;
    show_windows(&paths.table).await?;
    let table_ref = |name: &str, location: &Path| TableRef {
        name: name.into(),
        location: location.display().to_string(),
        version: None,
    };
    let tables = [
        table_ref("events", &paths.table),
        table_ref("dlq", &paths.dlq),
        table_ref("hourly", &paths.hourly),
    ];
    let ctx = sluice_sql::session(&tables, &Default::default()).await?;
    check_derived(&ctx, &paths.hourly).await?;
    check_rows(&ctx, &paths.dlq, &stats).await
}

/// Run 1, SIGKILLed once a few windows are published; then run 2, the same command, which
/// resumes from the table alone.
fn run_killed_then_again(paths: &DemoPaths) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the sluice binary")?;
    let mut child = Command::new(&exe)
        .args(paths.run_args("demo1"))
        .stdout(Stdio::null())
        .spawn()?;
    let started = Instant::now();
    let killed_at = loop {
        if let Some(status) = child.try_wait()? {
            println!("demo: run 1 finished before the kill ({status}); the restart below then commits nothing");
            break None;
        }
        let version = log_versions(&paths.table);
        if version >= 4 || started.elapsed() > Duration::from_secs(120) {
            child.kill()?; // SIGKILL on Unix
            child.wait()?;
            break Some(version);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if let Some(v) = killed_at {
        println!("demo: run 1 SIGKILLed mid-run with the table at version {v}");
    }
    print!("demo: run 2 (same command) -> ");
    std::io::stdout().flush()?;
    let status = Command::new(&exe).args(paths.run_args("demo2")).status()?;
    if !status.success() {
        bail!("run 2 failed: {status}");
    }
    Ok(())
}

/// Prints the table's windows as `sluice windows` does.
async fn show_windows(table: &Path) -> anyhow::Result<()> {
    println!(
        "\ndemo: windows of {} (sluice windows --table {})",
        table.display(),
        table.display()
    );
    let delta =
        sluice_publish::open_table(&table.display().to_string(), &Default::default(), None).await?;
    let listing = sluice_publish::list_windows(&delta).await?;
    println!(
        "{}",
        sluice_sql::format(&[crate::report::listing_batch(&listing)?], Format::Table)?
    );
    Ok(())
}

/// Prints the derived table and checks it against the batch job's answer: the same query
/// over the whole raw table, grouped by window.
async fn check_derived(ctx: &SessionContext, hourly_table: &Path) -> anyhow::Result<()> {
    let hourly =
        "SELECT dt, hour, events, users, purchases, revenue_cents FROM hourly ORDER BY dt, hour";
    println!(
        "demo: the derived table, kept by the stream (--derive hourly: \"{}\"; sluice query --table hourly={} \"{hourly}\")",
        hourly_sql(),
        hourly_table.display()
    );
    println!(
        "{}",
        sluice_sql::format(&sluice_sql::query(ctx, hourly).await?, Format::Table)?
    );
    let differing = format!(
        "SELECT count(*) AS differing, 0 AS unused FROM ( \
           (SELECT dt, hour, events, users, purchases, revenue_cents FROM hourly \
            EXCEPT ALL SELECT dt, hour, {HOURLY_COLUMNS} FROM events GROUP BY dt, hour) \
           UNION ALL \
           (SELECT dt, hour, {HOURLY_COLUMNS} FROM events GROUP BY dt, hour \
            EXCEPT ALL SELECT dt, hour, events, users, purchases, revenue_cents FROM hourly))"
    );
    let (differing, _) = first_two_ints(&sluice_sql::query(ctx, &differing).await?)?;
    println!(
        "demo: derived windows differing from the same SQL over the raw table grouped by hour: {differing}\n"
    );
    if differing != 0 {
        bail!("the derived table differs from its query over the raw table in {differing} rows");
    }
    Ok(())
}

/// Prints the dead letters and checks the table holds each generated event once.
async fn check_rows(
    ctx: &SessionContext,
    dlq: &Path,
    stats: &sluice_source::generate::GeneratorSummary,
) -> anyhow::Result<()> {
    let dup_sql =
        "SELECT count(*) AS rows, count(*) - count(DISTINCT event_id) AS duplicates FROM events";
    let result = sluice_sql::query(ctx, dup_sql).await?;
    let (rows, duplicates) = first_two_ints(&result)?;
    let dead_sql = "SELECT source_partition, source_offset, reason, detail FROM dlq \
                    ORDER BY source_partition, source_offset";
    println!(
        "demo: dead letters (sluice query --table dlq={} \"{dead_sql}\")",
        dlq.display()
    );
    let dead = sluice_sql::query(ctx, dead_sql).await?;
    let rejected: usize = dead.iter().map(|b| b.num_rows()).sum();
    println!("{}", sluice_sql::format(&dead, Format::Table)?);
    println!(
        "demo: table holds {rows} rows for {} distinct events; duplicates measured by SQL: {duplicates} \
         (the input had {} duplicate deliveries and a SIGKILL mid-run); dead letters: {rejected}",
        stats.events,
        stats.duplicates,
    );
    if duplicates != 0 || rows != stats.events as i64 {
        bail!("the table does not match the input: {rows} rows, {duplicates} duplicates");
    }
    Ok(())
}

/// The number of commits in the table's log (a cheap progress probe from outside).
fn log_versions(table: &Path) -> usize {
    std::fs::read_dir(table.join("_delta_log"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

fn first_two_ints(batches: &[deltalake::arrow::array::RecordBatch]) -> anyhow::Result<(i64, i64)> {
    let b = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .context("empty result")?;
    let get = |i: usize| -> anyhow::Result<i64> {
        let c = deltalake::arrow::compute::cast(
            b.column(i),
            &deltalake::arrow::datatypes::DataType::Int64,
        )?;
        let c = c.as_primitive::<Int64Type>();
        if c.is_null(0) {
            bail!("null result");
        }
        Ok(c.value(0))
    };
    Ok((get(0)?, get(1)?))
}
