//! The documentation's commands run as written. Every fenced `sh` block that follows a
//! `<!-- test: run -->` line in README.md or docs/*.md is run by bash (`-euo pipefail`) with the
//! binary under test first on PATH, in a scratch copy of `data/` and `examples/`; the blocks of
//! one file run in order in one directory, as a reader would type them. A block that fails
//! fails the test with its output, and so does output the documentation shows that the
//! binary does not print (the marks are in `blocks`; every block of output is checked, or
//! marked as a figure). docs/cli.md is also checked against the command's own
//! option definitions: every option is documented, and every documented option exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{copy_dir, ok, BIN};

pub mod blocks;

use blocks::Block;

/// The runnable blocks' commands of a Markdown file, in order.
fn runnable_blocks(file: &str, markdown: &str) -> Vec<String> {
    blocks::blocks(file, markdown)
        .unwrap()
        .into_iter()
        .filter_map(|b| match b {
            Block::Run { body, .. } => Some(body),
            _ => None,
        })
        .collect()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the runnable blocks of `file` (relative to the repository) in a scratch directory,
/// checking the output each shows and the output blocks after it; returns how many ran.
fn run_blocks_of(file: &str) -> usize {
    run_blocks_with(file, &[])
}

/// [`run_blocks_of`], with `env` set for the blocks (`PATH` is put before the binary's).
fn run_blocks_with(file: &str, env: &[(&str, String)]) -> usize {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let blocks = blocks::blocks(file, &text).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("data"), &dir.path().join("data"));
    copy_dir(&repo().join("examples"), &dir.path().join("examples"));
    let bin_dir = Path::new(BIN).parent().unwrap();
    let before: Vec<&str> = env
        .iter()
        .filter(|(k, _)| *k == "PATH")
        .map(|(_, v)| v.as_str())
        .collect();
    let path = format!(
        "{}{}:{}",
        before.iter().map(|p| format!("{p}:")).collect::<String>(),
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    // What the last runnable block printed, stdout and stderr in order.
    let mut printed: Option<String> = None;
    for block in &blocks {
        match block {
            Block::Run { body, shown } => {
                ran += 1;
                let out = Command::new("bash")
                    .args(["-euo", "pipefail", "-c", &format!("exec 2>&1\n{body}")])
                    .current_dir(dir.path())
                    .env("PATH", &path)
                    .env_remove("SLUICE_LOG")
                    .env("SLUICE_PROGRESS_INTERVAL_MS", "3600000")
                    .envs(
                        env.iter()
                            .filter(|(k, _)| *k != "PATH")
                            .map(|(k, v)| (k, v)),
                    )
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                assert!(
                    out.status.success(),
                    "{}: runnable block failed ({}):\n{body}\n--- output\n{text}",
                    shown.at,
                    out.status,
                );
                blocks::check(shown, &text).unwrap_or_else(|e| panic!("{e}"));
                eprintln!("{}: ok\n{text}", shown.at);
                printed = Some(text);
            }
            Block::Output(shown) => {
                let printed = printed.as_deref().unwrap_or_else(|| {
                    panic!("{}: output with no runnable block before it", shown.at)
                });
                blocks::check(shown, printed).unwrap_or_else(|e| panic!("{e}"));
            }
            Block::OutputOf { test, shown } => {
                // The named test checks it: it must exist and read this file's blocks.
                let source = std::fs::read_to_string(repo().join(test))
                    .unwrap_or_else(|e| panic!("{}: {test}: {e}", shown.at));
                assert!(
                    source.contains(&format!("shown_of(\"{file}\"")),
                    "{}: {test} does not check it (blocks::shown_of)",
                    shown.at
                );
            }
        }
    }
    ran
}

/// The README's quickstart runs the installed binary only: after `cargo install`, no command
/// a newcomer copies builds anything again.
#[test]
fn the_readme_commands_run_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for block in runnable_blocks("README.md", &readme) {
        assert!(
            !block.contains("cargo "),
            "a quickstart command builds: {block}"
        );
    }
    assert!(run_blocks_of("README.md") >= 4);
    // A front page: the reference lives in docs/.
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; move reference to docs/"
    );
}

#[test]
fn the_docs_commands_run_as_written() {
    let mut ran = 0;
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "kafka.md" {
            ran += kafka_blocks();
        } else if name.ends_with(".md") {
            ran += run_blocks_of(&format!("docs/{name}"));
        }
    }
    assert!(ran >= 1, "no runnable block in docs/");
}

/// docs/kafka.md's blocks, with a broker at `$BROKERS` and a schema registry at
/// `$SCHEMA_REGISTRY` (and the Python with confluent-kafka first on `PATH`).
#[cfg(feature = "kafka")]
fn kafka_blocks() -> usize {
    use crate::servers::{create_topic, tansu, Registry};
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    for topic in ["clicks", "orders", "signups", "payments"] {
        create_topic(&broker, topic, 1);
    }
    let python = crate::common::python();
    let env = [
        ("BROKERS", broker.address.clone()),
        ("SCHEMA_REGISTRY", registry.url.clone()),
        ("PATH", python.parent().unwrap().display().to_string()),
    ];
    run_blocks_with("docs/kafka.md", &env)
}

/// A build without Kafka has no Kafka examples to run.
#[cfg(not(feature = "kafka"))]
fn kafka_blocks() -> usize {
    0
}

/// Options named in docs/cli.md (`--word`), and those of every subcommand's help.
#[test]
fn the_command_reference_names_every_option_and_no_other() {
    let reference = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let flags_in = |text: &str| -> std::collections::BTreeSet<String> {
        let mut flags = std::collections::BTreeSet::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("--") {
            let start = i + at + 2;
            let len = text[start..]
                .bytes()
                .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                .count();
            let preceded_ok = start < 3 || !bytes[start - 3].is_ascii_alphanumeric();
            if len > 1 && preceded_ok {
                flags.insert(text[start..start + len].trim_end_matches('-').to_string());
            }
            i = start + len.max(1);
        }
        flags
    };
    let documented = flags_in(&reference);
    let mut defined = std::collections::BTreeSet::new();
    let help = ok(&["--help"]);
    let commands: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    for command in &commands {
        defined.extend(flags_in(&ok(&[command, "--help"])));
    }
    defined.remove("help");
    let undocumented: Vec<_> = defined.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "options missing from docs/cli.md: {undocumented:?}"
    );
    // Words such as `--no-default-features` (cargo's) are allowed; options of sluice that do
    // not exist are not.
    let cargo_words = ["no-default-features", "features", "locked", "path", "git"];
    let unknown: Vec<_> = documented
        .difference(&defined)
        .filter(|f| !cargo_words.contains(&f.as_str()) && !f.starts_with("help"))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/cli.md names options sluice does not have: {unknown:?}"
    );
}
