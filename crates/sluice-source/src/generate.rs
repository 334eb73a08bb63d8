//! A deterministic event stream with the faults of a real one: out-of-order events, late
//! events and duplicate deliveries; and, when asked, the shapes real streams have: nested
//! records (GitHub-event-like), fields that appear mid-stream, records without their key,
//! and clock-skewed events far in the future. Same spec and seed, same bytes.

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
    /// Flat events, or nested ones shaped like GitHub's event archive.
    pub shape: Shape,
    /// Per mille of events whose `event_id` is null or missing (alternately): records
    /// without their row key.
    pub null_key_per_mille: u32,
    /// From this event on, events carry two more fields: `coupon` (top level) and a nested
    /// one (`actor.plan` in the nested shape, `geo` in the flat shape): a stream whose schema
    /// grows mid-run.
    pub new_fields_from: Option<u64>,
    /// Events dated 73 years ahead of the stream (a device clock saying 2099), spread evenly.
    pub far_future_events: u64,
}

/// The shape of generated events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// `{"event_id","ts","user_id","country","kind","amount"}`.
    #[default]
    Flat,
    /// GitHub-event-like: `actor` and `repo` objects, a `payload` with an array of commit
    /// objects (each with an `author` object, three levels down), a map of labels, nulls at
    /// every level and non-ASCII text.
    Nested,
}

impl Shape {
    pub fn parse_name(name: &str) -> Option<Shape> {
        match name {
            "flat" => Some(Shape::Flat),
            "nested" => Some(Shape::Nested),
            _ => None,
        }
    }
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
            shape: Shape::Flat,
            null_key_per_mille: 0,
            new_fields_from: None,
            far_future_events: 0,
        }
    }
}

/// 73 years of 365.25 days: a far-future event's distance from the stream.
const FAR_FUTURE_US: i64 = 73 * 31_557_600_000_000;

/// What was generated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneratorSummary {
    pub lines: u64,
    pub events: u64,
    pub duplicates: u64,
    pub bytes: u64,
    /// Events written without their key (null or missing `event_id`).
    pub null_keys: u64,
    /// Events dated far in the future.
    pub far_future: u64,
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
        let mut t = t.max(spec.start_us);
        let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
        let amount = if kind == "purchase" {
            rng.below(100_000) as f64 / 100.0
        } else {
            0.0
        };
        // The optional faults draw from a generator of their own, so a stream without them
        // is byte for byte what it always was.
        let mut extra = Rng::new(spec.seed ^ i.wrapping_mul(0x5851_F42D_4C95_7F2D));
        let far = spec.far_future_events > 0
            && (i + 1) % (spec.events / spec.far_future_events.min(spec.events)).max(1) == 0
            && summary.far_future < spec.far_future_events;
        if far {
            t += FAR_FUTURE_US;
            summary.far_future += 1;
        }
        let id = if extra.per_mille(spec.null_key_per_mille) {
            summary.null_keys += 1;
            if i % 2 == 0 {
                Some("\"event_id\":null,".to_string())
            } else {
                None
            }
        } else {
            Some(format!("\"event_id\":\"e{i:09}\","))
        };
        let id = id.unwrap_or_default();
        let grown = spec.new_fields_from.is_some_and(|from| i >= from);
        let user = rng.below(50_000);
        let country = COUNTRIES[rng.below(COUNTRIES.len() as u64) as usize];
        line.clear();
        match spec.shape {
            Shape::Flat => {
                write!(
                    line,
                    "{{{id}\"ts\":\"{}\",\"user_id\":\"u{user}\",\"country\":\"{country}\",\"kind\":\"{kind}\",\"amount\":{amount:.2}",
                    rfc3339_millis(t),
                )?;
                if grown {
                    write!(
                        line,
                        ",\"coupon\":\"C{}\",\"geo\":{{\"lat\":{:.3},\"lon\":{:.3}}}",
                        extra.below(1000),
                        extra.below(180_000) as f64 / 1000.0 - 90.0,
                        extra.below(360_000) as f64 / 1000.0 - 180.0
                    )?;
                }
                line.extend_from_slice(b"}\n");
            }
            Shape::Nested => nested_event(
                &mut line, &mut extra, &id, t, user, country, kind, amount, grown,
            )?,
        }
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

const LOGINS: [&str; 6] = ["octocat", "müller", "たなか", "o'brien", "dev\\null", "zoë"];
const ACTIONS: [&str; 4] = ["opened", "closed", "labeled", "synchronize"];

/// One GitHub-event-like record: objects three levels deep, an array of objects, a map,
/// nulls at every level, non-ASCII and escaped text.
#[allow(clippy::too_many_arguments)]
fn nested_event(
    line: &mut Vec<u8>,
    rng: &mut Rng,
    id: &str,
    t: i64,
    user: u64,
    country: &str,
    kind: &str,
    amount: f64,
    grown: bool,
) -> std::io::Result<()> {
    let login = LOGINS[rng.below(LOGINS.len() as u64) as usize];
    let login = serde_json::to_string(login).unwrap_or_default();
    write!(
        line,
        "{{{id}\"ts\":\"{}\",\"type\":\"{kind}\",\"actor\":{{\"id\":{user},\"login\":{login},\"display\":",
        rfc3339_millis(t)
    )?;
    if rng.per_mille(100) {
        line.extend_from_slice(b"null");
    } else {
        write!(line, "\"{} from {country}\"", login.trim_matches('"'))?;
    }
    if grown {
        write!(
            line,
            ",\"plan\":\"{}\"",
            ["free", "pro", "team"][rng.below(3) as usize]
        )?;
    }
    write!(line, "}},\"repo\":")?;
    if rng.per_mille(50) {
        line.extend_from_slice(b"null");
    } else {
        write!(
            line,
            "{{\"id\":{},\"name\":\"org/r{}\"}}",
            rng.below(1000),
            rng.below(1000)
        )?;
    }
    write!(
        line,
        ",\"payload\":{{\"action\":\"{}\",\"number\":{},\"amount\":{amount:.2},\"commits\":",
        ACTIONS[rng.below(ACTIONS.len() as u64) as usize],
        rng.below(10_000)
    )?;
    let commits = rng.below(4);
    if commits == 3 {
        line.extend_from_slice(b"null");
    } else {
        line.push(b'[');
        for c in 0..commits {
            if c > 0 {
                line.push(b',');
            }
            write!(line, "{{\"sha\":\"{:016x}\",\"author\":", rng.next_u64())?;
            if rng.per_mille(100) {
                line.extend_from_slice(b"null");
            } else {
                write!(line, "{{\"name\":{login},\"email\":")?;
                if rng.per_mille(200) {
                    line.extend_from_slice(b"null");
                } else {
                    write!(line, "\"u{user}@example.org\"")?;
                }
                line.push(b'}');
            }
            write!(
                line,
                ",\"message\":\"fix #{} \\u00e9t\\u00e9 \\\"quoted\\\"\"}}",
                rng.below(100)
            )?;
        }
        line.push(b']');
    }
    write!(line, ",\"labels\":")?;
    match rng.below(3) {
        0 => line.extend_from_slice(b"{}"),
        1 => line.extend_from_slice(b"null"),
        _ => write!(line, "{{\"area\":\"core\",\"prio\":\"p{}\"}}", rng.below(3))?,
    }
    line.push(b'}');
    if grown {
        write!(line, ",\"coupon\":\"C{}\"", rng.below(1000))?;
    }
    line.extend_from_slice(b"}\n");
    Ok(())
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
