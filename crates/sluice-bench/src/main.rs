//! `sluice-bench`: how fast sluice lands a stream compared with the floor, measured in one run
//! (ratios, not absolute timings: the machines are noisy).
//!
//! `sluice-bench compare` generates a deterministic input (24 hours, 3% duplicate deliveries,
//! 2% out of order, 0.5% hours late) with `sluice generate`, then runs every alternative as
//! its own process, alternating, at least three times each, and takes the median:
//! (a) the floor: arrow-json decode + one Parquet file per hour, decode and encode overlapped
//! on two threads, no Delta log (`sluice-bench floor`); (b) deltalake's own `write` of the
//! same batches into an hour-partitioned table (`sluice-bench delta-write`); (c) `sluice run`,
//! swap mode, `--key event_id`, rewrite late policy; (d) the same in merge mode; (e) (c) with
//! 1-day windows (24x larger), for the memory check; (h) `sluice backfill` of those 1-day
//! windows, whose memory must stay within 1.2x of (e)'s (a backfill is bounded by
//! `--flush-bytes-max` as a stream is); (f) and (g) are (c) and (a) over the same events nested;
//! (m) is (c) with the Prometheus recorder installed (`--metrics-addr`), for metrics' overhead;
//! (r) is (c) over the same lines with 30% of them bad (dead letters), whose memory must stay
//! within 1.2x of (c)'s; (z), (v) and (s) are (c) over the same events as gzipped files, as
//! a CSV export and as objects under an S3 prefix (moto), each against (c)'s rows/s; (q) is
//! (c) over the same events as a Parquet export (`ts` a timestamp), against (c) and against
//! (y), Polars `read_parquet` + `write_delta` of the same files (the Python venv `just test`
//! installs; left out without it);
//! (k) is `sluice run` over the same events produced to a local Kafka-protocol topic (tansu),
//! beside (p), a plain consumer reading that topic: the broker's ceiling; (kr) is (k) over the
//! lines of (r), for the same memory check. (c) runs a few more times with `--format json`,
//! whose `busy_seconds` say where its time goes. A batch of 100,000 changed keys is applied
//! to mirrors of 1M and 10M rows (CDC, `--merge-scope table`), for the files it reads and
//! rewrites and how its time grows with the table. The same lines as JSON, Avro and Protobuf
//! messages are decoded in process, no broker, for each format's decode rows/s.
//! Peak RSS is the child's `ru_maxrss`.

mod alternatives;
mod avro;
mod catchup;
mod decode;
mod dirty;
mod formats;
mod kafka;
mod listing;
mod log;
mod measure;
mod mirror;
mod moto;
mod protobuf;
mod registry;
mod server;
mod split;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sluice-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every alternative and write the report.
    Compare(measure::CompareArgs),
    /// The floor: decode NDJSON and write one Parquet file per hour (no Delta log).
    Floor {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// 2: decode and encode overlap on two threads; 1: one thread does both.
        #[arg(long, default_value_t = 2)]
        threads: u8,
    },
    /// deltalake's own write (append, hour-partitioned, no dedupe, no offsets).
    DeltaWrite {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        table: PathBuf,
    },
    /// Only the catch-up measurement: backlogs of many windows landed by `sluice run`, and
    /// one window's publish latency with few and with many windows in the table.
    CatchUp {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value = "data/seattle-temps.ndjson")]
        temps: PathBuf,
        #[arg(long, default_value_t = 10_000)]
        many_windows: usize,
        /// The sluice binary; default: next to this one.
        #[arg(long)]
        sluice: Option<PathBuf>,
    },
    /// Only the listing-cost measurement: a followed run over an S3 prefix (moto) of
    /// `--objects` objects picks up `--new` more; moto's request log counts the requests.
    Listing {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 100_000)]
        objects: usize,
        #[arg(long, default_value_t = 10)]
        new: usize,
        /// The sluice binary; default: next to this one.
        #[arg(long)]
        sluice: Option<PathBuf>,
    },
    /// Only the mirror measurement: a batch of `--changed` changed keys applied to mirrors of
    /// each size in `--rows`.
    Mirror {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
        rows: Vec<u64>,
        #[arg(long, default_value_t = 100_000)]
        changed: u64,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The sluice binary; default: next to this one.
        #[arg(long)]
        sluice: Option<PathBuf>,
    },
    /// Only the long-log measurement: publish latency and restart-to-resume near version 10
    /// and near `--versions`.
    LogGrowth {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 10_000)]
        versions: u64,
        #[arg(long, default_value_t = 1_000)]
        rows: usize,
        /// The sluice binary; default: next to this one.
        #[arg(long)]
        sluice: Option<PathBuf>,
    },
}

