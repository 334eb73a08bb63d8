"""Writes Debezium change events (NDJSON, as Debezium's JSON converter writes them, of a table
`users (id bigint, name text, score double precision)`) as one Parquet file with pyarrow, the
way a connector's sink to files lands them: `before` and `after` struct columns, `source` a
struct (its missing fields null), `op` text, `ts_ms` a long.

  debezium_parquet.py CHANGES.ndjson OUT.parquet"""
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

ROW = pa.struct([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
SOURCE = pa.struct([("connector", pa.string()), ("table", pa.string()), ("lsn", pa.int64()),
                    ("txId", pa.int64()), ("ts_ms", pa.int64())])
SCHEMA = pa.schema([("before", ROW), ("after", ROW), ("source", SOURCE),
                    ("op", pa.string()), ("ts_ms", pa.int64())])


def main():
    changes, out = sys.argv[1], sys.argv[2]
    rows = []
    with open(changes, "rb") as f:
        for line in f:
            if line.strip():
                change = json.loads(line)
                rows.append({name: change.get(name) for name in SCHEMA.names})
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), out)
    print(f"wrote {len(rows)} changes as Parquet")


if __name__ == "__main__":
    main()
