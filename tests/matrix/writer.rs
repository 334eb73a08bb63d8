//! The matrix's writers: the commands that write a cell's table, each through the real
//! binary, SIGKILLed once after a commit it made and run again until it ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::model::BAD_TIME_FORMAT;
use super::source::{Source, FILES};
use crate::common::{version, Rng, BIN};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Writer {
    /// A bounded run (a Kafka run until idle).
    Run,
    /// `--follow --until-idle` while the source is written.
    Follow,
    /// Runs, then `sluice rewrite --force` of two windows.
    Rewrite,
    /// Runs, then `sluice backfill --force` of every window.
    Backfill,
    /// Runs over changes some of whose times are written another way, then `sluice
    /// dead-letters --replay` with that format.
    Replay,
    /// Runs with a derived table.
    Derive,
}

impl Writer {
    pub const ALL: [Writer; 6] = [
        Writer::Run,
        Writer::Follow,
        Writer::Rewrite,
        Writer::Backfill,
        Writer::Replay,
        Writer::Derive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Writer::Run => "run",
            Writer::Follow => "follow",
            Writer::Rewrite => "rewrite",
            Writer::Backfill => "backfill",
            Writer::Replay => "replay",
            Writer::Derive => "derive",
        }
    }
}

/// The derived table's query (a group per op: an empty window has no rows).
pub const DERIVE_SQL: &str = "agg=SELECT op, count(*) AS n, sum(seq) AS s FROM window GROUP BY op";

/// How a writer ended.
#[derive(Debug)]
pub enum Ended {
    /// Done; with how many of its processes were SIGKILLed after a commit.
    Done { kills: u32 },
    /// Refused with exit 2, the table at the version it had (nothing written): the command
    /// refused (`run`, `rewrite`, ...) and why.
    Refused { command: String, why: String },
}

/// One cell's commands: the table, the options every run gives, the environment.
pub struct Commands<'a> {
    pub table: PathBuf,
    pub options: Vec<String>,
    pub env: Vec<(&'static str, String)>,
    pub kafka: bool,
    pub rng: &'a mut Rng,
    /// What ran, for a failure's report.
    pub log: Vec<String>,
}

