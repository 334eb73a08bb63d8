"""Writes each NDJSON file of a directory as the Parquet file a producer would land, with
pyarrow (an independent writer): `ts` as timestamp[us, UTC], `amount` as double, the other
fields as text; lines that are not JSON objects are left out (Parquet has no torn rows).

  to_parquet.py IN_DIR OUT_DIR ROW_GROUP_ROWS

Each `name.ndjson` becomes `name.parquet`, its rows in line order."""
import json
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([
    ("event_id", pa.string()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("user_id", pa.string()),
    ("country", pa.string()),
    ("kind", pa.string()),
    ("amount", pa.float64()),
])


def rows_of(path):
    for line in path.read_bytes().split(b"\n"):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        row = {k: record.get(k) for k in SCHEMA.names}
        if row["ts"] is not None:
            row["ts"] = datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))
        yield row


def main():
    src, out, group = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.iterdir()):
        table = pa.Table.from_pylist(list(rows_of(path)), schema=SCHEMA)
        pq.write_table(table, out / (path.name.removesuffix(".ndjson") + ".parquet"),
                       row_group_size=group)


if __name__ == "__main__":
    main()
