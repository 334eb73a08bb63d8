//! `sluice-bench compare`: runs every alternative as a child process, alternating, and reports
//! medians and ratios taken in this one run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::Args;

use crate::alternatives::BenchError;
use crate::usage::run_measured;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Distinct events to generate (3% duplicate deliveries come on top).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Runs of each alternative (at least 3; the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the report goes.
    #[arg(long, default_value = "bench/RESULTS.md")]
    results: PathBuf,
    /// Scratch directory (input and tables); default: a new one under the system temp dir.
    #[arg(long)]
    work: Option<PathBuf>,
    /// The sluice binary; default: next to this one.
    #[arg(long)]
    sluice: Option<PathBuf>,
    /// Table versions of the log-growth measurement (publish latency and restart-to-resume
    /// near version 10 and near this version); 0 skips it.
    #[arg(long, default_value_t = 10_000)]
    log_versions: u64,
    /// Rows of each window published in the log-growth measurement.
    #[arg(long, default_value_t = 1_000)]
    log_window_rows: usize,
    /// The year of hourly temperatures the catch-up measurement lands (and grows to two
    /// cities); relative to the working directory.
    #[arg(long, default_value = "data/seattle-temps.ndjson")]
    temps: PathBuf,
    /// Windows in the table for the many-windows publish latency; 0 skips the catch-up
    /// measurement.
    #[arg(long, default_value_t = 10_000)]
    many_windows: usize,
    /// Skip the Kafka measurement (it needs tansu: `scripts/servers install`).
    #[arg(long)]
    skip_kafka: bool,
    /// Objects under the S3 prefix (moto) of the listing-cost measurement, which a followed
    /// run picks 10 new ones up from; 0 skips it.
    #[arg(long, default_value_t = 100_000)]
    listing_objects: usize,
    /// Sizes of the mirrors a batch of changed keys is applied to; `0` skips it.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    mirror_rows: Vec<u64>,
    /// Keys changed in that batch (the same for every size): 1% of 10M rows.
    #[arg(long, default_value_t = 100_000)]
    mirror_changed: u64,
    /// The Python with Polars and deltalake for case (y) (the venv `just test` installs);
    /// without them (y) is left out.
    #[arg(long)]
    python: Option<PathBuf>,
    /// The schema of the generated events, for the Kafka run (a topic has no file to infer
    /// it from); relative to the working directory.
    #[arg(long, default_value = "data/schema.toml")]
    schema: PathBuf,
}

/// Builds the command of one alternative from the input directory and its output path.
type CommandFor = Box<dyn Fn(&Path, &Path) -> Command>;

/// Back-to-back pairs of (c) and (m) that measure the cost of metrics (at least `--runs`).
const METRICS_PAIRS: usize = 15;

/// One alternative: a label and how to run it into `out`.
struct Alternative {
    id: &'static str,
    what: &'static str,
    command: CommandFor,
    /// Whether it reads the nested input (for its MB/s).
    nested: bool,
}

/// Wall time and peak RSS of each run of one alternative.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    rss_kib: Vec<u64>,
}

impl Samples {
    fn median_wall(&self) -> Duration {
        let mut w = self.wall.clone();
        w.sort();
        w[w.len() / 2]
    }

    fn median_rss_kib(&self) -> u64 {
        let mut r = self.rss_kib.clone();
        r.sort_unstable();
        r[r.len() / 2]
    }
}

pub fn compare(args: CompareArgs) -> Result<(), BenchError> {
    if args.runs < 3 {
        return Err("--runs: at least 3".into());
    }
    let me = std::env::current_exe()?;
    let sluice = match &args.sluice {
        Some(p) => p.clone(),
        None => me.with_file_name("sluice"),
    };
    if !sluice.exists() {
        return Err(format!("{} not found: build it or give --sluice", sluice.display()).into());
    }
    let work = args.work.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("sluice-bench-{}", std::process::id()))
    });
    let inputs = Inputs::prepare(&sluice, args.events, &work)?;
    let alternatives = alternatives(&me, &sluice, &inputs, args.python.as_deref());
    let (samples, metrics_ratios) = measure(&alternatives, &work, &inputs.input, args.runs)?;
    let split = busy_split(&alternatives, &work, &inputs.input, args.runs)?;
    let more = More::measure(&args, &work, &sluice, &inputs)?;
    let mut report = report(
        &alternatives,
        &samples,
        inputs.lines,
        (inputs.bytes, inputs.nested_bytes),
        args.runs,
        &metrics_ratios,
    );
    crate::split::report(&mut report, &split);
    more.report(&mut report);
    println!("{report}");
    write_results(&args.results, report)?;
    if args.work.is_none() {
        std::fs::remove_dir_all(&work)?;
    }
    Ok(())
}

