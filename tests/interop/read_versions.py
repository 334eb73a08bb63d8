"""Reads every version of a sluice table (raw or derived) with Python delta-rs (an independent
Delta reader) and checks each window's row count against what sluice's commit metadata says was
published.
Exits non-zero on the first mismatch."""
import json
import os
import sys
from pathlib import Path

from deltalake import DeltaTable


def main(table: str) -> int:
    log = Path(table) / "_delta_log"
    versions = sorted(int(p.stem) for p in log.glob("*.json"))
    expected: dict[str, int] = {}
    failures = 0
    for v in versions:
        for line in (log / f"{v:020}.json").read_text().splitlines():
            info = json.loads(line).get("commitInfo", {}).get("sluice")
            # One window per commit, or a group commit's several.
            for published in (info or {}).get("windows", [info] if info else []):
                if "window" in published:
                    expected[published["window"]] = published["window_rows"]
        dt = DeltaTable(table, version=v)
        data = dt.to_pyarrow_table(columns=["dt", "hour"]).to_pydict()
        counts: dict[str, int] = {}
        for d, h in zip(data["dt"], data["hour"]):
            key = f"dt={d}/hour={h}"
            counts[key] = counts.get(key, 0) + 1
        if counts != expected:
            print(f"version {v}: read {counts}, published {expected}")
            failures += 1
    print(f"interop: Python delta-rs read versions 0..{versions[-1]} of {len(expected)} windows; "
          f"{failures} versions disagreed with the published row counts")
    sys.stdout.flush()
    return 1 if failures else 0


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    os._exit(code)  # delta-rs can abort at interpreter exit; see shared notes
