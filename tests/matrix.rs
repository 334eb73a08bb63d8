//! Every combination, with a model (issue 59): the product of table modes, writers, sources
//! and the ways a stream arrives. Each cell runs the real binary, SIGKILLs a process of its
//! writer after a commit, runs it again until it ends, and compares the table, read by Python
//! delta-rs, with the rows the mode promises ([`model::expected`]); or checks that sluice
//! refused the combination with exit 2 before writing anything.
//!
//! `cargo test matrix` runs a pairwise cover: every pair of values of any two dimensions in
//! at least one cell (CI, within its time limit). `SLUICE_MATRIX=full` runs the whole product
//! (`just matrix`); `SLUICE_MATRIX=mirror/replay/*/*` the cells matching a pattern (mode,
//! writer, source, arrival). Both print a table of cells: held, refused, failed.

mod model;
mod source;
mod writer;

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::{seed, Rng};
use crate::servers::{moto, tansu, Registry, Server};
use model::{Arrival, Event, Mode, Row, HOURS};
use source::{Kind, Source, FILES};
use writer::{Commands, Ended, Writer, DERIVE_SQL};

/// The servers a matrix's cells share: a Kafka-protocol broker, an S3 server (bucket
/// `matrix`) and a schema registry, started once.
pub struct Servers {
    kafka: Option<Server>,
    s3: Option<Server>,
    registry: Option<Registry>,
}

impl Servers {
    fn start(cells: &[Cell], dir: &Path) -> Servers {
        let any = |f: &dyn Fn(Kind) -> bool| cells.iter().any(|c| f(c.kind));
        Servers {
            kafka: any(&|k| k.is_kafka()).then(tansu),
            s3: any(&|k| k == Kind::S3).then(|| moto("matrix")),
            registry: any(&|k| k == Kind::KafkaAvro)
                .then(|| Registry::start(dir.join("registry.json"))),
        }
    }

    pub fn kafka(&self) -> &Server {
        self.kafka.as_ref().expect("a Kafka cell starts the broker")
    }

    pub fn s3(&self) -> &Server {
        self.s3.as_ref().expect("an S3 cell starts moto")
    }