/// The inputs every alternative reads: the same events as NDJSON, nested, with bad lines,
/// gzipped, as CSV and Parquet exports, and as S3 objects (when moto is installed).
struct Inputs {
    input: PathBuf,
    nested: PathBuf,
    dirty: PathBuf,
    gzipped: PathBuf,
    csv: PathBuf,
    parquet: PathBuf,
    /// The S3 server (kept running while the alternatives read from it) and the source URL
    /// of the events uploaded to it; `None` when moto is not installed.
    s3: Option<(crate::moto::Moto, String)>,
    lines: u64,
    bytes: u64,
    nested_bytes: u64,
}

impl Inputs {
    fn prepare(sluice: &Path, events: u64, work: &Path) -> Result<Inputs, BenchError> {
        let input = work.join("input");
        let (lines, bytes) = generate(sluice, events, &[], &input)?;
        // The same events, nested as GitHub's event archive is (same row count).
        let nested = work.join("nested");
        let (_, nested_bytes) = generate(sluice, events, &["--shape", "nested"], &nested)?;
        // The same lines, 30% of them bad.
        let dirty = work.join("dirty");
        let (_, bad) = crate::dirty::write_dirty(&input, &dirty)?;
        eprintln!("input with bad lines: {bad} of {lines} lines bad");
        // The same events as files land: gzipped, a CSV export, objects under an S3 prefix.
        let gzipped = work.join("gzip");
        crate::formats::write_gzip(&input, &gzipped)?;
        let csv = work.join("csv");
        crate::formats::write_csv(&input, &csv)?;
        let parquet = work.join("parquet");
        crate::formats::write_parquet(&input, &parquet)?;
        let s3 = match crate::moto::start("landing")? {
            Some(m) => {
                let url = crate::formats::upload(&m, &input, "events/2026/10/03")?;
                Some((m, format!("ndjson:{url}")))
            }
            None => {
                eprintln!("moto is not installed: the S3 prefix case (s) is left out");
                None
            }
        };
        Ok(Inputs {
            input,
            nested,
            dirty,
            gzipped,
            csv,
            parquet,
            s3,
            lines,
            bytes,
            nested_bytes,
        })
    }
}

/// Every alternative compared: the floor, deltalake's `write`, sluice's modes over each input.
fn alternatives(
    me: &Path,
    sluice: &Path,
    inputs: &Inputs,
    python: Option<&Path>,
) -> Vec<Alternative> {
    let cmd = Commands {
        me: me.to_path_buf(),
        sluice: sluice.to_path_buf(),
    };
    let flat_src = format!("ndjson:{}", inputs.input.display());
    let mut alternatives = flat_alternatives(&cmd, &flat_src);
    alternatives.extend(other_inputs(&cmd, inputs));
    match crate::formats::polars(python) {
        Some(python) => {
            let parquet = inputs.parquet.clone();
            alternatives.push(Alternative {
                id: "y",
                nested: false,
                what: "Polars `read_parquet` + `write_delta` of (q)'s files (append, partitioned by dt and hour of `ts`; no dedupe, no offsets)",
                command: Box::new(move |_: &Path, out: &Path| {
                    let mut c = Command::new(&python);
                    c.arg(crate::formats::POLARS_SCRIPT).arg(&parquet).arg(out);
                    c
                }),
            });
        }
        None => eprintln!("no Python with Polars and deltalake: the Polars case (y) is left out"),
    }
    if let Some((moto, src)) = &inputs.s3 {
        let run = cmd.run(src, &["--window", "1h"]);
        let env = moto.options();
        alternatives.push(Alternative {
            id: "s",
            nested: false,
            what: "(c) over the same files as objects under an S3 prefix (moto on loopback)",
            command: Box::new(move |i: &Path, o: &Path| {
                let mut c = run(i, o);
                c.envs(env.clone());
                c
            }),
        });
    }
    alternatives
}

/// How the alternatives' commands are built: this binary's cases and sluice's commands.
struct Commands {
    me: PathBuf,
    sluice: PathBuf,
}

impl Commands {
    /// `sluice run` or `sluice backfill` over `src` into the alternative's table.
    fn sluice(&self, sub: &'static str, src: &str, extra: &'static [&'static str]) -> CommandFor {
        let sluice = self.sluice.clone();
        let src = src.to_string();
        Box::new(move |_: &Path, out: &Path| {
            let mut c = Command::new(&sluice);
            c.args([sub, "--source", &src, "--table"])
                .arg(out)
                .args(["--key", "event_id"]);
            // The late policy is a stream's (a backfill refuses it: it rebuilds whole windows).
            if sub == "run" {
                c.args(["--late", "rewrite"]);
            }
            c.args(extra);
            c
        })
    }

    /// `sluice run` over `src`.
    fn run(&self, src: &str, extra: &'static [&'static str]) -> CommandFor {
        self.sluice("run", src, extra)
    }

