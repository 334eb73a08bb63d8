//! How the binary ends: the exit statuses of its own (a usage error, every record rejected,
//! a broken promise, an interruption), each with a one-line message; any other error is
//! exit status 1, printed with its chain by `main`.

/// A failure with an exit status of its own, printed as one line: an invalid option or
/// config value (2), a run whose every record was rejected (3), a table that `verify` finds
/// breaking a promise (4), an interrupted run (130).
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub message: String,
}

impl Exit {
    pub const USAGE: u8 = 2;
    pub const ALL_REJECTED: u8 = 3;
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

/// Shorthand for a usage error (exit status 2).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Exit::error(Exit::USAGE, message)
}
