//! How the run uses memory, threads and the store: `--flush-bytes-max`, `--chunk-bytes`,
//! `--decode-threads`, `--compression`, `--checkpoint-interval`, `--store-attempts-max`,
//! `--restarts-max`, `--group-windows-max` and `--attempt`.

use sluice_ingest::defaults;
use sluice_stage::Codec;

use super::run_args::RunArgs;
use super::values::parse_bytes;
use crate::exit::usage;

/// The tuning group, resolved.
#[derive(Debug, Clone)]
pub struct Tuning {
    pub flush_bytes_max: usize,
    pub chunk_bytes: usize,
    pub decode_threads: usize,
    pub codec: Codec,
    pub checkpoint_interval: u64,
    pub store_attempts_max: u32,
    pub restarts_max: u32,
    pub group_windows_max: usize,
    pub attempt: Option<String>,
}

impl RunArgs {
    /// The tuning group's flags.
    pub(crate) fn tuning_group(&self) -> anyhow::Result<Tuning> {
        let flush_bytes_max = parse_bytes(
            self.flush_bytes_max
                .as_deref()
                .unwrap_or(defaults::FLUSH_BYTES_MAX),
        )
        .ok_or_else(|| usage("--flush-bytes-max: expected a size like 256MiB, 64MB or 1048576"))?;
        let chunk_bytes = parse_bytes(self.chunk_bytes.as_deref().unwrap_or(defaults::CHUNK_BYTES))
            .filter(|n| *n >= 4096)
            .ok_or_else(|| usage("--chunk-bytes: expected a size of at least 4KiB, like 4MiB"))?;
        let decode_threads = self.decode_threads.unwrap_or(defaults::DECODE_THREADS);
        if !(1..=64).contains(&decode_threads) {
            return Err(usage("--decode-threads: from 1 to 64"));
        }
        let codec = Codec::parse_name(self.compression.as_deref().unwrap_or(defaults::COMPRESSION))
            .ok_or_else(|| usage("--compression: use snappy or zstd"))?;
        let at_least_1 = |flag: &str, n: u64| -> anyhow::Result<()> {
            match n {
                0 => Err(usage(format!("{flag}: must be at least 1"))),
                _ => Ok(()),
            }
        };
        let checkpoint_interval = self
            .checkpoint_interval
            .unwrap_or(defaults::CHECKPOINT_INTERVAL);
        at_least_1("--checkpoint-interval", checkpoint_interval)?;
        let store_attempts_max = self
            .store_attempts_max
            .unwrap_or(defaults::STORE_ATTEMPTS_MAX);
        at_least_1("--store-attempts-max", store_attempts_max.into())?;
        let group_windows_max = self
            .group_windows_max
            .unwrap_or(defaults::GROUP_WINDOWS_MAX);
        at_least_1("--group-windows-max", group_windows_max as u64)?;
        Ok(Tuning {
            flush_bytes_max,
            chunk_bytes,
            decode_threads,
            codec,
            checkpoint_interval,
            store_attempts_max,
            restarts_max: self.restarts_max.unwrap_or(defaults::RESTARTS_MAX),
            group_windows_max,
            attempt: self.attempt()?,
        })
    }

    /// `--attempt`: letters, digits and `_` (it is part of staged file names).
    fn attempt(&self) -> anyhow::Result<Option<String>> {
        let Some(attempt) = &self.attempt else {
            return Ok(None);
        };
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if attempt.is_empty() || !attempt.chars().all(word) {
            return Err(usage("--attempt: use letters, digits and _ only"));
        }
        Ok(Some(attempt.clone()))
    }
}
