//! How the binary ends: the exit statuses of its own (a usage error, every record rejected
//! or a failed expectation, a broken promise, an interruption), each with a one-line message; any other error is
//! exit status 1, printed with its chain by `main`.

/// A failure with an exit status of its own, printed as one line: an invalid option or
/// config value (2), a run whose every record was rejected or that a record stopped under
/// `--expect-or-fail` (3), a table that `verify` finds
/// breaking a promise (4), an interrupted run (130).
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub message: String,
}

impl Exit {
    pub const USAGE: u8 = 2;
    pub const ALL_REJECTED: u8 = 3;
    /// A record broke an expectation under `fail` (`--expect-or-fail`): the run stopped
    /// before publishing its window.
    pub const EXPECTATION_FAILED: u8 = 3;
    /// `sluice verify` found a broken promise.
    pub const FINDINGS: u8 = 4;
    pub const INTERRUPTED: u8 = 130;

    pub fn error(status: u8, message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Exit {
            status,
            message: message.into(),
        })
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// `e` with the exit status of its own where it has one: a record that broke an
/// `--expect-or-fail` rule (3), an expectation the records cannot be checked with (2).
pub fn of_failure(e: anyhow::Error) -> anyhow::Error {
    use sluice_ingest::IngestError;
    let found = e
        .chain()
        .find_map(|c| match c.downcast_ref::<IngestError>() {
            Some(IngestError::ExpectationFailed(b)) => {
                Some((Exit::EXPECTATION_FAILED, b.to_string()))
            }
            Some(IngestError::ExpectationRefused(r)) => {
                Some((Exit::USAGE, format!("{r}; nothing was written")))
            }
            _ => None,
        });
    match found {
        Some((status, message)) => Exit::error(status, message),
        None => e,
    }
}

/// Shorthand for a usage error (exit status 2).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Exit::error(Exit::USAGE, message)
}
