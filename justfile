# sluice recipes.
# Cargo's own target directory (./target) unless CARGO_TARGET_DIR names another (CI shares one
# outside the clone).
export CARGO_TARGET_DIR := env_var_or_default("CARGO_TARGET_DIR", justfile_directory() + "/target")

# The whole test suite (what CI runs).
test:
    ./scripts/test

# Generate a stream, ingest it with a SIGKILL mid-run, restart, show windows and SQL.
demo:
    cargo run -- demo

# Formatting and lints, as every commit needs them.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy -p sluice -p sluice-ingest -p sluice-source --no-default-features --features gcs,azure --all-targets -- -D warnings

# Crash soak: SIGKILL the real binary at random moments over a generated input, restart each
# time, then compare with one clean run (0 duplicates, 0 losses). CI runs 30 kills over 60k events.
soak events="1000000" kills="200" slices="100":
    ./scripts/soak {{events}} {{kills}} {{slices}}

# Benchmark (release build): sluice vs the floor and deltalake's write, merge mode, larger
# windows; medians and same-run ratios written to bench/RESULTS.md.
bench events="1000000" runs="3":
    ./scripts/bench {{events}} {{runs}}
