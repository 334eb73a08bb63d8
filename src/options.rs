//! The command line as each subcommand shows it. `run`, `backfill`, `rewrite` and `derive`
//! share one option struct (and one config file format), but each shows and takes only the
//! options it uses: the others are hidden from its help and refused with a usage error
//! (exit 2) when given. Also the shell completions and the man page, generated from the same
//! definitions.

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, CommandFactory, FromArgMatches};

use crate::Cli;

/// Options of `sluice run` that a bounded recomputation does not take (a Kafka backfill takes
/// the first three).
const STREAM_ONLY: [&str; 20] = [
    "dry_run",
    "brokers",
    "group",
    "start",
    "kafka_options",
    "max_events",
    "follow",
    "poll_interval",
    "idle_timeout",
    "until_idle",
    "late",
    "max_rewrite_age",
    "late_batch",
    "max_reject_ratio",
    "metrics_addr",
    "compact_files_min",
    "retain",
    "notify_urls",
    "notify_commands",
    "notify_drain",
];

/// Options of `sluice run` about reading and decoding a source, which `derive` does not read.
const SOURCE_ONLY: [&str; 29] = [
    "source",
    "change_feed",
    "expect_flags",
    "expect_or_drop_flags",
    "expect_or_fail_flags",
    "no_expectations",
    "schema_registry",
    "kafka_columns",
    "kafka_bytes",
    "time_column",
    "lateness",
    "max_time_ahead",
    "time_jump_events",
    "time_field",
    "time_format",
    "time_zone",
    "schema",
    "infer_lines",
    "schema_evolution",
    "columns_max",
    "dlq",
    "chunk_bytes",
    "decode_threads",
    "flush_bytes_max",
    "key",
    "mode",
    "merge_scope",
    "pipelines",
    "group_windows_max",
];

/// The options each subcommand does not take.
fn not_taken(subcommand: &str) -> Vec<&'static str> {
    match subcommand {
        // A recomputation from a topic reads it with --brokers (and --kafka-option; --group
        // names its client, never joined).
        "backfill" | "rewrite" => STREAM_ONLY
            .iter()
            .filter(|id| !matches!(**id, "brokers" | "group" | "kafka_options"))
            .copied()
            .collect(),
        // `derive --follow` follows the raw table (see `derive_help`).
        "derive" => STREAM_ONLY
            .iter()
            .chain(&SOURCE_ONLY)
            .filter(|id| !matches!(**id, "follow" | "poll_interval"))
            .copied()
            .collect(),
        _ => Vec::new(),
    }
}

/// The command with each subcommand's options as it shows them.
pub fn command() -> Command {
    let mut command = Cli::command();
    for name in ["backfill", "rewrite", "derive"] {
        command = command.mut_subcommand(name, |mut sub| {
            for id in not_taken(name) {
                sub = sub.mut_arg(id, |a| a.hide(true));
            }
            if name == "derive" {
                sub = derive_help(sub);
            }
            sub
        });
    }
    command
}

/// The options `derive` shares with `run` but reads differently: it follows the raw table.
fn derive_help(sub: Command) -> Command {
    sub.mut_arg("follow", |a| {
        a.help("Keep the derived tables up to the raw table as it grows (beside the ingesters), instead of a range; stop with SIGINT/SIGTERM")
    })
    .mut_arg("poll_interval", |a| {
        a.help("With --follow: pause between two looks at the raw table. [default: 1s]")
    })
}

/// Parses the process's arguments: clap's errors, and a usage error for an option the
/// subcommand does not take.
pub fn parse() -> Result<Cli, clap::Error> {
    let mut command = command();
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    if let Some((name, sub)) = matches.subcommand() {
        refuse_not_taken(&mut command, name, sub)?;
    }
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}

fn refuse_not_taken(
    command: &mut Command,
    name: &str,
    sub: &ArgMatches,
) -> Result<(), clap::Error> {
    for id in not_taken(name) {
        if sub.value_source(id) == Some(ValueSource::CommandLine) {
            let flag = id.replace('_', "-");
            let sub_command = command
                .find_subcommand_mut(name)
                .expect("the subcommand was parsed");
            return Err(sub_command.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--{flag} is not an option of `sluice {name}` (see `sluice {name} --help`)"
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `sluice completions SHELL`: the completion script on stdout.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<()> {
    let mut command = command();
    clap_complete::generate(args.shell, &mut command, "sluice", &mut std::io::stdout());
    Ok(())
}

/// `sluice man`: the man page (roff) on stdout, every subcommand in it.
pub fn man_page() -> anyhow::Result<()> {
    let command = command();
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(command.clone()).render(&mut out)?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let title = format!("sluice-{}", sub.get_name());
        clap_mangen::Man::new(sub.clone())
            .title(title)
            .render(&mut out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hidden_option_exists_and_the_help_leaves_it_out() {
        let mut command = command();
        for name in ["backfill", "rewrite", "derive"] {
            let sub = command.find_subcommand_mut(name).unwrap();
            let help = sub.render_long_help().to_string();
            for id in not_taken(name) {
                assert!(
                    sub.get_arguments().any(|a| a.get_id() == id),
                    "{name}: no option {id}"
                );
                let flag = format!("--{}", id.replace('_', "-"));
                let shown = help.lines().any(|l| {
                    l.trim_start()
                        .strip_prefix(&flag)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '=']))
                });
                assert!(!shown, "{name} --help shows {flag}");
            }
        }
    }

    #[test]
    fn an_option_a_subcommand_does_not_take_is_refused() {
        let mut command = command();
        let args = [
            "sluice",
            "backfill",
            "--source",
            "ndjson:x",
            "--table",
            "t",
            "--from",
            "2026-01-01",
            "--to",
            "2026-01-02",
            "--follow",
        ];
        let matches = command.try_get_matches_from_mut(args).unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        let e = refuse_not_taken(&mut command, name, sub).unwrap_err();
        assert!(
            e.to_string()
                .contains("--follow is not an option of `sluice backfill`"),
            "{e}"
        );
        assert_eq!(e.exit_code(), 2);
    }
}
