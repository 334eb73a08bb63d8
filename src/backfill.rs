//! `sluice backfill` and `sluice rewrite`: recompute windows from a bounded source through the
//! stream's own publish path (the batch rerun).

use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use sluice_ingest::{backfill, BackfillProgress};
use sluice_window::{parse_instant, EventTime, Window};

use crate::args::{RunArgs, RunPlan};
use crate::ingest::{attempt, wire, SystemClock};
use crate::usage;

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// First instant of the range: windows starting at or after it, e.g. 2026-10-03T00:00Z.
    #[arg(long)]
    pub from: String,
    /// End of the range (exclusive): windows starting before it.
    #[arg(long)]
    pub to: String,
}

#[derive(Debug, Args)]
pub struct RewriteArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Any instant in the window to recompute, e.g. 2026-10-03T14.
    #[arg(long)]
    pub at: String,
}

pub async fn backfill_command(args: BackfillArgs) -> anyhow::Result<()> {
    let from = parse_instant(&args.from).map_err(|e| usage(format!("--from: {e}")))?;
    let to = parse_instant(&args.to).map_err(|e| usage(format!("--to: {e}")))?;
    if to <= from {
        return Err(usage("--to: must be after --from"));
    }
    recompute(args.run.plan()?, from, to, "backfill").await
}

pub async fn rewrite_command(args: RewriteArgs) -> anyhow::Result<()> {
    let at = parse_instant(&args.at).map_err(|e| usage(format!("--at: {e}")))?;
    let plan = args.run.plan()?;
    let window = Window::containing(plan.window, at);
    recompute(plan, window.start(), window.end(), "rewrite").await
}

async fn recompute(
    plan: RunPlan,
    from: EventTime,
    to: EventTime,
    what: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let w = wire(&plan).await?;
    let clock = SystemClock;
    let mut bar = Progress::new(what);
    let (summary, _) = backfill(
        &w.config,
        &w.source,
        &w.decoder,
        w.table,
        from,
        to,
        what == "rewrite",
        attempt(&plan),
        &clock,
        &mut |p| bar.show(p),
    )
    .await
    .with_context(|| format!("{what} of [{}, {})", from.to_rfc3339(), to.to_rfc3339()))?;
    bar.finish();
    println!(
        "sluice {what}: windows in [{}, {}): {} republished, {} already complete and left unchanged; \
         {} rows in range, {} outside ignored, {} bad lines ignored; table version {}; {:.2} s",
        from.to_rfc3339(),
        to.to_rfc3339(),
        summary.windows_published,
        summary.windows_unchanged,
        summary.rows,
        summary.outside,
        summary.rejected,
        summary
            .last_version
            .map_or_else(|| "unchanged".to_string(), |v| v.to_string()),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A one-line progress display on a terminal (redrawn in place); silent otherwise.
struct Progress {
    what: &'static str,
    tty: bool,
    drawn: bool,
}

impl Progress {
    fn new(what: &str) -> Self {
        Progress {
            what: if what == "rewrite" {
                "rewrite"
            } else {
                "backfill"
            },
            tty: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn show(&mut self, p: BackfillProgress) {
        if !self.tty {
            return;
        }
        let (label, done, total) = match p {
            BackfillProgress::Read { bytes, total } => ("reading", bytes, total),
            BackfillProgress::Published { done, total } => ("publishing windows", done, total),
        };
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let filled = (pct / 5) as usize;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{} {label:<18} [{}{}] {pct:>3}%",
            self.what,
            "#".repeat(filled),
            " ".repeat(20 - filled)
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
        }
    }
}
