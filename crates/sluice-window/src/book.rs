//! The window book: which windows are published (and the position their publication covers)
//! and which are open (and the first position each holds). It decides whether an event is a
//! replay, goes to an open window, or is late, and which windows the watermark sealed.

use std::collections::BTreeMap;

use crate::time::EventTime;
use crate::window::Window;

/// Where one event goes, decided by [`WindowBook::route`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Buffer it in its open window.
    Buffer,
    /// A replay of an event that a publication of its window already handled: skip it.
    Replayed,
    /// Its window was sealed before it arrived: the late policy decides.
    Late,
}

/// The window lifecycle of one source stream, `Open -> Sealed -> Published`, over positions of
/// type `P` (ordered as the stream is read).
///
/// It answers the three questions recovery depends on:
/// - is this event a replay of one already published? (`route`)
/// - which windows are sealed? (`sealed`)
/// - from which position may the stream resume without skipping an unpublished event?
///   (`resume_position`)
///
/// A published window remembers its *coverage*: the stream position below which every event
/// of that window was handled by the publication. Coverage is persisted in the table with the
/// window's files, so a restarted run rebuilds this book from the table alone (E4).
#[derive(Debug, Clone)]
pub struct WindowBook<P> {
    /// Windows holding unpublished events, with the lowest position they hold.
    open: BTreeMap<Window, P>,
    /// Published windows and their coverage.
    published: BTreeMap<Window, P>,
}

impl<P> Default for WindowBook<P> {
    fn default() -> Self {
        WindowBook {
            open: BTreeMap::new(),
            published: BTreeMap::new(),
        }
    }
}

impl<P: Ord + Clone> WindowBook<P> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds the book from windows read back from the table.
    pub fn from_published(published: impl IntoIterator<Item = (Window, P)>) -> Self {
        let mut book = Self::new();
        for (window, coverage) in published {
            book.record_coverage(window, coverage);
        }
        book
    }

    pub fn route(&self, window: Window, position: &P, watermark: EventTime) -> Route {
        if let Some(coverage) = self.published.get(&window) {
            if position < coverage {
                return Route::Replayed;
            }
        }
        if watermark >= window.end() {
            Route::Late
        } else {
            Route::Buffer
        }
    }

    /// Records that `window` now holds an unpublished event at `position`.
    pub fn hold(&mut self, window: Window, position: &P) {
        match self.open.get_mut(&window) {
            Some(lowest) if position < lowest => *lowest = position.clone(),
            Some(_) => {}
            None => {
                self.open.insert(window, position.clone());
            }
        }
    }

    /// Open windows whose end the watermark has reached, oldest first.
    pub fn sealed(&self, watermark: EventTime) -> Vec<Window> {
        let sealed: Vec<Window> = self
            .open
            .keys()
            .copied()
            .take_while(|w| w.end() <= watermark)
            .collect();
        debug_assert!(
            self.open
                .keys()
                .skip(sealed.len())
                .all(|w| w.end() > watermark),
            "E2: every window the watermark has passed seals (none is left open behind it)"
        );
        sealed
    }

    pub fn is_open(&self, window: Window) -> bool {
        self.open.contains_key(&window)
    }

    pub fn is_published(&self, window: Window) -> bool {
        self.published.contains_key(&window)
    }

    pub fn coverage(&self, window: Window) -> Option<&P> {
        self.published.get(&window)
    }

    pub fn open_windows(&self) -> impl Iterator<Item = (Window, &P)> {
        self.open.iter().map(|(w, p)| (*w, p))
    }

    pub fn published_windows(&self) -> impl Iterator<Item = (Window, &P)> {
        self.published.iter().map(|(w, p)| (*w, p))
    }

    /// `window` was published with every event below `coverage` handled.
    pub fn mark_published(&mut self, window: Window, coverage: P) {
        self.open.remove(&window);
        self.record_coverage(window, coverage);
    }

    /// Forgets the unpublished events of `window` (they will be replayed from the source).
    pub fn discard(&mut self, window: Window) {
        self.open.remove(&window);
    }

    fn record_coverage(&mut self, window: Window, coverage: P) {
        match self.published.get_mut(&window) {
            Some(c) if coverage > *c => *c = coverage,
            Some(_) => {}
            None => {
                self.published.insert(window, coverage);
            }
        }
    }

    /// The position the stream may resume from: the lowest position held by an unpublished
    /// window, or `read_position` (the next unread position) when none is held.
    pub fn resume_position(&self, read_position: &P) -> P {
        let resume = self
            .open
            .values()
            .fold(
                read_position,
                |lowest, p| if p < lowest { p } else { lowest },
            )
            .clone();
        debug_assert!(
            self.open.values().all(|held| *held >= resume),
            "E1: a resume position reads again every event an open window holds"
        );
        resume
    }
}
