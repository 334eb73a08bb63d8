//! The pure window state of one run (one source partition set, one shard; a backfill's too,
//! under [`Rules::batch`]): which window each event goes to, whether it is a replay or late,
//! which windows are sealed and may be published, and the rows they hold. No I/O: the runner hands it decoded events and asks it
//! what to publish; everything it decides depends only on the input and the table's state it
//! was started from (E5).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use deltalake::arrow::array::RecordBatch;
use sluice_source::Position;
use sluice_window::{
    EventTime, Observed, Route, SkewGuard, Watermark, WatermarkState, Window, WindowBook,
    WindowFinder, WindowSize,
};

use crate::buffer::{Buffers, Part, WindowBuffer};
use crate::config::{IngestConfig, LatePolicy};

/// The rules routing follows, fixed for a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub window: WindowSize,
    pub lateness_ms: i64,
    pub skew: SkewGuard,
    pub late: LatePolicy,
    pub max_rewrite_age_ms: Option<i64>,
    pub late_batch_ms: i64,
    pub flush_bytes_max: usize,
}

impl Rules {
    pub fn of(config: &IngestConfig) -> Rules {
        Rules {
            window: config.window,
            lateness_ms: config.lateness_ms,
            skew: config.skew,
            late: config.late,
            // A window the run's retention removed is never published again: its late
            // events are too late (the rule expiry uses, `end + retain < watermark`).
            max_rewrite_age_ms: match (config.max_rewrite_age_ms, config.retain_ms) {
                (Some(a), Some(r)) => Some(a.min(r)),
                (a, r) => a.or(r),
            },
            late_batch_ms: config.late_batch_ms,
            flush_bytes_max: config.flush_bytes_max,
        }
    }

    /// The rules of a backfill: every event of its bounded input is kept in its window
    /// (none is late, far ahead or a replay: the range is recomputed whole), and the windows
    /// are due at the end of the input. Windows and buffers as a run's (`config`).
    pub fn batch(config: &IngestConfig) -> Rules {
        Rules {
            window: config.window,
            lateness_ms: i64::MAX,
            skew: SkewGuard::OFF,
            late: LatePolicy::Rewrite,
            max_rewrite_age_ms: None,
            late_batch_ms: 0,
            flush_bytes_max: config.flush_bytes_max,
        }
    }

    fn watermark(&self, resumed: WatermarkState) -> Watermark {
        Watermark::new(self.lateness_ms.saturating_mul(1000))
            .with_guard(self.skew_guard())
            .resumed(resumed)
    }

    /// The clock-skew guard of `--max-time-ahead`, but never less than two windows: the next
    /// window's events are never ahead, whatever the window's size (daily rows a day apart,
    /// or 25 hours apart across the end of daylight saving time, are a stream, not a skewed
    /// clock). Fixed by the window size, so a replay decides as the first run (E5).
    pub fn skew_guard(&self) -> SkewGuard {
        SkewGuard {
            ahead_us: self
                .skew
                .ahead_us
                .max(self.window.as_micros().saturating_mul(2)),
            ..self.skew
        }
    }
}

/// Why a late event is not kept (it goes to the dead-letter table instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LateReason {
    /// `--late drop`.
    Late,
    /// Its window ended more than `--max-rewrite-age` before the watermark.
    TooLate,
}

impl LateReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LateReason::Late => "late",
            LateReason::TooLate => "too_late",
        }
    }
}

/// A late event routing did not keep.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LateRow {
    /// Its index in the decoded chunk.
    pub index: usize,
    pub window: Window,
    pub event_time: EventTime,
    pub watermark: EventTime,
    pub reason: LateReason,
}

/// What routing one decoded chunk decided.
#[derive(Debug, Default)]
pub(crate) struct Routed {
    /// Per window, the indexes (in chunk order) of the rows it keeps.
    pub groups: BTreeMap<Window, Vec<u32>>,
    /// Late rows not kept.
    pub dropped: Vec<LateRow>,
    pub replayed: u64,
    pub late: u64,
    pub ahead: u64,
}

