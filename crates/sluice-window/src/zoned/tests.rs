//! Windows in zones: local days of 23 and 25 hours, the repeated and the skipped hour,
//! midnights that do not exist, half-hour changes; and, walked over years in several zones,
//! that windows tile time and addresses name exactly one window each.

use crate::{AddressLayout, EventTime, TimeFormat, Window, WindowSize, Zone};

const HOUR_US: i64 = 3_600_000_000;

fn size(text: &str, zone: &str) -> WindowSize {
    WindowSize::parse(text)
        .unwrap()
        .in_zone(Zone::parse(zone).unwrap())
        .unwrap()
}

fn at(text: &str) -> EventTime {
    TimeFormat::Rfc3339.parse_str(text).unwrap()
}

fn hours(w: Window) -> f64 {
    (w.end().as_micros() - w.start().as_micros()) as f64 / HOUR_US as f64
}

fn path(size: WindowSize, w: Window) -> String {
    AddressLayout::default_for(size).address(w).hive_path()
}

#[test]
fn new_york_days_are_local_days_of_23_24_and_25_hours() {
    let day = size("1d", "America/New_York");
    let w = Window::containing(day, at("2013-03-10T12:00:00Z"));
    assert_eq!(w.start(), at("2013-03-10T05:00:00Z"), "midnight EST");
    assert_eq!(w.end(), at("2013-03-11T04:00:00Z"), "midnight EDT");
    assert_eq!((hours(w), path(day, w)), (23.0, "dt=2013-03-10".into()));
    let w = Window::containing(day, at("2013-11-04T03:30:00Z"));
    assert_eq!(w.start(), at("2013-11-03T04:00:00Z"));
    assert_eq!((hours(w), path(day, w)), (25.0, "dt=2013-11-03".into()));
    let w = Window::containing(day, at("2013-07-01T03:59:59Z"));
    assert_eq!((hours(w), path(day, w)), (24.0, "dt=2013-06-30".into()));
    assert_eq!(day.label(), "1d in America/New_York");
    assert_eq!(WindowSize::parse(&day.label()).unwrap(), day);
}

#[test]
fn the_repeated_hour_is_one_window_and_the_skipped_hour_none() {
    let hour = size("1h", "America/New_York");
    // 2013-11-03: 01:00 EDT (05:00Z) to 02:00 EST (07:00Z) is local hour 01, twice over.
    let w = Window::containing(hour, at("2013-11-03T06:30:00Z"));
    assert_eq!(
        (w.start(), w.end()),
        (at("2013-11-03T05:00:00Z"), at("2013-11-03T07:00:00Z"))
    );
    assert_eq!(path(hour, w), "dt=2013-11-03/hour=01");
    // 2013-03-10: 02:00 EST is 03:00 EDT; hour 01 ends at 07:00Z and hour 03 starts there.
    let w = Window::containing(hour, at("2013-03-10T06:59:59Z"));
    assert_eq!(path(hour, w), "dt=2013-03-10/hour=01");
    assert_eq!(w.end(), at("2013-03-10T07:00:00Z"));
    let next = Window::containing(hour, w.end());
    assert_eq!(path(hour, next), "dt=2013-03-10/hour=03");
    let skipped = [
        ("dt".to_string(), "2013-03-10".to_string()),
        ("hour".into(), "02".into()),
    ];
    assert!(AddressLayout::DtHour.window_of(hour, &skipped).is_err());
}

#[test]
fn a_day_whose_midnight_is_skipped_starts_at_the_change() {
    // São Paulo started daylight saving time at midnight: 2018-11-04 began at 01:00 (-02).
    let day = size("1d", "America/Sao_Paulo");
    let w = Window::containing(day, at("2018-11-04T12:00:00Z"));
    assert_eq!(w.start(), at("2018-11-04T03:00:00Z"));
    assert_eq!((hours(w), path(day, w)), (23.0, "dt=2018-11-04".into()));
    let values = [("dt".to_string(), "2018-11-04".to_string())];
    assert_eq!(AddressLayout::Dt.window_of(day, &values), Ok(w));
}