impl Commands<'_> {
    /// `sluice run` with the cell's options and `extra`, SIGKILLed after its first commit
    /// (or its second), then run again until it ends.
    pub fn run(&mut self, extra: &[&str]) -> Result<Ended, String> {
        let mut args = vec!["run".to_string()];
        args.extend(self.options.iter().cloned());
        if self.kafka {
            args.push("--until-idle=4s".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let commits = 1 + self.rng.below(2) as i64;
        self.until_done(&args, Kill::AfterCommits(commits))
    }

    /// `sluice rewrite --force` of the windows at `hours`, each SIGKILLed at a random moment
    /// and run again.
    pub fn rewrite(&mut self, hours: &[i64]) -> Result<Ended, String> {
        let mut kills = 0;
        for h in hours {
            let mut args = vec!["rewrite".to_string()];
            args.extend(self.bounded_options());
            args.extend([format!("--at=2026-10-03T{h:02}"), "--force".into()]);
            let delay = self.rng.below(400);
            match self.until_done(&args, Kill::After(delay))? {
                Ended::Done { kills: k } => kills += k,
                refused => return Ok(refused),
            }
        }
        Ok(Ended::Done { kills })
    }

    pub fn backfill(&mut self, hours: u32) -> Result<Ended, String> {
        let mut args = vec!["backfill".to_string()];
        args.extend(self.bounded_options());
        args.extend([
            "--from=2026-10-03T00:00Z".to_string(),
            format!("--to=2026-10-03T{hours:02}:00Z"),
            "--force".into(),
        ]);
        let commits = 1 + self.rng.below(2) as i64;
        self.until_done(&args, Kill::AfterCommits(commits))
    }

    pub fn replay(&mut self) -> Result<Ended, String> {
        let args: Vec<String> = [
            "dead-letters",
            "--table",
            self.table.to_str().unwrap(),
            "--replay",
            "--time-format",
            BAD_TIME_FORMAT,
        ]
        .map(str::to_string)
        .into();
        let delay = self.rng.below(300);
        self.until_done(&args, Kill::After(delay))
    }

    /// A followed run while `source` is written a part at a time (the last part first in
    /// part when `being_written`), SIGKILLed after a commit, then followed again until it
    /// ends idle once the source is complete.
    pub fn follow(&mut self, source: &mut Source, being_written: bool) -> Result<Ended, String> {
        let mut args = vec!["run".to_string()];
        args.extend(self.options.iter().cloned());
        if !self.kafka {
            args.extend(["--follow".into(), "--poll-interval=100ms".into()]);
        }
        args.push(format!(
            "--until-idle={}",
            if self.kafka { "3s" } else { "1500ms" }
        ));
        source.write_to(1, false);
        let mut kills = 0;
        let args_ref = &args;
        let ended = std::thread::scope(|scope| {
            let writing = scope.spawn(move || {
                for part in 2..=FILES {
                    std::thread::sleep(Duration::from_millis(150));
                    if being_written && part == FILES {
                        source.write_to(FILES - 1, true);
                        std::thread::sleep(Duration::from_millis(400));
                    }
                    source.write_to(part, false);
                }
            });
            let first = self.once(args_ref, Kill::AfterCommits(1));
            writing.join().unwrap();
            first
        })?;
        match ended {
            Once::Refused { command, why } => return Ok(Ended::Refused { command, why }),
            Once::Killed => {
                kills += 1;
                self.after_kill(&args);
            }
            Once::Done => {}
        }
        // Followed again once the source is complete: it reads what is left and ends idle.
        match self.until_done(&args, Kill::Never)? {
            Ended::Done { .. } => Ok(Ended::Done { kills }),
            refused => Ok(refused),
        }
    }

    /// The cell's options without the source's stream options (a bounded command).
    fn bounded_options(&self) -> Vec<String> {
        self.options.clone()
    }

    /// Runs `args`, killed as `kill` says, then again (never killed) until one ends:
    /// success, or a refusal (exit 2) that wrote nothing.
    fn until_done(&mut self, args: &[String], kill: Kill) -> Result<Ended, String> {
        let mut kills = 0;
        let mut kill = kill;
        for _ in 0..6 {
            match self.once(args, kill)? {
                Once::Done => return Ok(Ended::Done { kills }),
                Once::Refused { command, why } => return Ok(Ended::Refused { command, why }),
                Once::Killed => {
                    kills += 1;
                    self.after_kill(args);
                }
            }
            kill = Kill::Never;
        }
        Err(format!("sluice {} did not end after 6 runs", args[0]))
    }

    /// After a SIGKILL of a Kafka run: the group's session timeout (6 s) passes before the
    /// next run, as a supervisor's restart back-off would let it. (The test broker, tansu,
    /// evicts the dead member then, but does not hand its partitions to a member that
    /// joined before: a run restarted at once would get none and end idle. A Kafka broker
    /// holds the new member's join until the dead one is evicted.)
    fn after_kill(&self, args: &[String]) {
        if self.kafka && args[0] == "run" {
            std::thread::sleep(Duration::from_millis(8_000));
        }
    }

    fn once(&mut self, args: &[String], kill: Kill) -> Result<Once, String> {
        let before = version(&self.table);
        self.log.push(format!("sluice {}", args.join(" ")));
        let started = Instant::now();
        // The process's errors go to a file (a pipe read only at its end could fill up);
        // every process's are kept, after its command line, in `commands.log`.
        let stderr_path = self.table.with_file_name("stderr.log");
        let mut child = self.spawn(args, &stderr_path);
        let keep = |stderr: &str| {
            use std::io::Write;
            let log = self.table.with_file_name("commands.log");
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
            {
                let _ = writeln!(f, "$ sluice {}\n{stderr}", args.join(" "));
            }
        };
        let deadline = started + Duration::from_secs(120);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                keep(&stderr);
                return match status.code() {
                    Some(0) => Ok(Once::Done),
                    Some(2) if version(&self.table) == before => {
                        let why = stderr.lines().next().unwrap_or_default().to_string();
                        self.log.push(format!("  refused: {why}"));
                        Ok(Once::Refused {
                            command: args[0].clone(),
                            why,
                        })
                    }
                    _ => Err(format!(
                        "sluice {} exited {status}: {stderr}",
                        args.join(" ")
                    )),
                };
            }
            let due = match kill {
                Kill::Never => false,
                Kill::After(ms) => started.elapsed() >= Duration::from_millis(ms),
                // (A table's creation is version 0: its commits count from there.)
                Kill::AfterCommits(n) => version(&self.table) >= before.max(0) + n,
            };
            if due {
                child.kill().unwrap();
                child.wait().unwrap();
                keep(&std::fs::read_to_string(&stderr_path).unwrap_or_default());
                self.log.push(format!(
                    "  SIGKILL after {} ms (table version {} -> {})",
                    started.elapsed().as_millis(),
                    before,
                    version(&self.table)
                ));
                return Ok(Once::Killed);
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                return Err(format!("sluice {} ran for 120 s", args.join(" ")));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn spawn(&self, args: &[String], stderr: &Path) -> Child {
        Command::new(BIN)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).expect("a file for the errors"))
            .spawn()
            .expect("sluice runs")
    }
}

#[derive(Debug, Clone, Copy)]
enum Kill {
    Never,
    /// After this many milliseconds.
    After(u64),
    /// Once the table has this many more commits.
    AfterCommits(i64),
}

enum Once {
    Done,
    Killed,
    Refused { command: String, why: String },
}

/// The table of a derived table declared with [`DERIVE_SQL`] beside `table`.
pub fn derived_table(table: &Path) -> PathBuf {
    table.with_file_name("agg")
}