/// A reading of the state for the run's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateGauges {
    pub open_windows: usize,
    /// Rows held in memory (staged parts not included), as Arrow measures them.
    pub buffered_bytes: usize,
    /// The watermark, in milliseconds since the epoch; `None` before the first event.
    pub watermark_ms: Option<i64>,
}

/// The window state of a run; see the module doc.
#[derive(Debug)]
pub(crate) struct WindowState {
    rules: Rules,
    book: WindowBook<Position>,
    watermark: Watermark,
    /// Per open window: the watermark's input before its first held event (what the
    /// watermark must be restored to if the stream resumes at that event).
    max_before_hold: HashMap<Window, WatermarkState>,
    buffers: Buffers,
    /// Published windows holding late rows (and windows far ahead), with the processing time
    /// the first of them was read: published once [`Rules::late_batch_ms`] has passed.
    late_since_ms: HashMap<Window, i64>,
    /// Open windows holding events far ahead of the stream: published on their own after the
    /// late batch interval (the watermark may never reach them).
    ahead_windows: BTreeSet<Window>,
    /// Set when every held window must publish now (end of input, idle seal), late batches
    /// included.
    draining: bool,
    /// The next unread position.
    read_position: Position,
}

impl WindowState {
    /// The state a run starts from: the table's published windows (with the position their
    /// publication covers), where reading resumes, and the watermark's input stored there.
    pub fn resumed(
        rules: Rules,
        published: impl IntoIterator<Item = (Window, Position)>,
        read_position: Position,
        watermark: WatermarkState,
    ) -> WindowState {
        WindowState {
            book: WindowBook::from_published(published),
            watermark: rules.watermark(watermark),
            max_before_hold: HashMap::new(),
            buffers: Buffers::new(rules.flush_bytes_max),
            late_since_ms: HashMap::new(),
            ahead_windows: BTreeSet::new(),
            draining: false,
            read_position,
            rules,
        }
    }

    /// Routes the events of one chunk (their event times and positions, in order): decides
    /// for each whether it is a replay, kept in its window, or a late row not kept. The
    /// watermark moves with every event, so a row's lateness is decided by the events before
    /// it, whatever the chunking. `now_ms` starts late batches.
    pub fn route(
        &mut self,
        file: u32,
        event_times: &[EventTime],
        offsets: &[i64],
        now_ms: i64,
    ) -> Routed {
        debug_assert_eq!(
            event_times.len(),
            offsets.len(),
            "E6: an event time per routed row"
        );
        let mut routed = Routed::default();
        let mut last: Option<(Window, Vec<u32>)> = None;
        let mut windows = WindowFinder::new(self.rules.window);
        for (i, (t, offset)) in event_times.iter().zip(offsets).enumerate() {
            let window = windows.find(*t);
            let position = Position {
                file,
                offset: *offset,
            };
            let wm = self.watermark.current();
            let route = self.book.route(window, &position, wm);
            let keep = match route {
                Route::Replayed => {
                    routed.replayed += 1;
                    false
                }
                Route::Buffer => true,
                Route::Late => {
                    routed.late += 1;
                    match self.late_reason(window, wm) {
                        None => true,
                        Some(reason) => {
                            routed.dropped.push(LateRow {
                                index: i,
                                window,
                                event_time: *t,
                                watermark: wm,
                                reason,
                            });
                            false
                        }
                    }
                }
            };
            if keep {
                if !self.book.is_open(window) {
                    self.max_before_hold.insert(window, self.watermark.state());
                    if route == Route::Late {
                        self.late_since_ms.insert(window, now_ms);
                    }
                }
                self.book.hold(window, &position);
                // Events mostly arrive in time order: keep the current window's rows
                // aside instead of a map lookup per row.
                match &mut last {
                    Some((w, rows)) if *w == window => rows.push(i as u32),
                    _ => {
                        if let Some((w, rows)) = last.take() {
                            routed.groups.entry(w).or_default().extend(rows);
                        }
                        last = Some((window, vec![i as u32]));
                    }
                }
            }
            if self.watermark.observe(*t) == Observed::Ahead && keep && route == Route::Buffer {
                // Far ahead of the stream: its window is published on its own (after the
                // late batch), not when the watermark reaches it, which it may never do.
                routed.ahead += 1;
                self.ahead_windows.insert(window);
                self.late_since_ms.entry(window).or_insert(now_ms);
            }
        }
        if let Some((w, rows)) = last {
            routed.groups.entry(w).or_default().extend(rows);
        }
        for rows in routed.groups.values_mut() {
            rows.sort_unstable();
        }
        let kept: usize = routed.groups.values().map(Vec::len).sum();
        debug_assert_eq!(
            kept + routed.dropped.len() + routed.replayed as usize,
            offsets.len(),
            "E6: every row is held, dropped as a dead letter or replayed (already published)"
        );
        debug_assert!(
            (routed.groups.iter())
                .all(|(w, rows)| rows.iter().all(|&i| w.contains(event_times[i as usize]))),
            "E5: a row is held in the window of its event time"
        );
        routed
    }

