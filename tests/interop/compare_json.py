"""Compares a sluice table with the input it was written from, field by field, as three
independent readers see it: Python delta-rs (pyarrow), Polars, and polars-deltalake (a
delta-kernel-rs reader).

  compare_json.py TABLE DLQ_TABLE INPUT

INPUT is an NDJSON file or a directory of them (records at (file name, byte offset); a gzip or
zstd file at offsets in its decompressed bytes, decompressed here by Python's gzip and the
zstandard package), or a `.messages.json` file: a list of [source partition, offset, message
text] (a Kafka topic's).

For a table keyed by source position (no --key), every input record must be exactly one of: a
row of the table (found by `_sluice_source` and `_sluice_offset`) or a dead letter (found by
`source_partition` and `source_offset`). Every row must hold the values of its record exactly:
each JSON field a column (or struct member) of the same value, nothing left out, JSON nulls and
absent fields read as null. Numbers compare exactly (as decimals, a double by its shortest
text); a text column holds a number or boolean as its text and an object or array as its JSON
text; a column renamed by sluice (`sluice.sourceName` in its Delta metadata) holds the field
of that name. Prints a summary; exits non-zero on the first kinds of mismatch."""
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

import polars as pl
import polars_deltalake
from deltalake import DeltaTable

SKIP = {"_sluice_source", "_sluice_offset", "dt", "hour", "window_start", "pipeline", "shard"}


def lines_of(input_path: Path) -> dict[tuple[str, int], bytes]:
    """(source, offset) -> record: every non-blank line of every input file, or every message
    of a `.messages.json` list."""
    if input_path.name.endswith(".messages.json"):
        return {(src, off): text.encode() for src, off, text in json.loads(input_path.read_text())}
    out = {}
    files = [input_path] if input_path.is_file() else sorted(
        p for p in input_path.iterdir() if p.is_file() and not p.name.startswith("."))
    for path in files:
        data = decompressed(path.read_bytes())
        at = 0
        for raw in data.split(b"\n"):
            line = raw[3:] if at == 0 and raw.startswith(b"\xef\xbb\xbf") else raw
            if line.strip():
                out[(path.name, at)] = line.rstrip(b"\r")
            at += len(raw) + 1
    return out


def decompressed(data: bytes) -> bytes:
    """A file's bytes, decompressed if they are a gzip or zstd stream (by their magic bytes)."""
    if data.startswith(b"\x1f\x8b"):
        import gzip
        return gzip.decompress(data)
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        import io
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    return data


def parse(text):
    """A JSON text with exact numbers: fractions and exponents as Decimal."""
    return json.loads(text, parse_float=Decimal)


def source_names(dtype):
    """A Delta type with the columns sluice renamed mapped back to their fields' names: a
    nested dict of column name -> (field name, member types) for structs, lists and maps."""
    name = type(dtype).__name__
    if name in ("StructType", "Schema"):
        out = {}
        for f in dtype.fields:
            out[f.name] = ((f.metadata or {}).get("sluice.sourceName", f.name), source_names(f.type))
        return ("struct", out)
    if name == "ArrayType":
        return ("list", source_names(dtype.element_type))
    if name == "MapType":
        return ("map", source_names(dtype.value_type))
    return None


def by_field_names(value, names):
    """A row's value with struct members keyed by their fields' names (see source_names)."""
    if names is None or value is None:
        return value
    kind, inner = names
    if kind == "struct" and isinstance(value, dict):
        return {inner[k][0] if k in inner else k: by_field_names(v, inner[k][1] if k in inner else None)
                for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [by_field_names(v, inner) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: by_field_names(v, inner) for k, v in value.items()}
    return value


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
    if same_text(expected, actual, path, problems):
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
        # Delta column names are case-insensitive: a key may name its column in any case.
        for k, v in expected.items():
            column = spelled(actual, k)
            if column is None and v is not None:
                problems.append(f"{path}.{k}: field not in the table (JSON {v!r})")
                continue
            same(v, actual.get(column), f"{path}.{k}", problems)
        for k, v in actual.items():
            if spelled(expected, k) is None and v is not None:
                problems.append(f"{path}.{k}: table {v!r}, absent from the JSON")
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            same(e, a, f"{path}[{i}]", problems)
        return
    if isinstance(expected, (int, Decimal)) and not isinstance(expected, bool):
        if isinstance(actual, float):
            actual = Decimal(repr(actual))  # a double is the number its shortest text is
        elif isinstance(actual, str):
            try:
                actual = Decimal(actual)  # a text column keeps a number as its text
            except ArithmeticError:
                pass
        if isinstance(actual, bool) or not isinstance(actual, (int, Decimal)) or actual != expected:
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")
        return
    if isinstance(expected, bool) and isinstance(actual, str):
        actual = {"true": True, "false": False}.get(actual, actual)
    if isinstance(expected, bool) != isinstance(actual, bool) or expected != actual:
        problems.append(f"{path}: JSON {expected!r}, table {actual!r}")


def spelled(d: dict, key: str):
    """The key of `d` that names `key`: itself, else one equal to it ignoring case."""
    if key in d:
        return key
    return next((k for k in d if k.lower() == key.lower()), None)


def same_text(expected, actual, path: str, problems: list[str]) -> bool:
    """A nested value in a text column: its JSON text. Whether `actual` was such a text."""
    if isinstance(expected, (dict, list)) and isinstance(actual, str):
        try:
            if parse(actual) != expected:
                problems.append(f"{path}: JSON {expected!r}, table text {actual!r}")
        except ValueError:
            problems.append(f"{path}: JSON {expected!r}, table {actual!r}")
        return True
    return False


def check(reader: str, rows: list[dict], lines: dict, dead: set, problems: list[str],
          names) -> int:
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
        expected = parse(line)
        actual = by_field_names({k: normalize(v) for k, v in row.items() if k not in SKIP}, names)
        mine: list[str] = []
        same(expected, actual, f"{at[0]}:{at[1]}", mine)
        problems.extend(f"{reader}: {p}" for p in mine)
    missing = set(lines) - seen - dead
    for at in sorted(missing)[:10]:
        problems.append(f"{reader}: line {at} is neither a row nor a dead letter")
    return len(seen)


def main(table: str, dlq: str, input_path: str) -> int:
    lines = lines_of(Path(input_path))
    dead_rows = DeltaTable(dlq).to_pyarrow_table(
        columns=["source_partition", "source_offset", "reason"]).to_pylist()
    dead = {(d["source_partition"], d["source_offset"]) for d in dead_rows}
    reasons: dict[str, int] = {}
    for d in dead_rows:
        reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    problems: list[str] = []
    delta = DeltaTable(table)
    names = source_names(delta.schema())
    read = {
        "delta-rs": delta.to_pyarrow_table().to_pylist(),
        "polars": pl.read_delta(table).to_dicts(),
        "polars-deltalake": polars_deltalake.read_delta(table).to_dicts(),
    }
    counts = {r: check(r, rows, lines, dead, problems, names) for r, rows in read.items()}
    print(f"compare_json: {len(lines)} input lines; "
          + ", ".join(f"{r} read {n} rows" for r, n in counts.items())
          + f"; {len(dead)} dead letters {dict(sorted(reasons.items()))}; {len(problems)} problems")
    for p in problems[:40]:
        print(f"  {p}")
    sys.stdout.flush()
    return 1 if problems else 0


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    os._exit(code)  # delta-rs can abort at interpreter exit; see shared notes