    /// One of this binary's own cases (`floor`, `delta-write`) over the input.
    fn bench(&self, sub: &'static str, extra: &'static [&'static str]) -> CommandFor {
        let me = self.me.clone();
        Box::new(move |input: &Path, out: &Path| {
            let mut c = Command::new(&me);
            c.arg(sub).arg("--input").arg(input);
            c.arg(if sub == "floor" { "--out" } else { "--table" })
                .arg(out);
            c.args(extra);
            c
        })
    }
}

/// The alternatives over the flat NDJSON events: the floor, deltalake, sluice's modes.
fn flat_alternatives(cmd: &Commands, flat_src: &str) -> Vec<Alternative> {
    vec![
        Alternative {
            id: "a",
            nested: false,
            what: "floor: arrow-json decode + Parquet per hour, decode and encode on 2 threads, no Delta log",
            command: cmd.bench("floor", &["--threads", "2"]),
        },
        Alternative {
            id: "b",
            nested: false,
            what: "deltalake 1.1 `write` (append, hour-partitioned, no dedupe, no offsets)",
            command: cmd.bench("delta-write", &[]),
        },
        Alternative {
            id: "c",
            nested: false,
            what: "`sluice run` swap mode, 1h windows, `--key event_id`, late rewrite",
            command: cmd.run(flat_src, &["--window", "1h"]),
        },
        Alternative {
            id: "t",
            nested: false,
            what: "(c) decoding on two threads (`--decode-threads 2`: a deal of two chunks, one decoder's results)",
            command: cmd.run(flat_src, &["--window", "1h", "--decode-threads", "2"]),
        },
        Alternative {
            id: "m",
            nested: false,
            what: "(c) with metrics recorded (`--metrics-addr 127.0.0.1:0`: the Prometheus recorder installed, nobody scraping)",
            command: cmd.run(flat_src, &["--window", "1h", "--metrics-addr", "127.0.0.1:0"]),
        },
        Alternative {
            id: "d",
            nested: false,
            what: "`sluice run` merge mode (`--mode merge`), otherwise as (c)",
            command: cmd.run(flat_src, &["--window", "1h", "--mode", "merge"]),
        },
        Alternative {
            id: "e",
            nested: false,
            what: "(c) with 1-day windows (24x larger), memory check",
            command: cmd.run(flat_src, &["--window", "1d"]),
        },
        Alternative {
            id: "h",
            nested: false,
            what: "`sluice backfill` of the same 1-day windows as (e) into a new table, memory check",
            command: cmd.sluice(
                "backfill",
                flat_src,
                &["--window", "1d", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-06T00:00:00Z"],
            ),
        },
    ]
}

/// The alternatives over the other inputs: bad lines, nested events, gzip, CSV, Parquet.
fn other_inputs(cmd: &Commands, inputs: &Inputs) -> Vec<Alternative> {
    let nested_src = format!("ndjson:{}", inputs.nested.display());
    let dirty_src = format!("ndjson:{}", inputs.dirty.display());
    let parquet_src = format!("parquet:{}", inputs.parquet.display());
    let gzip_src = format!("ndjson:{}", inputs.gzipped.display());
    let csv_src = format!("csv:{}", inputs.csv.display());
    let nested = inputs.nested.clone();
    vec![
        Alternative {
            id: "r",
            nested: false,
            what: "(c) over the same lines with 30% of them bad (cut short, a spoiled time, inside an array: dead letters), memory check",
            command: cmd.run(&dirty_src, &["--window", "1h"]),
        },
        Alternative {
            id: "f",
            nested: true,
            what: "(c) over the same events nested like GitHub's event archive (objects 3 deep, arrays of objects, maps, nulls; schema inferred)",
            command: cmd.run(&nested_src, &["--window", "1h"]),
        },
        Alternative {
            id: "g",
            nested: true,
            what: "the floor (a) over the nested events of (f): what their size costs any writer",
            command: {
                let floor = cmd.bench("floor", &["--threads", "2"]);
                let nested = nested.clone();
                Box::new(move |_: &Path, out: &Path| floor(&nested, out)) as CommandFor
            },
        },
        Alternative {
            id: "z",
            nested: false,
            what: "(c) over the same files gzipped (`gzip` default level)",
            command: cmd.run(&gzip_src, &["--window", "1h"]),
        },
        Alternative {
            id: "v",
            nested: false,
            what: "(c) over the same events as a CSV export (`csv:`, types inferred)",
            command: cmd.run(&csv_src, &["--window", "1h"]),
        },
        Alternative {
            id: "q",
            nested: false,
            what: "(c) over the same events as a Parquet export (`parquet:`, 4 files, `ts` a timestamp, snappy)",
            command: cmd.run(&parquet_src, &["--window", "1h"]),
        },
    ]
}

/// Removes the table an alternative wrote into `out` (and its dead-letter table).
fn clear_tables(out: &Path) -> Result<(), BenchError> {
    for dir in [
        out.to_path_buf(),
        PathBuf::from(format!("{}_dlq", out.display())),
    ] {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
    }
    Ok(())
}

/// `runs` rounds of every alternative in turn, then back-to-back pairs of (c) and (m): the
/// samples of each, and the ratios of the pairs.
fn measure(
    alternatives: &[Alternative],
    work: &Path,
    input: &Path,
    runs: usize,
) -> Result<(Vec<Samples>, Vec<f64>), BenchError> {
    let mut samples: Vec<Samples> = alternatives.iter().map(|_| Samples::default()).collect();
    let run_once = |alt: &Alternative, run: String| -> Result<(Duration, u64), BenchError> {
        let out = work.join(format!("out-{}", alt.id));
        clear_tables(&out)?;
        let log = work.join(format!("{}.log", alt.id));
        let (wall, rss) = run_measured((alt.command)(input, &out), &log)?;
        eprintln!(
            "run {run} ({}): {:.2} s, peak RSS {} MiB",
            alt.id,
            wall.as_secs_f64(),
            rss / 1024
        );
        Ok((wall, rss))
    };
    for run in 1..=runs {
        for (alt, s) in alternatives.iter().zip(samples.iter_mut()) {
            let (wall, rss) = run_once(alt, run.to_string())?;
            s.wall.push(wall);
            s.rss_kib.push(rss);
        }
    }
    // The cost of metrics is small beside the spread of single runs (a 5-run median moved it
    // by ±5% between two runs of this bench): it is measured pair by pair, (c) then (m)
    // back to back, and the median of the pairs' ratios is reported.
    let mut metrics_ratios = Vec::new();
    for pair in 1..=METRICS_PAIRS.max(runs) {
        let (c, _) = run_once(alternative(alternatives, "c"), format!("pair {pair}"))?;
        let (m, _) = run_once(alternative(alternatives, "m"), format!("pair {pair}"))?;
        metrics_ratios.push(m.as_secs_f64() / c.as_secs_f64());
    }
    Ok((samples, metrics_ratios))
}

/// The alternative named `id`.
fn alternative<'a>(alternatives: &'a [Alternative], id: &str) -> &'a Alternative {
    alternatives.iter().find(|a| a.id == id).expect("defined")
}

