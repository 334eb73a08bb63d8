//! What finding new objects costs: a followed `sluice run` over a dated S3 prefix (moto)
//! that holds `objects` objects picks up `new` more, with `--listing incremental` and with
//! `--listing full`. moto's own request log counts the requests sent from the moment the new
//! objects are put to the run's end (by kind: listings, reads; the puts themselves left out).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::alternatives::BenchError;
use crate::moto::Moto;

const PREFIX: &str = "events/dt=2026-10-03";

/// The requests one followed run sent after the new objects were put.
pub struct ListingCost {
    pub listing: &'static str,
    pub objects: usize,
    pub new: usize,
    pub lists: usize,
    pub reads: usize,
    pub other: usize,
    /// From the puts to the run's end.
    pub seconds: f64,
}

pub fn listing_cost(
    sluice: &Path,
    work: &Path,
    objects: usize,
    new: usize,
) -> Result<Vec<ListingCost>, BenchError> {
    let mut costs = Vec::new();
    for listing in ["incremental", "full"] {
        let log = work.join(format!("moto-{listing}.log"));
        let Some(moto) = crate::moto::start_logged("landing", Some(&log))? else {
            return Err("moto is not installed (scripts/servers install)".into());
        };
        let started = Instant::now();
        put_objects(&moto, 0..objects, |i| {
            // One event in the first object (a new table's schema is inferred from it); the
            // others empty: listing them is the cost measured, reading them costs nothing.
            if i == 0 {
                events(0, 1)
            } else {
                Vec::new()
            }
        })?;
        eprintln!(
            "listing ({listing}): {objects} objects put in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        let table = work.join(format!("listing-{listing}"));
        if table.exists() {
            std::fs::remove_dir_all(&table)?;
        }
        let mut run = Command::new(sluice);
        run.args(["run", "--source", &format!("ndjson:s3://landing/{PREFIX}/")])
            .arg("--table")
            .arg(&table)
            .args(["--key", "event_id", "--listing", listing, "--follow"])
            .args(["--poll-interval", "1s", "--until-idle", "3s"])
            .envs(moto.options())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = run.spawn()?;
        // The run has listed the prefix and created its table; then an idle look or two.
        let deadline = Instant::now() + Duration::from_secs(600);
        while !table.join("_delta_log/00000000000000000000.json").exists() {
            if Instant::now() > deadline || child.try_wait()?.is_some() {
                return Err("the followed run did not create its table".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        let mark = std::fs::read_to_string(&log)?.lines().count();
        let put_at = Instant::now();
        put_objects(&moto, objects..objects + new, |i| events(i, 100))?;
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("the followed run ({listing}) failed: {status}").into());
        }
        let seconds = put_at.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&log)?;
        let mut cost = ListingCost {
            listing,
            objects,
            new,
            lists: 0,
            reads: 0,
            other: 0,
            seconds,
        };
        for line in text.lines().skip(mark) {
            // moto colours some lines (ANSI escapes around the request).
            let line = strip_ansi(line);
            let Some(request) = line.split('"').nth(1) else {
                continue;
            };
            let mut parts = request.split(' ');
            match (parts.next(), parts.next()) {
                (Some("PUT"), _) => {}
                (Some("GET"), Some(path)) if path.contains("list-type=2") => cost.lists += 1,
                (Some("GET"), _) => cost.reads += 1,
                (Some(_), _) => cost.other += 1,
                _ => {}
            }
        }
        eprintln!(
            "listing ({listing}): {} lists, {} reads, {} other requests in {seconds:.1} s",
            cost.lists, cost.reads, cost.other
        );
        costs.push(cost);
    }
    Ok(costs)
}

/// `text` without its ANSI escape sequences (`ESC [ ... m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `n` flat events (JSON lines) of object `object`.
fn events(object: usize, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            format!(
                "{{\"event_id\":\"o{object}-{i}\",\"ts\":\"2026-10-03T{:02}:{:02}:00Z\",\"amount\":{i}}}\n",
                (object / 60) % 24,
                object % 60
            )
        })
        .collect::<String>()
        .into_bytes()
}

/// Puts objects `range` (named so that they sort in order) under the prefix, 64 at a time.
fn put_objects(
    moto: &Moto,
    range: std::ops::Range<usize>,
    body: impl Fn(usize) -> Vec<u8>,
) -> Result<(), BenchError> {
    let url = url::Url::parse(&format!("s3://{}/", moto.bucket))?;
    let options = moto.options().into_iter().collect();
    let store: Arc<dyn ObjectStore> =
        sluice_source::source_store(&url, &options, Default::default())?;
    let runtime = tokio::runtime::Runtime::new()?;
    let puts = range.map(|i| {
        let store = store.clone();
        let location = object_store::path::Path::from(format!("{PREFIX}/part-{i:07}.ndjson"));
        let bytes = body(i);
        async move { store.put(&location, bytes.into()).await }
    });
    runtime.block_on(async {
        let mut done = futures::stream::iter(puts).buffer_unordered(64);
        while let Some(put) = done.next().await {
            put?;
        }
        Ok::<_, object_store::Error>(())
    })?;
    Ok(())
}

pub fn report(r: &mut String, costs: &[ListingCost]) {
    let _ = writeln!(
        r,
        "\n## Finding new objects under a large S3 prefix (moto)\n\n\
         A followed run (`--poll-interval 1s --until-idle 3s`) over a dated prefix holding the objects below picks up the new ones; \
         moto's request log counts what it sent from the puts to the run's end (each look after the pickup included).\n"
    );
    let _ = writeln!(
        r,
        "| `--listing` | objects | new | listings | reads | other | total | target |"
    );
    let _ = writeln!(r, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in costs {
        let total = c.lists + c.reads + c.other;
        let target = if c.listing == "incremental" {
            format!("< 20: {}", if total < 20 { "met" } else { "NOT met" })
        } else {
            "(printed)".to_string()
        };
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {} | {} | {total} in {:.1} s | {target} |",
            c.listing, c.objects, c.new, c.lists, c.reads, c.other, c.seconds
        );
    }
}
