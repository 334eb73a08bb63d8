//! The time parser: any text, in any time format and zone, is an event time within the
//! range events may have, or an error; never a panic.

use proptest::prelude::*;
use proptest::sample::select;
use sluice_window::{parse_instant, TimeFormat, TimeSpec, Zone};

use crate::inputs::time_like;
use crate::runner::fuzz;

fn formats() -> impl Strategy<Value = TimeFormat> {
    select(vec![
        "rfc3339",
        "epoch_s",
        "epoch_ms",
        "epoch_us",
        "epoch_ns",
        "%Y/%m/%d %H:%M",
        "%d.%m.%Y %H:%M:%S%.f %z",
        "%Y-%m-%dT%H:%M:%S%:z",
        "%s",
        "%s%.3f",
        "%a %b %e %T %Y",
        "%Y-%m-%d",
        "%j %Y",
        "%Y%m%d%H%M%S",
        "%+",
    ])
    .prop_map(|name| TimeFormat::parse_name(name).expect("a valid format"))
}

fn zones() -> impl Strategy<Value = Zone> {
    select(vec![
        "UTC",
        "+05:30",
        "-08:00",
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kathmandu",
        "Pacific/Kiritimati",
    ])
    .prop_map(|name| Zone::parse(name).expect("a zone"))
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => time_like(),
        1 => any::<String>(),
        1 => "[0-9 :TZ+.eE/-]{0,30}",
    ]
}

#[test]
fn any_text_in_any_format_and_zone_is_an_event_time_or_an_error() {
    fuzz(
        "time text",
        6000,
        (formats(), zones(), any_text()),
        |(format, zone, text)| {
            let spec = TimeSpec::new(format, zone);
            if let Ok(t) = spec.parse_text(&text) {
                prop_assert!(t.in_event_range(), "{text:?} read as {t:?}");
            }
            let _ = spec.parse_micros(&text);
            Ok(())
        },
    );
}

#[test]
fn any_number_in_any_format_is_an_event_time_or_an_error() {
    fuzz(
        "time numbers",
        3000,
        (formats(), zones(), any::<i64>(), any::<f64>()),
        |(format, zone, integer, float)| {
            let spec = TimeSpec::new(format, zone);
            for t in [spec.from_integer(integer), spec.from_float(float)]
                .into_iter()
                .flatten()
            {
                prop_assert!(t.in_event_range(), "{integer} / {float} read as {t:?}");
            }
            Ok(())
        },
    );
}

/// What a person types on the command line (an instant, a zone, a format) is read or
/// refused, never a panic; a pattern they give reads any record text.
#[test]
fn any_option_text_is_read_or_refused() {
    fuzz(
        "time options",
        3000,
        (any_text(), "%[a-zA-Z%.:+0-9 ]{0,12}", any_text()),
        |(text, pattern, record)| {
            let _ = parse_instant(&text);
            let _ = Zone::parse(&text);
            let _ = TimeFormat::parse_name(&text);
            if let Ok(format) = TimeFormat::parse_name(&pattern) {
                if let Ok(t) = TimeSpec::new(format, Zone::Utc).parse_text(&record) {
                    prop_assert!(t.in_event_range());
                }
            }
            Ok(())
        },
    );
}
