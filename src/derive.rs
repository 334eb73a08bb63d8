//! Derived tables: their options (`[[derive]]` in the config file, or `--derive*` flags),
//! their start-up validation, and `sluice derive` (recompute a range, the batch rerun).

use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Deserialize;
use sluice_ingest::terms;
use sluice_ingest::{DeriveError, DeriveSpec, Deriver};
use sluice_publish::{Contract, OpenError, TableOptions, WindowTable};
use sluice_sql::DerivedQuery;

use crate::args::RunSettings;
use crate::backfill::parse_range_of;
use crate::ingest::{attempt, raw_options, SystemClock};
use crate::usage;
use sluice_ingest::Clock;

/// One derived table as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeriveConfig {
    /// Names the table in logs and errors.
    pub name: String,
    /// Where the derived table lives (path or URL).
    pub table: String,
    /// The query over `window` (one window of the raw table).
    pub sql: String,
    /// Output columns identifying a row within a window: publish by MERGE on them.
    #[serde(default)]
    pub key: Vec<String>,
}

/// Derived tables declared as flags: `--derive NAME=LOCATION`.
pub fn tables_from_flags(tables: &[String]) -> anyhow::Result<Vec<DeriveConfig>> {
    let mut out: Vec<DeriveConfig> = Vec::new();
    for t in tables {
        let (name, table) = crate::args::key_value("--derive", t)?;
        if out.iter().any(|d| d.name == name) {
            return Err(usage(format!("--derive: {name} is given twice")));
        }
        out.push(DeriveConfig {
            name,
            table,
            ..DeriveConfig::default()
        });
    }
    Ok(out)
}

/// Applies `--derive-sql NAME=SQL` and `--derive-key NAME=FIELD[,FIELD]` to the derived
/// tables declared by flags or in the config file.
pub fn apply_flags(
    derive: &mut [DeriveConfig],
    sqls: &[String],
    keys: &[String],
) -> anyhow::Result<()> {
    let find = |flag: &str, text: &str| -> anyhow::Result<(usize, String)> {
        let (name, value) = crate::args::key_value(flag, text)?;
        let i = derive.iter().position(|d| d.name == name).ok_or_else(|| {
            usage(format!(
                "{flag}: no derived table {name}; declare it with --derive {name}=LOCATION or in the config file"
            ))
        })?;
        Ok((i, value))
    };
    let mut sql_at = Vec::new();
    for s in sqls {
        sql_at.push(find("--derive-sql", s)?);
    }
    let mut key_at = Vec::new();
    for k in keys {
        key_at.push(find("--derive-key", k)?);
    }
    for (i, sql) in sql_at {
        derive[i].sql = sql;
    }
    for (i, key) in key_at {
        derive[i].key = key.split(',').map(|c| c.trim().to_string()).collect();
    }
    Ok(())
}

/// Checks the derived tables' options (not their queries: those are planned against the raw
/// table once it is open).
pub fn check(derive: &[DeriveConfig], taken: &[&str]) -> anyhow::Result<()> {
    for (i, d) in derive.iter().enumerate() {
        let valid_name = !d.name.is_empty()
            && d.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(usage(format!(
                "derived table {:?}: use a name of letters, digits, _ and -",
                d.name
            )));
        }
        if derive[..i].iter().any(|e| e.name == d.name) {
            return Err(usage(format!("derived table {}: named twice", d.name)));
        }
        if d.table.is_empty() {
            return Err(usage(format!(
                "derived table {}: no table location",
                d.name
            )));
        }
        if d.sql.trim().is_empty() {
            return Err(usage(format!(
                "derived table {}: no query (sql, or --derive-sql {}=SQL)",
                d.name, d.name
            )));
        }
        if d.key.iter().any(String::is_empty) {
            return Err(usage(format!("derived table {}: empty key column", d.name)));
        }
        let same_place = |a: &str| a.trim_end_matches('/') == d.table.trim_end_matches('/');
        if taken.iter().any(|t| same_place(t)) || derive[..i].iter().any(|e| same_place(&e.table)) {
            return Err(usage(format!(
                "derived table {}: {} is already the raw, dead-letter or another derived table",
                d.name, d.table
            )));
        }
    }
    Ok(())
}

