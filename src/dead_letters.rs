//! `sluice dead-letters`: a pipeline's dead letters by reason and position, and `--replay`:
//! the selected ones read again with decode options that now fit them and landed in the table
//! exactly once (sluice_ingest's replay), each then recorded in the dead-letter table as
//! `replayed`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use clap::Args;
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use deltalake::datafusion::prelude::{col, lit, DataFrame};
use sluice_ingest::replay::{replay, Fate, Letter, Replayed, StoredTime};
use sluice_ingest::{defaults, Clock};
use sluice_publish::{
    recorded_contract, Contract, DeadLetter, DeadLetterOwner, DeadLetterTable, TableOptions,
    WindowTable, REPLAYED_REASON, TABLE_ID_COLUMN,
};
use sluice_source::{LineDecoder, SchemaEvolution};
use sluice_stage::{StageOptions, Stager};
use sluice_window::Shard;

use crate::args::table_flags::{TableFlags, TableTarget};
use crate::args::{default_dlq_location, RunArgs};
use crate::exit::usage;
use crate::open::SystemClock;
use crate::report::parse_storage_options;
use crate::words::counted;

#[derive(Debug, Clone, Args)]
pub struct DeadLettersArgs {
    /// The table the dead letters were meant for: --table [PATH] (or the table of --config
    /// [FILE], whose dead-letter and tombstone tables and pipeline apply too).
    #[command(flatten)]
    pub target: TableFlags,
    /// Its dead-letter table. [default: the table's location with _dlq appended]
    #[arg(long)]
    pub dlq: Option<String>,
    /// The pipeline whose dead letters these are. [default: sluice]
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Only dead letters of these reasons (comma-separated or repeated), e.g. bad_time.
    #[arg(long, value_delimiter = ',')]
    pub reason: Vec<String>,
    /// How many dead letters are listed (the oldest first by position). [default: 20]
    #[arg(long)]
    pub limit: Option<usize>,
    /// table (for people) or json (one object).
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
    /// Land the selected dead letters not replayed yet in the table, read with the table's
    /// options except the time options given here; each is then recorded as replayed.
    /// Running it twice lands nothing twice.
    #[arg(long)]
    pub replay: bool,
    /// With --replay: the field holding the event time. [default: the table's]
    #[arg(long)]
    pub time_field: Option<String>,
    /// With --replay: how event times are written. [default: the table's]
    #[arg(long)]
    pub time_format: Option<String>,
    /// With --replay: the zone of event times without an offset. [default: the table's]
    #[arg(long, allow_hyphen_values = true)]
    pub time_zone: Option<String>,
    /// With --replay into a table with deletes: its tombstone table. [default: the table's
    /// location with _tombstones appended]
    #[arg(long)]
    pub tombstones: Option<String>,
    /// Remove the dead letters meant for a table once at --table's location (removed, or not
    /// kept because its first run landed nothing), whole files; a dry run unless --apply.
    #[arg(long, conflicts_with = "replay")]
    pub remove_others: bool,
    /// With --remove-others: remove them; without it, only count what would go.
    #[arg(long, requires = "remove_others")]
    pub apply: bool,
}

/// One row of the dead-letter table, as listed.
#[derive(Debug, Clone)]
struct Stored {
    letter: Letter,
    detail: String,
    window: Option<String>,
}

