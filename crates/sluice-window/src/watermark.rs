//! The watermark: the largest event time seen minus the allowed lateness, with a guard that
//! keeps one clock-skewed event from moving it. A function of the input read so far (E5); its
//! state is stored with the offsets so a restart resumes it exactly.

use crate::time::EventTime;

/// How far the watermark trusts a single event: the clock-skew guard.
///
/// An event more than `ahead_us` past the largest event time seen so far is *ahead* (a
/// device whose clock says 2099, a unit mistake): it does not move the watermark, so one such
/// event cannot make the rest of the stream late. A stream that really jumps forward (a source
/// silent for a week that resumes) sends nothing but ahead events; once `jump_events` of
/// them come in a row, with no event in between that is on time (late events do not count
/// either way), the watermark follows: the largest event time seen becomes the earliest of
/// that run (to the second). Both depend only on the input, so a replay decides exactly as the first run
/// (E5), and the run's count is part of the state a resume restores ([`WatermarkState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkewGuard {
    /// `i64::MAX`: no guard.
    pub ahead_us: i64,
    pub jump_events: u32,
}

impl SkewGuard {
    /// No guard: every event moves the watermark.
    pub const OFF: SkewGuard = SkewGuard {
        ahead_us: i64::MAX,
        jump_events: 1,
    };

    /// One day ahead, 100 events in a row to follow a jump.
    pub const DEFAULT: SkewGuard = SkewGuard {
        ahead_us: 86_400_000_000,
        jump_events: 100,
    };
}

impl Default for SkewGuard {
    fn default() -> Self {
        SkewGuard::DEFAULT
    }
}

/// The watermark's input as of some point of the stream: what a run resuming at that point
/// must restore (stored in the table with the resume offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WatermarkState {
    /// The largest event time seen (ahead events excepted).
    pub max_seen: Option<EventTime>,
    /// Ahead events read in a row since the last on-time event.
    pub ahead_run: u32,
    /// The earliest event time of that run, to the second (rounded down): what the
    /// watermark follows from when the run confirms a jump.
    pub ahead_min: Option<EventTime>,
}

/// The most ahead events in a row a jump can need ([`SkewGuard::jump_events`]): the run's
/// count takes 24 bits of [`WatermarkState::ahead_code`].
pub const JUMP_EVENTS_MAX: u32 = (1 << 24) - 1;
/// Seconds from the earliest event time (1900-01-01) to the Unix epoch.
const CODE_OFFSET_S: i64 = 2_208_988_800;

impl WatermarkState {
    /// The ahead run as one integer (one `txn` of the table: one lookup when a run
    /// resumes): 0 without a run, else the run's earliest second (from 1900) in the high bits
    /// and its count in the low 24.
    pub fn ahead_code(&self) -> i64 {
        match (self.ahead_run, self.ahead_min) {
            (0, _) | (_, None) => 0,
            (run, Some(min)) => {
                let s = min.as_micros().div_euclid(1_000_000) + CODE_OFFSET_S;
                let code = (s.max(0) << 24) | i64::from(run.min(JUMP_EVENTS_MAX));
                debug_assert_eq!(
                    WatermarkState::default().with_ahead_code(code).ahead_run,
                    run.min(JUMP_EVENTS_MAX),
                    "E4: the ahead run a resume restores is the one stored"
                );
                code
            }
        }
    }

    /// The ahead run of [`WatermarkState::ahead_code`].
    pub fn with_ahead_code(mut self, code: i64) -> Self {
        let run = (code & i64::from(JUMP_EVENTS_MAX)) as u32;
        if code <= 0 || run == 0 {
            self.ahead_run = 0;
            self.ahead_min = None;
        } else {
            self.ahead_run = run;
            self.ahead_min = Some(EventTime::from_micros(
                ((code >> 24) - CODE_OFFSET_S).saturating_mul(1_000_000),
            ));
        }
        self
    }
}

/// What one event was to the watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// It moved the watermark, or could have (on time, or late).
    Counted,
    /// Too far ahead of the stream: it did not move the watermark.
    Ahead,
}