/// Refuses, before anything is written, derived tables that record another raw table, query
/// or key than this run gives them (their contract; see docs/cli.md).
pub async fn check_contracts(settings: &RunSettings) -> anyhow::Result<()> {
    if settings.derive.is_empty() {
        return Ok(());
    }
    let raw_url = sluice_publish::location_url(&settings.table)
        .map_err(|e| usage(format!("--table: {e}")))?;
    for d in &settings.derive {
        let options = TableOptions {
            storage_options: settings.storage_options.clone(),
            ..TableOptions::new(d.table.clone())
        };
        let recorded = sluice_publish::recorded_contract(&options, &settings.pipeline)
            .await
            .with_context(|| format!("reading derived table {} at {}", d.name, d.table))?;
        let Some(recorded) = recorded else {
            continue;
        };
        let given = Contract::new()
            .with(terms::RAW, raw_url.as_str())
            .with(terms::SQL, d.sql.trim())
            .with(terms::KEY, d.key.join(","));
        let differences = recorded.differences(&given);
        if !differences.is_empty() {
            let what = differences
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(usage(format!(
                "derived table {} at {}: {what}. Nothing was written. A changed query or raw table needs a derived table location of its own",
                d.name, d.table
            )));
        }
    }
    Ok(())
}

/// Plans every derived query against `raw` and opens the derived tables. A query that does
/// not settings, or a derived table whose columns differ from the query's output, is a usage
/// error (exit 2) before anything is ingested.
pub async fn open_deriver(
    settings: &RunSettings,
    raw: &mut WindowTable,
    options: &TableOptions,
    attempt: &str,
    stage: sluice_stage::StageOptions,
) -> anyhow::Result<Option<Deriver>> {
    if settings.derive.is_empty() {
        return Ok(None);
    }
    let specs = settings
        .derive
        .iter()
        .map(|d| DeriveSpec {
            query: DerivedQuery {
                name: d.name.clone(),
                sql: d.sql.clone(),
                key: d.key.clone(),
            },
            options: TableOptions {
                location: d.table.clone(),
                // Deliveries are the raw table's to record.
                notified: Default::default(),
                ..options.clone()
            },
        })
        .collect();
    match Deriver::open(specs, raw, &settings.pipeline, attempt, stage).await {
        Ok(d) => Ok(Some(d)),
        Err(e @ DeriveError::Query(_)) => Err(usage(e.to_string())),
        Err(DeriveError::Open { name, source }) => match *source {
            OpenError::SchemaMismatch { url, found, expected } => Err(usage(format!(
                "derived table {name}: the table at {url} has columns {found}, but the query's output is {expected}; give a changed query a new table location"
            ))),
            e @ OpenError::ContractMismatch { .. } => Err(usage(format!(
                "derived table {name}: {e}. Nothing was written. A changed query or raw table needs a derived table location of its own"
            ))),
            e @ (OpenError::PartitionMismatch { .. }
            | OpenError::Schema(_)) => Err(usage(format!(
                "derived table {name}: {e}"
            ))),
            e @ OpenError::ReservedColumn { .. } => Err(usage(format!(
                "derived table {name}: {e}; name the query's column another way (`AS`)"
            ))),
            other => Err(anyhow::Error::new(other)
                .context(format!("opening derived table {name}"))),
        },
        Err(other) => Err(anyhow::Error::new(other).context("opening the derived tables")),
    }
}

/// `sluice derive` takes the run options and a range, as `backfill` does, or `--follow`.
#[derive(Debug, clap::Args)]
pub struct DeriveArgs {
    #[command(flatten)]
    pub run: crate::args::RunArgs,
    /// First instant of the range: windows starting at or after it, e.g. 2026-10-03T00:00Z.
    #[arg(long, required_unless_present = "follow", conflicts_with = "follow")]
    pub from: Option<String>,
    /// End of the range (exclusive): windows starting before it.
    #[arg(long, required_unless_present = "follow", conflicts_with = "follow")]
    pub to: Option<String>,
}

