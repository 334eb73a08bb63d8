//! `sluice`: land event streams in Delta Lake tables with batch-style overwrite semantics.
//!
//! The binary only wires: options and config files in, library calls, results out. Errors
//! print with their whole chain. Exit status: 0 done, 1 failed, 2 invalid options (nothing
//! written), 3 every record of the run rejected, 4 `verify` found a broken promise, 130 interrupted (SIGINT/SIGTERM).

mod args;
mod backfill;
mod dead_letters;
mod demo;
mod derive;
mod dry_run;
mod exit;
mod ingest;
mod lag;
mod maintenance;
mod metrics;
mod notify;
mod open;
mod options;
mod progress;
mod report;
mod rule_counts;
mod signals;
mod status;
mod status_page;
mod verify;
mod warnings;
mod words;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use exit::Exit;

/// Land event streams in Delta Lake tables: every window is an address, every restart a rerun.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, propagate_version = true)]
pub struct Cli {
    /// Log more: -v each publication, -vv debug (sluice's own events); -vvv every
    /// dependency's too. SLUICE_LOG (a tracing filter, e.g. sluice=debug,deltalake=info)
    /// overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log lines on stderr: text, or json (one JSON object per line: timestamp, level,
    /// target and the event's fields, for a log collector).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ingest a source into a Delta table, window by window; safe to rerun after any stop.
    #[command(
        override_usage = "sluice run --source <SOURCE> --table <TABLE> [OPTIONS]\n       sluice run --config <FILE> [OPTIONS]"
    )]
    Run(Box<args::RunArgs>),
    /// Run SQL over Delta tables (DataFusion).
    #[command(disable_version_flag = true)]
    Query(report::QueryArgs),
    /// List a table's windows: address, files, rows, publishing version and time.
    Windows(report::WindowsArgs),
    /// A table's state: per pipeline its resume positions, windows (complete across shards),
    /// files per window and dead letters; the last commit, the log and its last checkpoint.
    Status(status::StatusArgs),
    /// A pipeline's dead letters by reason and position; with --replay, land the selected
    /// ones after their cause is fixed (a new --time-format, say), exactly once.
    DeadLetters(dead_letters::DeadLettersArgs),
    /// Check a table against what sluice promises: its files are there with the rows their
    /// statistics say, each window holds what its last publication recorded, no row key
    /// twice, history versions that do not overlap, no row above its tombstone, offsets that
    /// only move forward. Exit 4 when a promise is broken.
    Verify(verify::VerifyArgs),
    /// Generate a stream, ingest it with a SIGKILL mid-run, restart, and show the result.
    Demo(demo::DemoArgs),
    /// Remove staged files that no retained table version references (orphans of attempts
    /// that never published).
    Gc(report::GcArgs),
    /// Delete the data files that versions older than the retention period removed
    /// (deltalake's vacuum; a dry run unless --apply).
    Vacuum(report::VacuumArgs),
    /// Rewrite each window's small files into fewer, larger ones (one commit per window, same
    /// rows, dataChange=false); running it twice changes nothing.
    Compact(maintenance::CompactArgs),
    /// Remove whole windows that ended longer ago than --older-than (a dry run unless
    /// --apply); `sluice vacuum` then deletes their files.
    Expire(maintenance::ExpireArgs),
    /// Recompute the windows starting in [--from, --to) from a bounded source and publish each
    /// by swap, as the stream would (the batch rerun); running it twice changes nothing.
    Backfill(Box<backfill::BackfillArgs>),
    /// Recompute the one window containing --at from a bounded source.
    Rewrite(Box<backfill::RewriteArgs>),
    /// Recompute derived tables' windows in a range from the raw table (the batch rerun), or
    /// with --follow keep them up to the raw table as it grows (beside the ingesters, until
    /// SIGINT or SIGTERM).
    Derive(Box<derive::DeriveArgs>),
    /// Write a deterministic test stream (duplicates, out-of-order and late events) as NDJSON.
    Generate(demo::GenerateArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(options::CompletionsArgs),
    /// Print the man page (roff) to stdout: `sluice man > sluice.1`.
    Man,
}

/// At most 2 malloc arenas (glibc). glibc gives threads that allocate under contention arenas
/// of their own and keeps freed memory in them: the staging threads' freed Arrow buffers then
/// stayed resident, and the benchmark's hourly run peaked anywhere from 124 to 202 MiB over
/// runs of one input; with 2 arenas, 111 to 124 MiB at the same speed (bench/RESULTS.md).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it runs first in main, before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// The log filter: sluice's own events at the level `-v` asks for; dependencies' logs
/// (deltalake's snapshot internals, its retried commits, kernel errors that sluice handles and
/// words itself) only from -vvv or SLUICE_LOG.
fn log_filter(verbose: u8) -> String {
    match verbose {
        0 => "off,sluice=warn".into(),
        1 => "off,sluice=info".into(),
        2 => "off,sluice=debug".into(),
        _ => "debug".into(),
    }
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = match options::parse() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter(cli.verbose)));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_current_span(false).init(),
    }
    warnings::set_json_logs(cli.log_format == LogFormat::Json);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(a) => ingest::run(*a).await,
            Command::Query(a) => report::query(a).await,
            Command::Windows(a) => report::windows(a).await,
            Command::Demo(a) => demo::demo(a).await,
            Command::Generate(a) => demo::generate_files(a),
            Command::Gc(a) => report::gc(a).await,
            Command::Vacuum(a) => report::vacuum(a).await,
            Command::Compact(a) => maintenance::compact(a).await,
            Command::Status(a) => status::status(a).await,
            Command::DeadLetters(a) => dead_letters::dead_letters(a).await,
            Command::Verify(a) => verify::verify(a).await,
            Command::Expire(a) => maintenance::expire(a).await,
            Command::Backfill(a) => backfill::backfill_command(*a).await,
            Command::Rewrite(a) => backfill::rewrite_command(*a).await,
            Command::Derive(a) => derive::derive_command(*a).await,
            Command::Completions(a) => options::completions(a),
            Command::Man => options::man_page(),
        }
    });
    match result.map_err(exit::of_failure) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<Exit>().is_some() => {
            warnings::error(&[format!("sluice: {e}")]);
            ExitCode::from(e.downcast_ref::<Exit>().map_or(1, |x| x.status))
        }
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let mut lines = vec![format!("sluice: error: {e}")];
            lines.extend(
                causes_to_print(&e)
                    .into_iter()
                    .map(|c| format!("  caused by: {c}")),
            );
            warnings::error(&lines);
            ExitCode::FAILURE
        }
    }
}

/// The error's causes worth a line of their own: many library errors repeat their source's
/// text in their own message (deltalake's and object_store's do), and printing those again
/// made one store error three identical lines.
fn causes_to_print(e: &anyhow::Error) -> Vec<String> {
    let mut shown = e.to_string();
    let mut lines = Vec::new();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !shown.contains(&text) {
            shown.push('\n');
            shown.push_str(&text);
            lines.push(text);
        }
    }
    lines
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cause_whose_text_was_already_printed_gets_no_line_of_its_own() {
        let store = std::io::Error::other("GET http://host/t/_delta_log: 404 Not Found");
        let e = anyhow::Error::new(store)
            .context("opening the Delta table failed: GET http://host/t/_delta_log: 404 Not Found")
            .context("sluice windows failed");
        assert_eq!(
            super::causes_to_print(&e),
            ["opening the Delta table failed: GET http://host/t/_delta_log: 404 Not Found"]
        );
        let e = anyhow::anyhow!("a").context("b");
        assert_eq!(super::causes_to_print(&e), ["a"]);
    }
}
