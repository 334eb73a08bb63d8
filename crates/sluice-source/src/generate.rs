//! A deterministic event stream with the faults of a real one: out-of-order events, late
//! events and duplicate deliveries. Same seed, same bytes.

use std::io::Write;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GeneratorSpec {
    pub seed: u64,
    /// Distinct events (duplicate deliveries come on top).
    pub events: u64,
    /// Event time of the first event, microseconds since the epoch.
    pub start_us: i64,
    /// Event times span this many hours.
    pub hours: u32,
    /// Per mille of deliveries that repeat an earlier event.
    pub duplicate_per_mille: u32,
    /// Per mille of events up to 20 minutes older than their neighbours.
    pub out_of_order_per_mille: u32,
    /// Per mille of events 2 to 5 hours older than their neighbours.
    pub late_per_mille: u32,
}

impl Default for GeneratorSpec {
    fn default() -> Self {
        GeneratorSpec {
            seed: 42,
            events: 10_000,
            // 2026-10-03T00:00:00Z
            start_us: 1_790_985_600_000_000,
            hours: 24,
            duplicate_per_mille: 30,
            out_of_order_per_mille: 20,
            late_per_mille: 5,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneratorSummary {
    pub lines: u64,
    pub events: u64,
    pub duplicates: u64,
    pub bytes: u64,
}

/// SplitMix64: tiny, fast, and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn per_mille(&mut self, p: u32) -> bool {
        self.below(1000) < u64::from(p)
    }
}

const COUNTRIES: [&str; 8] = ["DE", "FR", "US", "JP", "BR", "IN", "NG", "SE"];
const KINDS: [&str; 3] = ["view", "cart", "purchase"];

/// Writes the stream as NDJSON lines.
pub fn generate(spec: &GeneratorSpec, out: &mut impl Write) -> std::io::Result<GeneratorSummary> {
    let mut rng = Rng::new(spec.seed);
    let span_us = i64::from(spec.hours.max(1)) * 3_600_000_000;
    let step_us = span_us / spec.events.max(1) as i64;
    let mut summary = GeneratorSummary::default();
    // Duplicates are re-delivered a little later: keep a small ring of recent lines.
    let mut recent: Vec<Vec<u8>> = Vec::with_capacity(256);
    let mut line = Vec::with_capacity(160);
    for i in 0..spec.events {
        let mut t = spec.start_us + i as i64 * step_us + rng.below(step_us.max(1) as u64) as i64;
        if rng.per_mille(spec.late_per_mille) {
            t -= 7_200_000_000 + rng.below(10_800_000_000) as i64;
        } else if rng.per_mille(spec.out_of_order_per_mille) {
            t -= rng.below(1_200_000_000) as i64;
        }
        let t = t.max(spec.start_us);
        let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
        let amount = if kind == "purchase" {
            rng.below(100_000) as f64 / 100.0
        } else {
            0.0
        };
        line.clear();
        writeln!(
            line,
            "{{\"event_id\":\"e{i:09}\",\"ts\":\"{}\",\"user_id\":\"u{}\",\"country\":\"{}\",\"kind\":\"{kind}\",\"amount\":{amount:.2}}}",
            rfc3339_millis(t),
            rng.below(50_000),
            COUNTRIES[rng.below(COUNTRIES.len() as u64) as usize],
        )?;
        out.write_all(&line)?;
        summary.lines += 1;
        summary.events += 1;
        summary.bytes += line.len() as u64;
        if recent.len() < 256 {
            recent.push(line.clone());
        } else {
            let slot = rng.below(256) as usize;
            recent[slot].clone_from(&line);
        }
        if rng.per_mille(spec.duplicate_per_mille) {
            let dup = &recent[rng.below(recent.len() as u64) as usize];
            out.write_all(dup)?;
            summary.lines += 1;
            summary.duplicates += 1;
            summary.bytes += dup.len() as u64;
        }
    }
    Ok(summary)
}

/// `2026-10-03T14:25:00.123Z` without a date library on the hot path.
fn rfc3339_millis(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let millis = us.rem_euclid(1_000_000) / 1000;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes() {
        let spec = GeneratorSpec {
            events: 2000,
            ..Default::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let sa = generate(&spec, &mut a).unwrap();
        generate(&spec, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(sa.events, 2000);
        assert!(sa.duplicates > 20 && sa.duplicates < 120, "{sa:?}");
        assert_eq!(sa.lines, a.iter().filter(|b| **b == b'\n').count() as u64);
        let other = GeneratorSpec { seed: 7, ..spec };
        let mut c = Vec::new();
        generate(&other, &mut c).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(
            rfc3339_millis(1_790_985_600_000_000),
            "2026-10-03T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339_millis(1_791_037_500_123_456),
            "2026-10-03T14:25:00.123Z"
        );
        assert_eq!(
            rfc3339_millis(951_782_400_000_000),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
