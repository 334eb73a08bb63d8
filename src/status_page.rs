//! `sluice status --html FILE`: the table's state as one self-contained page (server-side
//! HTML and inline SVG, no script, no external asset: it opens offline, from a file, in any
//! browser). A file rather than a server: it needs no port and no process left running, it
//! can be written by a cron job or `watch` beside the pipeline and served by anything, and
//! each page is a record of the moment it was written. Every figure carries a `data-`
//! attribute with its value, for tests and scrapers.

use std::collections::BTreeMap;
use std::fmt::Write;

use sluice_publish::{TableStatus, WindowListing};
use sluice_window::{AddressLayout, Window, WindowSize};

use crate::lag::{Lag, Waiting};
use crate::words::human_bytes;

/// The most window slots the timeline draws (a year of hours); the rest are counted.
const SLOTS_MAX: usize = 24 * 366;

/// What the page shows.
pub struct Page<'a> {
    pub status: &'a TableStatus,
    pub windows: &'a [WindowListing],
    /// The dead letters by pipeline and reason.
    pub dead: Option<&'a BTreeMap<String, BTreeMap<String, i64>>>,
    /// Dead letters per hour they were detected in, by reason: (hour, reason, count).
    pub dead_by_hour: &'a [(String, String, i64)],
    /// The retained commits: version, time (ms), operation.
    pub commits: &'a [(u64, Option<i64>, String)],
    pub lag: Option<&'a Lag>,
    /// When the page was written (ms since the epoch).
    pub now_ms: i64,
}

/// A window slot of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub address: String,
    pub start_ms: i64,
    pub state: SlotState,
    pub rows: i64,
    pub publications: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Published,
    /// Published more than once (late rows, a backfill, a replay).
    Rewritten,
    /// No window between two published ones.
    Missing,
}

impl SlotState {
    fn name(self) -> &'static str {
        match self {
            SlotState::Published => "published",
            SlotState::Rewritten => "rewritten",
            SlotState::Missing => "missing",
        }
    }
}

/// The windows in time order, with a `Missing` slot for each window between two published
/// ones (known when the window size is: the contract's, or the one the layout fixes).
pub fn slots(windows: &[WindowListing], size: Option<WindowSize>) -> Vec<Slot> {
    let mut placed: Vec<(Window, AddressLayout, &WindowListing)> = windows
        .iter()
        .filter_map(|w| {
            let values: Vec<(String, String)> = w
                .address
                .split('/')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let layout = AddressLayout::of_partition_values(&values)?;
            Some((layout.window_at(size, &values)?, layout, w))
        })
        .collect();
    placed.sort_by_key(|(window, ..)| window.start());
    let mut out: Vec<Slot> = Vec::new();
    for (i, &(window, layout, w)) in placed.iter().enumerate() {
        if i > 0 {
            let mut next = Window::starting_at(window.size(), placed[i - 1].0.end());
            while let Some(gap) = next.filter(|g| g.start() < window.start()) {
                if out.len() >= SLOTS_MAX {
                    break;
                }
                out.push(Slot {
                    address: layout.address(gap).hive_path(),
                    start_ms: gap.start().as_micros() / 1000,
                    state: SlotState::Missing,
                    rows: 0,
                    publications: 0,
                });
                next = Window::starting_at(gap.size(), gap.end());
            }
        }
        out.push(Slot {
            address: w.address.clone(),
            start_ms: window.start().as_micros() / 1000,
            state: if w.publications > 1 {
                SlotState::Rewritten
            } else {
                SlotState::Published
            },
            rows: w.rows,
            publications: w.publications,
        });
    }
    out
}

/// Text for HTML: `&`, `<`, `>` and quotes escaped.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn instant(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

