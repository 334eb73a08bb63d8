"""Compares a sluice mirror with its PostgreSQL table, row for row, as Python delta-rs reads it.

  compare_pg.py TABLE EXPECTED_JSON [--current]

EXPECTED_JSON is {"key": [column, ...], "columns": [[name, PostgreSQL type], ...], "rows":
[row_to_json of each row of `SELECT * FROM t`]}. Every PostgreSQL column must be a column of
the Delta table (the table may have more: the envelope's `__op` and `__source`); the rows must
be the same set, keyed by the key columns, each value equal under its PostgreSQL type: numbers
exactly (numeric as decimals, a double by its value), timestamps as instants, dates and text as
they are. With --current (a history, `--scd 2`), only the current versions (`__end_at` null)
are compared. Prints one summary line; exits 1 with the first differences."""
import json
import os
import sys
from datetime import date, datetime, timezone
from decimal import Decimal

from deltalake import DeltaTable


def instant(value):
    """A timestamptz value (a datetime, or text such as `2026-10-03 12:00:00.5+00` or
    `2026-10-03T12:00:00.5+00:00`) as a UTC ISO text; naive datetimes are UTC."""
    if isinstance(value, str):
        text = value.replace(" ", "T", 1)
        if text[-3] in "+-" and text[-3:].replace("+", "").replace("-", "").isdigit():
            text += ":00"
        value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat()


def normal(pg_type, value):
    """`value` (from either side) in one comparable form for a column of `pg_type`."""
    if value is None:
        return None
    if pg_type in ("integer", "bigint", "smallint"):
        return int(value)
    if pg_type == "numeric":
        return Decimal(str(value)).normalize()
    if pg_type in ("double precision", "real"):
        return float(value)
    if pg_type == "boolean":
        if isinstance(value, str):
            return {"true": True, "false": False}[value]
        return bool(value)
    if pg_type == "date":
        return value.isoformat() if isinstance(value, date) else str(value)
    if pg_type.startswith("timestamp"):
        return instant(value)
    return str(value)


def keyed(rows, key, columns, side):
    out = {}
    for row in rows:
        values = tuple(normal(t, row[n]) for n, t in columns)
        k = tuple(values[[n for n, _ in columns].index(c)] for c in key)
        if k in out:
            sys.exit(f"{side}: key {k} twice")
        out[k] = values
    return out


def main():
    table, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f, parse_float=Decimal)
    columns = [tuple(c) for c in expected["columns"]]
    key = expected["key"]
    dt = DeltaTable(table)
    arrow = dt.to_pyarrow_table()
    missing = [n for n, _ in columns if n not in arrow.column_names]
    if missing:
        sys.exit(f"{table}: no column {missing} (it has {arrow.column_names})")
    pg = keyed(expected["rows"], key, columns, "postgres")
    rows = arrow.to_pylist()
    current = "--current" in sys.argv[3:]
    if current:
        rows = [r for r in rows if r["__end_at"] is None]
    delta = keyed(rows, key, columns, "delta")
    lost = sorted(k for k in pg if k not in delta)
    extra = sorted(k for k in delta if k not in pg)
    differ = sorted(k for k in pg if k in delta and pg[k] != delta[k])
    if lost or extra or differ:
        print(f"{table}: {len(pg)} rows in postgres, {len(delta)} in delta; "
              f"lost {len(lost)}, extra {len(extra)}, different {len(differ)}")
        for k in lost[:5]:
            print(f"  lost {k}: {pg[k]}")
        for k in extra[:5]:
            print(f"  extra {k}: {delta[k]}")
        for k in differ[:5]:
            print(f"  differ {k}:\n    postgres {pg[k]}\n    delta    {delta[k]}")
        return 1
    types = {f.name: str(f.type) for f in arrow.schema}
    described = ", ".join(f"{n} {types[n]}" for n, _ in columns)
    what = "current versions" if current else "rows"
    print(f"{table.rsplit('/', 1)[-1]}: {len(pg)} {what} equal to PostgreSQL ({described})")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # delta-rs can abort at interpreter exit; see shared notes