/// Event-time progress of one source stream: the largest event time seen, minus the allowed
/// lateness. A window is sealed once the watermark reaches its end.
///
/// The watermark moves only forward and only by events (or by the end of bounded input), so
/// it is a pure function of the input prefix read so far (E5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    lateness_us: i64,
    guard: SkewGuard,
    state: WatermarkState,
    ended: bool,
}

impl Watermark {
    /// `lateness_us` must be non-negative; it is clamped to 0 otherwise.
    pub fn new(lateness_us: i64) -> Self {
        Watermark {
            lateness_us: lateness_us.max(0),
            guard: SkewGuard::OFF,
            state: WatermarkState::default(),
            ended: false,
        }
    }

    /// With a clock-skew guard.
    pub fn with_guard(mut self, guard: SkewGuard) -> Self {
        self.guard = SkewGuard {
            ahead_us: guard.ahead_us.max(0),
            jump_events: guard.jump_events.clamp(1, JUMP_EVENTS_MAX),
        };
        self
    }

    /// Restores the watermark's input as of a resume position.
    pub fn resumed(mut self, state: WatermarkState) -> Self {
        self.state = state;
        self
    }

    /// Whether `t` would be an ahead event now (without observing it).
    pub fn is_ahead(&self, t: EventTime) -> bool {
        match self.state.max_seen {
            Some(m) => t.as_micros() > m.as_micros().saturating_add(self.guard.ahead_us),
            None => false,
        }
    }

    pub fn observe(&mut self, t: EventTime) -> Observed {
        let before = self.current();
        let run_was_short = self.state.ahead_run < self.guard.jump_events;
        let observed = self.observe_unchecked(t);
        debug_assert!(
            self.current() >= before,
            "E5: the watermark moves only forward"
        );
        debug_assert!(
            !run_was_short || self.state.ahead_run < self.guard.jump_events,
            "E5: an ahead run stays shorter than a jump (at a jump the watermark follows)"
        );
        observed
    }

    fn observe_unchecked(&mut self, t: EventTime) -> Observed {
        if self.is_ahead(t) {
            let s = &mut self.state;
            s.ahead_run += 1;
            let second = EventTime::from_micros(t.as_micros().div_euclid(1_000_000) * 1_000_000);
            s.ahead_min = Some(s.ahead_min.map_or(second, |m| m.min(second)));
            if s.ahead_run < self.guard.jump_events {
                return Observed::Ahead;
            }
            // The stream jumped: follow it from the earliest event of the run.
            s.max_seen = s.ahead_min;
            s.ahead_run = 0;
            s.ahead_min = None;
        } else if t >= self.current() {
            // On time: an ahead run is broken.
            self.state.ahead_run = 0;
            self.state.ahead_min = None;
        }
        if self.state.max_seen.is_none_or(|m| t > m) {
            self.state.max_seen = Some(t);
        }
        Observed::Counted
    }

    /// Bounded input ended: every window seals.
    pub fn end_of_input(&mut self) {
        self.ended = true;
    }

    pub fn max_seen(&self) -> Option<EventTime> {
        self.state.max_seen
    }

    /// The input so far, as a resume restores it.
    pub fn state(&self) -> WatermarkState {
        self.state
    }

    pub fn lateness_us(&self) -> i64 {
        self.lateness_us
    }

    /// The watermark the events alone set (the latest event seen, less the lateness), also
    /// after the end of input; `None` before the first event. What retention is measured
    /// from: unlike [`Watermark::current`], the end of input does not move it.
    pub fn of_events(&self) -> Option<EventTime> {
        self.state
            .max_seen
            .map(|m| EventTime::from_micros(m.as_micros().saturating_sub(self.lateness_us)))
    }

    /// `EventTime::MIN` before the first event, `EventTime::MAX` after the end of input.
    pub fn current(&self) -> EventTime {
        if self.ended {
            return EventTime::MAX;
        }
        match self.state.max_seen {
            Some(m) => EventTime::from_micros(m.as_micros().saturating_sub(self.lateness_us)),
            None => EventTime::MIN,
        }
    }
}
