//! Where notifications go: an HTTP(S) endpoint (POST) or a local command (JSON on stdin).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use async_trait::async_trait;

/// One delivery attempt of one notification. Object safe: a run holds its targets as
/// `Box<dyn Target>`, and tests can bring their own.
#[async_trait]
pub trait Target: Send + Sync + std::fmt::Debug {
    /// Delivers `body` (a JSON object) with its idempotency `key`; `Ok` only when the
    /// receiver accepted it.
    async fn deliver(&self, body: &[u8], key: &str) -> Result<(), DeliveryError>;
}

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("POST {url} failed: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("POST {url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("starting {program:?} failed: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program:?} exited with {status}{}", stderr_tail(.stderr))]
    Exit {
        program: String,
        status: String,
        stderr: String,
    },
    #[error("{program:?} ran longer than {timeout_ms} ms and was killed")]
    Timeout { program: String, timeout_ms: u64 },
    #[error("the delivery task failed: {0}")]
    Task(String),
}

fn stderr_tail(stderr: &str) -> String {
    let tail = stderr.trim();
    if tail.is_empty() {
        String::new()
    } else {
        let start = tail.char_indices().rev().nth(300).map_or(0, |(i, _)| i);
        format!(": {}", &tail[start..])
    }
}

/// POSTs the JSON body to a URL with the header `Idempotency-Key`; any 2xx is delivered.
#[derive(Debug)]
pub struct HttpTarget {
    url: String,
    client: reqwest::Client,
}

impl HttpTarget {
    /// `timeout_ms` bounds each attempt (connect, send, answer).
    pub fn new(url: &str, timeout_ms: u64) -> Result<HttpTarget, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(timeout_ms))
            .build()?;
        Ok(HttpTarget {
            url: url.to_string(),
            client,
        })
    }
}

#[async_trait]
impl Target for HttpTarget {
    async fn deliver(&self, body: &[u8], key: &str) -> Result<(), DeliveryError> {
        let response = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .body(body.to_vec())
            .send()
            .await
            .map_err(|source| DeliveryError::Request {
                url: self.url.clone(),
                source: source.without_url(),
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(DeliveryError::Status {
                url: self.url.clone(),
                status: status.as_u16(),
            })
        }
    }
}

/// Runs a command with the JSON body on stdin and the key in `SLUICE_IDEMPOTENCY_KEY`;
/// exit status 0 is delivered. No shell is involved: `argv[0]` is the program (give
/// `["sh", "-c", "..."]` for one).
#[derive(Debug)]
pub struct CommandTarget {
    argv: Vec<String>,
    timeout_ms: u64,
}

impl CommandTarget {
    /// `argv` must not be empty; `timeout_ms` bounds each run (then the command is killed).
    pub fn new(argv: Vec<String>, timeout_ms: u64) -> Option<CommandTarget> {
        (!argv.is_empty()).then_some(CommandTarget { argv, timeout_ms })
    }
}

#[async_trait]
impl Target for CommandTarget {
    async fn deliver(&self, body: &[u8], key: &str) -> Result<(), DeliveryError> {
        let argv = self.argv.clone();
        let body = body.to_vec();
        let key = key.to_string();
        let timeout = Duration::from_millis(self.timeout_ms);
        let timeout_ms = self.timeout_ms;
        // A blocking child process on the blocking pool (sluice's tokio has no process
        // feature); waited for in short steps so the timeout can kill it.
        tokio::task::spawn_blocking(move || run_command(&argv, &body, &key, timeout, timeout_ms))
            .await
            .map_err(|e| DeliveryError::Task(e.to_string()))?
    }
}

fn run_command(
    argv: &[String],
    body: &[u8],
    key: &str,
    timeout: Duration,
    timeout_ms: u64,
) -> Result<(), DeliveryError> {
    let program = argv[0].clone();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("SLUICE_IDEMPOTENCY_KEY", key)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| DeliveryError::Spawn {
            program: program.clone(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that exits without reading its input is judged by its status alone.
        let _ = stdin.write_all(body);
    }
    // stderr is read on a thread of its own, so a chatty command never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut text);
            text
        })
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(DeliveryError::Timeout {
                    program,
                    timeout_ms,
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => return Err(DeliveryError::Spawn { program, source }),
        }
    };
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        Err(DeliveryError::Exit {
            program,
            status: status.to_string(),
            stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64) -> CommandTarget {
        CommandTarget::new(vec!["sh".into(), "-c".into(), script.into()], timeout_ms).unwrap()
    }

    #[tokio::test]
    async fn a_command_gets_the_body_on_stdin_and_the_key_in_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let target = sh(
            &format!(
                "printf '%s|' \"$SLUICE_IDEMPOTENCY_KEY\" > {0}; cat >> {0}",
                out.display()
            ),
            5_000,
        );
        target.deliver(b"{\"a\":1}", "t/dt=1/7").await.unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "t/dt=1/7|{\"a\":1}");
    }

    #[tokio::test]
    async fn a_failing_command_says_its_status_and_stderr_and_a_slow_one_is_killed() {
        let e = sh("echo 'no disk left' >&2; exit 3", 5_000)
            .deliver(b"{}", "k")
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("exit status: 3") && text.contains("no disk left"),
            "{text}"
        );
        let started = Instant::now();
        let e = sh("sleep 5", 200).deliver(b"{}", "k").await.unwrap_err();
        assert!(matches!(e, DeliveryError::Timeout { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(4));
        let e = CommandTarget::new(vec!["/no/such/program".into()], 1_000)
            .unwrap()
            .deliver(b"{}", "k")
            .await
            .unwrap_err();
        assert!(matches!(e, DeliveryError::Spawn { .. }), "{e}");
        assert!(CommandTarget::new(Vec::new(), 1_000).is_none());
    }

    #[tokio::test]
    async fn an_unreachable_url_is_a_delivery_error_not_a_panic() {
        // A port nothing listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = HttpTarget::new(&format!("http://127.0.0.1:{port}/hook"), 2_000).unwrap();
        let e = target.deliver(b"{}", "k").await.unwrap_err();
        assert!(matches!(e, DeliveryError::Request { .. }), "{e}");
    }
}
