"""Reads a table's change data feed with Python delta-rs (`DeltaTable.load_cdf`) and checks it
against the table itself: for every version from START on, the feed of that version applied to
the table as of the version before gives the table as of that version, row for row (by the
columns named in KEY, comma-separated). Prints one JSON line per version: its number, the
count of each change type, and whether the version holds `_change_data` files.

  change_feed.py TABLE START KEY

Exits non-zero, naming the version, on the first version whose feed is not the difference."""
import json
import os
import sys
from collections import Counter

import pyarrow as pa
from deltalake import DeltaTable

SLUICE = {"_sluice_source", "_sluice_offset"}
CDF = {"_change_type", "_commit_version", "_commit_timestamp"}


def rows_at(path, version, columns):
    table = DeltaTable(path, version=version).to_pyarrow_table().to_pylist()
    return {key_of(r, columns): strip(r) for r in table}


def key_of(row, columns):
    return tuple(json.dumps(row[c], default=str) for c in columns)


def strip(row):
    return {k: v for k, v in row.items() if k not in CDF}


def main():
    path, start, key = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    table = DeltaTable(path)
    states = {v: rows_at(path, v, key) for v in range(max(start - 1, 0), table.version() + 1)}
    feed = pa.table(table.load_cdf(starting_version=start).read_all()).to_pylist()
    by_version = {}
    for change in feed:
        by_version.setdefault(change["_commit_version"], []).append(change)
    history = {h["version"]: h for h in table.history()}
    for version in range(start, table.version() + 1):
        changes = by_version.get(version, [])
        before = states[version - 1] if version > 0 else {}
        after = states[version]
        applied = dict(before)
        for c in changes:
            k = key_of(c, key)
            kind = c["_change_type"]
            if kind in ("delete", "update_preimage"):
                if applied.get(k) != strip(c):
                    sys.exit(f"version {version}: {kind} of {k} is not the table's row {applied.get(k)}: {strip(c)}")
                del applied[k]
        for c in changes:
            k = key_of(c, key)
            if c["_change_type"] in ("insert", "update_postimage"):
                if k in applied:
                    sys.exit(f"version {version}: {c['_change_type']} of {k}, which the table holds")
                applied[k] = strip(c)
        if applied != after:
            missing = set(after) - set(applied)
            extra = set(applied) - set(after)
            changed = [k for k in after if k in applied and applied[k] != after[k]]
            sys.exit(f"version {version}: the feed applied gives another table (missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}, changed {changed[:5]})")
        counts = Counter(c["_change_type"] for c in changes)
        operation = history.get(version, {}).get("operation")
        print(json.dumps({"version": version, "operation": operation, "changes": counts}))


main()
# Every check passed and was printed: leave without the interpreter's teardown, in which
# python deltalake 1.6 sometimes aborts ("terminate called without an active exception")
# after load_cdf, a native thread outliving the runtime.
sys.stdout.flush()
os._exit(0)