    pub fn registry(&self) -> &Registry {
        self.registry
            .as_ref()
            .expect("an Avro cell starts the registry")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cell {
    mode: Mode,
    writer: Writer,
    kind: Kind,
    arrival: Arrival,
}

impl Cell {
    fn names(&self) -> [&'static str; 4] {
        [
            self.mode.name(),
            self.writer.name(),
            self.kind.name(),
            self.arrival.name(),
        ]
    }

    /// Whether sluice refuses this combination (exit 2, nothing written): a backfill or a
    /// rewrite republishes windows by swap, which a table of merges (a mirror, a history)
    /// cannot take; such a table is recomputed by running the stream again (merges are
    /// idempotent).
    fn expect_refused(&self) -> bool {
        matches!(self.writer, Writer::Backfill | Writer::Rewrite)
            && !matches!(self.mode, Mode::Rows | Mode::Keyed)
    }

    /// Its value in each dimension, as an index.
    fn values(&self) -> [usize; 4] {
        let at = |all: &[&str], v: &str| all.iter().position(|a| *a == v).unwrap();
        let [m, w, k, a] = self.names();
        [
            at(&Mode::ALL.map(Mode::name), m),
            at(&Writer::ALL.map(Writer::name), w),
            at(&Kind::ALL.map(Kind::name), k),
            at(&Arrival::ALL.map(Arrival::name), a),
        ]
    }
}

/// Every cell of the product.
fn product() -> Vec<Cell> {
    let mut cells = Vec::new();
    for mode in Mode::ALL {
        for writer in Writer::ALL {
            for kind in Kind::ALL {
                for arrival in Arrival::ALL {
                    cells.push(Cell {
                        mode,
                        writer,
                        kind,
                        arrival,
                    });
                }
            }
        }
    }
    cells
}

/// A pairwise cover of the product: cells chosen greedily, each covering the most pairs of
/// values (of any two dimensions) not yet covered, until every pair is; ties broken in the
/// product's order, so the cover is the same on every run.
fn pairwise() -> Vec<Cell> {
    let all = product();
    let pairs = |c: &Cell| -> Vec<(usize, usize, usize, usize)> {
        let v = c.values();
        let mut out = Vec::new();
        for i in 0..4 {
            for j in i + 1..4 {
                out.push((i, v[i], j, v[j]));
            }
        }
        out
    };
    let mut uncovered: BTreeSet<_> = all.iter().flat_map(pairs).collect();
    let mut cover = Vec::new();
    // Cells sluice refuses test only that they are refused: every pair a cell that runs can
    // cover is covered by one, then the pairs only refused cells have (a merge mode with a
    // writer that publishes by swap) by those.
    let (runs, refused): (Vec<Cell>, Vec<Cell>) = all.iter().partition(|c| !c.expect_refused());
    for candidates in [runs, refused] {
        loop {
            let best = candidates.iter().max_by_key(|c| {
                let gain = pairs(c).iter().filter(|p| uncovered.contains(p)).count();
                // The first of the best: max_by_key keeps the last, so order by position too.
                (gain, std::cmp::Reverse(c.values()))
            });
            let Some(best) = best.filter(|c| pairs(c).iter().any(|p| uncovered.contains(p))) else {
                break;
            };
            for p in pairs(best) {
                uncovered.remove(&p);
            }
            cover.push(*best);
        }
    }
    assert!(uncovered.is_empty(), "every pair is in some cell");
    cover.sort();
    cover
}

/// The cells `SLUICE_MATRIX` selects: `full`, a pattern `mode/writer/source/arrival` (`*`
/// for any, `kafka-*` for a prefix), or (unset) the pairwise cover.
fn selected() -> (String, Vec<Cell>) {
    match std::env::var("SLUICE_MATRIX").ok().as_deref() {
        None | Some("") | Some("pairwise") => ("pairwise cover".into(), pairwise()),
        Some("full") => ("full product".into(), product()),
        Some(pattern) => {
            let parts: Vec<&str> = pattern.split('/').collect();
            assert_eq!(
                parts.len(),
                4,
                "SLUICE_MATRIX={pattern}: mode/writer/source/arrival"
            );
            let cells = product()
                .into_iter()
                .filter(|c| {
                    c.names()
                        .iter()
                        .zip(&parts)
                        .all(|(name, p)| match p.strip_suffix('*') {
                            Some(prefix) => name.starts_with(prefix),
                            None => p == name,
                        })
                })
                .collect();
            (format!("cells matching {pattern}"), cells)
        }
    }
}

#[derive(Debug)]
enum Outcome {
    Held { kills: u32 },
    Refused(String),
    Failed(String),
}

/// Runs one cell in `dir`; its outcome and the commands it ran.
fn run_cell(
    cell: Cell,
    name: &str,
    seed: u64,
    servers: &Servers,
    dir: &Path,
) -> (Outcome, Vec<String>) {
    let mut rng = Rng(seed);
    let events = model::events(&mut rng, cell.writer == Writer::Replay);
    let delivered = model::deliveries(cell.arrival, events.len(), &mut rng);
    let per_part = delivered.len().div_ceil(FILES);
    let parts: Vec<Vec<Event>> = delivered
        .chunks(per_part)
        .map(|c| c.iter().map(|&i| events[i].clone()).collect())
        .collect();
    let mut source = Source::new(cell.kind, servers, dir, name, parts);
    let table = dir.join("table");
    let mut options: Vec<String> = [
        format!("--table={}", table.display()),
        "--window=1h".into(),
        format!("--lateness={}s", model::LATENESS_S),
        "--chunk-bytes=4KiB".into(),
        "--group-windows-max=1".into(),
    ]
    .into();
    options.extend(cell.mode.options().iter().map(|o| o.to_string()));
    options.extend(source.options());
    if cell.kind == Kind::KafkaJson {
        // A topic of JSON has no file to infer columns from: its schema is given, as a user
        // gives it (Avro takes the registry's).
        let schema = dir.join("schema.toml");
        let fields: String = [
            ("id", "long"),
            ("seq", "long"),
            ("op", "string"),
            ("v", "string"),
            ("ts", "string"),
        ]
        .iter()
        .map(|(n, t)| format!("[[fields]]\nname = \"{n}\"\ntype = \"{t}\"\n\n"))
        .collect();
        std::fs::write(&schema, fields).unwrap();
        options.push(format!("--schema={}", schema.display()));
    }
    if cell.kind.is_kafka() {
        options.push(format!("--group={name}"));
    }
    if cell.writer == Writer::Derive {
        let agg = writer::derived_table(&table);
        options.push(format!("--derive=agg={}", agg.display()));
        options.push(format!("--derive-sql={DERIVE_SQL}"));
    }
    let mut commands = Commands {
        table: table.clone(),
        options,
        env: source.env(),
        kafka: cell.kind.is_kafka(),
        rng: &mut rng,
        log: Vec::new(),
    };
    let hours = [
        commands.rng.below(u64::from(HOURS)) as i64,
        commands.rng.below(u64::from(HOURS)) as i64,
    ];
    let ended = write(cell, &mut commands, &mut source, hours);
    let log = std::mem::take(&mut commands.log);
    let outcome = match ended {
        Err(e) => Outcome::Failed(e),
        Ok(Ended::Refused { why, .. }) if !cell.expect_refused() => {
            Outcome::Failed(format!("refused, where the mode promises its rows: {why}"))
        }
        Ok(Ended::Done { .. }) if cell.expect_refused() => {
            Outcome::Failed("not refused: a swap of a table of merges".into())
        }
        // The cell's first run refused before the table was made: nothing to compare. Any
        // other command's refusal leaves the table its runs wrote, compared with the model.
        Ok(Ended::Refused { command, why })
            if command == "run" && !table.join("_delta_log").exists() =>
        {
            Outcome::Refused(why)
        }
        Ok(_) if !table.join("_delta_log").exists() => {
            Outcome::Failed("the runs wrote no table".into())
        }
        Ok(ended) => match compare(cell, &table, &events, &delivered) {
            Err(e) => Outcome::Failed(e),
            Ok(()) => match ended {
                Ended::Done { kills } => Outcome::Held { kills },
                Ended::Refused { why, .. } => Outcome::Refused(why),
            },
        },
    };
    (outcome, log)
}

/// Writes the cell's source and table as its writer does.
fn write(
    cell: Cell,
    c: &mut Commands,
    source: &mut Source,
    hours: [i64; 2],
) -> Result<Ended, String> {
    let being_written = cell.arrival == Arrival::BeingWritten;
    if cell.writer == Writer::Follow {
        return c.follow(source, being_written);
    }
    let mut kills = 0;
    if being_written {
        source.write_to(FILES - 1, true);
        match c.run(&[])? {
            Ended::Done { kills: k } => kills += k,
            refused => return Ok(refused),
        }
    }
    source.write_to(FILES, false);
    match c.run(&[])? {
        Ended::Done { kills: k } => kills += k,
        refused => return Ok(refused),
    }
    let then = match cell.writer {
        Writer::Rewrite => c.rewrite(&hours)?,
        Writer::Backfill => c.backfill(HOURS)?,
        Writer::Replay => c.replay()?,
        _ => Ended::Done { kills: 0 },
    };
    Ok(match then {
        Ended::Done { kills: k } => Ended::Done { kills: kills + k },
        refused => refused,
    })
}

/// The table (and a derived table) against the model.
fn compare(cell: Cell, table: &Path, events: &[Event], delivered: &[usize]) -> Result<(), String> {
    let mut tables = vec![table.to_path_buf()];
    if cell.writer == Writer::Derive {
        tables.push(writer::derived_table(table));
    }
    for t in &tables {
        crate::common::verified(t)?;
    }
    let read = source::read_tables(&tables);
    let int = |r: &serde_json::Map<String, serde_json::Value>, k: &str| {
        r.get(k).and_then(|v| match v {
            serde_json::Value::String(s) => s.parse().ok(),
            v => v.as_i64(),
        })
    };
    let text = |r: &serde_json::Map<String, serde_json::Value>, k: &str| {
        r.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let mut rows: Vec<Row> = read[0]
        .1
        .iter()
        .map(|r| {
            (
                int(r, "id").unwrap_or(-1),
                int(r, "seq").unwrap_or(-1),
                text(r, "op"),
                text(r, "v"),
                int(r, "__start_at"),
                int(r, "__end_at"),
            )
        })
        .collect();
    rows.sort();
    let expected = model::expected(cell.mode, events, delivered);
    differ("table", &rows, &expected)?;
    if cell.writer == Writer::Derive {
        let mut derived: Vec<(i64, String, i64, i64)> = read[1]
            .1
            .iter()
            .map(|r| {
                let n = int(r, "n").unwrap_or(-1);
                (
                    int(r, "hour").unwrap_or(-1),
                    text(r, "op"),
                    n,
                    int(r, "s").unwrap_or(-1),
                )
            })
            .collect();
        derived.sort();
        let sharded = cell.kind.is_kafka();
        differ(
            "derived table",
            &derived,
            &model::derived(&expected, events, sharded),
        )?;
    }
    Ok(())
}

/// An error naming the rows `found` has that `expected` lacks and the other way round.
fn differ<T: Ord + Clone + std::fmt::Debug>(
    what: &str,
    found: &[T],
    expected: &[T],
) -> Result<(), String> {
    if found == expected {
        return Ok(());
    }
    let minus = |a: &[T], b: &[T]| {
        let mut b: Vec<T> = b.to_vec();
        let mut out = Vec::new();
        for x in a {
            match b.iter().position(|y| y == x) {
                Some(i) => {
                    b.remove(i);
                }
                None => out.push(x.clone()),
            }
        }
        out
    };
    let (extra, missing) = (minus(found, expected), minus(expected, found));
    Err(format!(
        "the {what} has {} rows, the model {}: {} extra {:?}{}, {} missing {:?}{}",
        found.len(),
        expected.len(),
        extra.len(),
        &extra[..extra.len().min(4)],
        if extra.len() > 4 { " ..." } else { "" },
        missing.len(),
        &missing[..missing.len().min(4)],
        if missing.len() > 4 { " ..." } else { "" },
    ))
}

#[test]
fn matrix_of_modes_writers_sources_and_arrivals() {
    let seed = seed("matrix");
    let (scope, cells) = selected();
    let root = tempfile::tempdir().unwrap();
    let servers = Servers::start(&cells, root.path());
    let jobs: usize = std::env::var("SLUICE_MATRIX_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(3);
    let started = Instant::now();
    let queue = Mutex::new(cells.iter().copied().enumerate().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let Some((i, cell)) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let dir = root.path().join(format!("c{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                let name = format!("m{}c{i}", seed % 100_000);
                let cell_seed = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let t = Instant::now();
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_cell(cell, &name, cell_seed, &servers, &dir)
                }));
                let (outcome, log) = ran.unwrap_or_else(|panic| {
                    let why = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    (
                        Outcome::Failed(format!("the cell panicked: {why}")),
                        Vec::new(),
                    )
                });
                results
                    .lock()
                    .unwrap()
                    .push((i, cell, outcome, log, t.elapsed()));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    report(&scope, seed, &results, started.elapsed(), root);
}

type Result_ = (usize, Cell, Outcome, Vec<String>, Duration);

/// Prints the table of cells and the counts; fails naming the failed cells (their commands
/// and directory kept).
fn report(scope: &str, seed: u64, results: &[Result_], took: Duration, root: tempfile::TempDir) {
    eprintln!(
        "{:<15} {:<9} {:<11} {:<14} {:<8} {:>6}  detail",
        "mode", "writer", "source", "arrival", "cell", "secs"
    );
    let (mut held, mut refused, mut failed, mut kills) = (0, 0, Vec::new(), 0);
    for (i, cell, outcome, _, t) in results {
        let [m, w, k, a] = cell.names();
        let (word, detail) = match outcome {
            Outcome::Held { kills: n } => {
                held += 1;
                kills += n;
                ("held", format!("{n} SIGKILL"))
            }
            Outcome::Refused(why) => {
                refused += 1;
                ("refused", why.chars().take(100).collect())
            }
            Outcome::Failed(why) => {
                failed.push(*i);
                ("FAILED", why.chars().take(300).collect())
            }
        };
        eprintln!(
            "{m:<15} {w:<9} {k:<11} {a:<14} {word:<8} {:>6.1}  {detail}",
            t.as_secs_f64()
        );
    }
    eprintln!(
        "matrix ({scope}): {} cells: {held} held, {refused} refused, {} failed; {kills} SIGKILLs; {:.0} s (seed {seed})",
        results.len(),
        failed.len(),
        took.as_secs_f64()
    );
    if std::env::var_os("SLUICE_MATRIX_LOG").is_some() {
        for (i, cell, _, log, _) in results {
            eprintln!("\ncell {i} {:?}:", cell.names());
            for line in log {
                eprintln!("  {line}");
            }
        }
    }
    if !failed.is_empty() {
        let kept = root.keep();
        for (i, cell, outcome, log, _) in results.iter().filter(|r| failed.contains(&r.0)) {
            eprintln!(
                "\ncell {i} {:?} in {}/c{i}:\n{outcome:?}",
                cell.names(),
                kept.display()
            );
            for line in log {
                eprintln!("  {line}");
            }
        }
        panic!("{} cells failed (seed {seed})", failed.len());
    }
}

#[test]
fn the_pairwise_cover_covers_every_pair() {
    let cover = pairwise();
    let mut seen = BTreeSet::new();
    for c in &cover {
        let v = c.values();
        for i in 0..4 {
            for j in i + 1..4 {
                seen.insert((i, v[i], j, v[j]));
            }
        }
    }
    let sizes = [6, 6, 8, 5];
    let pairs: usize = (0..4)
        .flat_map(|i| (i + 1..4).map(move |j| (i, j)))
        .map(|(i, j)| sizes[i] * sizes[j])
        .sum();
    assert_eq!(seen.len(), pairs);
    assert!(cover.len() < 80, "{} cells", cover.len());
}
