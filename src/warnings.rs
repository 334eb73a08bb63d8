//! What a run says on stderr about its input, besides the summary: rejected records above
//! `--max-reject-ratio` (with the reasons and the first rejected line), fields left out,
//! duplicate deliveries kept for want of `--key`; and the exit status 3 of a run whose every
//! record was rejected. Never silent: a run that lands nothing does not exit 0.

use std::sync::atomic::{AtomicBool, Ordering};

use sluice_ingest::RunSummary;
use sluice_source::SchemaEvolution;

use crate::args::RunSettings;

/// Whether stderr carries JSON log lines (`--log-format json`): messages for people then go
/// through the log as events, so every stderr line stays one JSON object.
static JSON_LOGS: AtomicBool = AtomicBool::new(false);

pub fn set_json_logs(json: bool) {
    JSON_LOGS.store(json, Ordering::Relaxed);
}

/// A warning for the person running sluice: a line on stderr, or a warn event in JSON logs.
pub fn warn(text: &str) {
    if JSON_LOGS.load(Ordering::Relaxed) {
        tracing::warn!(target: "sluice", "{text}");
    } else {
        eprintln!("{text}");
    }
}

/// The error a command ends with: lines on stderr, or one error event in JSON logs.
pub fn error(lines: &[String]) {
    if JSON_LOGS.load(Ordering::Relaxed) {
        tracing::error!(target: "sluice", "{}", lines.join("; "));
    } else {
        for line in lines {
            eprintln!("{line}");
        }
    }
}

/// Reasons shown in a rejection warning, at most.
const REASONS_SHOWN_MAX: usize = 3;

/// Prints the run's warnings; an error (exit 3) when every record was rejected.
pub fn warn_about_input(s: &RunSummary, settings: &RunSettings) -> anyhow::Result<()> {
    if s.rows_with_ignored_fields > 0 {
        let mut fields = s
            .ignored_fields
            .named
            .iter()
            .map(|(f, n)| format!("{f} ({n})"))
            .collect::<Vec<_>>();
        if s.ignored_fields.others > 0 {
            fields.push(format!("other fields ({})", s.ignored_fields.others));
        }
        let fields = fields.join(", ");
        let how = if settings.evolution == SchemaEvolution::Ignore {
            "--schema-evolution ignore"
        } else {
            "values with nothing to store, such as {}"
        };
        warn(&format!(
            "sluice run: {} rows carried fields the table does not have, left out ({how}): {fields}",
            s.rows_with_ignored_fields
        ));
    }
    if s.tombstones_skipped > 0 {
        warn(&format!(
            "sluice run: {} Kafka tombstones (messages without a value) left out: a change log writes one after each delete event, which carries the delete (--envelope)",
            s.tombstones_skipped
        ));
    }
    let records = s.rows + s.rejected;
    let share = if records == 0 {
        0.0
    } else {
        s.rejected as f64 / records as f64
    };
    if s.rejected > 0 && (share > settings.output.max_reject_ratio || s.rows == 0) {
        warn(&rejection_warning(
            s,
            share,
            &settings.dlq,
            settings.dry_run,
        ));
    }
    if settings.key.is_none() && s.duplicates_kept > 0 {
        warn(&format!(
            "sluice run: {}{} records were byte-for-byte copies of an earlier record (duplicate deliveries); without --key each is kept as a row of its own. Give --key FIELD[,FIELD] (for a new table) to keep one row per key per window",
            if s.duplicates_capped { "at least " } else { "" },
            s.duplicates_kept
        ));
    }
    if s.rows == 0 && s.rejected > 0 {
        return Err(crate::exit::Exit::error(
            crate::exit::Exit::ALL_REJECTED,
            format!(
                "every record of this run ({}) was rejected; nothing {} in {}",
                s.rejected,
                if settings.dry_run {
                    "would land"
                } else {
                    "landed"
                },
                settings.table
            ),
        ));
    }
    Ok(())
}

/// The warning for many rejected records: how many, the top reasons, the first line.
fn rejection_warning(s: &RunSummary, share: f64, dlq: &str, dry_run: bool) -> String {
    let reasons = s
        .rejections
        .top()
        .into_iter()
        .take(REASONS_SHOWN_MAX)
        .map(|(r, n)| format!("{r} ({n})"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        "sluice run: warning: {} of {} records rejected ({:.1}%): {reasons}; all {} the dead-letter table {dlq}",
        s.rejected,
        s.rows + s.rejected,
        share * 100.0,
        if dry_run { "would be in" } else { "are in" }
    );
    if let Some(first) = &s.rejections.first {
        text += &format!(
            "\n  first: {} at {}:{}: {}\n  line: {}",
            first.reason, first.source, first.offset, first.detail, first.raw
        );
    }
    text
}
