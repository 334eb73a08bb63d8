//! The fenced blocks of the documentation, and what they claim the binary prints.
//!
//! A block is marked by the line before its fence:
//! - `<!-- test: run -->` before a ```sh block: commands that run as written; a line of it
//!   starting `#>` shows a line they print (stdout and stderr, in order).
//! - `<!-- test: output -->` before a ```text or ```json block: lines the runnable block
//!   before it prints, in order (other lines may come between).
//! - `<!-- test: output of tests/NAME.rs -->`: output that test checks (it needs a server
//!   the documentation's commands do not start).
//! - `<!-- test: figure -->`: a picture, not output.
//!
//! A ```text or ```json block with none of these fails the test: output shown in the
//! documentation is checked, or said not to be output. In shown output `…` stands for any
//! text (a time, a path, a size that varies); a JSON block matches a printed line holding
//! the same object, `…` in its strings.

pub const RUN: &str = "<!-- test: run -->";
const OUTPUT: &str = "<!-- test: output -->";
const OUTPUT_OF: &str = "<!-- test: output of ";
const FIGURE: &str = "<!-- test: figure -->";

/// The documented output of one block.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Where the block is, `file:line`.
    pub at: String,
    pub lines: Vec<String>,
    pub json: bool,
}

#[derive(Debug, Clone)]
pub enum Block {
    /// Commands to run, with the lines they show (`#>`).
    Run { body: String, shown: Shown },
    /// What the runnable block before it prints.
    Output(Shown),
    /// What the test file `test` checks.
    OutputOf { test: String, shown: Shown },
}

/// The marked blocks of `markdown` (the file `file`), in order; an unmarked block of output
/// is an error naming it.
pub fn blocks(file: &str, markdown: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut marker: Option<&str> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        let Some(lang) = trimmed.strip_prefix("```") else {
            if !trimmed.is_empty() {
                marker = Some(trimmed);
            }
            i += 1;
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let at = format!("{file}:{}", i + 1);
        let body: Vec<String> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim() != "```")
            .map(|l| {
                l.get(indent..)
                    .unwrap_or(l.trim_start())
                    .trim_end()
                    .to_string()
            })
            .collect();
        i += body.len() + 2;
        let json = lang == "json";
        let output = |lines: Vec<String>| Shown {
            at: at.clone(),
            lines,
            json,
        };
        match marker.take() {
            Some(RUN) if lang == "sh" => {
                let shown = body
                    .iter()
                    .filter_map(|l| l.trim_start().strip_prefix("#>"))
                    .map(|l| l.strip_prefix(' ').unwrap_or(l).to_string())
                    .collect();
                out.push(Block::Run {
                    body: body.join("\n"),
                    shown: Shown {
                        at: at.clone(),
                        lines: shown,
                        json: false,
                    },
                });
            }
            Some(RUN) => return Err(format!("{at}: {RUN} must be followed by a ```sh fence")),
            Some(OUTPUT) => out.push(Block::Output(output(body))),
            Some(FIGURE) => {}
            Some(m) if m.starts_with(OUTPUT_OF) => {
                let test = m[OUTPUT_OF.len()..].trim_end_matches("-->").trim();
                out.push(Block::OutputOf {
                    test: test.to_string(),
                    shown: output(body),
                });
            }
            _ if matches!(lang, "text" | "json" | "") => {
                return Err(format!(
                    "{at}: a ```{lang} block shows output nothing checks: mark it {OUTPUT} \
                     (after a runnable block), or {FIGURE}"
                ))
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether the printed line `printed` is the shown line `shown` (`…` standing for any text).
pub fn line_matches(shown: &str, printed: &str) -> bool {
    let printed = printed.trim_end();
    let mut parts = shown.split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = printed.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the printed JSON value is the shown one: the same keys, equal values, a shown
/// string with `…` matching as a line does.
fn json_matches(shown: &serde_json::Value, printed: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (shown, printed) {
        (Value::String(s), Value::String(p)) => line_matches(s, p),
        (Value::Object(s), Value::Object(p)) => {
            s.len() == p.len()
                && s.iter()
                    .all(|(k, v)| p.get(k).is_some_and(|pv| json_matches(v, pv)))
        }
        (Value::Array(s), Value::Array(p)) => {
            s.len() == p.len() && s.iter().zip(p).all(|(a, b)| json_matches(a, b))
        }
        _ => shown == printed,
    }
}

/// Checks that `printed` shows `shown`: its lines in order (others may come between), or
/// for JSON, one printed line holding the shown object.
pub fn check(shown: &Shown, printed: &str) -> Result<(), String> {
    let printed_lines: Vec<&str> = printed.lines().collect();
    if shown.json {
        let value: serde_json::Value = serde_json::from_str(&shown.lines.join("\n"))
            .map_err(|e| format!("{}: the shown JSON does not parse: {e}", shown.at))?;
        let found = printed_lines.iter().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|p| json_matches(&value, &p))
        });
        return if found {
            Ok(())
        } else {
            Err(format!(
                "{}: no printed line holds the shown JSON\n--- printed\n{printed}",
                shown.at
            ))
        };
    }
    // The earliest match of each line in turn: if any order-keeping match exists, this finds one.
    let mut next = 0;
    for line in &shown.lines {
        match printed_lines[next..]
            .iter()
            .position(|p| line_matches(line, p))
        {
            Some(at) => next += at + 1,
            None => {
                return Err(format!(
                    "{}: the binary does not print (in this order) the shown line\n  {line}\n--- printed\n{printed}",
                    shown.at
                ))
            }
        }
    }
    Ok(())
}

/// The output `docs_file` shows as checked by the test file `test`.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
pub fn shown_of(docs_file: &str, test: &str) -> Vec<Shown> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(docs_file);
    let text = std::fs::read_to_string(path).unwrap();
    blocks(docs_file, &text)
        .unwrap()
        .into_iter()
        .filter_map(|b| match b {
            Block::OutputOf { test: t, shown } if t == test => Some(shown),
            _ => None,
        })
        .collect()
}