/// `sluice derive`: recomputes the derived windows of a range from the raw table and
/// publishes those whose rows changed (a second run changes nothing). Reads no source.
/// With `--follow`, keeps the derived tables up to the raw table as it grows (beside the
/// ingesters), every `--poll-interval`, until SIGINT or SIGTERM.
pub async fn derive_command(args: DeriveArgs) -> anyhow::Result<()> {
    let range = match (&args.from, &args.to) {
        (Some(from), Some(to)) => Some(parse_range_of(from, to)?),
        _ => None,
    };
    let mut run = args.run.merge_config()?;
    run.config = None;
    let follow_ms = if run.follow {
        let ms = crate::args::duration_or_default(
            "--poll-interval",
            &run.poll_interval,
            sluice_ingest::defaults::POLL_INTERVAL,
        )?;
        if ms < 1 {
            return Err(usage("--poll-interval: must be at least 1ms"));
        }
        Some(ms as u64)
    } else {
        None
    };
    // Not a followed source: the raw table is what is followed.
    run.follow = false;
    run.poll_interval = None;
    // The source is not read; a placeholder satisfies the run options' check.
    run.source.get_or_insert_with(|| "ndjson:-".into());
    // The window size and layout come from the raw table's contract.
    let settings = crate::ingest::resolve(run).await?;
    if settings.derive.is_empty() {
        return Err(usage(
            "no derived tables: declare them with [[derive]] in --config, or --derive NAME=LOCATION --derive-sql NAME=SQL",
        ));
    }
    let started = Instant::now();
    // Only read: the raw table's contract is not checked or recorded here.
    let mut options = TableOptions {
        contract: None,
        ..raw_options(&settings)
    };
    // A Kafka run's table has a shard per partition: read as one of them, derived whole.
    let derived_options = options.clone();
    if crate::ingest::table_is_sharded(&options).await {
        options.shard = Some(sluice_window::Shard(0));
    }
    let mut raw =
        match WindowTable::open_existing(&options, None, settings.layout, settings.window).await {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                return Err(usage(format!(
                    "--table: no raw table at {}; derived tables are computed from it",
                    settings.table
                )))
            }
            Err(e) => return Err(crate::ingest::open_error(e, &settings.table)),
        };
    let stage = sluice_stage::StageOptions {
        codec: settings.codec,
        ..sluice_stage::StageOptions::default()
    };
    let Some(mut deriver) = open_deriver(
        &settings,
        &mut raw,
        &derived_options,
        &attempt(&settings),
        stage,
    )
    .await?
    else {
        return Ok(());
    };
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("derive [{bar:30}] {pos}/{len} windows, {elapsed} elapsed")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if let Some(poll_ms) = follow_ms {
        let sharded = options.shard.is_some();
        return follow_raw(&settings, &mut raw, &mut deriver, sharded, poll_ms, started).await;
    }
    let Some((from, to)) = range else {
        return Err(usage("--from and --to: the range to derive (or --follow)"));
    };
    let now_ms = SystemClock.now_ms();
    let mut lines = crate::progress::ProgressLines::new("derive");
    deriver
        .derive_range(&mut raw, from, to, now_ms, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
            lines.tick(|| format!("{done} of {total} derived windows recomputed"));
        })
        .await
        .context("deriving")?;
    bar.finish_and_clear();
    let s = &deriver.summary;
    if settings.json {
        let json = serde_json::json!({
            "derived_windows_recomputed": s.computed,
            "derived_windows_published": s.published,
            "commits": s.commits,
            "raw_table_version": raw.version(),
            "seconds": started.elapsed().as_secs_f64(),
        });
        println!("{json}");
        return Ok(());
    }
    println!(
        "sluice derive: {} recomputed from raw table version {}, {} published in {} ({} unchanged) in {:.2} s",
        crate::ingest::counted(s.computed, "derived window"),
        raw.version().map_or("-".into(), |v| v.to_string()),
        s.published,
        crate::ingest::counted(s.commits, "commit"),
        s.computed - s.published,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `sluice derive --follow`: every `poll_ms`, re-reads the raw table and brings every derived
/// table up to it (the windows changed since each settled; in a Kafka table, the windows that
/// became complete or were rewritten while complete), until SIGINT or SIGTERM. A failure
/// another writer causes (a derived window published by a run beside it) re-reads the tables,
/// up to `--restarts-max` times in a row.
async fn follow_raw(
    settings: &RunSettings,
    raw: &mut WindowTable,
    deriver: &mut Deriver,
    sharded: bool,
    poll_ms: u64,
    started: Instant,
) -> anyhow::Result<()> {
    let stop = crate::signals::Stop::on_signal();
    let mut stopped = stop.rx.clone();
    let mut failures = 0;
    let mut rounds: u64 = 0;
    while !*stopped.borrow() {
        let now_ms = SystemClock.now_ms();
        let step = async {
            raw.reload()
                .await
                .map_err(|e| DeriveError::Raw(Box::new(e)))?;
            if sharded {
                deriver
                    .follow_sharded(raw, &settings.pipeline, now_ms)
                    .await
            } else {
                deriver.catch_up(raw, now_ms).await
            }
        }
        .await;
        match step {
            Ok(()) => failures = 0,
            Err(e) if e.is_resumable() && failures < settings.restarts_max => {
                failures += 1;
                tracing::warn!(error = %e, attempt = failures, "re-reading the tables and deriving again");
            }
            Err(e) => return Err(anyhow::Error::new(e).context("following the raw table")),
        }
        rounds += 1;
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(poll_ms)) => {}
            _ = stopped.changed() => {}
        }
    }
    let s = &deriver.summary;
    println!(
        "sluice derive --follow: {} recomputed, {} published in {} ({} unchanged), raw table version {}, {} at the raw table in {:.2} s; stopped by a signal",
        crate::ingest::counted(s.computed, "derived window"),
        s.published,
        crate::ingest::counted(s.commits, "commit"),
        s.computed - s.published,
        raw.version().map_or("-".into(), |v| v.to_string()),
        crate::ingest::counted(rounds, "look"),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::args::RunArgs;

    #[test]
    fn derived_tables_from_the_config_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("p.toml");
        std::fs::write(
            &cfg,
            "source = \"ndjson:in\"\ntable = \"t\"\n\
             [[derive]]\nname = \"rev\"\ntable = \"t_rev\"\nsql = \"SELECT 1 AS one FROM window\"\n\
             [[derive]]\nname = \"kinds\"\ntable = \"t_kinds\"\nsql = \"SELECT kind FROM window\"\nkey = [\"kind\"]\n",
        )
        .unwrap();
        let args = RunArgs {
            config: Some(cfg.clone()),
            derive_tables: vec!["extra=t_extra".into()],
            derive_sql: vec![
                "extra=SELECT 2 AS two FROM window".into(),
                "rev=SELECT 3 AS three FROM window".into(),
            ],
            derive_key: vec!["extra=two".into()],
            ..Default::default()
        };
        let settings = args.settings().unwrap();
        let names: Vec<&str> = settings.derive.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["extra", "rev", "kinds"]);
        assert_eq!(settings.derive[0].key, ["two"]);
        assert_eq!(
            settings.derive[1].sql, "SELECT 3 AS three FROM window",
            "a flag wins"
        );
        assert_eq!(settings.derive[2].key, ["kind"]);

        let bad = |derive_tables: Vec<&str>, derive_sql: Vec<&str>| {
            RunArgs {
                source: Some("ndjson:in".into()),
                table: Some("t".into()),
                derive_tables: derive_tables.into_iter().map(String::from).collect(),
                derive_sql: derive_sql.into_iter().map(String::from).collect(),
                ..Default::default()
            }
            .settings()
            .unwrap_err()
            .to_string()
        };
        assert!(bad(vec!["a=x"], vec![]).contains("no query"));
        assert!(bad(vec!["a=x"], vec!["b=SELECT 1"]).contains("no derived table b"));
        assert!(bad(vec!["a=t"], vec!["a=SELECT 1"]).contains("already the raw"));
        assert!(bad(vec!["a=x", "a=y"], vec![]).contains("given twice"));
        assert!(bad(vec!["a b=x"], vec!["a b=SELECT 1"]).contains("use a name"));
        assert!(bad(vec!["x"], vec![]).contains("expected KEY=VALUE"));
    }
}
