//! One seeded property-test run per test: the seed printed, a failure replayable.

use std::fmt::Debug;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

/// Runs `test` over `cases` values of `strategy` (times `SLUICE_FUZZ_SCALE`, for long runs:
/// `just fuzz`), seeded from `SLUICE_TEST_SEED` or afresh; prints the cases tried and the
/// seed, and on a failure (a panic included) the smallest input found and how to replay it.
pub fn fuzz<S>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let seed = std::env::var("SLUICE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(fresh_seed);
    let scale = std::env::var("SLUICE_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1);
    let cases = cases.saturating_mul(scale.max(1));
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    match runner.run(&strategy, test) {
        Ok(()) => eprintln!("fuzz {name}: {cases} cases, no failure (seed {seed})"),
        Err(e) => panic!("fuzz {name}: {e}\nseed {seed} (rerun with SLUICE_TEST_SEED={seed})"),
    }
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}
