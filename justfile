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

# Property tests of the input path (arbitrary bytes, JSON and text into time parsing,
# inference, decoding and keys), `rounds` times with fresh seeds and `scale` times the cases
# CI runs; stops at the first failure, which prints its seed (SLUICE_TEST_SEED replays it).
fuzz rounds="20" scale="10":
    #!/usr/bin/env bash
    set -euo pipefail
    log="$(mktemp)"
    for i in $(seq {{rounds}}); do
      if ! SLUICE_FUZZ_SCALE={{scale}} cargo test --workspace --all-targets --locked -q -- \
          any_text_in_any_format any_number_in_any_format any_option_text \
          every_message_is_a_row_or_a_dead_letter rows_of_any_messages_dedupe \
          --nocapture >"$log" 2>&1; then
        cat "$log"
        exit 1
      fi
      grep -oE 'fuzz [^:]+: [0-9]+ cases, [^(]*\(seed [0-9]+\)' "$log"
    done

# Crash soak: SIGKILL the real binary at random moments over a generated input, restart each
# time, then compare with one clean run (0 duplicates, 0 losses). CI runs 30 kills over 60k events.
soak events="1000000" kills="200" slices="100":
    ./scripts/soak {{events}} {{kills}} {{slices}}

# Every combination of table mode, writer, source and arrival (6 x 6 x 8 x 5 cells), each
# the real binary SIGKILLed after a commit and run again, its table compared with a model of
# the mode (tests/matrix.rs); prints the table of cells (held, refused, failed). CI runs a
# pairwise cover of the same cells. `cells` narrows it: mode/writer/source/arrival, `*` any.
# Needs the test servers (installed here) and the Python readers `just test` installs.
matrix cells="full" jobs="3":
    scripts/servers install
    SLUICE_MATRIX={{cells}} SLUICE_MATRIX_JOBS={{jobs}} cargo test --workspace --all-targets --locked -- matrix_of_modes --nocapture

# Benchmark (release build): sluice vs the floor and deltalake's write, merge mode, larger
# windows; medians and same-run ratios written to bench/RESULTS.md.
bench events="1000000" runs="3":
    ./scripts/bench {{events}} {{runs}}
