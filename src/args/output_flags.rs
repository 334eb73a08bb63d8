//! What a run reports and where: `--format`, `--max-reject-ratio`, `--metrics-addr`,
//! `--notify-drain`, and `--dry-run` (which writes nothing).

use std::net::SocketAddr;

use sluice_ingest::defaults;

use super::run_args::RunArgs;
use super::values::{duration_or_default, parse_ratio};
use crate::exit::usage;

/// The output group, resolved.
#[derive(Debug, Clone)]
pub struct Output {
    /// See `--max-reject-ratio`: a share from 0 to 1.
    pub max_reject_ratio: f64,
    /// The summary as one JSON object instead of a line of text.
    pub json: bool,
    pub metrics_addr: Option<SocketAddr>,
    pub notify_drain_ms: u64,
}

impl RunArgs {
    /// The output group's flags.
    pub(crate) fn output_group(&self) -> anyhow::Result<Output> {
        let notify_drain_ms =
            duration_or_default("--notify-drain", &self.notify_drain, defaults::NOTIFY_DRAIN)?;
        let max_reject_ratio = parse_ratio(
            self.max_reject_ratio
                .as_deref()
                .unwrap_or(defaults::MAX_REJECT_RATIO),
        )
        .ok_or_else(|| usage("--max-reject-ratio: expected a share like 10% or 0.1"))?;
        let json = match self.format.as_deref().unwrap_or("text") {
            "text" => false,
            "json" => true,
            _ => return Err(usage("--format: use text or json")),
        };
        let metrics_addr = match self.metrics_addr.as_deref() {
            None => None,
            Some(addr) => Some(addr.parse().map_err(|_| {
                usage(format!(
                    "--metrics-addr {addr:?}: expected HOST:PORT with an IP address, e.g. 127.0.0.1:9464 or 0.0.0.0:9464"
                ))
            })?),
        };
        Ok(Output {
            max_reject_ratio,
            json,
            metrics_addr,
            notify_drain_ms: notify_drain_ms.max(0) as u64,
        })
    }

    /// `--dry-run` reads files as they are now: not a Kafka topic, not followed.
    pub(crate) fn check_dry_run(&self, kafka: bool, follow: bool) -> anyhow::Result<()> {
        if self.dry_run && kafka {
            return Err(usage(
                "--dry-run: reads files, not a Kafka topic (a run commits its group's offsets to the broker); to try a topic, backfill a scratch table",
            ));
        }
        if self.dry_run && follow {
            return Err(usage(
                "--dry-run: reads the input as it is now; leave out --follow",
            ));
        }
        Ok(())
    }
}
