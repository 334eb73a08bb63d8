//! The one restart rule of every mode (a run, a followed run, a Kafka partition's writer, a
//! backfill, derived tables kept up): after a failure that re-reading the tables may get
//! past (a lost commit race, a store failure that outlasted its per-operation retries), the
//! work resumes from the re-read tables, after a pause that doubles with each failure in a
//! row; progress (a commit, a step that succeeds) starts the count again; past
//! [`RestartPolicy::restarts_max`] failures in a row the mode ends with
//! [`RestartsExhausted`], which names the limit and the last failure.

use std::time::Duration;

/// The pause before the first restart of a row of failures.
pub const RESTART_PAUSE_MS_FIRST: u64 = 100;
/// The longest pause between two restarts.
pub const RESTART_PAUSE_MS_MAX: u64 = 5_000;

/// How a mode restarts: the same rule everywhere, with the limit the run was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Failures in a row that are resumed; the next one ends the mode (`--restarts-max`).
    pub restarts_max: u32,
    pub pause_ms_first: u64,
    pub pause_ms_max: u64,
}

impl RestartPolicy {
    /// The policy of a run given `--restarts-max restarts_max`.
    pub fn new(restarts_max: u32) -> Self {
        RestartPolicy {
            restarts_max,
            pause_ms_first: RESTART_PAUSE_MS_FIRST,
            pause_ms_max: RESTART_PAUSE_MS_MAX,
        }
    }

    /// The same rule without pauses, for tests that fail on purpose hundreds of times.
    pub fn immediate(restarts_max: u32) -> Self {
        RestartPolicy {
            restarts_max,
            pause_ms_first: 0,
            pause_ms_max: 0,
        }
    }
}

/// An error a restart may get past, or not.
pub trait Resumable {
    fn is_resumable(&self) -> bool;
}

/// The failures in a row of one piece of work under a [`RestartPolicy`].
#[derive(Debug, Clone)]
pub struct Restarts {
    policy: RestartPolicy,
    in_a_row: u32,
    total: u64,
}

/// The mode gave up: `restarts` failures in a row were resumed and one more came.
#[derive(Debug, thiserror::Error)]
#[error("{last}; gave up after {restarts} restarts in a row from the re-read tables (--restarts-max {restarts})")]
pub struct RestartsExhausted<E: std::error::Error> {
    pub restarts: u32,
    pub last: E,
}

/// Why a mode ended: a failure no restart gets past, or a resumable one past the limit.
#[derive(Debug, thiserror::Error)]
pub enum RestartEnd<E: std::error::Error> {
    #[error(transparent)]
    Fatal(E),
    #[error(transparent)]
    Exhausted(RestartsExhausted<E>),
}

/// After a failure: resume (after the pause), or end with this error.
#[derive(Debug)]
pub enum AfterFailure<E: std::error::Error> {
    /// Re-read the tables and resume, after `pause`; the `attempt`-th restart in a row.
    Resume {
        attempt: u32,
        pause: Duration,
        error: E,
    },
    /// Not resumable: end with the error itself.
    Fatal(E),
    /// Resumable, but past the limit.
    Exhausted(RestartsExhausted<E>),
}

impl Restarts {
    pub fn new(policy: RestartPolicy) -> Self {
        Restarts {
            policy,
            in_a_row: 0,
            total: 0,
        }
    }

    pub fn policy(&self) -> RestartPolicy {
        self.policy
    }

    /// Progress was made (a commit, a step that succeeded): the count starts again.
    pub fn progressed(&mut self) {
        self.in_a_row = 0;
    }

    /// Restarts made so far, in every row.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// What to do after `error`.
    pub fn after_failure<E: std::error::Error + Resumable>(&mut self, error: E) -> AfterFailure<E> {
        if !error.is_resumable() {
            return AfterFailure::Fatal(error);
        }
        if self.in_a_row >= self.policy.restarts_max {
            return AfterFailure::Exhausted(RestartsExhausted {
                restarts: self.in_a_row,
                last: error,
            });
        }
        self.in_a_row += 1;
        self.total += 1;
        AfterFailure::Resume {
            attempt: self.in_a_row,
            pause: self.pause(self.in_a_row),
            error,
        }
    }

    /// After `error`: the pause to wait before re-reading the tables and resuming (the
    /// restart logged with `what`), or why the mode ends.
    pub fn resume_after<E: std::error::Error + Resumable>(
        &mut self,
        error: E,
        what: &str,
    ) -> Result<Duration, RestartEnd<E>> {
        match self.after_failure(error) {
            AfterFailure::Resume {
                attempt,
                pause,
                error,
            } => {
                tracing::warn!(error = %error, attempt, pause_ms = pause.as_millis() as u64, "{what}");
                Ok(pause)
            }
            AfterFailure::Fatal(e) => Err(RestartEnd::Fatal(e)),
            AfterFailure::Exhausted(e) => Err(RestartEnd::Exhausted(e)),
        }
    }

    /// The pause before the `attempt`-th restart in a row: the first pause, doubled for each
    /// restart before it, at most the longest.
    fn pause(&self, attempt: u32) -> Duration {
        let doubled = self
            .policy
            .pause_ms_first
            .saturating_mul(1u64 << (attempt.saturating_sub(1)).min(20));
        Duration::from_millis(doubled.min(self.policy.pause_ms_max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Failure(&'static str, bool);

    impl Resumable for Failure {
        fn is_resumable(&self) -> bool {
            self.1
        }
    }

    fn resumed(after: AfterFailure<Failure>) -> (u32, u64) {
        match after {
            AfterFailure::Resume { attempt, pause, .. } => (attempt, pause.as_millis() as u64),
            other => panic!("not resumed: {other:?}"),
        }
    }

    #[test]
    fn failures_in_a_row_resume_with_doubling_pauses_up_to_the_limit() {
        let mut restarts = Restarts::new(RestartPolicy {
            restarts_max: 3,
            pause_ms_first: 50,
            pause_ms_max: 150,
        });
        let lost_race = || Failure("lost a race", true);
        assert_eq!(resumed(restarts.after_failure(lost_race())), (1, 50));
        assert_eq!(resumed(restarts.after_failure(lost_race())), (2, 100));
        assert_eq!(resumed(restarts.after_failure(lost_race())), (3, 150));
        match restarts.after_failure(lost_race()) {
            AfterFailure::Exhausted(e) => assert_eq!(
                e.to_string(),
                "lost a race; gave up after 3 restarts in a row from the re-read tables (--restarts-max 3)"
            ),
            other => panic!("{other:?}"),
        }
        // Progress starts the count again; the total keeps every restart.
        restarts.progressed();
        assert_eq!(resumed(restarts.after_failure(lost_race())), (1, 50));
        assert_eq!(restarts.total(), 4);
    }

    #[test]
    fn a_failure_a_restart_cannot_get_past_ends_at_once() {
        let mut restarts = Restarts::new(RestartPolicy::new(5));
        match restarts.after_failure(Failure("bad option", false)) {
            AfterFailure::Fatal(e) => assert_eq!(e.0, "bad option"),
            other => panic!("{other:?}"),
        }
        assert_eq!(restarts.total(), 0);
    }

    #[test]
    fn no_restarts_allowed_gives_up_on_the_first_failure() {
        let mut restarts = Restarts::new(RestartPolicy::new(0));
        assert!(matches!(
            restarts.after_failure(Failure("store down", true)),
            AfterFailure::Exhausted(RestartsExhausted { restarts: 0, .. })
        ));
    }
}
