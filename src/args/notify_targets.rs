//! `sluice run`'s notify targets as configured: `[[notify]]` in the config file,
//! `--notify-url` and `--notify-command`, and their validation.

use std::collections::BTreeSet;

use serde::Deserialize;
use sluice_notify::parse_reasons;
use sluice_publish::valid_target_name;
use sluice_window::parse_duration_ms;

use crate::exit::usage;

/// One delivery attempt's bound unless a target gives its own.
const TIMEOUT_DEFAULT: &str = "10s";

/// A `[[notify]]` target of the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Names the target's bookkeeping in the table: keep it when the URL or command changes.
    pub name: String,
    /// POST to this http:// or https:// URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Or run this command (no shell: `["sh", "-c", "..."]` for one), JSON on stdin.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `complete`, `rewritten`; both when left out.
    #[serde(default)]
    pub on: Vec<String>,
    /// One attempt's bound, e.g. 10s. [default: 10s]
    #[serde(default)]
    pub timeout: Option<String>,
}

/// The targets given as flags: `--notify-url NAME=URL`, `--notify-command NAME=COMMAND` (run
/// by `sh -c`).
pub fn targets_from_flags(
    urls: &[String],
    commands: &[String],
) -> anyhow::Result<Vec<NotifyConfig>> {
    let mut out: Vec<NotifyConfig> = Vec::new();
    let given = urls
        .iter()
        .map(|u| ("--notify-url", u))
        .chain(commands.iter().map(|c| ("--notify-command", c)));
    for (flag, text) in given {
        let (name, value) = super::values::key_value(flag, text)?;
        if out.iter().any(|t| t.name == name) {
            return Err(usage(format!("{flag}: target {name} is given twice")));
        }
        let mut target = NotifyConfig {
            name,
            ..NotifyConfig::default()
        };
        if flag == "--notify-url" {
            target.url = Some(value);
        } else {
            target.command = Some(vec!["sh".into(), "-c".into(), value]);
        }
        out.push(target);
    }
    Ok(out)
}

/// Checks every target: a valid, unique name; a URL or a command, not both; known reasons;
/// a valid timeout.
pub fn check(targets: &[NotifyConfig]) -> anyhow::Result<()> {
    let mut names = BTreeSet::new();
    for t in targets {
        let at = format!("notify target {:?}", t.name);
        if !valid_target_name(&t.name) {
            return Err(usage(format!(
                "{at}: use 1 to 64 letters, digits, '_', '-' or '.' in a name"
            )));
        }
        if !names.insert(&t.name) {
            return Err(usage(format!("{at} is given twice")));
        }
        match (&t.url, &t.command) {
            (Some(url), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(usage(format!(
                        "{at}: url {url:?} is not an http:// or https:// URL"
                    )));
                }
            }
            (None, Some(argv)) if !argv.is_empty() && !argv[0].is_empty() => {}
            (None, Some(_)) => return Err(usage(format!("{at}: the command is empty"))),
            (Some(_), Some(_)) => {
                return Err(usage(format!("{at}: give a url or a command, not both")))
            }
            (None, None) => return Err(usage(format!("{at}: give a url or a command"))),
        }
        parse_reasons(&t.on).map_err(|e| usage(format!("{at}: on: {e}")))?;
        timeout_ms(t).map_err(|e| usage(format!("{at}: timeout: {e}")))?;
    }
    Ok(())
}

pub(crate) fn timeout_ms(t: &NotifyConfig) -> Result<u64, String> {
    let ms = parse_duration_ms(t.timeout.as_deref().unwrap_or(TIMEOUT_DEFAULT))
        .map_err(|e| e.to_string())?;
    if ms <= 0 {
        return Err("must be more than 0".into());
    }
    Ok(ms as u64)
}
