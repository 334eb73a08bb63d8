"""Edits a Delta table by hand, as another engine would: Python delta-rs appends rows that
break what sluice promises, for `sluice verify` to find.

  hand_edit.py copy TABLE COLUMN VALUE      append the rows whose COLUMN is VALUE again
  hand_edit.py version TABLE ID START       append the current version of key ID, starting at START
  hand_edit.py tombstone TABLE ID LSN       append a tombstone of key ID at sequence LSN

Prints the table version the edit made.
"""

import datetime
import sys

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake


def main():
    op, table = sys.argv[1], sys.argv[2]
    rows = DeltaTable(table).to_pyarrow_table()
    if op == "copy":
        column, value = sys.argv[3], int(sys.argv[4])
        edit = rows.filter(pc.equal(rows[column], value))
    elif op == "version":
        key, start = int(sys.argv[3]), int(sys.argv[4])
        edit = rows.filter(pc.and_(pc.equal(rows["id"], key), pc.is_null(rows["__end_at"])))
        at = edit.schema.get_field_index("__start_at")
        edit = edit.set_column(at, "__start_at", pa.array([start] * edit.num_rows, pa.int64()))
    elif op == "tombstone":
        key, lsn = int(sys.argv[3]), int(sys.argv[4])
        when = datetime.datetime(2026, 10, 3, 16, tzinfo=datetime.timezone.utc)
        edit = pa.table(
            {
                "id": pa.array([key], pa.int64()),
                "lsn": pa.array([lsn], pa.int64()),
                "deleted_at": pa.array([when], pa.timestamp("us", tz="UTC")),
                "pipeline": ["sluice"],
            },
            schema=rows.schema,
        )
    else:
        raise SystemExit(f"unknown edit {op}")
    assert edit.num_rows > 0, f"{op}: no rows to append"
    write_deltalake(table, edit, mode="append")
    print(DeltaTable(table).version())


main()