/// At most 2 malloc arenas (glibc), as `sluice` sets it (see its `main`): the alternatives
/// measured in this process, the floor and deltalake's write, run under the same allocator
/// settings as the `sluice` runs they are compared with.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it runs first in main, before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// The sluice binary given, or the one next to this one.
fn sluice_binary(given: Option<PathBuf>) -> Result<PathBuf, alternatives::BenchError> {
    match given {
        Some(s) => Ok(s),
        None => Ok(std::env::current_exe()?.with_file_name("sluice")),
    }
}

/// `sluice-bench catch-up`: the catch-up measurement alone, printed.
fn catchup_only(
    dir: &std::path::Path,
    temps: &std::path::Path,
    many_windows: usize,
    sluice: Option<PathBuf>,
) -> Result<(), alternatives::BenchError> {
    let sluice = sluice_binary(sluice)?;
    std::fs::create_dir_all(dir)?;
    let (runs, counts) = catchup::catch_up(&sluice, temps, dir, many_windows)?;
    let mut r = String::new();
    catchup::report(&mut r, &runs, &counts);
    println!("{r}");
    Ok(())
}

/// `sluice-bench listing`: the listing-cost measurement alone, printed.
fn listing_only(
    dir: &std::path::Path,
    objects: usize,
    new: usize,
    sluice: Option<PathBuf>,
) -> Result<(), alternatives::BenchError> {
    let sluice = sluice_binary(sluice)?;
    std::fs::create_dir_all(dir)?;
    let costs = listing::listing_cost(&sluice, dir, objects, new)?;
    let mut r = String::new();
    listing::report(&mut r, &costs);
    println!("{r}");
    Ok(())
}

/// `sluice-bench mirror`: the mirror measurement alone, printed.
fn mirror_only(
    dir: &std::path::Path,
    rows: &[u64],
    changed: u64,
    runs: usize,
    sluice: Option<PathBuf>,
) -> Result<(), alternatives::BenchError> {
    let sluice = sluice_binary(sluice)?;
    std::fs::create_dir_all(dir)?;
    let cases = mirror::mirror_cost(&sluice, dir, rows, changed, runs)?;
    let mut r = String::new();
    mirror::report(&mut r, &cases);
    println!("{r}");
    Ok(())
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compare(args) => measure::compare(args),
        Command::Floor {
            input,
            out,
            threads,
        } => alternatives::floor(&input, &out, threads >= 2),
        Command::DeltaWrite { input, table } => alternatives::delta_write(&input, &table),
        Command::LogGrowth {
            dir,
            versions,
            rows,
            sluice,
        } => measure::log_only(&dir, versions, rows, sluice),
        Command::CatchUp {
            dir,
            temps,
            many_windows,
            sluice,
        } => catchup_only(&dir, &temps, many_windows, sluice),
        Command::Listing {
            dir,
            objects,
            new,
            sluice,
        } => listing_only(&dir, objects, new, sluice),
        Command::Mirror {
            dir,
            rows,
            changed,
            runs,
            sluice,
        } => mirror_only(&dir, &rows, changed, runs, sluice),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