    /// Whether a late event for `window` under watermark `wm` is dropped, and why.
    fn late_reason(&self, window: Window, wm: EventTime) -> Option<LateReason> {
        let too_late = self.rules.max_rewrite_age_ms.is_some_and(|age| {
            window
                .end()
                .as_micros()
                .saturating_add(age.saturating_mul(1000))
                < wm.as_micros()
        });
        if too_late {
            Some(LateReason::TooLate)
        } else if self.rules.late == LatePolicy::Drop {
            Some(LateReason::Late)
        } else {
            None
        }
    }

    /// Holds `batch` (rows of `window` from source partition `partition`, offsets `first`
    /// to `last`) in the window's buffer.
    pub fn buffer(
        &mut self,
        window: Window,
        batch: RecordBatch,
        partition: &str,
        first: i64,
        last: i64,
    ) {
        self.buffers.push(window, batch, partition, first, last);
    }

    /// Everything before `position` is read.
    pub fn read_to(&mut self, position: Position) {
        self.read_position = position;
    }

    pub fn read_position(&self) -> Position {
        self.read_position
    }

    /// While the buffers are over the memory budget: the window holding the most rows in
    /// memory and those rows, to be staged as parts ([`WindowState::add_part`]).
    pub fn take_largest(&mut self) -> Option<(Window, Vec<RecordBatch>)> {
        if !self.buffers.over_budget() {
            return None;
        }
        let window = self.buffers.largest()?;
        Some((window, self.buffers.take_batches(window)))
    }

    pub fn add_part(&mut self, window: Window, part: Part) {
        self.buffers.add_part(window, part);
    }

    /// The windows to publish now: those the watermark sealed and those of events far ahead,
    /// except late batches whose interval has not passed at `now_ms` (unless draining).
    /// First publications come before republications, each oldest first: a first publication
    /// stages a whole window, a republication mostly a few late rows, so the large stagings
    /// start first and the small ones fill the other core beside them (the end of the input:
    /// the last window and the late rows of many others).
    pub fn due(&self, now_ms: i64) -> Vec<Window> {
        let mut windows = self.book.sealed(self.watermark.current());
        let ahead: Vec<Window> = self
            .ahead_windows
            .iter()
            .copied()
            .filter(|w| self.book.is_open(*w) && !windows.contains(w))
            .collect();
        windows.extend(ahead);
        windows.retain(|window| {
            let batching = self
                .late_since_ms
                .get(window)
                .is_some_and(|since| now_ms.saturating_sub(*since) < self.rules.late_batch_ms);
            self.draining || !batching
        });
        windows.sort_by_key(|window| (self.book.is_published(*window), *window));
        windows
    }

    /// What [`WindowState::take_for_publication`] would take of `window`, before it is taken:
    /// whether it was published before, and its buffered bytes.
    pub fn publication_of(&self, window: Window) -> (bool, usize) {
        (
            self.book.is_published(window),
            self.buffers.total_bytes_of(window),
        )
    }

