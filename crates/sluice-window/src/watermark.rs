use crate::time::EventTime;

/// Event-time progress of one source stream: the largest event time seen, minus the allowed
/// lateness. A window is sealed once the watermark reaches its end.
///
/// The watermark moves only forward and only by events (or by the end of bounded input), so
/// it is a pure function of the input prefix read so far (E5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    lateness_us: i64,
    max_seen: Option<EventTime>,
    ended: bool,
}

impl Watermark {
    /// `lateness_us` must be non-negative; it is clamped to 0 otherwise.
    pub fn new(lateness_us: i64) -> Self {
        Watermark {
            lateness_us: lateness_us.max(0),
            max_seen: None,
            ended: false,
        }
    }

    /// Restores a watermark from the largest event time seen before a resume position.
    pub fn resumed(lateness_us: i64, max_seen: Option<EventTime>) -> Self {
        Watermark {
            max_seen,
            ..Watermark::new(lateness_us)
        }
    }

    pub fn observe(&mut self, t: EventTime) {
        if self.max_seen.is_none_or(|m| t > m) {
            self.max_seen = Some(t);
        }
    }

    /// Bounded input ended: every window seals.
    pub fn end_of_input(&mut self) {
        self.ended = true;
    }

    pub fn max_seen(&self) -> Option<EventTime> {
        self.max_seen
    }

    pub fn lateness_us(&self) -> i64 {
        self.lateness_us
    }

    /// `EventTime::MIN` before the first event, `EventTime::MAX` after the end of input.
    pub fn current(&self) -> EventTime {
        if self.ended {
            return EventTime::MAX;
        }
        match self.max_seen {
            Some(m) => EventTime::from_micros(m.as_micros().saturating_sub(self.lateness_us)),
            None => EventTime::MIN,
        }
    }
}
