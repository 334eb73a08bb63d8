"""Compares a sluice table with the NDJSON input it was written from, field by field, as two
independent readers see it: Python delta-rs (pyarrow) and Polars.

  compare_json.py TABLE DLQ_TABLE INPUT_DIR

For a table keyed by source position (no --key), every input line must be exactly one of: a
row of the table (found by `_sluice_source` and `_sluice_offset`) or a dead letter (found by
`source_partition` and `source_offset`). Every row must hold the values of its line: each JSON
field a column (or struct member) of the same value, nothing left out, JSON nulls and absent
fields read as null. Prints a summary; exits non-zero on the first kinds of mismatch."""
import json
import math
import os
import sys
from pathlib import Path

import polars as pl
from deltalake import DeltaTable

SKIP = {"_sluice_source", "_sluice_offset", "dt", "hour", "window_start", "pipeline", "shard"}


def lines_of(input_dir: Path) -> dict[tuple[str, int], bytes]:
    """(file name, byte offset) -> line, for every non-blank line of every input file."""
    out = {}
    files = [input_dir] if input_dir.is_file() else sorted(
        p for p in input_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    for path in files:
        data = path.read_bytes()
        at = 0
        for raw in data.split(b"\n"):
            line = raw[3:] if at == 0 and raw.startswith(b"\xef\xbb\xbf") else raw
            if line.strip():
                out[(path.name, at)] = line.rstrip(b"\r")
            at += len(raw) + 1
    return out


def normalize(value, column_type=None):
    """A value as plain Python: maps (pyarrow lists of pairs, Polars lists of key/value structs)
    become dicts."""
    if isinstance(value, list) and value and all(
            isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: normalize(v) for k, v in value}
    if isinstance(value, list) and value and all(
            isinstance(v, dict) and set(v) == {"key", "value"} for v in value):
        return {v["key"]: normalize(v["value"]) for v in value}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    return value


def same(expected, actual, path: str, problems: list[str], is_map: bool = False) -> None:
    """Whether the JSON value equals the table's; structs compare member by member (an absent
    member is null), maps key by key."""
    if len(problems) > 20:
        return
    if expected is None:
        if actual not in (None, {}) and not (isinstance(actual, dict) and all(
                v is None for v in actual.values())):
            problems.append(f"{path}: JSON null, table {actual!r}")
        return
    if isinstance(expected, dict):
        if actual == []:
            actual = {}  # an empty map
        if actual is None:
            # {} in JSON is a struct or map with nothing in it; a struct seen only as {} has
            # no column to hold it (and so reads as null).
            if expected and any(v is not None for v in expected.values()):
                problems.append(f"{path}: JSON {expected!r}, table null")
            return
        if not isinstance(actual, dict):
            problems.append(f"{path}: JSON object, table {actual!r}")
            return
        for k, v in expected.items():
            if k not in actual and v is not None:
                problems.append(f"{path}.{k}: field not in the table (JSON {v!r})")
                continue
            same(v, actual.get(k), f"{path}.{k}", problems)
        for k, v in actual.items():
            if k not in expected and v is not None:
                problems.append(f"{path}.{k}: table {v!r}, absent from the JSON")
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            same(e, a, f"{path}[{i}]", problems)
        return
    if isinstance(expected, float) or isinstance(actual, float):
        if actual is None or not math.isclose(float(expected), float(actual), rel_tol=0,
                                              abs_tol=0):
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")
        return
    if isinstance(expected, bool) != isinstance(actual, bool) or expected != actual:
        # A JSON number in a text column reads as its text.
        if not (isinstance(actual, str) and isinstance(expected, (int, float))
                and actual == json.dumps(expected)):
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")


def check(reader: str, rows: list[dict], lines: dict, dead: set, problems: list[str]) -> int:
    seen = set()
    for row in rows:
        at = (row["_sluice_source"], row["_sluice_offset"])
        if at in seen:
            problems.append(f"{reader}: line {at} is two rows")
        seen.add(at)
        if at in dead:
            problems.append(f"{reader}: line {at} is a row and a dead letter")
        line = lines.get(at)
        if line is None:
            problems.append(f"{reader}: row at {at} has no input line")
            continue
        expected = json.loads(line)
        actual = {k: normalize(v) for k, v in row.items() if k not in SKIP}
        mine: list[str] = []
        same(expected, actual, f"{at[0]}:{at[1]}", mine)
        problems.extend(f"{reader}: {p}" for p in mine)
    missing = set(lines) - seen - dead
    for at in sorted(missing)[:10]:
        problems.append(f"{reader}: line {at} is neither a row nor a dead letter")
    return len(seen)


def main(table: str, dlq: str, input_dir: str) -> int:
    lines = lines_of(Path(input_dir))
    dead_rows = DeltaTable(dlq).to_pyarrow_table(
        columns=["source_partition", "source_offset", "reason"]).to_pylist()
    dead = {(d["source_partition"], d["source_offset"]) for d in dead_rows}
    reasons: dict[str, int] = {}
    for d in dead_rows:
        reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    problems: list[str] = []
    by_delta_rs = check("delta-rs", DeltaTable(table).to_pyarrow_table().to_pylist(), lines,
                        dead, problems)
    by_polars = check("polars", pl.read_delta(table).to_dicts(), lines, dead, problems)
    print(f"compare_json: {len(lines)} input lines; delta-rs read {by_delta_rs} rows, polars "
          f"{by_polars}; {len(dead)} dead letters {dict(sorted(reasons.items()))}; "
          f"{len(problems)} problems")
    for p in problems[:40]:
        print(f"  {p}")
    sys.stdout.flush()
    return 1 if problems else 0


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    os._exit(code)  # delta-rs can abort at interpreter exit; see shared notes