/// Where (c)'s time goes, from its own report.
fn busy_split(
    alternatives: &[Alternative],
    work: &Path,
    input: &Path,
    runs: usize,
) -> Result<crate::split::Split, BenchError> {
    let c = alternative(alternatives, "c");
    let out = work.join("out-split");
    clear_tables(&out)?;
    let split = crate::split::busy_split(
        || {
            // Each run lands in a new table (the one before is removed first).
            let _ = clear_tables(&out);
            (c.command)(input, &out)
        },
        runs,
        &work.join("split.log"),
    )?;
    clear_tables(&out)?;
    Ok(split)
}

/// The measurements beside the alternatives: the long log (locally and on S3), the
/// catch-up, Kafka, decoding alone, the listing cost and the mirrors.
struct More {
    logs: Vec<crate::log::LogReport>,
    catch_up: Option<(Vec<crate::catchup::CatchUp>, crate::catchup::WindowCount)>,
    kafka: Option<crate::kafka::KafkaReport>,
    decode: Option<crate::decode::DecodeReport>,
    listing: Option<Vec<crate::listing::ListingCost>>,
    mirror: Option<Vec<crate::mirror::MirrorCase>>,
}

impl More {
    fn measure(
        args: &CompareArgs,
        work: &Path,
        sluice: &Path,
        inputs: &Inputs,
    ) -> Result<More, BenchError> {
        let sluice_bin = sluice.to_path_buf();
        let mut logs = Vec::new();
        if args.log_versions >= 200 {
            let (versions, rows) = (args.log_versions, args.log_window_rows);
            let local = crate::log::LogPlace::Local;
            logs.push(crate::log::log_growth(
                work,
                versions,
                rows,
                &sluice_bin,
                local,
            )?);
            // The same log on S3, when moto is installed (`scripts/servers install`).
            match crate::moto::start("bench")? {
                Some(moto) => logs.push(crate::log::log_growth(
                    work,
                    versions,
                    rows,
                    &sluice_bin,
                    crate::log::LogPlace::S3(&moto),
                )?),
                None => eprintln!("moto is not installed: the long log on S3 is left out"),
            }
        }
        let catch_up = (args.many_windows >= 10)
            .then(|| crate::catchup::catch_up(&sluice_bin, &args.temps, work, args.many_windows))
            .transpose()?;
        let kafka = match args.skip_kafka {
            true => None,
            false => {
                let input = (inputs.input.as_path(), inputs.dirty.as_path());
                crate::kafka::kafka_case(work, input, &args.schema, &sluice_bin, args.runs)?
            }
        };
        let decode = crate::decode::decode_case(work, &inputs.input, &args.schema, args.runs)?;
        let listing = (args.listing_objects > 0)
            .then(|| crate::listing::listing_cost(&sluice_bin, work, args.listing_objects, 10))
            .transpose()?;
        let mirror = (args.mirror_rows.iter().any(|&n| n > 0))
            .then(|| {
                let (rows, changed) = (&args.mirror_rows, args.mirror_changed);
                crate::mirror::mirror_cost(&sluice_bin, work, rows, changed, args.runs)
            })
            .transpose()?;
        Ok(More {
            logs,
            catch_up,
            kafka,
            decode,
            listing,
            mirror,
        })
    }

