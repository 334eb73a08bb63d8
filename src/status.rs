//! `sluice status`: a table's state for the people who run it (docs/cli.md describes the
//! JSON object, field by field).

use std::collections::BTreeMap;

use anyhow::Context;
use clap::Args;
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use sluice_publish::{PipelineStatus, TableStatus, REPLAYED_REASON};

use crate::args::table_flags::TableFlags;
use crate::dead_letters::meant_for;
use crate::exit::usage;
use crate::report::parse_storage_options;
use crate::words::human_bytes;

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// Its dead-letter table. [default: the table's location with _dlq appended]
    #[arg(long)]
    pub dlq: Option<String>,
    /// table (for people) or json (one object, documented in docs/cli.md).
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Also count the objects and bytes under _delta_log/ (lists the whole log: on S3 a
    /// request per thousand objects).
    #[arg(long)]
    pub log_size: bool,
    /// The pipeline's source, to show its lag (what the table has not read of it): a file
    /// source as `run` takes it, or kafka:TOPIC with --brokers. [default: the config file's]
    #[arg(long)]
    pub source: Option<String>,
    /// Object store option of --source, KEY=VALUE (repeatable). [default: the config file's]
    #[arg(long = "source-option", value_name = "KEY=VALUE")]
    pub source_options: Vec<String>,
    /// With --source kafka:TOPIC: the brokers. [default: the config file's]
    #[arg(long, value_name = "HOST:PORT")]
    pub brokers: Option<String>,
    /// The pipeline that reads --source. [default: the config file's, else sluice]
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Also write the status as a page to FILE (HTML and inline SVG, no script or external
    /// asset): the windows on a timeline with the missing ones between them, the source's
    /// lag, dead letters by reason and per hour, commits per hour.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
}

pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let json = match args.format.as_str() {
        "table" => false,
        "json" => true,
        other => return Err(usage(format!("--format {other:?}: use table or json"))),
    };
    let target = args.target.resolve()?;
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    let table = sluice_publish::open_table(&target.table, &storage, None).await?;
    let mut status = sluice_publish::status(&table)
        .await
        .with_context(|| format!("reading the status of {}", target.table))?;
    if args.log_size {
        let (objects, bytes) = sluice_publish::log_size(&table)
            .await
            .with_context(|| format!("listing the log of {}", target.table))?;
        status.log.objects = Some(objects);
        status.log.bytes = Some(bytes);
    }
    let dlq = (args.dlq.clone())
        .or(target.file.dlq.clone())
        .unwrap_or_else(|| crate::args::default_dlq_location(&target.table));
    let id = sluice_publish::table_id(&table)
        .with_context(|| format!("reading the id of {}", target.table))?;
    let dead = dead_letters(&dlq, &storage, Some(&id)).await?;
    let rules = expectations(&status, &target.table, &storage, &dlq, &id).await?;
    let resume = status
        .pipelines
        .iter()
        .map(|p| {
            let offsets = p.positions.iter().map(|(k, t)| (k.clone(), t.version));
            (p.pipeline.clone(), offsets.collect())
        })
        .collect();
    let flags = crate::lag::SourceFlags {
        source: args.source.clone(),
        source_options: args.source_options.clone(),
        brokers: args.brokers.clone(),
        pipeline: args.pipeline.clone(),
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let lag = crate::lag::source_lag(&target, flags, &resume, now_ms).await?;
    if let Some(path) = &args.html {
        let dead_by_hour = match &dead {
            Some(_) => dead_letters_by_hour(&dlq, &storage, &id).await?,
            None => Vec::new(),
        };
        let page = crate::status_page::Page {
            status: &status,
            windows: &sluice_publish::list_windows(&table).await?,
            dead: dead.as_ref().map(|(d, _)| d),
            dead_by_hour: &dead_by_hour,
            commits: &sluice_publish::commit_history(&table).await?,
            lag: lag.as_ref(),
            now_ms,
        };
        let size = (status.pipelines.first())
            .and_then(|p| p.contract.get(sluice_publish::terms::WINDOW))
            .and_then(|w| sluice_window::WindowSize::parse(w).ok());
        std::fs::write(path, crate::status_page::render(&page, size))
            .with_context(|| format!("--html {}: writing the page", path.display()))?;
    }
    if json {
        let mut value = serde_json::to_value(&status)?;
        value["dead_letter_table"] = serde_json::json!(dead.as_ref().map(|_| &dlq));
        let (counts, others) = dead.unwrap_or_default();
        value["dead_letters"] = serde_json::json!(counts);
        value["dead_letters_of_other_tables"] = serde_json::json!(others);
        value["lag"] = serde_json::to_value(&lag)?;
        value["expectations"] = serde_json::to_value(&rules)?;
        println!("{value}");
    } else {
        print!("{}", text(&status, &dlq, dead.as_ref(), &rules));
        if let Some(lag) = &lag {
            println!("\nlag       {}", crate::lag::text(lag));
        }
    }
    Ok(())
}

/// What each pipeline's expectations found ([`crate::rule_counts`]); the dead-letter table is
/// read only when a pipeline has rules.
async fn expectations(
    status: &TableStatus,
    location: &str,
    storage: &std::collections::HashMap<String, String>,
    dlq: &str,
    table_id: &str,
) -> anyhow::Result<crate::rule_counts::RuleCounts> {
    let any = status.pipelines.iter().any(|p| {
        p.contract
            .get(sluice_publish::terms::EXPECT)
            .is_some_and(|t| !t.is_empty())
    });
    if !any {
        return Ok(Default::default());
    }
    // A dead letter `expectation` names its rule first in its detail (`rule: condition ...`).
    let sql = "SELECT pipeline, split_part(detail, ':', 1) AS rule, count(*) AS n FROM own \
               WHERE reason = 'expectation' GROUP BY 1, 2";
    let mut dropped = DeadCounts::new();
    if let Some((rows, _)) = dead_letter_counts(dlq, storage, Some(table_id), sql).await? {
        for (pipeline, rule, n) in rows {
            dropped.entry(pipeline).or_default().insert(rule, n);
        }
    }
    crate::rule_counts::count(status, location, storage, &dropped).await
}

/// Dead letters by pipeline and reason.
pub(crate) type DeadCounts = BTreeMap<String, BTreeMap<String, i64>>;

/// The dead letters meant for the table of id `table_id` (none: for any table), by pipeline
/// and reason, and the number meant for other tables once at its location; `None` when
/// there is no dead-letter table.
pub(crate) async fn dead_letters(
    dlq: &str,
    storage: &std::collections::HashMap<String, String>,
    table_id: Option<&str>,
) -> anyhow::Result<Option<(DeadCounts, usize)>> {
    let sql = "SELECT pipeline, reason, count(*) AS n FROM own GROUP BY pipeline, reason";
    let Some((rows, others)) = dead_letter_counts(dlq, storage, table_id, sql).await? else {
        return Ok(None);
    };
    let mut out = DeadCounts::new();
    for (pipeline, reason, n) in rows {
        out.entry(pipeline).or_default().insert(reason, n);
    }
    Ok(Some((out, others)))
}

/// The table's dead letters per hour they were detected in, by reason: (hour, reason,
/// count), oldest first.
async fn dead_letters_by_hour(
    dlq: &str,
    storage: &std::collections::HashMap<String, String>,
    table_id: &str,
) -> anyhow::Result<Vec<(String, String, i64)>> {
    let sql = format!(
        "SELECT CAST(date_trunc('hour', detected_at) AS VARCHAR) AS hour, reason, count(*) AS n \
         FROM own WHERE reason <> '{REPLAYED_REASON}' GROUP BY 1, 2 ORDER BY 1, 2"
    );
    let counted = dead_letter_counts(dlq, storage, Some(table_id), &sql).await?;
    Ok(counted.map(|(rows, _)| rows).unwrap_or_default())
}

/// `sql` over `own`, the dead letters of `dlq` meant for the table of id `table_id` (none:
/// any), selecting two strings and a count (rows with a null string left out); and how many
/// dead letters are meant for other tables. `None` without a dead-letter table.
async fn dead_letter_counts(
    dlq: &str,
    storage: &std::collections::HashMap<String, String>,
    table_id: Option<&str>,
    sql: &str,
) -> anyhow::Result<Option<(Vec<(String, String, i64)>, usize)>> {
    if sluice_publish::open_table(dlq, storage, None)
        .await
        .is_err()
    {
        return Ok(None);
    }
    let tables = [sluice_sql::TableRef {
        name: "d".into(),
        location: dlq.to_string(),
        version: None,
    }];
    let ctx = sluice_sql::session(&tables, storage).await?;
    let (own, others) = meant_for(ctx.table("d").await?, table_id).await?;
    ctx.register_table("own", own.into_view())?;
    let batches = sluice_sql::query(&ctx, sql)
        .await
        .with_context(|| format!("counting the dead letters of {dlq}"))?;
    let mut out = Vec::new();
    for b in &batches {
        // DataFusion may give strings as views or dictionaries: read them as plain strings.
        let as_type = |i: usize, t: &DataType| cast(b.column(i), t);
        let (x, y, n) = (
            as_type(0, &DataType::Utf8)?,
            as_type(1, &DataType::Utf8)?,
            as_type(2, &DataType::Int64)?,
        );
        let (Some(x), Some(y), Some(n)) = (
            x.as_string_opt::<i32>(),
            y.as_string_opt::<i32>(),
            n.as_primitive_opt::<Int64Type>(),
        ) else {
            anyhow::bail!("the dead-letter table {dlq} has unexpected column types");
        };
        for i in 0..b.num_rows() {
            if !x.is_null(i) && !y.is_null(i) {
                out.push((x.value(i).to_string(), y.value(i).to_string(), n.value(i)));
            }
        }
    }
    Ok(Some((out, others)))
}

fn text(
    s: &TableStatus,
    dlq: &str,
    dead: Option<&(DeadCounts, usize)>,
    rules: &crate::rule_counts::RuleCounts,
) -> String {
    let mut lines = table_lines(s);
    for p in &s.pipelines {
        lines.push(String::new());
        lines.extend(pipeline_lines(p, dlq, dead, rules));
    }
    if let Some((_, others @ 1..)) = dead {
        lines.push(String::new());
        lines.push(format!(
            "{} in {dlq} meant for a table once at this location (removed; not counted above)",
            crate::words::counted(*others as u64, "dead letter")
        ));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The table's lines of [`text`]: its version, data and log.
fn table_lines(s: &TableStatus) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = |l: String| lines.push(l);
    line(format!("table     {}", s.table));
    line(format!(
        "version   {}{}",
        s.version,
        match &s.last_commit {
            Some(c) => format!(
                ", last commit {} {}{}",
                c.timestamp_ms
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_else(|| "(no time)".into()),
                c.operation.as_deref().unwrap_or("?"),
                c.sluice
                    .as_deref()
                    .map(|k| format!(" (sluice {k})"))
                    .unwrap_or_default()
            ),
            None => String::new(),
        }
    ));
    line(format!(
        "data      {} rows in {} files, {}",
        s.rows,
        s.files,
        human_bytes(s.bytes)
    ));
    line(format!(
        "log       {} commits, oldest {}{}; {}",
        s.log.commits,
        s.log
            .oldest_commit
            .map_or("-".to_string(), |v| v.to_string()),
        match (s.log.objects, s.log.bytes) {
            (Some(objects), Some(bytes)) =>
                format!("; {objects} objects, {}", human_bytes(bytes as i64)),
            _ => String::new(),
        },
        match &s.checkpoint {
            Some(c) => format!(
                "last checkpoint at version {} ({} commits since)",
                c.version, c.commits_since
            ),
            None => "no checkpoint".to_string(),
        }
    ));
    lines
}

/// A pipeline's lines of [`text`]: its options, windows, files, positions and dead letters.
fn pipeline_lines(
    p: &PipelineStatus,
    dlq: &str,
    dead: Option<&(DeadCounts, usize)>,
    rules: &crate::rule_counts::RuleCounts,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = |l: String| lines.push(l);
    line(format!("pipeline  {}", p.pipeline));
    if !p.contract.is_empty() {
        line(format!(
            "  options   {}",
            p.contract
                .iter()
                // Expectations have lines of their own.
                .filter(|(k, v)| !v.is_empty() && *k != sluice_publish::terms::EXPECT)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    let mut windows = format!(
        "  windows   {}{}",
        p.windows,
        match (&p.first_address, &p.last_address) {
            (Some(first), Some(last)) if first == last => format!(", {first}"),
            (Some(first), Some(last)) => format!(" from {first} to {last}"),
            _ => String::new(),
        }
    );
    if let (Some(complete), Some(incomplete), Some(shards)) =
        (p.windows_complete, p.windows_incomplete, p.shards)
    {
        windows +=
            &format!("; {complete} complete, {incomplete} not sealed by all {shards} shards yet");
    }
    line(windows);
    line(format!(
        "  files     {} ({} rows, {}; mean file {}); {} windows of several files{}",
        p.files,
        p.rows,
        human_bytes(p.bytes),
        human_bytes(p.mean_file_bytes),
        p.windows_of_several_files,
        if p.most_files.is_empty() {
            String::new()
        } else {
            format!(
                ", most: {}",
                p.most_files
                    .iter()
                    .map(|w| format!("{} ({})", w.window, w.files))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ));
    for (partition, txn) in &p.positions {
        // A compressed or Parquet file read to its end has no offset to show.
        let at = if txn.version as u64 == sluice_source::compression::COMPRESSED_LEN {
            "its end".to_string()
        } else {
            format!("offset {}", txn.version)
        };
        line(format!(
            "  resume    {partition} at {at}{}",
            txn.last_updated_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| format!(
                    " (committed {})",
                    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ))
                .unwrap_or_default()
        ));
    }
    for (watermark, t) in &p.max_event_time {
        line(format!(
            "  events    {watermark}: latest event time before the resume position {t}"
        ));
    }
    for (target, version) in &p.notified {
        line(format!("  notified  {target} through version {version}"));
    }
    line(dead_line(p, dlq, dead));
    for l in crate::rule_counts::lines(rules.get(&p.pipeline).map_or(&[], Vec::as_slice)) {
        line(l);
    }
    lines
}

/// The dead-letter line of pipeline `p` in [`text`]: its dead letters in `dlq` by reason.
fn dead_line(p: &PipelineStatus, dlq: &str, dead: Option<&(DeadCounts, usize)>) -> String {
    // `replayed` rows record replays (`sluice dead-letters --replay`), not dead letters.
    let reasons = dead.and_then(|(d, _)| d.get(&p.pipeline));
    let letters: Vec<(&String, &i64)> = reasons
        .into_iter()
        .flatten()
        .filter(|(r, _)| *r != REPLAYED_REASON)
        .collect();
    let replayed = reasons
        .and_then(|r| r.get(REPLAYED_REASON))
        .map_or(String::new(), |n| format!(" ({n} replayed since)"));
    if letters.is_empty() {
        "  dead      none".to_string()
    } else {
        format!(
            "  dead      {} in {dlq}: {}{replayed}",
            letters.iter().map(|(_, n)| **n).sum::<i64>(),
            letters
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}