    /// Takes `window`'s rows to publish them: from here on the window counts as published
    /// (covering the read position), so rows of it read while its publication runs are late
    /// rows, published again after it. Returns its rows and whether it was published before.
    pub fn take_for_publication(&mut self, window: Window) -> (WindowBuffer, bool) {
        let republish = self.book.is_published(window);
        let buffer = self.buffers.remove(window);
        self.book.mark_published(window, self.read_position);
        self.max_before_hold.remove(&window);
        self.late_since_ms.remove(&window);
        self.ahead_windows.remove(&window);
        (buffer, republish)
    }

    /// The lowest position held by an unpublished window other than `window`: where the
    /// stream resumes once `window` is published.
    pub fn resume_excluding(&self, window: Window) -> Position {
        self.book
            .open_windows()
            .filter(|(w, _)| *w != window)
            .map(|(_, p)| *p)
            .fold(self.read_position, std::cmp::min)
    }

    /// The watermark's input before `resume`: everything read, when the stream resumes at
    /// the read position; else what was recorded when the window holding `resume` took its
    /// first event.
    pub fn watermark_before(&self, resume: Position, publishing: Window) -> Option<WatermarkState> {
        if resume == self.read_position {
            return Some(self.watermark.state());
        }
        self.book
            .open_windows()
            .filter(|(w, p)| *w != publishing && **p == resume)
            .find_map(|(w, _)| self.max_before_hold.get(&w).copied())
    }

    pub fn lateness_us(&self) -> i64 {
        self.watermark.lateness_us()
    }

    pub fn watermark(&self) -> EventTime {
        self.watermark.current()
    }

    /// The end of input: every held window (late batches included) is due.
    pub fn end_of_input(&mut self) {
        self.watermark.end_of_input();
        self.draining = true;
    }

    /// An idle seal: moves the watermark past the newest open window, as if an event that
    /// far past it had arrived, and makes every held window due until
    /// [`WindowState::end_idle_seal`]. Returns whether any window was open.
    pub fn begin_idle_seal(&mut self) -> bool {
        let Some(end) = self.book.open_windows().map(|(w, _)| w.end()).max() else {
            return false;
        };
        let lateness_us = self.watermark.lateness_us();
        self.watermark.observe(EventTime::from_micros(
            end.as_micros().saturating_add(lateness_us),
        ));
        self.draining = true;
        true
    }

    pub fn end_idle_seal(&mut self) {
        self.draining = false;
    }

    /// What the state gauges report.
    pub fn gauges(&self) -> StateGauges {
        let watermark = self.watermark.current();
        StateGauges {
            open_windows: self.book.open_windows().count(),
            buffered_bytes: self.buffers.memory_bytes(),
            // Before the first event and after the end of input the watermark is at an end of
            // time: not a reading.
            watermark_ms: (watermark > EventTime::MIN && watermark < EventTime::MAX)
                .then(|| watermark.as_micros().div_euclid(1000)),
        }
    }

    /// The watermark the events set (see [`sluice_window::Watermark::of_events`]).
    pub fn watermark_of_events(&self) -> Option<EventTime> {
        self.watermark.of_events()
    }

    /// Whether `window` holds rows not yet published (open, or late rows waiting).
    pub fn holds(&self, window: Window) -> bool {
        self.late_since_ms.contains_key(&window)
            || self.book.open_windows().any(|(w, _)| w == window)
    }

