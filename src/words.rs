//! The words and figures of command summaries.

/// `n` and a noun, plural unless `n` is 1 ("1 commit", "3 commits").
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Busy time by phase as a JSON object of seconds (`busy_seconds` of `--format json`).
pub fn busy_seconds(busy_us: &[(&str, u64)]) -> serde_json::Value {
    busy_us
        .iter()
        .map(|(phase, us)| (phase.to_string(), serde_json::json!(*us as f64 / 1e6)))
        .collect::<serde_json::Map<String, serde_json::Value>>()
        .into()
}
