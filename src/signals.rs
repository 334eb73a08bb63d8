//! Stopping a run by signal. SIGTERM (a service manager's stop) ends a followed run
//! gracefully with status 0 after its current chunk; SIGINT (Ctrl-C) ends any run with status
//! 130. Either way the run says what the table holds and where the next run resumes: windows
//! still open are not published, and their events are re-read from the positions the table
//! records (exactly as after a crash).

use std::sync::{Arc, OnceLock};

use crate::args::RunSettings;

/// Which signal stopped the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

/// Printed on stderr when SIGTERM ends a followed run.
pub const STOPPED_NOTE: &str = "sluice run: stopped by SIGTERM after the current chunk; windows still open are not published, and the next run re-reads their events from the positions the table records";

/// A stop flag raised by SIGINT or SIGTERM, and which one raised it.
pub struct Stop {
    /// Raised on the first signal (a followed run then ends after its current chunk).
    pub rx: tokio::sync::watch::Receiver<bool>,
    by: Arc<OnceLock<Signal>>,
}

impl Stop {
    /// Listens for SIGINT and SIGTERM from now on.
    pub fn on_signal() -> Stop {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let by = Arc::new(OnceLock::new());
        let set = by.clone();
        tokio::spawn(async move {
            let signal = wait_for_signal().await;
            let _ = set.set(signal);
            tracing::info!(?signal, "stop requested: finishing the current chunk");
            let _ = tx.send(true);
            // Keep the sender alive so the run does not mistake its drop for a stop.
            std::future::pending::<()>().await;
        });
        Stop { rx, by }
    }

    pub fn signal(&self) -> Option<Signal> {
        self.by.get().copied()
    }

    /// The error of a run stopped by a signal (exit 130): the table's version, and where the
    /// next run resumes.
    pub async fn interrupted(&self, settings: &RunSettings, how: &str) -> anyhow::Error {
        let version = sluice_publish::open_table(&settings.table, &settings.storage_options, None)
            .await
            .ok()
            .and_then(|t| t.version());
        crate::exit::Exit::error(crate::exit::Exit::INTERRUPTED, format!(
            "interrupted: {how}. The table {} holds every window published before the signal (version {}); windows still open are not published, and the next run re-reads their events from the positions the table records",
            settings.table,
            version.map_or("-".into(), |v| v.to_string())
        ))
    }
}

async fn wait_for_signal() -> Signal {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => Signal::Interrupt,
                _ = term.recv() => Signal::Terminate,
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    Signal::Interrupt
}
