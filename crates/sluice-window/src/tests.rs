use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 86_400_000_000;

fn sizes() -> impl Strategy<Value = WindowSize> {
    prop::sample::select(vec![
        "1m", "5m", "10m", "15m", "30m", "1h", "2h", "3h", "6h", "12h", "1d",
    ])
    .prop_map(|s| WindowSize::parse(s).unwrap())
}

fn event_times() -> impl Strategy<Value = EventTime> {
    // 1950 .. 2100, microsecond resolution.
    (-631_152_000_000_000i64..4_102_444_800_000_000).prop_map(EventTime::from_micros)
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration_ms("10m"), Ok(600_000));
    assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
    assert_eq!(parse_duration_ms("250ms"), Ok(250));
    assert_eq!(parse_duration_ms("7d"), Ok(604_800_000));
    assert!(matches!(
        parse_duration_ms("10"),
        Err(DurationError::MissingUnit(_))
    ));
    assert!(matches!(
        parse_duration_ms("10w"),
        Err(DurationError::UnknownUnit(_))
    ));
    assert!(matches!(
        parse_duration_ms("h"),
        Err(DurationError::NotANumber(_))
    ));
    assert!(matches!(parse_duration_ms(""), Err(DurationError::Empty)));
    assert!(matches!(
        parse_duration_ms("99999999999999999d"),
        Err(DurationError::Overflow(_))
    ));
}

#[test]
fn window_sizes_are_bounded_and_day_aligned() {
    assert!(WindowSize::parse("1m").is_ok());
    assert!(WindowSize::parse("1d").is_ok());
    assert!(matches!(
        WindowSize::parse("30s"),
        Err(WindowSizeError::OutOfRange(_))
    ));
    assert!(matches!(
        WindowSize::parse("2d"),
        Err(WindowSizeError::OutOfRange(_))
    ));
    assert!(matches!(
        WindowSize::parse("90s"),
        Err(WindowSizeError::OutOfRange(_))
    ));
    assert!(matches!(
        WindowSize::parse("7m"),
        Err(WindowSizeError::NotDayAligned(_))
    ));
    assert_eq!(WindowSize::parse("60m").unwrap().label(), "1h");
    assert_eq!(WindowSize::parse("1440m").unwrap().label(), "1d");
    assert_eq!(WindowSize::parse("15m").unwrap().label(), "15m");
}

#[test]
fn event_times_parse_in_every_format() {
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T16:25:00.5+02:00")
        .unwrap();
    assert_eq!(
        t,
        TimeFormat::EpochMicros
            .from_integer(1_791_037_500_500_000)
            .unwrap()
    );
    assert_eq!(
        TimeFormat::EpochSeconds
            .from_integer(1_791_037_500)
            .unwrap(),
        TimeFormat::EpochMillis
            .from_integer(1_791_037_500_000)
            .unwrap()
    );
    assert!(matches!(
        TimeFormat::Rfc3339.parse_str("yesterday"),
        Err(TimeError::NotRfc3339 { .. })
    ));
    assert!(matches!(
        TimeFormat::EpochSeconds.from_integer(i64::MAX),
        Err(TimeError::OutOfRange { .. })
    ));
    assert!(matches!(
        TimeFormat::Rfc3339.from_integer(5),
        Err(TimeError::IntegerForText(_))
    ));
    assert!(matches!(
        TimeFormat::EpochMillis.parse_str("five"),
        Err(TimeError::NotANumber { .. })
    ));
    assert!(TimeFormat::parse_name("epoch_ms").is_ok());
    assert!(TimeFormat::parse_name("iso").is_err());
}