pub async fn dead_letters(mut args: DeadLettersArgs) -> anyhow::Result<()> {
    let target = args.target.resolve()?;
    args.tombstones = args.tombstones.or(target.file.tombstones.clone());
    let pipeline = (args.pipeline.clone())
        .or(target.file.pipeline.clone())
        .unwrap_or_else(|| defaults::PIPELINE.into());
    let dlq = (args.dlq.clone())
        .or(target.file.dlq.clone())
        .unwrap_or_else(|| default_dlq_location(&target.table));
    args.dlq = Some(dlq.clone());
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    if (args.time_field.is_some() || args.time_format.is_some() || args.time_zone.is_some())
        && !args.replay
    {
        return Err(usage(
            "--time-field, --time-format, --time-zone: only with --replay",
        ));
    }
    let table_id = match sluice_publish::open_table(&target.table, &storage, None).await {
        Ok(table) => Some(
            sluice_publish::table_id(&table)
                .with_context(|| format!("reading the id of {}", target.table))?,
        ),
        Err(sluice_publish::OpenError::NoTable(_)) => None,
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("opening {}", target.table)));
        }
    };
    if args.remove_others {
        return remove_others(&dlq, &storage, table_id, args.apply).await;
    }
    let (stored, others) = read_letters(&dlq, &storage, &pipeline, table_id.as_deref()).await?;
    let replayed: BTreeSet<(String, i64)> = stored
        .iter()
        .filter(|s| s.letter.reason == REPLAYED_REASON)
        .map(|s| (s.letter.source.clone(), s.letter.offset))
        .collect();
    let selected: Vec<&Stored> = stored
        .iter()
        .filter(|s| s.letter.reason != REPLAYED_REASON)
        .filter(|s| args.reason.is_empty() || args.reason.contains(&s.letter.reason))
        .collect();
    if !args.replay {
        let meant = Meant {
            table_exists: table_id.is_some(),
            others,
        };
        return list(&args, &target.table, &dlq, &selected, &replayed, meant);
    }
    let pending: Vec<Letter> = selected
        .iter()
        .filter(|s| !replayed.contains(&(s.letter.source.clone(), s.letter.offset)))
        .map(|s| s.letter.clone())
        .collect();
    replay_letters(&args, &target, &pipeline, &dlq, storage, pending).await
}

/// Which table the listed dead letters were meant for.
#[derive(Debug, Clone, Copy)]
struct Meant {
    /// Whether the table is there: without it, the dead letters of every table once at its
    /// location are listed (a run that lands no row leaves no table).
    table_exists: bool,
    /// Rows meant for another table once at the location, left out.
    others: usize,
}

/// Prints the counts by reason and the first `--limit` letters.
fn list(
    args: &DeadLettersArgs,
    table: &str,
    dlq: &str,
    selected: &[&Stored],
    replayed: &BTreeSet<(String, i64)>,
    meant: Meant,
) -> anyhow::Result<()> {
    let is_replayed = |s: &Stored| replayed.contains(&(s.letter.source.clone(), s.letter.offset));
    let mut by_reason: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for s in selected {
        let entry = by_reason.entry(&s.letter.reason).or_default();
        entry.0 += 1;
        entry.1 += u64::from(is_replayed(s));
    }
    let limit = args.limit.unwrap_or(20);
    let shown: Vec<&&Stored> = selected.iter().take(limit).collect();
    if args.format == "json" {
        let json = serde_json::json!({
            "dead_letter_table": dlq,
            "table_exists": meant.table_exists,
            "dead_letters_of_other_tables": meant.others,
            "by_reason": by_reason.iter().map(|(r, (n, done))| (r.to_string(), serde_json::json!({"dead_letters": n, "replayed": done}))).collect::<serde_json::Map<_, _>>(),
            "dead_letters": shown.iter().map(|s| serde_json::json!({
                "source_partition": s.letter.source,
                "source_offset": s.letter.offset,
                "reason": s.letter.reason,
                "detail": s.detail,
                "window": s.window,
                "replayed": is_replayed(s),
                "raw": s.letter.raw,
            })).collect::<Vec<_>>(),
        });
        println!("{json}");
        return Ok(());
    }
    println!("{} in {dlq}", counted(selected.len() as u64, "dead letter"));
    if !meant.table_exists {
        println!(
            "  (no table at {}: these were meant for a table once there)",
            table
        );
    }
    if meant.others > 0 {
        println!(
            "  ({} meant for a table once at {} not listed)",
            counted(meant.others as u64, "dead letter"),
            table
        );
    }
    for (reason, (n, done)) in &by_reason {
        println!("  {reason:<18} {n:>8}  ({done} replayed)");
    }
    for s in shown {
        let mark = if is_replayed(s) { "  [replayed]" } else { "" };
        println!(
            "{}:{}  {}  {}{mark}",
            s.letter.source, s.letter.offset, s.letter.reason, s.detail
        );
    }
    if selected.len() > limit {
        println!("... {} more (--limit)", selected.len() - limit);
    }
    Ok(())
}