    /// Their sections of the report.
    fn report(&self, report: &mut String) {
        for log in &self.logs {
            log_report(report, log);
        }
        if let Some((runs, counts)) = &self.catch_up {
            crate::catchup::report(report, runs, counts);
        }
        if let Some(kafka) = &self.kafka {
            crate::kafka::report(report, kafka);
        }
        match &self.decode {
            Some(decode) => crate::decode::report(report, decode),
            None => eprintln!("no Python for the registry: decoding alone is left out"),
        }
        if let Some(listing) = &self.listing {
            crate::listing::report(report, listing);
        }
        if let Some(mirror) = &self.mirror {
            crate::mirror::report(report, mirror);
        }
    }
}

/// Writes `report` to `results`, keeping the hand-written reading of a previous run after
/// the new tables, to be revised.
fn write_results(results: &Path, mut report: String) -> Result<(), BenchError> {
    if let Some(parent) = results.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if let Ok(previous) = std::fs::read_to_string(results) {
        if let Some(at) = previous.find(READING_HEADING) {
            report.push('\n');
            report.push_str(&previous[at..]);
        }
    }
    std::fs::write(results, report)?;
    eprintln!("written to {}", results.display());
    Ok(())
}

/// Generates the benchmark's input (24 hours, 4 files, seed 42) into `out`, replacing it;
/// its lines and bytes.
fn generate(
    sluice: &Path,
    events: u64,
    extra: &[&str],
    out: &Path,
) -> Result<(u64, u64), BenchError> {
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    let status = Command::new(sluice)
        .args(["generate", "--events", &events.to_string(), "--hours", "24"])
        .args(extra)
        .args(["--files", "4", "--seed", "42", "--out"])
        .arg(out)
        .status()?;
    if !status.success() {
        return Err(format!("sluice generate {extra:?} failed").into());
    }
    let (lines, bytes) = input_size(out)?;
    eprintln!(
        "input: {lines} lines, {:.1} MB in {}",
        bytes as f64 / 1e6,
        out.display()
    );
    Ok((lines, bytes))
}

/// Lines and bytes of the input.
fn input_size(dir: &Path) -> Result<(u64, u64), BenchError> {
    let (mut lines, mut bytes) = (0u64, 0u64);
    for entry in std::fs::read_dir(dir)? {
        let data = std::fs::read(entry?.path())?;
        bytes += data.len() as u64;
        lines += data.iter().filter(|b| **b == b'\n').count() as u64;
    }
    Ok((lines, bytes))
}

/// A ratio of two alternatives' rows/s taken round by round (see `report`).
#[derive(Clone, Copy)]
struct Paired {
    /// The median of the rounds' ratios: the figure judged.
    median: f64,
    min: f64,
    max: f64,
    /// The ratio of the two medians, for comparison with earlier runs' reports.
    of_medians: f64,
}

impl Default for Paired {
    fn default() -> Self {
        Paired {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            of_medians: f64::NAN,
        }
    }
}

impl Paired {
    /// How the figure was taken, for the row's label.
    fn how(&self, runs: usize) -> String {
        format!(
            "median of the {runs} rounds' ratios (spread {:.2} to {:.2}; ratio of the medians {:.2})",
            self.min, self.max, self.of_medians
        )
    }
}

fn report(
    alternatives: &[Alternative],
    samples: &[Samples],
    lines: u64,
    (bytes, nested_bytes): (u64, u64),
    runs: usize,
    metrics_ratios: &[f64],
) -> String {
    let m = Measured {
        alternatives,
        samples,
    };
    let mut r = header(lines, (bytes, nested_bytes), runs);
    alternatives_table(&mut r, &m, lines, (bytes, nested_bytes));
    core_ratios(&mut r, &m, runs, metrics_ratios);
    format_ratios(&mut r, &m, runs);
    nested_ratios(&mut r, &m, (bytes, nested_bytes));
    r
}

