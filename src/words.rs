//! The words and figures of command summaries.

/// `n` and a noun, plural unless `n` is 1 ("1 commit", "3 commits").
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Rows that broke each expectation, for a summary line: `positive_amount 3, known_country 1`.
pub fn violations(by_rule: &std::collections::BTreeMap<String, u64>) -> String {
    by_rule
        .iter()
        .map(|(rule, n)| format!("{rule} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Busy time by phase as a JSON object of seconds (`busy_seconds` of `--format json`).
pub fn busy_seconds(busy_us: &[(&str, u64)]) -> serde_json::Value {
    busy_us
        .iter()
        .map(|(phase, us)| (phase.to_string(), serde_json::json!(*us as f64 / 1e6)))
        .collect::<serde_json::Map<String, serde_json::Value>>()
        .into()
}

/// A span of milliseconds for people: `45s`, `12m`, `3h 5m`, `2d 4h`.
pub fn duration_ms(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

pub fn human_bytes(bytes: i64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.1} MiB", b / (1 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}
