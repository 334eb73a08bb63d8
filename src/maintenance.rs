//! `sluice compact` (rewrite each window's many small files into fewer, larger ones) and
//! `sluice expire` (remove whole windows past a retention).

use anyhow::Context;
use clap::Args;
use sluice_publish::{
    CompactRule, DeadLetterExpiryRule, DeadLetterTable, TableOptions, TARGET_FILE_BYTES_DEFAULT,
};
use sluice_window::parse_instant;

use crate::args::parse_bytes;
use crate::args::table_flags::TableFlags;
use crate::exit::usage;
use crate::report::parse_storage_options;
use crate::words::human_bytes;

#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// Only windows starting at or after this instant (RFC 3339).
    #[arg(long)]
    pub from: Option<String>,
    /// Only windows starting before this instant (RFC 3339).
    #[arg(long)]
    pub to: Option<String>,
    /// Size of the files compaction writes, e.g. 128MiB. [default: 128MiB]
    #[arg(long, value_name = "SIZE")]
    pub target_file_size: Option<String>,
    /// Compact a window only when it holds more than this many files. [default: 1]
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub files_min: usize,
}

/// The rule `args` ask for, or a usage error.
pub fn rule(args: &CompactArgs) -> anyhow::Result<CompactRule> {
    let instant = |flag: &str, text: &Option<String>| -> anyhow::Result<_> {
        text.as_deref()
            .map(|t| parse_instant(t).map_err(|e| usage(format!("{flag}: {e}"))))
            .transpose()
    };
    let from = instant("--from", &args.from)?;
    let to = instant("--to", &args.to)?;
    if let (Some(from), Some(to)) = (from, to) {
        if to <= from {
            return Err(usage("--to: must be after --from"));
        }
    }
    let target_file_bytes = match args.target_file_size.as_deref() {
        None => TARGET_FILE_BYTES_DEFAULT,
        Some(text) => parse_bytes(text)
            .filter(|b| *b >= 1 << 20)
            .and_then(|b| i64::try_from(b).ok())
            .ok_or_else(|| {
                usage("--target-file-size: expected a size of at least 1MiB, like 128MiB")
            })?,
    };
    Ok(CompactRule {
        target_file_bytes,
        files_min: args.files_min,
        from,
        to,
    })
}