/// The medians and paired ratios of one run's samples, by alternative id.
struct Measured<'a> {
    alternatives: &'a [Alternative],
    samples: &'a [Samples],
}

impl Measured<'_> {
    fn at(&self, id: &str) -> Option<usize> {
        self.alternatives.iter().position(|a| a.id == id)
    }

    /// The median wall time of `id`, in seconds (NaN if it did not run).
    fn wall(&self, id: &str) -> f64 {
        self.at(id)
            .map_or(f64::NAN, |i| self.samples[i].median_wall().as_secs_f64())
    }

    /// The median peak RSS of `id`, in KiB (NaN if it did not run).
    fn rss(&self, id: &str) -> f64 {
        self.at(id)
            .map_or(f64::NAN, |i| self.samples[i].median_rss_kib() as f64)
    }

    /// Rows/s of `num` over `den`, round by round: each round runs every alternative once in
    /// turn, so a round's two runs saw the same machine (a drift over the rounds, other load
    /// on a shared host, moves both); the median of the rounds' ratios, with their spread.
    fn paired(&self, num: &str, den: &str) -> Paired {
        let (Some(n), Some(d)) = (self.at(num), self.at(den)) else {
            return Paired::default();
        };
        let mut ratios: Vec<f64> = self.samples[d]
            .wall
            .iter()
            .zip(&self.samples[n].wall)
            .map(|(d, n)| d.as_secs_f64() / n.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        Paired {
            median: ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN),
            min: ratios.first().copied().unwrap_or(f64::NAN),
            max: ratios.last().copied().unwrap_or(f64::NAN),
            of_medians: self.wall(den) / self.wall(num),
        }
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// The report's title and what was measured, on what machine.
fn header(lines: u64, (bytes, nested_bytes): (u64, u64), runs: usize) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|k| k.parse::<f64>().ok())
                })
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let mut r = String::new();
    let _ = writeln!(r, "# sluice benchmark results\n");
    let _ = writeln!(
        r,
        "Generated by `just bench` (`sluice-bench compare`, {} build) on {} — {cores} cores, {mem_gib:.1} GiB memory.\n",
        if cfg!(debug_assertions) { "DEBUG (not comparable)" } else { "release" },
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let _ = writeln!(
        r,
        "Input: {lines} lines, {:.1} MB of NDJSON (24 hours, 3% duplicate deliveries, 2% out of order, 0.5% hours late). \
         The same events nested (f, g): {:.1} MB. \
         Each alternative is one process, run {runs} times in alternation (a round runs each once, in the order listed); medians of wall time and peak RSS (`ru_maxrss`). \
         The target ratios are taken round by round, each round's two runs against the same state of the machine, and the median of the rounds' ratios is judged.\n",
        bytes as f64 / 1e6,
        nested_bytes as f64 / 1e6
    );
    r
}

/// One row per alternative: its median wall time, rows/s, input MB/s and peak RSS.
fn alternatives_table(r: &mut String, m: &Measured, lines: u64, (bytes, nested_bytes): (u64, u64)) {
    let _ = writeln!(r, "| | what | wall | rows/s | input MB/s | peak RSS |");
    let _ = writeln!(r, "| --- | --- | --- | --- | --- | --- |");
    for (a, s) in m.alternatives.iter().zip(m.samples) {
        let wall = s.median_wall().as_secs_f64();
        let _ = writeln!(
            r,
            "| ({}) | {} | {wall:.2} s | {:.2} M | {:.0} | {} MiB |",
            a.id,
            a.what,
            lines as f64 / wall / 1e6,
            if a.nested { nested_bytes } else { bytes } as f64 / 1e6 / wall,
            s.median_rss_kib() / 1024
        );
    }
}

