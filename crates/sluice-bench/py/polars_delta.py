"""Case (y) of sluice-bench: Polars reads a directory of Parquet files and appends them to a
new Delta table partitioned by the hour of `ts` (dt, hour), as a user would land a Parquet
export with Polars (`read_parquet` + `write_delta`). Usage: polars_delta.py SRC_DIR TABLE"""

import sys

import polars as pl

src, table = sys.argv[1], sys.argv[2]
frame = pl.read_parquet(f"{src}/*.parquet")
frame = frame.with_columns(
    dt=pl.col("ts").dt.strftime("%Y-%m-%d"),
    hour=pl.col("ts").dt.strftime("%H"),
)
frame.write_delta(table, mode="append", delta_write_options={"partition_by": ["dt", "hour"]})
