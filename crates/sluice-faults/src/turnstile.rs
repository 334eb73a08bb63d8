//! A turnstile for Delta commit attempts: several writers' commits pass one at a time in an
//! order the test chooses, so interleavings of writers are reproducible.

use std::sync::Mutex;

use tokio::sync::Notify;

/// Orders the Delta commit attempts of several writers: writer `i` may attempt a commit only
/// on its turn; after an attempt the turn passes to the next writer that has not finished.
/// A writer that attempts no commit before its next one keeps its turn (it may have been
/// rejected before writing, e.g. because the table moved).
#[derive(Debug)]
pub struct Turnstile {
    state: Mutex<TurnState>,
    notify: Notify,
}

#[derive(Debug)]
struct TurnState {
    next: usize,
    finished: Vec<bool>,
    /// `(writer, landed)` per commit attempt, in order.
    attempts: Vec<(usize, bool)>,
}

impl Turnstile {
    pub fn new(writers: usize) -> std::sync::Arc<Self> {
        assert!(writers > 0, "a turnstile needs at least one writer");
        std::sync::Arc::new(Turnstile {
            state: Mutex::new(TurnState {
                next: 0,
                finished: vec![false; writers],
                attempts: Vec::new(),
            }),
            notify: Notify::new(),
        })
    }

    pub(crate) async fn enter(&self, writer: usize) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let s = self.state.lock().expect("turnstile lock");
                if s.next == writer || s.finished[s.next] {
                    return;
                }
            }
            notified.await;
        }
    }

    pub(crate) fn leave(&self, writer: usize, landed: bool) {
        let mut s = self.state.lock().expect("turnstile lock");
        s.attempts.push((writer, landed));
        s.next = Self::after(&s, writer);
        drop(s);
        self.notify.notify_waiters();
    }

    /// Writer `writer` will attempt no more commits.
    pub fn finish(&self, writer: usize) {
        let mut s = self.state.lock().expect("turnstile lock");
        s.finished[writer] = true;
        if s.next == writer {
            s.next = Self::after(&s, writer);
        }
        drop(s);
        self.notify.notify_waiters();
    }

    /// `(writer, landed)` for every commit attempt so far, in order.
    pub fn attempts(&self) -> Vec<(usize, bool)> {
        self.state.lock().expect("turnstile lock").attempts.clone()
    }

    fn after(s: &TurnState, writer: usize) -> usize {
        let n = s.finished.len();
        (1..=n)
            .map(|k| (writer + k) % n)
            .find(|w| !s.finished[*w])
            .unwrap_or(writer)
    }
}
