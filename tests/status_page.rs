//! The status page in a real browser: a followed run is live, `status --html` writes the
//! page, headless Chromium (Debian's `chromium`, installed by scripts/servers) loads and
//! renders it, and what it shows (the windows, a missing hour, the lag, the dead letters) is
//! what `status --format json` says at the same moment.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{ok, write_in, BIN};

fn chromium() -> PathBuf {
    let path = std::env::var_os("SLUICE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "{}: no Chromium (scripts/servers install puts Debian's there)",
        path.display()
    );
    path
}

/// Chromium, headless, with a profile of its own under `dir`.
fn browser(dir: &Path) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--allow-file-access-from-files",
        "--window-size=1280,1000",
    ])
    .arg(format!("--user-data-dir={}", dir.join("profile").display()))
    .stderr(Stdio::null());
    cmd
}

/// The page's DOM as the browser parsed it.
fn dom(dir: &Path, page: &Path) -> String {
    let out = browser(dir)
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium --dump-dom: {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The values of attribute `name` on elements carrying `marker`, in order.
fn attributes(dom: &str, marker: &str, name: &str) -> Vec<String> {
    dom.split('<')
        .filter(|element| element.contains(marker))
        .filter_map(|element| {
            let at = element.find(&format!("{name}=\""))? + name.len() + 2;
            let rest = &element[at..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

/// Stops the followed run when the test ends, passed or not.
struct Followed(Child);

impl Drop for Followed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn event(hour: u32, minute: u32, id: u32) -> String {
    format!("{{\"id\":{id},\"ts\":\"2026-10-03T{hour:02}:{minute:02}:00Z\",\"kind\":\"view\"}}\n")
}

#[test]
fn the_page_shows_what_status_says_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let source = format!("ndjson:{}", input.display());
    // Hours 10, 11, 13 and 14 (12 has nothing), and three lines that are dead letters.
    let mut lines = String::new();
    let mut id = 0;
    for hour in [10, 11, 13, 14] {
        for minute in (0..60).step_by(10) {
            id += 1;
            lines += &event(hour, minute, id);
        }
    }
    lines += "{\"id\":900,\"ts\":\"noon\",\"kind\":\"view\"}\n";
    lines += "{\"id\":901,\"ts\":\"later\",\"kind\":\"view\"}\n";
    lines += "{\"id\":902,\n";
    write_in(&input, "a.ndjson", &lines);
    // Followed, looking for new files once an hour: a file added after its first read waits.
    let run = Command::new(BIN)
        .args([
            "run", "--source", &source, "--table", t, "--window", "1h", "--key", "id",
        ])
        .args(["--follow", "--poll-interval", "1h"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sluice runs");
    let _run = Followed(run);
    let status = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "status", "--table", t, "--source", &source, "--format", "json",
        ];
        args.extend(extra);
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !table.join("_delta_log").exists()
        || status(&[])["pipelines"][0]["windows"].as_u64() != Some(3)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the run published 3 windows"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    write_in(&input, "b.ndjson", &event(15, 5, 999));
    let page = dir.path().join("status.html");
    let json = status(&["--html", page.to_str().unwrap()]);
    let dom = dom(dir.path(), &page);

    // Windows: the published ones, and hour 12 missing between them.
    let states = attributes(&dom, "data-state=", "data-state");
    let addresses = attributes(&dom, "data-state=", "data-address");
    let published = states.iter().filter(|s| *s != "missing").count();
    assert_eq!(
        published as u64,
        json["pipelines"][0]["windows"].as_u64().unwrap()
    );
    assert_eq!(
        addresses.first().map(String::as_str),
        json["pipelines"][0]["first_address"].as_str()
    );
    assert_eq!(
        addresses.last().map(String::as_str),
        json["pipelines"][0]["last_address"].as_str()
    );
    let missing: Vec<&String> = (addresses.iter().zip(&states))
        .filter(|(_, s)| *s == "missing")
        .map(|(a, _)| a)
        .collect();
    assert_eq!(missing, ["dt=2026-10-03/hour=12"]);
    // The lag: the file added after the run's last look, and the open window's part of the
    // first (published once its window is: a restart reads it again).
    let lag = &json["lag"];
    assert_eq!(lag["files_waiting"], 2, "{lag}");
    let added = event(15, 5, 999).len() as u64;
    assert!(lag["bytes_waiting"].as_u64().unwrap() > added, "{lag}");
    assert_eq!(
        attributes(&dom, "id=\"lag\"", "data-files-waiting"),
        [lag["files_waiting"].to_string()]
    );
    assert_eq!(
        attributes(&dom, "id=\"lag\"", "data-bytes-waiting"),
        [lag["bytes_waiting"].to_string()]
    );
    // The dead letters by reason.
    let reasons = attributes(&dom, "data-reason=", "data-reason");
    let counts = attributes(&dom, "data-reason=", "data-count");
    let shown: Vec<(String, i64)> = (reasons.into_iter().zip(counts))
        .map(|(r, n)| (r, n.parse().unwrap()))
        .collect();
    let said: Vec<(String, i64)> = json["dead_letters"]["sluice"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(r, n)| (r.clone(), n.as_i64().unwrap()))
        .collect();
    assert_eq!(shown, said);
    assert_eq!(said.iter().map(|(_, n)| n).sum::<i64>(), 3);
    let by_hour: i64 = attributes(&dom, "class=\"dead\"", "data-count")
        .iter()
        .map(|n| n.parse::<i64>().unwrap())
        .sum();
    assert_eq!(by_hour, 3);
    // The commits: one bar per hour they were made in, the table's version in the list.
    assert!(!attributes(&dom, "class=\"bar\"", "data-count").is_empty());
    assert_eq!(
        attributes(&dom, "id=\"summary\"", "data-version"),
        [json["version"].to_string()]
    );

    // Rendered: a screenshot of the page, not a blank one.
    let shot = dir.path().join("status.png");
    let out = browser(dir.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(out.status.success());
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}
