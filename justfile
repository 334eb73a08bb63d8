# sluice recipes. One cargo target directory outside the clone serves every build.
export CARGO_TARGET_DIR := env_var_or_default("CARGO_TARGET_DIR", env_var("HOME") + "/.cache/sluice/target")

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

# Ingest throughput on a generated input (release build).
bench events="1000000":
    ./scripts/bench {{events}}
