//! The input path against arbitrary input (invariant E8: no record stops a pipeline):
//! property tests over arbitrary bytes, arbitrary JSON values and arbitrary strings into the
//! time parser (every kind of `--time-format`, offsets, IANA zones), schema inference, the
//! decoder (inferred and declared schemas, nested, every schema evolution policy, chunks cut
//! anywhere), key extraction (dedupe) and file formats (CSV, gzip, zstd). A panic or a
//! record-caused error fails a test and prints the seed that replays it
//! (`SLUICE_TEST_SEED=<seed>`); each test prints how many cases it tried.

mod decode;
mod files;
mod inputs;
mod keys;
mod runner;
mod sequence;
mod time;