/// The dead-letter rows meant for the table of id `table_id` (with rows written before sluice
/// recorded table ids, which could be any table's), and how many rows are meant for other
/// tables: ones removed from this location before (a table that never landed a row is).
/// Without a table id (no table there), every row.
/// Removes the dead letters of `dlq` meant for a table other than the one of `table_id` (the
/// table at the location now; any recorded table when there is none), whole files.
async fn remove_others(
    dlq: &str,
    storage: &std::collections::HashMap<String, String>,
    table_id: Option<String>,
    apply: bool,
) -> anyhow::Result<()> {
    let options = sluice_publish::TableOptions {
        storage_options: storage.clone(),
        ..sluice_publish::TableOptions::new(dlq)
    };
    let mut table = match sluice_publish::DeadLetterTable::open(&options).await {
        Ok(t) => t,
        Err(sluice_publish::DeadLetterError::Open(sluice_publish::OpenError::NoTable(_))) => {
            println!("sluice dead-letters: no dead-letter table at {dlq}");
            return Ok(());
        }
        Err(e) => {
            return Err(
                anyhow::Error::new(e).context(format!("opening the dead-letter table {dlq}"))
            )
        }
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let rule = sluice_publish::DeadLetterExpiryRule {
        detected_before_ms: i64::MAX,
        pipeline: None,
        meant_for: sluice_publish::MeantFor::OtherThan(table_id),
        dry_run: !apply,
    };
    let report = table
        .expire(&rule, now_ms)
        .await
        .with_context(|| format!("removing dead letters of other tables from {dlq}"))?;
    let kept = if report.files_kept_whole == 0 {
        String::new()
    } else {
        format!(
            "; {} files of this table's and others' kept whole",
            report.files_kept_whole
        )
    };
    println!(
        "sluice dead-letters: {} meant for a table once at this location ({} files) {}{kept}",
        crate::words::counted(report.rows as u64, "dead letter"),
        report.files,
        if apply {
            "removed"
        } else {
            "found (dry run, nothing removed; --apply removes them)"
        }
    );
    Ok(())
}

pub(crate) async fn meant_for(
    frame: DataFrame,
    table_id: Option<&str>,
) -> anyhow::Result<(DataFrame, usize)> {
    let Some(id) = table_id else {
        return Ok((frame, 0));
    };
    if frame
        .schema()
        .field_with_unqualified_name(TABLE_ID_COLUMN)
        .is_err()
    {
        return Ok((frame, 0));
    }
    let own = col(TABLE_ID_COLUMN)
        .eq(lit(id))
        .or(col(TABLE_ID_COLUMN).is_null());
    let others = frame.clone().filter(!own.clone())?.count().await?;
    Ok((frame.filter(own)?, others))
}

/// Reads the pipeline's rows of the dead-letter table meant for the table of id `table_id`
/// ([`meant_for`]; none if there is no dead-letter table), in position order, and how many
/// rows meant for other tables were left out.
async fn read_letters(
    dlq: &str,
    storage: &std::collections::HashMap<String, String>,
    pipeline: &str,
    table_id: Option<&str>,
) -> anyhow::Result<(Vec<Stored>, usize)> {
    if sluice_publish::open_table(dlq, storage, None)
        .await
        .is_err()
    {
        return Ok((Vec::new(), 0));
    }
    let tables = [sluice_sql::TableRef {
        name: "d".into(),
        location: dlq.to_string(),
        version: None,
    }];
    let ctx = sluice_sql::session(&tables, storage).await?;
    let columns = [
        "source_partition",
        "source_offset",
        "reason",
        "detail",
        "raw",
        "window",
    ];
    let pipeline_rows = ctx
        .table("d")
        .await?
        .filter(col("pipeline").eq(lit(pipeline)))?;
    let (rows, others) = meant_for(pipeline_rows, table_id).await?;
    let batches = rows
        .select_columns(&columns)?
        .sort(vec![
            col("source_partition").sort(true, true),
            col("source_offset").sort(true, true),
        ])?
        .collect()
        .await
        .with_context(|| format!("reading the dead letters of {dlq}"))?;
    let mut out = Vec::new();
    for b in &batches {
        out.extend(stored_rows(b).with_context(|| format!("reading {dlq}"))?);
    }
    Ok((out, others))
}

fn stored_rows(b: &RecordBatch) -> anyhow::Result<Vec<Stored>> {
    let text = |i: usize| cast(b.column(i), &DataType::Utf8);
    let (source, offset, reason, detail, raw, window) = (
        text(0)?,
        cast(b.column(1), &DataType::Int64)?,
        text(2)?,
        text(3)?,
        text(4)?,
        text(5)?,
    );
    let (Some(source), Some(offset), Some(reason), Some(detail), Some(raw), Some(window)) = (
        source.as_string_opt::<i32>(),
        offset.as_primitive_opt::<Int64Type>(),
        reason.as_string_opt::<i32>(),
        detail.as_string_opt::<i32>(),
        raw.as_string_opt::<i32>(),
        window.as_string_opt::<i32>(),
    ) else {
        anyhow::bail!("the dead-letter table has unexpected column types");
    };
    Ok((0..b.num_rows())
        .map(|i| Stored {
            letter: Letter {
                source: source.value(i).to_string(),
                offset: offset.value(i),
                reason: reason.value(i).to_string(),
                raw: raw.value(i).to_string(),
            },
            detail: detail.value(i).to_string(),
            window: (!window.is_null(i)).then(|| window.value(i).to_string()),
        })
        .collect())
}

/// The run settings a replay publishes with: the table's recorded options (its contract),
/// the time options given here overriding them if `given`.
fn replay_settings(
    args: &DeadLettersArgs,
    target: &TableTarget,
    pipeline: &str,
    contract: &Contract,
    given: bool,
) -> anyhow::Result<crate::args::RunSettings> {
    let args = &DeadLettersArgs {
        time_field: args.time_field.clone().filter(|_| given),
        time_format: args.time_format.clone().filter(|_| given),
        time_zone: args.time_zone.clone().filter(|_| given),
        ..args.clone()
    };
    let mut run = RunArgs {
        table: Some(target.table.clone()),
        pipeline: Some(pipeline.to_string()),
        dlq: args.dlq.clone(),
        tombstones: args.tombstones.clone(),
        storage_options: target.storage_options.clone(),
        time_field: args.time_field.clone(),
        time_format: args.time_format.clone(),
        time_zone: args.time_zone.clone(),
        // The source is not read; a placeholder satisfies the run options' check.
        source: Some("ndjson:-".into()),
        ..RunArgs::default()
    };
    run.adopt(contract);
    run.settings()
}

/// The summary line of a replay.
fn print_replayed(
    offered: usize,
    landed: usize,
    outcome: &Replayed,
    failing: usize,
    version: Option<u64>,
) {
    println!(
        "sluice dead-letters: {} replayed: {landed} landed ({} changed in {}), {failing} still failing; table version {}",
        counted(offered as u64, "dead letter"),
        counted(outcome.rows_changed, "row"),
        counted(outcome.windows, "window"),
        version.map_or("-".into(), |v| v.to_string()),
    );
}

/// The letters by the shard of the table they belong to: a Kafka table keeps each topic
/// partition's rows in a shard of its own (`topic/3`: shard 3), where its replayed rows land;
/// any other table is one.
async fn by_shard(
    options: &TableOptions,
    letters: Vec<Letter>,
) -> BTreeMap<Option<Shard>, Vec<Letter>> {
    let mut groups: BTreeMap<Option<Shard>, Vec<Letter>> = BTreeMap::new();
    if !crate::open::table_is_sharded(options).await {
        groups.insert(None, letters);
        return groups;
    }
    for letter in letters {
        let partition = sluice_source::kafka::partition_of_name(&letter.source);
        let shard = partition.and_then(|p| u32::try_from(p).ok()).map(Shard);
        groups.entry(shard).or_default().push(letter);
    }
    groups
}

/// Replays `letters` into `shard` of the table (the whole table for `None`) with the run
/// settings of a replay.
async fn replay_into(
    settings: &crate::args::RunSettings,
    stored: &StoredTime,
    options: &TableOptions,
    shard: Option<Shard>,
    attempt: &str,
    letters: Vec<Letter>,
) -> anyhow::Result<(Replayed, WindowTable)> {
    let (mut decode, config) = crate::open::runner(settings);
    // A replay lands records in the table's columns; one with fields the table lacks stays a
    // dead letter (`unknown_field`): the stream grows the table.
    decode.evolution = SchemaEvolution::Reject;
    let options = match shard {
        Some(shard) => sluice_ingest::shard_writer_options(options, shard),
        None => options.clone(),
    };
    let table = WindowTable::open_existing(&options, None, settings.layout, settings.window)
        .await
        .with_context(|| format!("opening the table {}", options.location))?
        .ok_or_else(|| usage(format!("--table {}: no table there", options.location)))?;
    decode.reserved = table.reserved_columns();
    let mut decoder = LineDecoder::new(table.record_schema(), decode).map_err(|e| {
        usage(format!(
            "decoding the dead letters with the table's options: {e}"
        ))
    })?;
    let stager = Stager::new(table.store(), attempt.to_string(), StageOptions::default());
    let now = SystemClock.now_ms();
    Ok(replay(&config, stored, table, &mut decoder, stager, letters, now).await?)
}

async fn replay_letters(
    args: &DeadLettersArgs,
    target: &TableTarget,
    pipeline: &str,
    dlq: &str,
    storage: std::collections::HashMap<String, String>,
    letters: Vec<Letter>,
) -> anyhow::Result<()> {
    let mut options = TableOptions::new(target.table.clone());
    options.storage_options = storage.clone();
    let contract = recorded_contract(&options, pipeline)
        .await
        .with_context(|| format!("reading the table {}", target.table))?
        .ok_or_else(|| {
            usage(format!(
                "--table {}: no table of pipeline {pipeline} there (give --pipeline?)",
                target.table
            ))
        })?;
    if letters.is_empty() {
        // Nothing pending: nothing to open a writer for.
        let table = sluice_publish::open_table(&target.table, &storage, None)
            .await
            .with_context(|| format!("opening the table {}", target.table))?;
        let version = table.version();
        print_replayed(0, 0, &Replayed::default(), 0, version);
        return Ok(());
    }
    let settings = replay_settings(args, target, pipeline, &contract, true)?;
    let table_settings = replay_settings(args, target, pipeline, &contract, false)?;
    let stored = StoredTime {
        field: table_settings.time_field.clone(),
        time: table_settings.time.clone(),
    };
    let clock = SystemClock;
    let attempt = format!("replay-{}", clock.now_ms());
    let offered = letters.len();
    let mut outcome = Replayed::default();
    let mut last_table = None;
    for (shard, letters) in by_shard(&options, letters).await {
        let (replayed, table) = replay_into(&settings, &stored, &options, shard, &attempt, letters)
            .await
            .context("replaying dead letters")?;
        outcome.rows_changed += replayed.rows_changed;
        outcome.windows += replayed.windows;
        outcome.version = replayed.version.or(outcome.version);
        outcome.fates.extend(replayed.fates);
        last_table = Some(table);
    }
    let table = last_table.expect("a letter is in some shard's group");
    let version = outcome.version.or(table.version());
    let markers = replay_markers(&outcome.fates, &target.table, version);
    if !markers.is_empty() {
        let mut dlq_options = TableOptions::new(dlq.to_string());
        dlq_options.storage_options = storage;
        let mut letters = DeadLetterTable::open_or_create(&dlq_options)
            .await
            .with_context(|| format!("opening the dead-letter table {dlq}"))?;
        let mut dlq_stager = Stager::new(letters.store(), attempt, StageOptions::default());
        let owner = DeadLetterOwner::of(&table, pipeline)
            .with_context(|| format!("reading the id of {}", target.table))?;
        letters
            .append(&owner, &markers, &[], clock.now_ms(), &mut dlq_stager)
            .await
            .with_context(|| format!("recording the replays in {dlq}"))?;
    }
    let failing: Vec<String> = outcome
        .fates
        .iter()
        .filter_map(|(l, f)| match f {
            Fate::Failing { reason, detail } => {
                Some(format!("{}:{} {reason}: {detail}", l.source, l.offset))
            }
            Fate::Landed { .. } => None,
        })
        .collect();
    print_replayed(offered, markers.len(), &outcome, failing.len(), version);
    for f in failing.iter().take(5) {
        eprintln!("  still failing: {f}");
    }
    Ok(())
}

/// A `replayed` marker for each letter that landed, naming the version it landed in.
fn replay_markers(fates: &[(Letter, Fate)], table: &str, version: Option<u64>) -> Vec<DeadLetter> {
    fates
        .iter()
        .filter_map(|(l, fate)| match fate {
            Fate::Landed { address } => Some(DeadLetter {
                source: l.source.clone(),
                offset: l.offset,
                reason: REPLAYED_REASON.into(),
                detail: format!(
                    "{} replayed into {} (version {})",
                    l.reason,
                    table,
                    version.map_or("-".into(), |v| v.to_string())
                ),
                raw: l.raw.clone(),
                window: Some(address.clone()),
            }),
            Fate::Failing { .. } => None,
        })
        .collect()
}
