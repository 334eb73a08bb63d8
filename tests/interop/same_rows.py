"""Checks, with Python delta-rs, that a table written from CSV exports holds exactly the rows
of the JSON lines the exports were made of, value for value.

  same_rows.py TABLE JSON_DIR

Every JSON line of JSON_DIR that parses is one record; its fields event_id, ts, user_id,
country, kind and amount must be one row of TABLE (as a multiset: no row missing, none extra).
A time compares as the instant it names, a number as its value, an absent field or JSON null
as null. Exits non-zero, naming the first differences, when they differ."""
import json
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from deltalake import DeltaTable

FIELDS = ["event_id", "ts", "user_id", "country", "kind", "amount"]


def instant(value):
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def normal(record):
    out = []
    for f in FIELDS:
        v = record.get(f)
        if f == "ts":
            v = instant(v)
        elif f == "amount" and v is not None:
            v = float(v)
        out.append(v)
    return tuple(out)


def main():
    table, json_dir = Path(sys.argv[1]), Path(sys.argv[2])
    expected = Counter()
    for path in sorted(json_dir.iterdir()):
        for line in path.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            expected[normal(record)] += 1
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=FIELDS).to_pylist()
    found = Counter(normal(r) for r in rows)
    missing, extra = expected - found, found - expected
    print(f"{sum(found.values())} rows, {sum(expected.values())} records; "
          f"{sum(missing.values())} missing, {sum(extra.values())} extra")
    for row in list(missing)[:3]:
        print("missing:", row)
    for row in list(extra)[:3]:
        print("extra:", row)
    sys.exit(1 if missing or extra else 0)


if __name__ == "__main__":
    main()