    /// The open windows and the first position each holds.
    #[cfg(test)]
    pub fn open_windows(&self) -> Vec<(Window, Position)> {
        self.book.open_windows().map(|(w, p)| (w, *p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rules(late: LatePolicy, max_rewrite_age_ms: Option<i64>) -> Rules {
        Rules {
            window: WindowSize::parse("1h").unwrap(),
            lateness_ms: 10 * 60_000,
            skew: SkewGuard::DEFAULT,
            late,
            max_rewrite_age_ms,
            late_batch_ms: 0,
            flush_bytes_max: 1 << 20,
        }
    }

    #[test]
    fn the_skew_guard_is_at_least_two_windows() {
        let mut r = rules(LatePolicy::Rewrite, None);
        let day_us = 86_400_000_000;
        assert_eq!(
            r.skew_guard().ahead_us,
            day_us,
            "1d is more than two 1h windows"
        );
        r.window = WindowSize::parse("1d").unwrap();
        assert_eq!(r.skew_guard().ahead_us, 2 * day_us);
        assert_eq!(r.skew_guard().jump_events, SkewGuard::DEFAULT.jump_events);
        r.skew = SkewGuard::OFF;
        assert_eq!(r.skew_guard(), SkewGuard::OFF);
    }

    /// Everything routing decided over a whole input, in input indexes.
    #[derive(Debug, PartialEq)]
    struct Decided {
        groups: BTreeMap<Window, Vec<u32>>,
        dropped: Vec<(usize, Window, &'static str)>,
        counts: (u64, u64, u64),
        open: Vec<(Window, Position)>,
        watermark: EventTime,
        due: Vec<Window>,
    }

    /// Routes `times` (positions are their indexes) cut into chunks at `cuts`.
    fn route_in_chunks(
        rules: Rules,
        published: &[(Window, Position)],
        times: &[i64],
        cuts: &[usize],
    ) -> Decided {
        let mut state = WindowState::resumed(
            rules,
            published.iter().copied(),
            Position { file: 1, offset: 0 },
            WatermarkState::default(),
        );
        let events: Vec<EventTime> = times
            .iter()
            .map(|s| EventTime::from_micros(s * 1_000_000))
            .collect();
        let offsets: Vec<i64> = (0..times.len() as i64).collect();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (times.len() + 1)).collect();
        bounds.extend([0, times.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut decided = Decided {
            groups: BTreeMap::new(),
            dropped: Vec::new(),
            counts: (0, 0, 0),
            open: Vec::new(),
            watermark: EventTime::from_micros(0),
            due: Vec::new(),
        };
        for pair in bounds.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            let routed = state.route(1, &events[from..to], &offsets[from..to], 0);
            for (window, rows) in routed.groups {
                let global = rows.iter().map(|i| i + from as u32);
                decided.groups.entry(window).or_default().extend(global);
            }
            for row in routed.dropped {
                decided
                    .dropped
                    .push((row.index + from, row.window, row.reason.as_str()));
            }
            decided.counts.0 += routed.replayed;
            decided.counts.1 += routed.late;
            decided.counts.2 += routed.ahead;
            state.read_to(Position {
                file: 1,
                offset: to as i64,
            });
        }
        decided.open = state.open_windows();
        decided.watermark = state.watermark();
        decided.due = state.due(0);
        decided
    }

    proptest! {
        /// E5 for the window core: the same events cut into different chunks are routed the
        /// same way (same rows per window, same late rows dropped, same sealed windows).
        #[test]
        fn e5_routing_does_not_depend_on_chunking(
            times in proptest::collection::vec(0i64..6 * 3600, 0..200),
            cuts in proptest::collection::vec(0usize..1000, 0..12),
            drop_late in any::<bool>(),
            max_age in proptest::option::of(0i64..3 * 3_600_000),
            published_hour in proptest::option::of(0i64..6),
        ) {
            let late = if drop_late { LatePolicy::Drop } else { LatePolicy::Rewrite };
            let rules = rules(late, max_age);
            let published: Vec<(Window, Position)> = published_hour
                .map(|h| (
                    Window::containing(rules.window, EventTime::from_micros(h * 3_600_000_000)),
                    Position { file: 1, offset: 50 },
                ))
                .into_iter()
                .collect();
            let whole = route_in_chunks(rules, &published, &times, &[]);
            let chunked = route_in_chunks(rules, &published, &times, &cuts);
            prop_assert_eq!(&whole, &chunked);
            // Every event is accounted for: kept, replayed or dropped (E6).
            let kept: usize = whole.groups.values().map(Vec::len).sum();
            prop_assert_eq!(
                kept as u64 + whole.counts.0 + whole.dropped.len() as u64,
                times.len() as u64
            );
        }
    }
}
