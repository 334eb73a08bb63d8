//! `--metrics-addr`: serves the run's metrics (see `docs/metrics.md`) in Prometheus's text
//! format over HTTP, for as long as the process runs.

use std::net::SocketAddr;

use anyhow::Context;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Histogram buckets of every `*_seconds` metric: from a local commit (milliseconds) to a
/// window sealed by an idle timeout or a slow store (minutes).
const SECONDS_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Installs the Prometheus recorder and its HTTP listener at `addr` (any path answers with
/// the metrics; `/metrics` by convention). Fails at once if `addr` cannot be bound.
pub fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .context("setting the histogram buckets")?
        .install()
        .with_context(|| format!("--metrics-addr {addr}: cannot serve metrics there"))?;
    sluice_ingest::describe_metrics();
    metrics::gauge!("sluice_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    tracing::info!(%addr, "serving Prometheus metrics at http://{addr}/metrics");
    Ok(())
}