/// The targets of the flat events: against the floor and deltalake, memory, merge, threads
/// and metrics.
fn core_ratios(r: &mut String, m: &Measured, runs: usize, metrics_ratios: &[f64]) {
    let c_over_a = m.paired("c", "a");
    let c_over_b = m.paired("c", "b");
    let e_over_c = m.rss("e") / m.rss("c");
    let r_over_c = m.rss("r") / m.rss("c");
    let h_over_e = m.rss("h") / m.rss("e");
    let c_rss_mib = m.rss("c") / 1024.0;
    let _ = writeln!(r, "\n| ratio (same run) | value | target | |");
    let _ = writeln!(r, "| --- | --- | --- | --- |");
    let _ = writeln!(
        r,
        "| rows/s (c)/(a), {} | {:.2} | ≥ 0.8 | {} |",
        c_over_a.how(runs),
        c_over_a.median,
        verdict(c_over_a.median >= 0.8)
    );
    let _ = writeln!(
        r,
        "| rows/s (c)/(b), {} | {:.2} | ≥ 1.3 | {} |",
        c_over_b.how(runs),
        c_over_b.median,
        verdict(c_over_b.median >= 1.3)
    );
    let _ = writeln!(
        r,
        "| peak RSS (c) | {c_rss_mib:.0} MiB | ≤ 256 MiB | {} |",
        verdict(c_rss_mib <= 256.0)
    );
    let _ = writeln!(
        r,
        "| peak RSS (e)/(c) | {e_over_c:.2} | < 1.2 | {} |",
        verdict(e_over_c < 1.2)
    );
    let _ = writeln!(
        r,
        "| peak RSS backfill (h) / run (e) | {h_over_e:.2} | ≤ 1.2 | {} |",
        verdict(h_over_e <= 1.2)
    );
    let _ = writeln!(
        r,
        "| peak RSS 30% bad lines (r) / clean (c) | {r_over_c:.2} | ≤ 1.2 | {} |",
        verdict(r_over_c <= 1.2)
    );
    let d_over_c = m.paired("d", "c");
    let _ = writeln!(
        r,
        "| rows/s merge (d) / swap (c), {} | {:.2} | ≥ 0.8 | {} |",
        d_over_c.how(runs),
        d_over_c.median,
        verdict(d_over_c.median >= 0.8)
    );
    let _ = writeln!(
        r,
        "| rows/s two decode threads (t) / one (c) | {:.2} | (the experiment: > 1 where cores are to spare) | |",
        m.wall("c") / m.wall("t")
    );
    let mut ratios = metrics_ratios.to_vec();
    ratios.sort_by(f64::total_cmp);
    let m_overhead = ratios[ratios.len() / 2] - 1.0;
    let _ = writeln!(
        r,
        "| wall time with metrics (m) / without (c), minus 1: median of {} back-to-back pairs (spread {:+.1}% to {:+.1}%) | {:+.1}% | < 3% | {} |",
        ratios.len(),
        (ratios[0] - 1.0) * 100.0,
        (ratios[ratios.len() - 1] - 1.0) * 100.0,
        m_overhead * 100.0,
        verdict(m_overhead < 0.03)
    );
}

/// The same events as other inputs land: gzip, CSV, S3 objects, Parquet (and Polars on it).
fn format_ratios(r: &mut String, m: &Measured, runs: usize) {
    for (id, what, target) in [
        ("z", "gzip", 0.7),
        ("v", "CSV", 1.2),
        ("s", "S3 prefix (moto)", 0.5),
    ] {
        if m.at(id).is_none() {
            let _ = writeln!(
                r,
                "| rows/s {what} ({id}) / (c) | not run (moto not installed) | ≥ {target} | |"
            );
            continue;
        }
        paired_row(
            r,
            &m.paired(id, "c"),
            runs,
            &format!("{what} ({id}) / plain local NDJSON (c)"),
            target,
        );
        let mib = m.rss(id) / 1024.0;
        let _ = writeln!(
            r,
            "| peak RSS {what} ({id}) | {mib:.0} MiB | ≤ 256 MiB | {} |",
            verdict(mib <= 256.0)
        );
    }
    paired_row(
        r,
        &m.paired("q", "c"),
        runs,
        "Parquet (q) / plain local NDJSON (c)",
        2.0,
    );
    let q_mib = m.rss("q") / 1024.0;
    let _ = writeln!(
        r,
        "| peak RSS Parquet (q) | {q_mib:.0} MiB | ≤ 256 MiB | {} |",
        verdict(q_mib <= 256.0)
    );
    if m.at("y").is_some() {
        paired_row(
            r,
            &m.paired("q", "y"),
            runs,
            "Parquet (q) / Polars (y)",
            2.0,
        );
    } else {
        let _ = writeln!(
            r,
            "| rows/s Parquet (q) / Polars (y) | not run (no Polars) | ≥ 2 | |"
        );
    }
}

/// The nested events against the flat ones and against the floor over the same nested events.
fn nested_ratios(r: &mut String, m: &Measured, (bytes, nested_bytes): (u64, u64)) {
    let f_over_c = m.wall("c") / m.wall("f");
    let _ = writeln!(
        r,
        "| rows/s nested (f) / flat (c) | {f_over_c:.2} | ≥ 0.7 | {} |",
        verdict(f_over_c >= 0.7)
    );
    let _ = writeln!(
        r,
        "| input MB/s nested (f) / flat (c) | {:.2} | (bytes per second, whatever the shape) | |",
        (nested_bytes as f64 / m.wall("f")) / (bytes as f64 / m.wall("c"))
    );
    let _ = writeln!(
        r,
        "| rows/s floor nested (g) / floor flat (a) | {:.2} | (what the nested rows' size costs the floor) | |",
        m.wall("a") / m.wall("g")
    );
    let _ = writeln!(
        r,
        "| rows/s nested (f) / floor nested (g) | {:.2} | (compare with (c)/(a)) | |",
        m.wall("g") / m.wall("f")
    );
}