#[test]
fn shown_lines_match_with_any_text_for_an_ellipsis() {
    assert!(line_matches("version   4", "version   4"));
    assert!(!line_matches("version   4", "version   45"));
    assert!(line_matches(
        "table     file:///…/t/",
        "table     file:///tmp/x/t/"
    ));
    assert!(line_matches("a … b … c", "a 1 b 2 c  "));
    assert!(!line_matches("a … b … c", "a 1 c 2 b"));
    assert!(line_matches("…", "anything"));
    assert!(!line_matches("x…x", "x"));
    let shown = Shown {
        at: "t".into(),
        lines: vec!["one".into(), "th…".into()],
        json: false,
    };
    assert!(check(&shown, "zero\none\ntwo\nthree\n").is_ok());
    assert!(check(&shown, "three\none\n").is_err());
    let json = Shown {
        at: "t".into(),
        lines: vec![r#"{"a": "x…", "b": 1}"#.into()],
        json: true,
    };
    assert!(check(&json, "noise\n{\"b\":1,\"a\":\"xyz\"}\n").is_ok());
    assert!(check(&json, "{\"b\":2,\"a\":\"xyz\"}\n").is_err());
    assert!(check(&json, "{\"b\":1,\"a\":\"xyz\",\"c\":0}\n").is_err());
}

#[test]
fn an_unmarked_block_of_output_is_refused() {
    let doc = "text\n\n```text\nversion 4\n```\n";
    assert!(blocks("d.md", doc).unwrap_err().contains("d.md:3"));
    let marked = "<!-- test: figure -->\n```text\nA ──▶ B\n```\n";
    assert!(blocks("d.md", marked).unwrap().is_empty());
    let indented = format!("- item\n\n  {RUN}\n  ```sh\n  echo hi\n  #> hi\n  ```\n");
    match &blocks("d.md", &indented).unwrap()[..] {
        [Block::Run { body, shown }] => {
            assert_eq!(body, "echo hi\n#> hi");
            assert_eq!(shown.lines, ["hi"]);
        }
        other => panic!("{other:?}"),
    }
}