pub async fn compact(args: CompactArgs) -> anyhow::Result<()> {
    let rule = rule(&args)?;
    let target = args.target.resolve()?;
    let options = TableOptions {
        storage_options: parse_storage_options(&target.table, &target.storage_options)?,
        ..TableOptions::new(target.table.clone())
    };
    let now = chrono::Utc::now();
    let attempt = format!(
        "compact{}{:05}",
        now.format("%Y%m%dT%H%M%S%3f"),
        std::process::id() % 100_000
    );
    let report = sluice_publish::compact(&options, &rule, &attempt, now.timestamp_millis())
        .await
        .with_context(|| format!("compacting {}", target.table))?;
    for c in &report.compacted {
        println!(
            "compacted {}: {} files ({}) -> {} ({}), {} rows, version {}",
            c.address,
            c.files_before,
            human_bytes(c.bytes_before),
            c.files_after,
            human_bytes(c.bytes_after),
            c.rows,
            c.version
        );
    }
    for address in &report.gave_way {
        println!("left {address} to its writer: it kept publishing the window meanwhile");
    }
    let files_before: usize = report.compacted.iter().map(|c| c.files_before).sum();
    let files_after: usize = report.compacted.iter().map(|c| c.files_after).sum();
    println!(
        "sluice compact: {} compacted ({files_before} files -> {files_after}), {} left as they are{}{}",
        crate::words::counted(report.compacted.len() as u64, "window"),
        report.left_alone,
        if report.gave_way.is_empty() {
            String::new()
        } else {
            format!(", {} left to a writer publishing them", report.gave_way.len())
        },
        if report.not_windows == 0 {
            String::new()
        } else {
            format!(
                ", {} files outside any window address not touched",
                report.not_windows
            )
        }
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// The table whose windows expire (and its tombstones, at <table>_tombstones, if any)
    /// is --table [PATH] (or the table of --config [FILE]); without one, give --dlq or
    /// --tombstones.
    #[command(flatten)]
    pub target: TableFlags,
    /// A tombstone table (--delete-when) whose tombstones of deletes older than --older-than
    /// (their event time) expire. [default: <table>_tombstones, when it exists]
    #[arg(long, value_name = "PATH")]
    pub tombstones: Option<String>,
    /// A dead-letter table whose dead letters detected longer ago than --older-than expire
    /// (every pipeline's; whole files, see docs/operations.md).
    #[arg(long, value_name = "PATH")]
    pub dlq: Option<String>,
    /// Remove whole windows that ended (dead letters detected) longer ago than this, by this
    /// machine's clock, e.g. 90d.
    #[arg(long, value_name = "DURATION")]
    pub older_than: String,
    /// The window size of a table that records none (written before sluice recorded its
    /// options); dt_hour and dt tables need none.
    #[arg(long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Remove them; without it, only list what would be removed (a dry run).
    #[arg(long)]
    pub apply: bool,
}

/// Expires the tombstones of deletes before `before` at `location`; a table that is not
/// there is nothing to expire.
async fn expire_tombstones(
    location: &str,
    storage_options: &std::collections::HashMap<String, String>,
    before: sluice_window::EventTime,
    apply: bool,
) -> anyhow::Result<()> {
    let options = TableOptions {
        storage_options: storage_options.clone(),
        ..TableOptions::new(location)
    };
    let expired = sluice_publish::expire_tombstones(&options, before, !apply)
        .await
        .with_context(|| format!("expiring tombstones of {location}"))?;
    let Some(n) = expired else {
        return Ok(());
    };
    println!(
        "sluice expire: {n} tombstones of deletes before {} {}",
        before.to_rfc3339(),
        outcome(apply)
    );
    Ok(())
}

pub async fn expire(args: ExpireArgs) -> anyhow::Result<()> {
    let older_than_ms = sluice_window::parse_duration_ms(&args.older_than)
        .map_err(|e| usage(format!("--older-than: {e}")))?;
    let window = args
        .window
        .as_deref()
        .map(|w| sluice_window::WindowSize::parse(w).map_err(|e| usage(format!("--window: {e}"))))
        .transpose()?;
    let (table, storage_options, file) = args.target.resolve_optional()?;
    let tombstones = args.tombstones.clone().or(file.tombstones);
    if table.is_none() && args.dlq.is_none() && tombstones.is_none() {
        return Err(usage(
            "--table: give the table (or --config FILE), --dlq or --tombstones: what expires",
        ));
    }
    if window.is_some() && table.is_none() {
        return Err(usage(
            "--window: only with --table (a window size of its windows)",
        ));
    }
    let any_table = [&table, &args.dlq, &tombstones]
        .into_iter()
        .flatten()
        .next()
        .map_or("", String::as_str);
    let storage_options = parse_storage_options(any_table, &storage_options)?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let cutoff_ms = now_ms.saturating_sub(older_than_ms);
    let ended_before = sluice_window::EventTime::from_micros(cutoff_ms.saturating_mul(1000));
    if let Some(table) = &table {
        let rule = sluice_publish::ExpireRule {
            ended_before,
            window,
            dry_run: !args.apply,
        };
        expire_windows(table, &storage_options, &rule, now_ms).await?;
    }
    let tombstones = tombstones.or_else(|| {
        table
            .as_deref()
            .map(crate::args::default_tombstones_location)
    });
    if let Some(location) = tombstones {
        expire_tombstones(&location, &storage_options, ended_before, args.apply).await?;
    }
    if let Some(dlq) = &args.dlq {
        expire_dead_letters(dlq, storage_options, cutoff_ms, args.apply, now_ms).await?;
    }
    Ok(())
}

/// `expire --table`: the table's windows that ended before the rule's time.
async fn expire_windows(
    table: &str,
    storage_options: &std::collections::HashMap<String, String>,
    rule: &sluice_publish::ExpireRule,
    now_ms: i64,
) -> anyhow::Result<()> {
    let options = TableOptions {
        storage_options: storage_options.clone(),
        ..TableOptions::new(table)
    };
    let report = sluice_publish::expire(&options, rule, now_ms)
        .await
        .with_context(|| format!("expiring windows of {table}"))?;
    for e in &report.expired {
        println!(
            "{} {} (ended {}, {} files, {} rows)",
            if rule.dry_run {
                "would remove"
            } else {
                "removed"
            },
            e.address,
            e.window_end.to_rfc3339(),
            e.files,
            e.rows
        );
    }
    for address in &report.gave_way {
        println!("left {address}: its writer kept publishing it meanwhile");
    }
    let rows: i64 = report.expired.iter().map(|e| e.rows).sum();
    println!(
        "sluice expire: {} windows ({rows} rows) that ended before {} {}",
        report.expired.len(),
        rule.ended_before.to_rfc3339(),
        outcome(!rule.dry_run)
    );
    Ok(())
}

/// `expire --dlq`: dead letters detected before `cutoff_ms`.
async fn expire_dead_letters(
    dlq: &str,
    storage_options: std::collections::HashMap<String, String>,
    cutoff_ms: i64,
    apply: bool,
    now_ms: i64,
) -> anyhow::Result<()> {
    let options = TableOptions {
        storage_options,
        ..TableOptions::new(dlq)
    };
    let rule = DeadLetterExpiryRule {
        detected_before_ms: cutoff_ms,
        pipeline: None,
        meant_for: sluice_publish::MeantFor::Any,
        dry_run: !apply,
    };
    let mut table = DeadLetterTable::open(&options)
        .await
        .with_context(|| format!("opening the dead-letter table {dlq}"))?;
    let report = table
        .expire(&rule, now_ms)
        .await
        .with_context(|| format!("expiring dead letters of {dlq}"))?;
    let kept = if report.files_kept_whole == 0 {
        String::new()
    } else {
        format!(
            "; {} files with older dead letters kept whole (they hold newer ones too)",
            report.files_kept_whole
        )
    };
    println!(
        "sluice expire: {} dead letters ({} files) detected before {} {}{kept}",
        report.rows,
        report.files,
        sluice_window::EventTime::from_micros(cutoff_ms.saturating_mul(1000)).to_rfc3339(),
        outcome(apply)
    );
    Ok(())
}

fn outcome(apply: bool) -> &'static str {
    if apply {
        "removed"
    } else {
        "found (dry run, nothing removed; --apply removes them)"
    }
}