/// One row of the report: a rows/s ratio of paired runs against its floor.
fn paired_row(r: &mut String, p: &Paired, runs: usize, what: &str, target: f64) {
    let verdict = if p.median >= target { "met" } else { "NOT met" };
    let _ = writeln!(
        r,
        "| rows/s {what}, {} | {:.2} | ≥ {target} | {verdict} |",
        p.how(runs),
        p.median,
    );
}

fn log_report(r: &mut String, log: &crate::log::LogReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    if log.place == "local" {
        let _ = writeln!(
            r,
            "\nA long log: one local table, {} publications (each swaps one of 24 hourly windows with a \
             {}-row file: 24 active files, one version per publication, a checkpoint every {} as \
             `sluice run` creates tables). Publish = stage + commit, until the commit is in the log \
             (seal to visible: a reader listing the log from then on sees it); {} publications at each end. \
             Restart = `sluice run` over a new empty source, process start to exit (table load, \
             resume offsets, published windows), median of 3; `sluice status` likewise (reads the \
             snapshot: the last checkpoint and the commits after it).\n",
            log.versions,
            log.rows_per_window,
            sluice_publish::CHECKPOINT_INTERVAL_DEFAULT,
            crate::log::SAMPLES
        );
    } else {
        let _ = writeln!(
            r,
            "\nThe same long log on {} (moto 5.2.5 on loopback: every store operation an HTTP \
             request to a Python server), {} publications.\n",
            log.place, log.versions
        );
    }
    let _ = writeln!(
        r,
        "| | at version ~10 | at version ~{} | ratio | target | |",
        log.versions
    );
    let _ = writeln!(r, "| --- | --- | --- | --- | --- | --- |");
    let ratio = ms(log.late.median) / ms(log.early.median);
    let _ = writeln!(
        r,
        "| publish latency, median | {:.1} ms | {:.1} ms | {ratio:.2} | ≤ 1.2 | {} |",
        ms(log.early.median),
        ms(log.late.median),
        verdict(ratio <= 1.2)
    );
    if let (Some((early, early_neg)), Some((late, late_neg))) =
        (log.dentries_early, log.dentries_late)
    {
        let _ = writeln!(
            r,
            "| kernel dentry cache when the samples began: entries (negative) | {early} ({early_neg}) | {late} ({late_neg}) | {:.1} | (context: path lookups walk it) | |",
            late as f64 / early.max(1) as f64
        );
    }
    let worst = log.early.p99.max(log.late.p99);
    let _ = writeln!(
        r,
        "| seal to visible, p99 | {:.1} ms | {:.1} ms | | ≤ 250 ms | {} |",
        ms(log.early.p99),
        ms(log.late.p99),
        verdict(ms(worst) <= 250.0)
    );
    let _ = writeln!(
        r,
        "| restart to resume | {:.0} ms | {:.0} ms | {:.2} | < 1 s at the end | {} |",
        ms(log.restart_early),
        ms(log.restart_late),
        ms(log.restart_late) / ms(log.restart_early),
        verdict(log.restart_late < Duration::from_secs(1))
    );
    let _ = writeln!(
        r,
        "| `sluice status` (issue 20) | {:.0} ms | {:.0} ms | {:.2} | < 1 s at the end | {} |",
        ms(log.status_early),
        ms(log.status_late),
        ms(log.status_late) / ms(log.status_early),
        verdict(log.status_late < Duration::from_secs(1))
    );
}

/// `sluice-bench log-growth`: the long-log measurement alone, printed.
pub fn log_only(
    dir: &Path,
    versions: u64,
    rows: usize,
    sluice: Option<PathBuf>,
) -> Result<(), BenchError> {
    let sluice = match sluice {
        Some(s) => s,
        None => std::env::current_exe()?.with_file_name("sluice"),
    };
    std::fs::create_dir_all(dir)?;
    let mut r = String::new();
    let log = crate::log::log_growth(dir, versions, rows, &sluice, crate::log::LogPlace::Local)?;
    log_report(&mut r, &log);
    if let Some(moto) = crate::moto::start("bench")? {
        let log = crate::log::log_growth(
            dir,
            versions,
            rows,
            &sluice,
            crate::log::LogPlace::S3(&moto),
        )?;
        log_report(&mut r, &log);
    }
    println!("{r}");
    Ok(())
}

/// The heading of the hand-written part of `bench/RESULTS.md`, which a new run keeps.
const READING_HEADING: &str = "## Reading this run";