/// The relaxations of ISO 8601 that real streams write keep their instant; a time without
/// an offset is read in the zone.
#[test]
fn iso_times_in_their_common_spellings() {
    let utc = TimeSpec::from(TimeFormat::Rfc3339);
    let at = |spec: &TimeSpec, t: &str| spec.parse_text(t).map(|e| e.to_rfc3339());
    for (text, want) in [
        ("2026-10-03T01:00:00Z", "2026-10-03T01:00:00Z"),
        ("2026-10-03 01:00:00", "2026-10-03T01:00:00Z"),
        ("2026-10-03 00:00:00.875", "2026-10-03T00:00:00.875Z"),
        ("2026-10-03T03:00:00+02", "2026-10-03T01:00:00Z"),
        ("2026-10-03T03:00:00+0200", "2026-10-03T01:00:00Z"),
        ("2026-10-02T20:00-05:00", "2026-10-03T01:00:00Z"),
        ("2026-10-03 01:00", "2026-10-03T01:00:00Z"),
        ("2026-10-03", "2026-10-03T00:00:00Z"),
        (
            "2026-10-03T01:00:00.123456789Z",
            "2026-10-03T01:00:00.123456Z",
        ),
        ("  2026-10-03T01:00:00z ", "2026-10-03T01:00:00Z"),
    ] {
        assert_eq!(at(&utc, text).as_deref(), Ok(want), "{text:?}");
    }
    for bad in [
        "2026-10-03T25:00:00",
        "2026-13-03",
        "03/10/2026",
        "2026-10-03T01:00:00+2",
        "",
    ] {
        assert!(utc.parse_text(bad).is_err(), "{bad:?}");
    }
    let berlin = TimeSpec::new(TimeFormat::Rfc3339, Zone::parse("Europe/Berlin").unwrap());
    assert_eq!(
        at(&berlin, "2026-07-01 12:00").as_deref(),
        Ok("2026-07-01T10:00:00Z")
    );
    assert_eq!(
        at(&berlin, "2026-12-01 12:00").as_deref(),
        Ok("2026-12-01T11:00:00Z")
    );
    // An offset in the text wins over the zone.
    assert_eq!(
        at(&berlin, "2026-12-01T12:00:00Z").as_deref(),
        Ok("2026-12-01T12:00:00Z")
    );
    // The hour repeated when DST ends is its earlier instant; the skipped hour is an error.
    assert_eq!(
        at(&berlin, "2026-10-25 02:30").as_deref(),
        Ok("2026-10-25T00:30:00Z")
    );
    assert!(matches!(
        berlin.parse_text("2026-03-29 02:30"),
        Err(TimeError::NoSuchLocalTime { .. })
    ));
    let fixed = TimeSpec::new(TimeFormat::Rfc3339, Zone::parse("-05:30").unwrap());
    assert_eq!(
        at(&fixed, "2026-10-03 00:00").as_deref(),
        Ok("2026-10-03T05:30:00Z")
    );
    assert!(Zone::parse("Mars/Olympus").is_err());
    assert!(Zone::parse("+25:00").is_err());
}

#[test]
fn strftime_patterns_read_local_times() {
    let spec = |p: &str, z: &str| {
        TimeSpec::new(TimeFormat::parse_name(p).unwrap(), Zone::parse(z).unwrap())
    };
    let at = |s: &TimeSpec, t: &str| s.parse_text(t).map(|e| e.to_rfc3339());
    let temps = spec("%Y/%m/%d %H:%M", "UTC");
    assert_eq!(
        at(&temps, "2010/01/01 00:00").as_deref(),
        Ok("2010-01-01T00:00:00Z")
    );
    assert!(matches!(
        temps.parse_text("2010-01-01 00:00"),
        Err(TimeError::NotPattern { .. })
    ));
    let seattle = spec("%Y/%m/%d %H:%M", "America/Los_Angeles");
    assert_eq!(
        at(&seattle, "2010/01/01 00:00").as_deref(),
        Ok("2010-01-01T08:00:00Z")
    );
    let days = spec("%d.%m.%Y", "UTC");
    assert_eq!(
        at(&days, "03.10.2026").as_deref(),
        Ok("2026-10-03T00:00:00Z")
    );
    let zoned = spec("%Y-%m-%d %H:%M:%S %z", "Europe/Berlin");
    assert_eq!(
        at(&zoned, "2026-10-03 01:00:00 +0000").as_deref(),
        Ok("2026-10-03T01:00:00Z")
    );
    let epoch = spec("%s", "Europe/Berlin");
    assert_eq!(
        at(&epoch, "1791037500").as_deref(),
        Ok("2026-10-03T14:25:00Z")
    );
    assert!(matches!(
        TimeFormat::parse_name("%Y-%Q"),
        Err(TimeError::BadPattern { .. })
    ));
}