const STYLE: &str =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}\
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}\
td.n{text-align:right;font-variant-numeric:tabular-nums}td.a{white-space:nowrap}.muted{color:#777}\
.axis{display:flex;justify-content:space-between;gap:16px;margin:2px 0;font-size:12px;white-space:nowrap}\
.published{fill:#2e7d32}.rewritten{fill:#f9a825}.missing{fill:#c62828}\
.key span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}\
.bar{fill:#1565c0}.dead{fill:#6a1b9a}";

/// The page.
pub fn render(page: &Page, size: Option<WindowSize>) -> String {
    let s = page.status;
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sluice status: {t}</title><style>{STYLE}</style></head><body>\
<h1>{t}</h1><p id=\"summary\" data-version=\"{v}\" data-rows=\"{r}\" data-files=\"{f}\">version {v} · {r} rows in {f} files · {b} · written {now}</p>",
        t = esc(&s.table),
        v = s.version,
        r = s.rows,
        f = s.files,
        b = human_bytes(s.bytes),
        now = instant(page.now_ms),
    );
    html += &pipelines(s);
    html += &lag(page.lag);
    html += &timeline(&slots(page.windows, size));
    html += &dead_letters(page.dead, page.dead_by_hour);
    html += &commits(page.commits);
    html += "</body></html>\n";
    html
}

fn pipelines(s: &TableStatus) -> String {
    let mut html = String::from("<h2>Pipelines</h2><table id=\"pipelines\"><tr><th>pipeline</th><th>windows</th><th>rows</th><th>first</th><th>last</th><th>options</th></tr>");
    for p in &s.pipelines {
        let options: Vec<String> = (p.contract.iter())
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = write!(
            html,
            "<tr data-pipeline=\"{name}\" data-windows=\"{w}\"><td>{name}</td><td class=\"n\">{w}</td><td class=\"n\">{r}</td><td class=\"a\">{first}</td><td class=\"a\">{last}</td><td class=\"muted\">{o}</td></tr>",
            name = esc(&p.pipeline),
            w = p.windows,
            r = p.rows,
            first = esc(p.first_address.as_deref().unwrap_or("-")),
            last = esc(p.last_address.as_deref().unwrap_or("-")),
            o = esc(&options.join(" ")),
        );
    }
    html + "</table>"
}

fn lag(lag: Option<&Lag>) -> String {
    let Some(lag) = lag else {
        return "<h2>Lag</h2><p id=\"lag\" class=\"muted\">no source given (status --source, or --config)</p>".into();
    };
    let attrs = match &lag.waiting {
        Waiting::Files {
            files,
            files_waiting,
            bytes_waiting,
            oldest_waiting_age_ms,
            ..
        } => format!(
            "data-files=\"{files}\" data-files-waiting=\"{files_waiting}\" data-bytes-waiting=\"{bytes_waiting}\" data-oldest-waiting-age-ms=\"{}\"",
            oldest_waiting_age_ms.map_or(String::new(), |a| a.to_string())
        ),
        Waiting::Records {
            records_waiting, ..
        } => format!("data-records-waiting=\"{records_waiting}\""),
    };
    let text = crate::lag::text(lag);
    format!("<h2>Lag</h2><p id=\"lag\" {attrs}>{}</p>", esc(&text))
}

fn timeline(slots: &[Slot]) -> String {
    let count = |state: SlotState| slots.iter().filter(|s| s.state == state).count();
    let mut html = format!(
        "<h2>Windows</h2><p class=\"key\"><span class=\"published\" style=\"background:#2e7d32\"></span>published {} <span style=\"background:#f9a825\"></span>rewritten {} <span style=\"background:#c62828\"></span>missing {}</p>",
        count(SlotState::Published),
        count(SlotState::Rewritten),
        count(SlotState::Missing)
    );
    let width = 1100usize;
    let cell = (width / slots.len().max(1)).clamp(2, 24);
    let _ = write!(
        html,
        "<svg id=\"timeline\" width=\"{}\" height=\"40\" role=\"img\" aria-label=\"windows\">",
        cell * slots.len().max(1)
    );
    for (i, slot) in slots.iter().enumerate() {
        let state = slot.state.name();
        let _ = write!(
            html,
            "<rect class=\"{state}\" data-address=\"{a}\" data-state=\"{state}\" data-rows=\"{r}\" x=\"{x}\" y=\"4\" width=\"{w}\" height=\"32\"><title>{a}: {state}, {r} rows, {p} publications, from {t}</title></rect>",
            a = esc(&slot.address),
            r = slot.rows,
            x = i * cell,
            w = cell.saturating_sub(1).max(1),
            p = slot.publications,
            t = instant(slot.start_ms),
        );
    }
    html += "</svg>";
    if let (Some(first), Some(last)) = (slots.first(), slots.last()) {
        let _ = write!(
            html,
            "<p class=\"axis muted\" style=\"width:{}px\"><span>{}</span><span>{}</span></p>",
            (cell * slots.len()).max(360),
            esc(&first.address),
            esc(&last.address)
        );
    }
    let missing: Vec<&str> = (slots.iter())
        .filter(|s| s.state == SlotState::Missing)
        .map(|s| s.address.as_str())
        .collect();
    if !missing.is_empty() {
        let _ = write!(
            html,
            "<p id=\"missing\">missing: {}</p>",
            esc(&missing.join(", "))
        );
    }
    html
}

fn dead_letters(
    dead: Option<&BTreeMap<String, BTreeMap<String, i64>>>,
    by_hour: &[(String, String, i64)],
) -> String {
    let mut html = String::from("<h2>Dead letters</h2>");
    let Some(dead) = dead else {
        return html + "<p id=\"dead-letters\" class=\"muted\">no dead-letter table</p>";
    };
    html +=
        "<table id=\"dead-letters\"><tr><th>pipeline</th><th>reason</th><th>dead letters</th></tr>";
    for (pipeline, reasons) in dead {
        for (reason, n) in reasons {
            let _ = write!(
                html,
                "<tr data-pipeline=\"{p}\" data-reason=\"{r}\" data-count=\"{n}\"><td>{p}</td><td>{r}</td><td class=\"n\">{n}</td></tr>",
                p = esc(pipeline),
                r = esc(reason),
            );
        }
    }
    html += "</table>";
    let mut hours: BTreeMap<&str, i64> = BTreeMap::new();
    for (hour, _, n) in by_hour {
        *hours.entry(hour.as_str()).or_default() += n;
    }
    html + &bars(
        "dead-letters-by-hour",
        "dead",
        &hours,
        "dead letters detected",
    )
}

/// An SVG bar chart of `counts` by key (an hour), each bar titled with its key and count.
fn bars(id: &str, class: &str, counts: &BTreeMap<&str, i64>, what: &str) -> String {
    let most = counts.values().copied().max().unwrap_or(0).max(1);
    let cell = (1100 / counts.len().max(1)).clamp(3, 40);
    let mut html = format!(
        "<svg id=\"{id}\" width=\"{}\" height=\"64\" role=\"img\" aria-label=\"{what} per hour\">",
        cell * counts.len().max(1)
    );
    for (i, (key, n)) in counts.iter().enumerate() {
        let h = (*n * 60 / most).max(1);
        let _ = write!(
            html,
            "<rect class=\"{class}\" data-hour=\"{k}\" data-count=\"{n}\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\"><title>{k}: {n} {what}</title></rect>",
            k = esc(key),
            x = i * cell,
            y = 62 - h,
            w = cell.saturating_sub(1).max(1),
        );
    }
    html += "</svg>";
    if let (Some(first), Some(last)) = (counts.keys().next(), counts.keys().next_back()) {
        let span = if first == last {
            esc(first)
        } else {
            format!("{} to {}", esc(first), esc(last))
        };
        let _ = write!(html, "<p class=\"muted\">{what} per hour, {span}</p>");
    }
    html
}

fn commits(commits: &[(u64, Option<i64>, String)]) -> String {
    let mut per_hour: BTreeMap<String, i64> = BTreeMap::new();
    for (_, t, _) in commits {
        if let Some(t) = t {
            let hour = instant(*t / 3_600_000 * 3_600_000);
            *per_hour.entry(hour).or_default() += 1;
        }
    }
    let keyed: BTreeMap<&str, i64> = per_hour.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut html = String::from("<h2>Commits</h2>");
    html += &bars("commits-by-hour", "bar", &keyed, "commits");
    html += "<table id=\"commits\"><tr><th>version</th><th>time</th><th>operation</th></tr>";
    for (version, t, operation) in commits.iter().rev().take(20) {
        let _ = write!(
            html,
            "<tr data-version=\"{version}\"><td class=\"n\">{version}</td><td>{}</td><td>{}</td></tr>",
            t.map(instant).unwrap_or_default(),
            esc(operation)
        );
    }
    html + "</table>"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(address: &str, publications: usize) -> WindowListing {
        WindowListing {
            address: address.into(),
            files: 1,
            rows: 10,
            version: Some(1),
            publications,
            published_at_ms: 0,
            seal: None,
        }
    }

    #[test]
    fn missing_windows_between_published_ones_in_time_order() {
        let windows = [
            listed("dt=2026-10-03/hour=14", 1),
            listed("dt=2026-10-03/hour=10", 2),
            listed("dt=2026-10-03/hour=11", 1),
        ];
        let slots = slots(&windows, None);
        let shown: Vec<(&str, SlotState)> = slots
            .iter()
            .map(|s| (s.address.as_str(), s.state))
            .collect();
        assert_eq!(
            shown,
            [
                ("dt=2026-10-03/hour=10", SlotState::Rewritten),
                ("dt=2026-10-03/hour=11", SlotState::Published),
                ("dt=2026-10-03/hour=12", SlotState::Missing),
                ("dt=2026-10-03/hour=13", SlotState::Missing),
                ("dt=2026-10-03/hour=14", SlotState::Published),
            ]
        );
    }

    #[test]
    fn text_from_the_table_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
