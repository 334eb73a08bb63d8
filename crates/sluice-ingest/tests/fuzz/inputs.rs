//! What streams carry, hostile parts included: JSON built from numbers no double holds,
//! names readers refuse or that differ only by case, any Unicode; times with a character
//! changed or cut short; lines with a byte changed, cut short, or any bytes at all.

use proptest::prelude::*;
use proptest::sample::{select, Index};

/// `s` as a JSON string literal.
pub fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A JSON object of these members, in this order.
pub fn object(members: &[(String, String)]) -> String {
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{v}", quote(k)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Numbers as streams write them, with those that break readers: beyond 2^53, beyond i64,
/// beyond a double's range, long fractions, `-0`, exponents.
pub fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (-1e6f64..1e6).prop_map(|f| f.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        select(vec![
            "9007199254740993",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551616",
            "1e400",
            "-1e400",
            "1e-400",
            "-0",
            "0.0",
            "1.50",
            "1E5",
            "123456789012345678901234567890123456789012",
            "0.1000000000000000000001",
            "4.9e-324",
            "16777217",
        ])
        .prop_map(String::from),
        "-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,22})?([eE][+-]?[0-9]{1,3})?",
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Insert(char),
    Replace(char),
    Delete,
}

fn odd_char() -> impl Strategy<Value = char> {
    prop_oneof![
        select(vec![
            'é',
            '0',
            '9',
            ':',
            'T',
            ' ',
            '+',
            '-',
            'Z',
            '.',
            '\u{0}',
            '\u{1F600}',
            '٣',
            '\u{FEFF}',
            '\n'
        ]),
        any::<char>(),
    ]
}

/// Times in the shapes `--time-format` reads, and near misses: characters inserted, changed
/// (multi-byte ones among them) or removed anywhere, or the text cut short.
pub fn time_like() -> impl Strategy<Value = String> {
    let base = select(vec![
        "2026-10-03T14:25:00Z",
        "2026-10-03 14:25:00.123456+02:00",
        "2026-10-03T14:25",
        "2026-10-03",
        "2026-10-03é0:00:00",
        "2026/10/03 14:25",
        "03.10.2026 14:25:00",
        "1791037500",
        "1791037500123",
        "1791037500.5",
        "2026-03-29T02:30:00",
        "2026-10-25 02:30",
        "Sat Oct  3 14:25:00 2026",
        "2026-10-03T14:25:00+0530",
        "+2026-10-03T14:25:00Z",
        "9999-12-31T23:59:59Z",
        "0000-01-01T00:00:00Z",
    ]);
    let edit = prop_oneof![
        odd_char().prop_map(Edit::Insert),
        odd_char().prop_map(Edit::Replace),
        Just(Edit::Delete),
    ];
    (
        base,
        prop::collection::vec((any::<Index>(), edit), 0..3),
        any::<Index>(),
        any::<bool>(),
    )
        .prop_map(|(base, edits, cut_at, cut)| {
            let mut chars: Vec<char> = base.chars().collect();
            for (at, e) in edits {
                let i = at.index(chars.len() + 1);
                match e {
                    Edit::Insert(c) => chars.insert(i, c),
                    Edit::Replace(c) if i < chars.len() => chars[i] = c,
                    Edit::Delete if i < chars.len() => {
                        chars.remove(i);
                    }
                    _ => {}
                }
            }
            if cut {
                chars.truncate(cut_at.index(chars.len() + 1));
            }
            chars.into_iter().collect()
        })
}

/// Any text: Unicode, control characters, near-miss times.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[ -~]{0,20}", time_like()]
}

/// Field names: the schemas' own in other cases, names readers refuse, the columns sluice
/// adds, Unicode whose lowercase is longer (`İ`), and anything.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(vec![
            "ts", "id", "n", "amount", "Amount", "AMOUNT", "user", "User", "Name", "name", "tags",
            "note", "items", "sku", "attrs", "a b", "x,y", "p(q)", "k=", "tab\there", "", "dt",
            "hour", "_sluice_offset", "_sluice_source", "é", "ÉTÉ", "İ", "i̇", "ß", "SS", "a.b",
        ])
        .prop_map(String::from),
        1 => "[a-zA-Z_ ,;{}()=\t\n.]{0,6}",
        1 => any::<String>().prop_map(|s| s.chars().take(8).collect()),
    ]
}

/// Any JSON value, nested up to four levels, as text.
pub fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        number_text(),
        text().prop_map(|s| quote(&s)),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..5).prop_map(|m| object(&m)),
        ]
    })
}

/// An event time within two days, RFC 3339.
fn good_time() -> impl Strategy<Value = String> {
    (0i64..48 * 3600).prop_map(|s| {
        sluice_window::EventTime::from_micros((1_791_072_000 + s) * 1_000_000).to_rfc3339()
    })
}

/// A record: an object with (mostly) a good time in `ts`, (mostly) an `id`, and any other
/// members.
pub fn record() -> impl Strategy<Value = String> {
    let ts = prop_oneof![
        6 => good_time().prop_map(|t| Some(quote(&t))),
        2 => time_like().prop_map(|t| Some(quote(&t))),
        1 => json_value().prop_map(Some),
        1 => Just(None),
    ];
    let id = prop_oneof![
        5 => (0u32..40).prop_map(|i| Some(quote(&format!("e{i}")))),
        1 => json_value().prop_map(Some),
        1 => Just(None),
    ];
    (ts, id, prop::collection::vec((key(), json_value()), 0..6)).prop_map(|(ts, id, rest)| {
        let mut members = Vec::new();
        if let Some(ts) = ts {
            members.push(("ts".to_string(), ts));
        }
        if let Some(id) = id {
            members.push(("id".to_string(), id));
        }
        members.extend(rest);
        object(&members)
    })
}

/// A line as a stream carries it, and whether it is a record as written (valid JSON).
#[derive(Clone)]
pub struct Line {
    pub bytes: Vec<u8>,
    pub clean: bool,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match std::str::from_utf8(&self.bytes) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => write!(f, "bytes {:?}", String::from_utf8_lossy(&self.bytes)),
        }
    }
}

/// A record; one with a byte changed or cut short; any bytes; any JSON value.
pub fn line() -> impl Strategy<Value = Line> {
    let line = |bytes: Vec<u8>, clean| Line { bytes, clean };
    prop_oneof![
        8 => record().prop_map(move |r| line(r.into_bytes(), true)),
        1 => (record(), any::<Index>(), any::<u8>()).prop_map(move |(r, at, b)| {
            let mut v = r.into_bytes();
            let i = at.index(v.len());
            v[i] = b;
            line(v, false)
        }),
        1 => (record(), any::<Index>()).prop_map(move |(r, at)| {
            let v = r.into_bytes();
            line(v[..at.index(v.len())].to_vec(), false)
        }),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(move |v| line(v, false)),
        1 => json_value().prop_map(move |v| line(v.into_bytes(), false)),
    ]
}