/// Epoch counts arrive as numbers or strings, with fractions and exponents; every value
/// outside years 1900-9999 is an error, never an overflow.
#[test]
fn epoch_counts_from_number_text() {
    let s = TimeSpec::from(TimeFormat::EpochSeconds);
    let at = |s: &TimeSpec, t: &str| s.parse_text(t).map(|e| e.as_micros());
    assert_eq!(at(&s, "1791037500"), Ok(1_791_037_500_000_000));
    assert_eq!(at(&s, "1791037500.25"), Ok(1_791_037_500_250_000));
    assert_eq!(at(&s, "1.7910375e9"), Ok(1_791_037_500_000_000));
    assert_eq!(
        s.from_float(1_791_037_500.5),
        Ok(EventTime::from_micros(1_791_037_500_500_000))
    );
    let ns = TimeSpec::from(TimeFormat::EpochNanos);
    assert_eq!(at(&ns, "1791037500123456789"), Ok(1_791_037_500_123_456));
    assert_eq!(
        TimeFormat::EpochNanos.from_integer(1_791_037_500_123_456_789),
        Ok(EventTime::from_micros(1_791_037_500_123_456))
    );
    for bad in ["1e30", "-1e30", "99999999999999999999999", "253402300800"] {
        assert!(
            matches!(s.parse_text(bad), Err(TimeError::OutOfRange { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        s.from_float(f64::INFINITY),
        Err(TimeError::NotANumber { .. })
    ));
    assert!(matches!(
        s.from_float(1e30),
        Err(TimeError::OutOfRange { .. })
    ));
}

/// Any instant written in a format reads back as itself, or is refused where the format
/// cannot hold it (a pattern coarser than the time).
#[test]
fn times_are_written_in_a_format_that_reads_them_back() {
    let t = EventTime::from_micros(1_791_037_500_123_456);
    let spec = |f: &str, zone: Zone| TimeSpec::new(TimeFormat::parse_name(f).unwrap(), zone);
    let written = |f: &str, zone: Zone| spec(f, zone).write(t);
    assert_eq!(
        written("rfc3339", Zone::Utc).as_deref(),
        Some("2026-10-03T14:25:00.123456Z")
    );
    assert_eq!(
        written("epoch_s", Zone::Utc).as_deref(),
        Some("1791037500.123456")
    );
    assert_eq!(
        written("epoch_ms", Zone::Utc).as_deref(),
        Some("1791037500123.456")
    );
    assert_eq!(
        written("epoch_us", Zone::Utc).as_deref(),
        Some("1791037500123456")
    );
    assert_eq!(
        written("epoch_ns", Zone::Utc).as_deref(),
        Some("1791037500123456000")
    );
    let berlin = Zone::parse("Europe/Berlin").unwrap();
    assert_eq!(
        written("%Y/%m/%d %H:%M:%S%.6f", berlin).as_deref(),
        Some("2026/10/03 16:25:00.123456")
    );
    assert_eq!(written("%Y/%m/%d %H:%M", Zone::Utc), None, "no seconds");
    let whole = EventTime::from_micros(1_791_037_500_000_000);
    assert_eq!(
        spec("%Y/%m/%d %H:%M:%S", Zone::Fixed(-8 * 3600))
            .write(whole)
            .as_deref(),
        Some("2026/10/03 06:25:00")
    );
    assert_eq!(
        spec("epoch_s", Zone::Utc)
            .write(EventTime::from_micros(-1_500_000))
            .as_deref(),
        Some("-1.5")
    );
}

proptest! {
    #[test]
    fn every_instant_is_written_exactly_in_rfc3339_and_epoch_formats(t in event_times()) {
        for f in ["rfc3339", "epoch_s", "epoch_ms", "epoch_us", "%Y-%m-%d %H:%M:%S%.6f"] {
            let spec = TimeSpec::new(TimeFormat::parse_name(f).unwrap(), Zone::Utc);
            let text = spec.write(t);
            prop_assert!(text.is_some(), "{f}: {t:?}");
            prop_assert_eq!(spec.parse_text(&text.unwrap()), Ok(t));
        }
    }
}

#[test]
fn instants_typed_by_people_parse_as_utc() {
    let at = |t: &str| parse_instant(t).unwrap().to_rfc3339();
    assert_eq!(at("2026-10-03"), "2026-10-03T00:00:00Z");
    assert_eq!(at("2026-10-03T14"), "2026-10-03T14:00:00Z");
    assert_eq!(at("2026-10-03T14:30Z"), "2026-10-03T14:30:00Z");
    assert_eq!(at("2026-10-03T14:30:05"), "2026-10-03T14:30:05Z");
    assert_eq!(at("2026-10-03T16:30:00+02:00"), "2026-10-03T14:30:00Z");
    for bad in ["", "yesterday", "2026-13-01", "2026-10-03T25"] {
        assert!(parse_instant(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn addresses_follow_the_batch_layout() {
    let hour = WindowSize::parse("1h").unwrap();
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:59:59.999999Z")
        .unwrap();
    let a = AddressLayout::DtHour.address(Window::containing(hour, t));
    assert_eq!(a.hive_path(), "dt=2026-10-03/hour=14");
    assert_eq!(a.tag(), "20261003T14");

    let day = WindowSize::parse("1d").unwrap();
    assert_eq!(AddressLayout::default_for(day), AddressLayout::Dt);
    assert_eq!(
        AddressLayout::Dt
            .address(Window::containing(day, t))
            .hive_path(),
        "dt=2026-10-03"
    );

    let five = WindowSize::parse("5m").unwrap();
    assert_eq!(AddressLayout::default_for(five), AddressLayout::WindowStart);
    assert_eq!(
        AddressLayout::WindowStart
            .address(Window::containing(five, t))
            .hive_path(),
        "window_start=20261003T1455Z"
    );
    assert!(AddressLayout::DtHour.validate(five).is_err());
    assert!(AddressLayout::Dt.validate(hour).is_err());
    assert!(AddressLayout::WindowStart.validate(hour).is_ok());
}

#[test]
fn foreign_partition_values_are_not_addresses() {
    let hour = WindowSize::parse("1h").unwrap();
    let pv = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(AddressLayout::DtHour
        .window_of(hour, &pv(&[("dt", "2026-10-03")]))
        .is_err());
    assert!(AddressLayout::DtHour
        .window_of(hour, &pv(&[("dt", "2026-10-03"), ("hour", "24")]))
        .is_err());
    assert!(AddressLayout::DtHour
        .window_of(hour, &pv(&[("dt", "x"), ("hour", "1")]))
        .is_err());
    // Not in canonical form: would alias another address.
    assert!(AddressLayout::DtHour
        .window_of(hour, &pv(&[("dt", "2026-10-03"), ("hour", "4")]))
        .is_err());
}

#[test]
fn watermark_trails_max_event_time_by_lateness() {
    let mut wm = Watermark::new(10 * 60_000_000);
    assert_eq!(wm.current(), EventTime::MIN);
    wm.observe(EventTime::from_micros(HOUR_US));
    wm.observe(EventTime::from_micros(HOUR_US / 2));
    assert_eq!(
        wm.current(),
        EventTime::from_micros(HOUR_US - 10 * 60_000_000)
    );
    wm.end_of_input();
    assert_eq!(wm.current(), EventTime::MAX);
}

/// One event far ahead of the stream does not move the watermark; a stream that jumps
/// forward is followed after `jump_events` ahead events in a row.
#[test]
fn the_skew_guard_ignores_one_far_future_event_and_follows_a_real_jump() {
    let guard = SkewGuard {
        ahead_us: DAY_US,
        jump_events: 3,
    };
    let t = |h: i64| EventTime::from_micros(h * HOUR_US);
    let mut wm = Watermark::new(0).with_guard(guard);
    assert_eq!(wm.observe(t(10)), Observed::Counted);
    assert_eq!(wm.observe(t(10 + 73 * 365 * 24)), Observed::Ahead);
    assert_eq!(wm.current(), t(10));
    // Two more ahead events with on-time events between: never a run of 3.
    for h in [11, 12] {
        assert_eq!(wm.observe(t(h + 10_000)), Observed::Ahead);
        assert_eq!(wm.observe(t(h)), Observed::Counted);
    }
    assert_eq!(wm.current(), t(12));
    assert_eq!(wm.state().ahead_run, 0);
    // A late event neither breaks nor extends a run.
    let week = 7 * 24;
    assert_eq!(wm.observe(t(12 + week + 1)), Observed::Ahead);
    assert_eq!(wm.observe(t(1)), Observed::Counted);
    assert_eq!(wm.observe(t(12 + week)), Observed::Ahead);
    assert_eq!(wm.state().ahead_run, 2);
    assert_eq!(wm.state().ahead_min, Some(t(12 + week)));
    // The run as one integer and back.
    let code = wm.state().ahead_code();
    assert_eq!(
        WatermarkState::default().with_ahead_code(code),
        WatermarkState {
            max_seen: None,
            ..wm.state()
        }
    );
    assert_eq!(WatermarkState::default().with_ahead_code(0).ahead_run, 0);
    // The third in a row: the stream jumped; the watermark follows from the run's earliest.
    let resumed = Watermark::new(0).with_guard(guard).resumed(wm.state());
    assert_eq!(wm.observe(t(12 + week + 2)), Observed::Counted);
    assert_eq!(wm.current(), t(12 + week + 2));
    // A resume from the saved state decides the same.
    let mut resumed = resumed;
    assert_eq!(resumed.observe(t(12 + week + 2)), Observed::Counted);
    assert_eq!(resumed, wm);
    // No guard: every event counts.
    let mut off = Watermark::new(0);
    off.observe(t(1));
    assert_eq!(off.observe(t(1_000_000)), Observed::Counted);
    assert_eq!(off.current(), t(1_000_000));
}

#[test]
fn key_winner_prefers_later_time_then_higher_position() {
    let t1 = EventTime::from_micros(1);
    let t2 = EventTime::from_micros(2);
    assert!(key_winner((t2, &0), (t1, &9)));
    assert!(!key_winner((t1, &9), (t2, &0)));
    assert!(key_winner((t1, &5), (t1, &4)));
    assert!(!key_winner((t1, &4), (t1, &4)));
}

proptest! {
    #[test]
    fn assignment_contains_and_aligns(size in sizes(), t in event_times()) {
        let w = Window::containing(size, t);
        prop_assert!(w.contains(t));
        prop_assert_eq!(w.start().as_micros().rem_euclid(size.as_micros()), 0);
        prop_assert_eq!(w.end().as_micros() - w.start().as_micros(), size.as_micros());
        // UTC alignment: windows never straddle midnight.
        prop_assert_eq!(
            w.start().as_micros().div_euclid(DAY_US),
            (w.end().as_micros() - 1).div_euclid(DAY_US)
        );
        // Neighbouring instants fall in the same window or the adjacent one.
        let next = Window::containing(size, EventTime::from_micros(t.as_micros() + 1));
        prop_assert!(next == w || next.start() == w.end());
    }

    #[test]
    fn addresses_round_trip_and_are_injective(size in sizes(), t in event_times(), u in event_times()) {
        let layout = AddressLayout::default_for(size);
        let w = Window::containing(size, t);
        let a = layout.address(w);
        let pairs: Vec<(String, String)> =
            a.pairs().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        prop_assert_eq!(layout.window_of(size, &pairs).unwrap(), w);
        let v = Window::containing(size, u);
        prop_assert_eq!(layout.address(v) == a, v == w);
        // window_start works for every size.
        let ws = AddressLayout::WindowStart.address(w);
        let pairs: Vec<(String, String)> =
            ws.pairs().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        prop_assert_eq!(AddressLayout::WindowStart.window_of(size, &pairs).unwrap(), w);
    }

    /// The book against a model: a sorted map of every event routed so far.
    #[test]
    fn book_matches_model(
        size in sizes(),
        lateness_min in 0i64..120,
        offsets in prop::collection::vec(-3 * HOUR_US..3 * HOUR_US, 1..200),
        publish_every in 1usize..20,
    ) {
        let base = 1_791_000_000_000_000i64;
        let mut book: WindowBook<u64> = WindowBook::new();
        let mut wm = Watermark::new(lateness_min * 60_000_000);
        // Model: events held per open window, and coverage per published window.
        let mut held: BTreeMap<Window, Vec<u64>> = BTreeMap::new();
        let mut covered: BTreeMap<Window, u64> = BTreeMap::new();
        let mut sealed_order: Vec<Window> = Vec::new();
        for (i, dt) in offsets.iter().enumerate() {
            let pos = i as u64;
            let t = EventTime::from_micros(base + dt);
            let w = Window::containing(size, t);
            let route = book.route(w, &pos, wm.current());
            let expected = if covered.get(&w).is_some_and(|c| pos < *c) {
                Route::Replayed
            } else if wm.current() >= w.end() {
                Route::Late
            } else {
                Route::Buffer
            };
            prop_assert_eq!(route, expected);
            if route != Route::Replayed {
                book.hold(w, &pos);
                held.entry(w).or_default().push(pos);
            }
            wm.observe(t);
            if i % publish_every == 0 {
                let ready = book.sealed(wm.current());
                // Sealed: exactly the open windows the watermark passed, oldest first.
                let model: Vec<Window> =
                    held.keys().copied().filter(|w| w.end() <= wm.current()).collect();
                prop_assert_eq!(&ready, &model);
                prop_assert!(ready.windows(2).all(|p| p[0] < p[1]));
                for w in ready {
                    held.remove(&w);
                    covered.insert(w, pos + 1);
                    book.mark_published(w, pos + 1);
                    sealed_order.push(w);
                }
            }
            // Resume: never above an unpublished event, never above the read position.
            let resume = book.resume_position(&(pos + 1));
            let lowest_held = held.values().flatten().min().copied().unwrap_or(pos + 1);
            prop_assert_eq!(resume, lowest_held.min(pos + 1));
        }
        wm.end_of_input();
        let rest = book.sealed(wm.current());
        prop_assert_eq!(rest, held.keys().copied().collect::<Vec<_>>());
        // Replaying everything after "restart" from the table's coverage skips exactly the
        // events that a publication handled.
        let restored = WindowBook::from_published(covered.clone());
        for (i, dt) in offsets.iter().enumerate() {
            let pos = i as u64;
            let w = Window::containing(size, EventTime::from_micros(base + dt));
            let replayed = restored.route(w, &pos, EventTime::MIN) == Route::Replayed;
            prop_assert_eq!(replayed, covered.get(&w).is_some_and(|c| pos < *c));
        }
    }
}

#[test]
fn a_shard_is_the_last_address_column_and_keeps_the_window() {
    let hour = WindowSize::parse("1h").unwrap();
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:25:00Z")
        .unwrap();
    let w = Window::containing(hour, t);
    let a = AddressLayout::DtHour.address(w).in_shard(Shard(3));
    assert_eq!(a.hive_path(), "dt=2026-10-03/hour=14/shard=3");
    assert_eq!(a.tag(), "20261003T14T3");
    assert_ne!(a, AddressLayout::DtHour.address(w).in_shard(Shard(4)));
    let pairs: Vec<(String, String)> = a
        .pairs()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(AddressLayout::DtHour.window_of(hour, &pairs).unwrap(), w);
    assert_eq!(Shard::of(&pairs), Some(Shard(3)));
    assert_eq!(
        AddressLayout::DtHour.table_columns(false, true),
        vec!["dt", "hour", SHARD_COLUMN]
    );
}

#[test]
fn a_pipeline_column_comes_between_the_window_and_the_shard() {
    let hour = WindowSize::parse("1h").unwrap();
    let w = Window::containing(
        hour,
        TimeFormat::Rfc3339
            .parse_str("2026-10-03T14:25:00Z")
            .unwrap(),
    );
    let a = AddressLayout::DtHour
        .address(w)
        .in_pipeline("orders-v2")
        .in_shard(Shard(1));
    assert_eq!(
        a.hive_path(),
        "dt=2026-10-03/hour=14/pipeline=orders-v2/shard=1"
    );
    let pairs: Vec<(String, String)> = a
        .pairs()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(AddressLayout::DtHour.window_of(hour, &pairs).unwrap(), w);
    assert_eq!(
        AddressLayout::DtHour.table_columns(true, true),
        vec!["dt", "hour", PIPELINE_COLUMN, SHARD_COLUMN]
    );
    for ok in ["sluice", "orders-v2", "a.b_c"] {
        assert!(valid_pipeline_name(ok), "{ok}");
    }
    for bad in ["", ".hidden", "a/b", "a b", "x=y", "ünï", &"p".repeat(129)] {
        assert!(!valid_pipeline_name(bad), "{bad}");
    }
}

#[test]
fn addresses_read_back_from_partition_values_are_those_sluice_writes() {
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:05:00Z")
        .unwrap();
    for (size, layout) in [
        ("1h", AddressLayout::DtHour),
        ("1d", AddressLayout::Dt),
        ("5m", AddressLayout::WindowStart),
    ] {
        let window = Window::containing(WindowSize::parse(size).unwrap(), t);
        let written = layout
            .address(window)
            .in_pipeline("orders")
            .in_shard(Shard(7));
        let values: Vec<(String, String)> = written
            .pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let read = Address::from_partition_values(&values).unwrap();
        assert_eq!(read, written);
        assert_eq!(layout.start_of(&values).unwrap(), window.start());
    }
    // Anything else is refused, never turned into a path.
    for bad in [
        pairs(&[("dt", "2026-10-03"), ("hour", "../../x")]),
        pairs(&[("dt", "2026-10-03"), ("hour", "24")]),
        pairs(&[("dt", "2026-10-3")]),
        pairs(&[("window_start", "20261003T1405")]),
        pairs(&[("dt", "2026-10-03"), ("pipeline", "../etc")]),
        pairs(&[("dt", "2026-10-03"), ("shard", "1/2")]),
        pairs(&[("dt", "2026-10-03"), ("country", "fr")]),
        pairs(&[("country", "fr")]),
        pairs(&[]),
    ] {
        assert!(
            Address::from_partition_values(&bad).is_err(),
            "{bad:?} was accepted"
        );
    }
}