#[test]
fn half_hour_changes_make_hours_of_30_and_90_minutes() {
    // Lord Howe Island moves its clocks by 30 minutes: 2019-10-06 02:00 became 02:30 (+11),
    // 2020-04-05 02:00 (+11) became 01:30 (+10:30).
    let hour = size("1h", "Australia/Lord_Howe");
    let spring = Window::containing(hour, at("2019-10-05T15:45:00Z"));
    assert_eq!(
        (hours(spring), path(hour, spring)),
        (0.5, "dt=2019-10-06/hour=02".into())
    );
    let autumn = Window::containing(hour, at("2020-04-04T14:45:00Z"));
    assert_eq!(
        (hours(autumn), path(hour, autumn)),
        (1.5, "dt=2020-04-05/hour=01".into())
    );
}

#[test]
fn a_zone_whose_clocks_go_back_across_an_hour_refuses_hourly_windows() {
    // Chatham Islands: 03:45 (+13:45) became 02:45 (+12:45), so local hour 03 comes twice
    // with hour 02 between.
    let hour = WindowSize::parse("1h").unwrap();
    let err = hour
        .in_zone(Zone::parse("Pacific/Chatham").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("from 03:45 to 02:45"), "{err}");
    assert!(size("6h", "Pacific/Chatham")
        .label()
        .ends_with("in Pacific/Chatham"));
}

#[test]
fn sub_hour_windows_need_a_zone_without_changes() {
    let quarter = WindowSize::parse("15m").unwrap();
    assert!(quarter
        .in_zone(Zone::parse("Europe/Berlin").unwrap())
        .is_err());
    let india = quarter.in_zone(Zone::parse("+05:30").unwrap()).unwrap();
    let w = Window::containing(india, at("2026-10-03T00:10:00Z"));
    assert_eq!(w.start(), at("2026-10-03T00:00:00Z"), "05:30 local");
    let day = size("1d", "+05:30");
    let w = Window::containing(day, at("2026-10-02T20:00:00Z"));
    assert_eq!(
        (w.start(), path(day, w)),
        (at("2026-10-02T18:30:00Z"), "dt=2026-10-03".into())
    );
}

/// Walks every window of three years (two for hourly windows) in zones with and without
/// daylight saving time: windows tile time, each address names exactly its window, and the
/// window of any instant inside is the same.
#[test]
fn windows_tile_time_and_addresses_name_one_window() {
    let zones = [
        "UTC",
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "America/Sao_Paulo",
        "Asia/Kolkata",
        "Pacific/Chatham",
        "-03:30",
    ];
    for zone in zones {
        for (text, years) in [("1d", 3), ("6h", 2), ("1h", 2)] {
            if (zone, text) == ("Pacific/Chatham", "1h") {
                continue;
            }
            let size = size(text, zone);
            let layout = AddressLayout::default_for(size);
            let mut w = Window::containing(size, at("2017-06-01T00:00:00Z"));
            let stop = at(&format!("{}-06-01T00:00:00Z", 2017 + years));
            let mut seen = std::collections::HashSet::new();
            while w.start() < stop {
                let id = format!("{zone} {text} {w}");
                assert!(w.start() < w.end(), "{id}");
                let mid = EventTime::from_micros((w.start().as_micros() + w.end().as_micros()) / 2);
                let last = EventTime::from_micros(w.end().as_micros() - 1);
                for t in [w.start(), mid, last] {
                    assert_eq!(Window::containing(size, t), w, "{id} at {}", t.to_rfc3339());
                }
                let address = layout.address(w);
                let values: Vec<(String, String)> = address
                    .pairs()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                assert_eq!(layout.window_of(size, &values), Ok(w), "{id}");
                assert!(seen.insert(address.hive_path()), "{id}: address used twice");
                w = Window::containing(size, w.end());
            }
        }
    }
}
