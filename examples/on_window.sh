#!/bin/sh
# A downstream job per window: `sluice run --notify-command "NAME=sh examples/on_window.sh"`
# runs it once for every hourly window that becomes complete, and again whenever late rows
# rewrite the window, with the notification (one JSON object) on stdin and its idempotency key
# in SLUICE_IDEMPOTENCY_KEY. Exit status 0 tells sluice it is done; anything else is retried.
#
# It writes the window's purchases per country to reports/<dt>T<hour>.csv. The output is
# addressed by the window, like the table's own windows: a repeated delivery (sluice delivers at
# least once) or a rewrite replaces the file, so the reports always equal one clean run.
set -eu
body=$(cat)
field() { printf '%s' "$body" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
table=$(field table)
address=$(field address)          # dt=2026-10-03/hour=14
dt=${address#dt=}; dt=${dt%%/*}
hour=${address##*hour=}
# Values go into SQL below: accept only what a dt/hour address holds.
case "$dt" in *[!0-9-]* | "") echo "unexpected address $address" >&2; exit 2 ;; esac
case "$hour" in *[!0-9]* | "") echo "unexpected address $address" >&2; exit 2 ;; esac
mkdir -p reports
sluice query --table "w=$table" --format csv \
  "SELECT country, count(*) AS purchases FROM w
   WHERE kind = 'purchase' AND dt = '$dt' AND hour = $hour
   GROUP BY country ORDER BY country" > "reports/${dt}T$hour.csv.part"
mv "reports/${dt}T$hour.csv.part" "reports/${dt}T$hour.csv"
echo "$SLUICE_IDEMPOTENCY_KEY $(field reason)" >> reports/deliveries.log
