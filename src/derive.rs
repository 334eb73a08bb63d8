//! `sluice derive`: recompute a range of a raw table's derived tables (the batch rerun), or
//! follow the raw table and keep them up. Their options are `args::derive_tables`'; opening
//! them is `open`'s.

use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_ingest::{Deriver, RawShape, RestartPolicy};
use sluice_publish::{TableOptions, WindowTable};
use sluice_window::EventTime;

use crate::args::{parse_range_of, RunSettings};
use crate::exit::usage;
use crate::open::{attempt, open_deriver, raw_options, SystemClock};

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
    let (settings, range, follow_ms) = derive_settings(args).await?;
    let started = Instant::now();
    // Only read: the raw table's contract is not checked or recorded here.
    let mut options = TableOptions {
        contract: None,
        ..raw_options(&settings)
    };
    // A Kafka run's table has a shard per partition: read as one of them, derived whole.
    let derived_options = options.clone();
    if crate::open::table_is_sharded(&options).await {
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
            Err(e) => return Err(crate::open::open_error(e, &settings.table)),
        };
    let stage = sluice_stage::StageOptions {
        codec: settings.tuning.codec,
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
    let mut lines = crate::progress::ProgressLines::new("derive");
    let policy = RestartPolicy::new(settings.tuning.restarts_max);
    deriver
        .derive_range_restarting(
            &mut raw,
            (from, to),
            policy,
            &SystemClock,
            &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
                lines.tick(|| format!("{done} of {total} derived windows recomputed"));
            },
        )
        .await
        .context("deriving")?;
    bar.finish_and_clear();
    let s = &deriver.summary;
    if settings.output.json {
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
        crate::words::counted(s.computed, "derived window"),
        raw.version().map_or("-".into(), |v| v.to_string()),
        s.published,
        crate::words::counted(s.commits, "commit"),
        s.computed - s.published,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The settings of `sluice derive`, its range (`--from`, `--to`) and, with `--follow`, its
/// poll interval in milliseconds.
async fn derive_settings(
    args: DeriveArgs,
) -> anyhow::Result<(RunSettings, Option<(EventTime, EventTime)>, Option<u64>)> {
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
    // The source is not read: none is resolved (a config file's is left alone).
    run.reads_no_source = true;
    // The window size and layout come from the raw table's contract.
    let settings = crate::open::resolve(run).await?;
    if settings.derive.is_empty() {
        return Err(usage(
            "no derived tables: declare them with [[derive]] in --config, or --derive NAME=LOCATION --derive-sql NAME=SQL",
        ));
    }
    Ok((settings, range, follow_ms))
}

/// `sluice derive --follow`: every `poll_ms`, re-reads the raw table and brings every derived
/// table up to it (the windows changed since each settled; in a Kafka table, the windows that
/// became complete or were rewritten while complete), until SIGINT or SIGTERM. A failure
/// another writer causes (a derived window published by a run beside it) re-reads the tables,
/// by the one restart rule (`--restarts-max` failures in a row, growing pauses).
async fn follow_raw(
    settings: &RunSettings,
    raw: &mut WindowTable,
    deriver: &mut Deriver,
    sharded: bool,
    poll_ms: u64,
    started: Instant,
) -> anyhow::Result<()> {
    let stop = crate::signals::Stop::on_signal();
    let shape = if sharded {
        RawShape::Sharded {
            pipeline: &settings.pipeline,
        }
    } else {
        RawShape::Whole
    };
    let policy = RestartPolicy::new(settings.tuning.restarts_max);
    let rounds = deriver
        .follow(raw, shape, poll_ms, policy, &SystemClock, stop.rx.clone())
        .await
        .context("following the raw table")?;
    let s = &deriver.summary;
    println!(
        "sluice derive --follow: {} recomputed, {} published in {} ({} unchanged), raw table version {}, {} at the raw table in {:.2} s; stopped by a signal",
        crate::words::counted(s.computed, "derived window"),
        s.published,
        crate::words::counted(s.commits, "commit"),
        s.computed - s.published,
        raw.version().map_or("-".into(), |v| v.to_string()),
        crate::words::counted(rounds, "look"),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
