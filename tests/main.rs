//! End-to-end tests of the real `sluice` binary, as one test binary (one link of the
//! deltalake and DataFusion dependency graph instead of one per file). Each module is one
//! subject; `common` and `servers` are their shared helpers (the binary under test, generated
//! streams, the Kafka-protocol and S3 test servers).

mod cdc;
mod cdc_formats;
mod change_feed;
mod common;
mod config_file;
mod dead_letters;
mod derive;
mod docs;
mod dry_run;
mod e2e;
mod expectations;
mod file_sources;
mod first_hour;
mod hostile;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "kafka")]
mod kafka_backfill;
#[cfg(feature = "kafka")]
mod kafka_end;
#[cfg(feature = "kafka")]
mod kafka_formats;
mod late;
mod local_days;
mod maintenance;
#[cfg(feature = "kafka")]
mod matrix;
mod meeting;
mod merge;
mod metrics;
mod notify;
mod postgres;
mod second_hour;
mod servers;
mod shapes;
mod status;
mod status_page;
mod stores;
mod verify;
