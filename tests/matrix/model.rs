//! The matrix's input and its model: a stream of changes of a few keys, the order and
//! multiplicity it arrives in, and the rows each table mode promises for it.
//!
//! Every change has a unique sequence number (`seq`), and its event time grows with it, so
//! "the latest event time wins" (swap and merge modes) and "the highest sequence wins"
//! (mirrors) name the same change, whatever order the changes arrive in.

use std::collections::BTreeMap;

use crate::common::Rng;

/// Changes in the stream, keys among them, and hours they span (1h windows).
pub const EVENTS: usize = 144;
const KEYS: u64 = 12;
pub const HOURS: u32 = 4;
/// `--lateness`, in seconds.
pub const LATENESS_S: i64 = 600;
/// How a change whose time is written the other way (a dead letter `bad_time` until it is
/// replayed with this format) writes it.
pub const BAD_TIME_FORMAT: &str = "%Y/%m/%d %H:%M:%S";

/// The table modes of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// No key: every delivery is a row, keyed by its source position.
    Rows,
    /// `--key id`, swap: one row per key per window.
    Keyed,
    /// `--mode merge` (window scope): one row per key per window, upserted.
    Merge,
    /// A mirror: one row per key across the table, the highest `seq`.
    Mirror,
    /// A mirror whose `op = 'd'` changes delete their key.
    MirrorDeletes,
    /// `--scd 2` with deletes: every change a version.
    History,
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Rows,
        Mode::Keyed,
        Mode::Merge,
        Mode::Mirror,
        Mode::MirrorDeletes,
        Mode::History,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Rows => "rows",
            Mode::Keyed => "keyed",
            Mode::Merge => "merge",
            Mode::Mirror => "mirror",
            Mode::MirrorDeletes => "mirror+deletes",
            Mode::History => "history",
        }
    }

    /// The run options that make a table of this mode.
    pub fn options(self) -> Vec<&'static str> {
        let mirror = [
            "--key",
            "id",
            "--sequence-field",
            "seq",
            "--mode",
            "merge",
            "--merge-scope",
            "table",
        ];
        let deletes = ["--delete-when", "op = 'd'"];
        match self {
            Mode::Rows => vec![],
            Mode::Keyed => vec!["--key", "id"],
            Mode::Merge => vec!["--key", "id", "--mode", "merge"],
            Mode::Mirror => mirror.to_vec(),
            Mode::MirrorDeletes => [&mirror[..], &deletes[..]].concat(),
            Mode::History => [&mirror[..], &deletes[..], &["--scd", "2"][..]].concat(),
        }
    }
}

/// How the stream arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arrival {
    InOrder,
    Shuffled,
    /// In order, the last file (or the last messages) still being written when the first
    /// run reads it, completed before the next.
    BeingWritten,
    /// In order, some changes delivered again later.
    Duplicates,
    /// In order, some changes delivered after every other (late for their windows).
    Late,
}

impl Arrival {
    pub const ALL: [Arrival; 5] = [
        Arrival::InOrder,
        Arrival::Shuffled,
        Arrival::BeingWritten,
        Arrival::Duplicates,
        Arrival::Late,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arrival::InOrder => "in-order",
            Arrival::Shuffled => "shuffled",
            Arrival::BeingWritten => "being-written",
            Arrival::Duplicates => "duplicates",
            Arrival::Late => "late",
        }
    }
}

/// One change of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: i64,
    pub seq: i64,
    pub op: &'static str,
    /// Seconds after 2026-10-03T00:00:00Z.
    pub at_s: i64,
    /// Its time is written in [`BAD_TIME_FORMAT`].
    pub bad_time: bool,
}

impl Event {
    pub fn v(&self) -> String {
        format!("v{}", self.seq)
    }

    /// The event time as written: RFC 3339, or [`BAD_TIME_FORMAT`].
    pub fn ts(&self) -> String {
        let (h, m, s) = (self.at_s / 3600, self.at_s / 60 % 60, self.at_s % 60);
        if self.bad_time {
            format!("2026/10/03 {h:02}:{m:02}:{s:02}")
        } else {
            format!("2026-10-03T{h:02}:{m:02}:{s:02}Z")
        }
    }

    pub fn json(&self) -> String {
        serde_json::json!({"id": self.id, "seq": self.seq, "op": self.op, "v": self.v(), "ts": self.ts()})
            .to_string()
    }

    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{}",
            self.id,
            self.seq,
            self.op,
            self.v(),
            self.ts()
        )
    }

    /// The hour (window) the change falls in.
    pub fn hour(&self) -> i64 {
        self.at_s / 3600
    }
}

/// The changes of the stream, in sequence order; with `bad_times`, about one in ten has its
/// time written the other way.
pub fn events(rng: &mut Rng, bad_times: bool) -> Vec<Event> {
    let step_s = i64::from(HOURS) * 3600 / EVENTS as i64;
    let mut deleted: BTreeMap<i64, bool> = BTreeMap::new();
    (0..EVENTS)
        .map(|i| {
            let id = rng.below(KEYS) as i64 + 1;
            let op = match deleted.get(&id) {
                None | Some(true) => "c",
                Some(false) if rng.below(8) == 0 => "d",
                Some(false) => "u",
            };
            deleted.insert(id, op == "d");
            Event {
                id,
                seq: 100 + i as i64,
                op,
                at_s: i as i64 * step_s + 1,
                bad_time: bad_times && rng.below(10) == 0,
            }
        })
        .collect()
}

