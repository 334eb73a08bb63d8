"""Checks, with Python delta-rs, that a table keyed by KEY holds each event of an NDJSON file
value for value, nested fields included: what a producer sent, as a reader of the table gets it.

  same_events.py TABLE EVENTS.ndjson KEY

Each distinct KEY of the file must be exactly one row, and every field of its event (the last
line of that key: duplicates are the same event delivered again) must equal the row's column:
structs member by member, arrays element by element, maps and objects key by key, numbers by
value (decimals exactly), a JSON null or an absent field as null, and a column or member the
event lacks (one a later schema version added) as null; an object none of whose members holds
a value reads as null (sluice stores no struct for it). Exits non-zero, naming the first
differences."""
import json
import os
import sys
from decimal import Decimal

from deltalake import DeltaTable

SKIP = {"_sluice_source", "_sluice_offset", "dt", "hour", "window_start", "pipeline", "shard"}


def normal(value):
    """A value as both sides can be compared: objects and maps as dicts without null members,
    arrays as lists, numbers as Decimal."""
    if isinstance(value, dict):
        out = {k: normal(v) for k, v in value.items()}
        # An object with no member that holds a value is stored as null: a struct column
        # (its type inferred from objects) has nothing to hold of it (docs/input.md).
        return {k: v for k, v in out.items() if v is not None} or None
    if isinstance(value, list):
        # A map column reads as a list of (key, value) pairs.
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return normal(dict(value))
        return [normal(e) for e in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float, Decimal)):
        return Decimal(str(value))
    return str(value)


def main():
    table, events, key = sys.argv[1], sys.argv[2], sys.argv[3]
    expected = {}
    with open(events, "rb") as f:
        for line in f:
            if line.strip():
                event = json.loads(line, parse_float=Decimal)
                expected[event[key]] = event
    rows = DeltaTable(table).to_pyarrow_table().to_pylist(maps_as_pydicts="strict")
    found, problems = {}, []
    for row in rows:
        if row[key] in found:
            problems.append(f"{key} {row[key]}: two rows")
        found[row[key]] = row
    for k, event in expected.items():
        row = found.get(k)
        if row is None:
            problems.append(f"{key} {k}: no row")
            continue
        columns = {c: v for c, v in row.items() if c not in SKIP}
        for column in sorted(set(columns) | set(event)):
            if normal(event.get(column)) != normal(columns.get(column)):
                problems.append(f"{key} {k}, {column}: sent {event.get(column)!r}, "
                                f"read {columns.get(column)!r}")
    extra = set(found) - set(expected)
    print(f"{len(rows)} rows, {len(expected)} events; {len(extra)} extra, "
          f"{len(problems)} problems")
    for p in problems[:5]:
        print(p)
    sys.stdout.flush()
    os._exit(1 if problems or extra else 0)  # delta-rs can abort at interpreter exit


if __name__ == "__main__":
    main()
