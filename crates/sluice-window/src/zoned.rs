//! Windows aligned to a zone's wall clock (`--window-zone`): a window is the run of instants
//! whose local time falls in one slot of the size's grid, counted from local midnight. A local
//! day is 23 or 25 hours long when daylight saving time starts or ends; the local hour that
//! repeats when it ends is one window of two hours, and the hour it skips has none. So every
//! window is a contiguous interval and no two share an address (the local date and hour).
//!
//! Pure: the zone database is data compiled in (chrono-tz).

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Utc};

use crate::time::Zone;

const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 24 * HOUR_US;
/// More than any zone's offset change at one transition (2 hours, in the historical record),
/// so a search bracket this far outside a window's nominal bounds lies in other windows.
const SHIFT_MAX_US: i64 = 3 * HOUR_US;

/// The offset east of UTC of `zone` at instant `t_us`, in microseconds.
pub(crate) fn offset_us(zone: Zone, t_us: i64) -> i64 {
    match zone {
        Zone::Utc => 0,
        Zone::Fixed(s) => i64::from(s) * 1_000_000,
        Zone::Named(tz) => DateTime::<Utc>::from_timestamp_micros(t_us)
            .map(|t| {
                let seconds = tz.offset_from_utc_datetime(&t.naive_utc()).fix();
                i64::from(seconds.local_minus_utc()) * 1_000_000
            })
            .unwrap_or(0),
    }
}

/// The wall-clock slot of instant `t_us`: its local time floored to the grid of `size_us`,
/// as microseconds since local 1970-01-01T00:00.
pub(crate) fn slot_of(zone: Zone, size_us: i64, t_us: i64) -> i64 {
    let wall = t_us.saturating_add(offset_us(zone, t_us));
    wall.div_euclid(size_us) * size_us
}

/// `[start, end)` of the window holding instant `t_us`: the run of instants around it in the
/// same slot.
pub(crate) fn bounds(zone: Zone, size_us: i64, t_us: i64) -> (i64, i64) {
    let slot = slot_of(zone, size_us, t_us);
    let offset = offset_us(zone, t_us);
    let in_slot = |u: i64| slot_of(zone, size_us, u) == slot;
    // Without a transition near the window, its bounds are the slot's edges at t's offset.
    let start = slot - offset;
    let start = if start <= t_us && in_slot(start) && !in_slot(start - 1) {
        start
    } else {
        first_in(in_slot, t_us - size_us - SHIFT_MAX_US, t_us)
    };
    let end = slot + size_us - offset;
    let end = if end > t_us && in_slot(end - 1) && !in_slot(end) {
        end
    } else {
        first_out(in_slot, t_us, t_us + size_us + SHIFT_MAX_US)
    };
    (start, end)
}

/// The least `u` in `(lo, hi]` with `inside(u)`, given `!inside(lo)`, `inside(hi)` and that
/// the instants inside form one run ending at `hi`.
fn first_in(inside: impl Fn(i64) -> bool, mut lo: i64, mut hi: i64) -> i64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if inside(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The least `u` in `(lo, hi]` with `!inside(u)`, given `inside(lo)`, `!inside(hi)` and that
/// the instants inside form one run starting at or before `lo`.
fn first_out(inside: impl Fn(i64) -> bool, lo: i64, hi: i64) -> i64 {
    first_in(|u| !inside(u), lo, hi)
}

/// The first time `zone`'s clocks go back from one slot of `size_us` into an earlier one, as
/// the instant and the wall-clock times before and after: the later slot would come twice,
/// two stretches of time at one address. Going back within one slot (New York's 02:00 to
/// 01:00, for hours or days) only makes that slot longer. Looked for from 1900 to 2100, a day
/// at a time (no zone changes its clocks twice in one day).
pub(crate) fn repeated_slot(
    zone: Zone,
    size_us: i64,
) -> Option<(i64, NaiveDateTime, NaiveDateTime)> {
    let Zone::Named(_) = zone else {
        return None;
    };
    let (from, to) = (-2_208_988_800_000_000_i64, 4_102_444_800_000_000_i64);
    let mut day = from;
    let mut offset = offset_us(zone, day);
    while day < to {
        let next = day + DAY_US;
        let next_offset = offset_us(zone, next);
        if next_offset < offset {
            let change = first_in(|u| offset_us(zone, u) == next_offset, day, next);
            let (before, after) = (change - 1 + offset, change + next_offset);
            if before.div_euclid(size_us) != after.div_euclid(size_us) {
                let wall =
                    |w: i64| DateTime::<Utc>::from_timestamp_micros(w).map(|t| t.naive_utc());
                return Some((change, wall(before + 1)?, wall(after)?));
            }
        }
        (day, offset) = (next, next_offset);
    }
    None
}

/// The first instant of the window whose slot starts at wall-clock time `wall`, if any
/// instant has that slot (a slot inside a skipped hour has none).
pub(crate) fn start_of_slot(zone: Zone, size_us: i64, wall: NaiveDateTime) -> Option<i64> {
    let wall_us = wall.and_utc().timestamp_micros();
    // The wall time's (earlier) instant; none when the clocks skipped it.
    let first = match zone.instant_of_wall_micros(wall_us) {
        Some(t) => t,
        // Read at the offset after the change it is an instant before the change, at the
        // offset before it one after (each in force a day away: changes are months apart);
        // between them the wall clock only moves forward, so the first instant at or past
        // `wall` is found by bisection.
        None => {
            let before = wall_us - offset_us(zone, wall_us + DAY_US);
            let after = wall_us - offset_us(zone, wall_us - DAY_US);
            let reached = |u: i64| u + offset_us(zone, u) >= wall_us;
            if reached(before) || !reached(after) {
                return None;
            }
            first_in(reached, before, after)
        }
    };
    (slot_of(zone, size_us, first) == wall_us).then(|| bounds(zone, size_us, first).0)
}

/// The wall-clock time of instant `t_us` in `zone`.
pub(crate) fn wall_time(zone: Zone, t_us: i64) -> Option<NaiveDateTime> {
    DateTime::<Utc>::from_timestamp_micros(t_us.checked_add(offset_us(zone, t_us))?)
        .map(|t| t.naive_utc())
}

#[cfg(test)]
mod tests;