/// The order the changes arrive in, as indexes into `events` (an index twice: delivered
/// twice).
pub fn deliveries(arrival: Arrival, n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    match arrival {
        Arrival::InOrder | Arrival::BeingWritten => {}
        Arrival::Shuffled => {
            for i in (1..n).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        Arrival::Duplicates => {
            let mut out = Vec::with_capacity(n * 6 / 5);
            let mut again: Vec<(usize, usize)> = Vec::new();
            for i in 0..n {
                out.push(i);
                if rng.below(6) == 0 {
                    again.push((i + 3 + rng.below(30) as usize, i));
                }
                again.retain(|&(at, e)| {
                    let due = at <= i;
                    if due {
                        out.push(e);
                    }
                    !due
                });
            }
            out.extend(again.iter().map(|&(_, e)| e));
            order = out;
        }
        Arrival::Late => {
            let (on_time, late): (Vec<usize>, Vec<usize>) =
                order.into_iter().partition(|_| rng.below(14) != 0);
            order = on_time.into_iter().chain(late).collect();
        }
    }
    order
}

/// A row as the comparison reads it: key, sequence, op, value, and a history's version
/// bounds.
pub type Row = (i64, i64, String, String, Option<i64>, Option<i64>);

fn row(e: &Event, bounds: (Option<i64>, Option<i64>)) -> Row {
    (e.id, e.seq, e.op.to_string(), e.v(), bounds.0, bounds.1)
}

/// The rows `mode` promises for `delivered` changes (each delivery of each change), sorted.
pub fn expected(mode: Mode, events: &[Event], delivered: &[usize]) -> Vec<Row> {
    let mut rows: Vec<Row> = match mode {
        Mode::Rows => delivered
            .iter()
            .map(|&i| row(&events[i], (None, None)))
            .collect(),
        Mode::Keyed | Mode::Merge => {
            let mut latest: BTreeMap<(i64, i64), &Event> = BTreeMap::new();
            for e in events {
                let slot = latest.entry((e.id, e.hour())).or_insert(e);
                if e.seq > slot.seq {
                    *slot = e;
                }
            }
            latest.values().map(|e| row(e, (None, None))).collect()
        }
        Mode::Mirror | Mode::MirrorDeletes => {
            let mut latest: BTreeMap<i64, &Event> = BTreeMap::new();
            for e in events {
                let slot = latest.entry(e.id).or_insert(e);
                if e.seq > slot.seq {
                    *slot = e;
                }
            }
            latest
                .values()
                .filter(|e| mode == Mode::Mirror || e.op != "d")
                .map(|e| row(e, (None, None)))
                .collect()
        }
        Mode::History => {
            let mut by_key: BTreeMap<i64, Vec<&Event>> = BTreeMap::new();
            for e in events {
                by_key.entry(e.id).or_default().push(e);
            }
            let mut versions = Vec::new();
            for changes in by_key.values_mut() {
                changes.sort_by_key(|e| e.seq);
                for (i, e) in changes.iter().enumerate() {
                    if e.op != "d" {
                        let end = changes.get(i + 1).map(|n| n.seq);
                        versions.push(row(e, (Some(e.seq), end)));
                    }
                }
            }
            versions
        }
    };
    rows.sort();
    rows
}

/// The rows of the derived table `SELECT op, count(*) AS n, sum(seq) AS s FROM window GROUP
/// BY op` over `rows` (the raw table's): `(hour, op, n, s)`, sorted. With `sealed_only` (a
/// sharded table: a window is derived once every shard has sealed it), only the windows the
/// watermark has passed: those ending by the latest event time less the lateness.
pub fn derived(rows: &[Row], events: &[Event], sealed_only: bool) -> Vec<(i64, String, i64, i64)> {
    let hour_of: BTreeMap<i64, i64> = events.iter().map(|e| (e.seq, e.hour())).collect();
    let latest_s = events.iter().map(|e| e.at_s).max().unwrap_or(0);
    let sealed = |hour: i64| !sealed_only || (hour + 1) * 3600 <= latest_s - LATENESS_S;
    let mut groups: BTreeMap<(i64, String), (i64, i64)> = BTreeMap::new();
    for r in rows.iter().filter(|r| sealed(hour_of[&r.1])) {
        let g = groups.entry((hour_of[&r.1], r.2.clone())).or_default();
        g.0 += 1;
        g.1 += r.1;
    }
    groups
        .into_iter()
        .map(|((h, op), (n, s))| (h, op, n, s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_keeps_each_modes_promise() {
        let e = |id, seq, op, at_s| Event {
            id,
            seq,
            op,
            at_s,
            bad_time: false,
        };
        let events = [
            e(1, 100, "c", 10),
            e(1, 101, "u", 20),
            e(2, 102, "c", 30),
            e(1, 103, "d", 4000),
            e(2, 104, "u", 4010),
        ];
        let all = [0, 1, 2, 3, 4, 1];
        let seqs = |mode| -> Vec<(i64, Option<i64>)> {
            expected(mode, &events, &all)
                .into_iter()
                .map(|r| (r.1, r.5))
                .collect()
        };
        assert_eq!(seqs(Mode::Rows).len(), 6);
        assert_eq!(
            seqs(Mode::Keyed),
            [(101, None), (103, None), (102, None), (104, None)]
        );
        assert_eq!(seqs(Mode::Mirror), [(103, None), (104, None)]);
        assert_eq!(seqs(Mode::MirrorDeletes), [(104, None)]);
        assert_eq!(
            seqs(Mode::History),
            [
                (100, Some(101)),
                (101, Some(103)),
                (102, Some(104)),
                (104, None)
            ]
        );
    }
}
