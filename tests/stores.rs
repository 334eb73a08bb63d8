//! Object stores, end to end: the real binary reaches GCS and Azure endpoints (the `gcs` and
//! `azure` features, on by default) and S3 (moto), and never prints a credential, even with
//! every log target at `trace`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use crate::common::BIN;

/// Secrets that must never appear in sluice's output.
const S3_SECRET: &str = "s3-secret-Zq8WmT3vKx";
/// The Azure account key (base64 of `azure-secret-Hy7Pq2Ln`): it signs requests and is never
/// sent itself.
const AZURE_KEY: &str = "YXp1cmUtc2VjcmV0LUh5N1BxMkxu";

/// A stand-in object store endpoint: answers every request `404 Not Found` and records each
/// request line with its `Authorization` header.
struct NotFound {
    address: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl NotFound {
    fn start() -> NotFound {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        let mut request = String::new();
                        let mut length = 0usize;
                        while reader.read_line(&mut line).unwrap_or(0) > 0 {
                            let l = line.trim_end().to_string();
                            line.clear();
                            if l.is_empty() {
                                break;
                            }
                            let lower = l.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                            if request.is_empty() || lower.starts_with("authorization:") {
                                request.push_str(&l);
                                request.push(' ');
                            }
                        }
                        if request.is_empty() {
                            return;
                        }
                        let mut body = vec![0u8; length];
                        if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                            return;
                        }
                        seen.lock().unwrap().push(request);
                        let reply = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
                        if stream.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        NotFound { address, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// `sluice windows --table TABLE` with every log target at `trace`.
fn windows(table: &str, options: &[String]) -> Output {
    let mut args = vec!["windows".to_string(), "--table".into(), table.into()];
    for o in options {
        args.push("--storage-option".into());
        args.push(o.clone());
    }
    Command::new(BIN)
        .args(&args)
        .env("SLUICE_LOG", "trace")
        .output()
        .expect("sluice runs")
}

/// `sluice windows` of a table its endpoint does not have: exit 1, naming the table.
fn failed_open(table: &str, options: &[String]) -> Output {
    let out = windows(table, options);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("opening the Delta table at {table}/")),
        "{stderr}"
    );
    out
}

fn assert_no_secret(out: &Output, secrets: &[&str]) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} printed:\n{text}");
    }
}

#[cfg(feature = "azure")]
#[test]
fn azure_tables_are_reached_with_a_signed_request_and_the_key_is_never_printed() {
    let endpoint = NotFound::start();
    let out = failed_open(
        "az://landing/events",
        &[
            "azure_storage_account_name=sluiceacct".into(),
            format!("azure_storage_account_key={AZURE_KEY}"),
            format!("azure_endpoint={}", endpoint.address),
            "azure_allow_http=true".into(),
        ],
    );
    let requests = endpoint.requests();
    assert!(
        requests.iter().any(|r| r.starts_with("GET /landing")
            && r.contains("prefix=events%2F_delta_log%2F")
            && r.contains("SharedKey sluiceacct:")),
        "{requests:?}"
    );
    assert_no_secret(&out, &[AZURE_KEY, "azure-secret-Hy7Pq2Ln"]);
    eprintln!(
        "azure: {} signed requests reached the endpoint",
        requests.len()
    );
}

#[cfg(feature = "gcs")]
#[test]
fn gcs_tables_are_reached_through_the_gcs_api() {
    let endpoint = NotFound::start();
    failed_open(
        "gs://landing/events",
        &[
            format!("google_base_url={}", endpoint.address),
            "google_skip_signature=true".into(),
        ],
    );
    let requests = endpoint.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /landing?list-type=2&prefix=events%2F_delta_log%2F")),
        "{requests:?}"
    );
    eprintln!("gcs: {} requests reached the endpoint", requests.len());
}

#[test]
fn s3_credentials_never_appear_in_logs_or_errors() {
    let moto = crate::servers::moto("lake");
    let dir = tempfile::tempdir().unwrap();
    let input = crate::common::input(dir.path(), 2_000, 2, 7, 1);
    let source = format!("ndjson:{}", input.display());
    let env: Vec<(&str, String)> = crate::servers::s3_env(&moto)
        .into_iter()
        .map(|(k, v)| match k {
            "AWS_SECRET_ACCESS_KEY" => (k, S3_SECRET.to_string()),
            _ => (k, v),
        })
        .collect();
    let run = |table: &str, extra: &[&str]| {
        let mut args = crate::common::run_args(&source, table, &["--key", "event_id"]);
        args.extend_from_slice(extra);
        Command::new(BIN)
            .args(&args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("SLUICE_LOG", "trace")
            .output()
            .expect("sluice runs")
    };
    // A run that lands rows, with the secret from the environment.
    let out = run("s3://lake/events", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_secret(&out, &[S3_SECRET]);
    // A run that fails (no such bucket), with the secret given as a storage option.
    let option = format!("aws_secret_access_key={S3_SECRET}-option");
    let out = run("s3://no-such-bucket/events", &["--storage-option", &option]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("s3://no-such-bucket/events"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_secret(&out, &[S3_SECRET]);
    let rows = Command::new(BIN)
        .args([
            "query",
            "--table",
            "t=s3://lake/events",
            "--format",
            "csv",
            "SELECT count(*) FROM t",
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&rows.stdout).to_string();
    let count: u64 = rows.lines().nth(1).unwrap_or_default().parse().unwrap_or(0);
    assert!(count > 1_000, "rows landed on S3: {rows}");
    eprintln!("s3: {count} rows landed; no secret in trace-level output");
}

/// The options of an S3 table and source, as docs/operations.md lists them, reach a real S3
/// server (moto) given as flags alone; a misspelt key is refused with the nearest one before
/// anything is opened (exit 2), and so is a plain-HTTP endpoint without `allow_http`.
#[test]
fn s3_options_are_checked_and_the_documented_keys_reach_the_store() {
    let moto = crate::servers::moto("keys");
    let dir = tempfile::tempdir().unwrap();
    let input = crate::common::input(dir.path(), 500, 1, 3, 1);
    let table = "s3://keys/t";
    let run = |options: &[String]| {
        let mut command = Command::new(BIN);
        command
            .args(["run", "--source", &format!("ndjson:{}", input.display())])
            .args(["--table", table]);
        for o in options {
            command.args(["--storage-option", o]);
        }
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
            command.env_remove(k);
        }
        command.output().unwrap()
    };
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).to_string();
    let mut options = vec![
        format!("endpoint={}", moto.address),
        "access_key_id=test".to_string(),
        "secret_access_key=test".to_string(),
        "region=us-east-1".to_string(),
    ];
    let out = run(&options);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "--storage-option: the endpoint {} is plain HTTP: give allow_http=true too",
            moto.address
        )),
        "{}",
        stderr(&out)
    );
    options.push("allow_http=true".to_string());
    let mut misspelt = options.clone();
    misspelt[1] = "acces_key_id=test".to_string();
    let out = run(&misspelt);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "sluice: --storage-option: \"acces_key_id\" is not an option of S3 (did you mean \"access_key_id\"?)"
    );
    // Nothing was written: there is no table yet.
    let mut status = vec!["status", "--table", table];
    let flags: Vec<String> = options
        .iter()
        .flat_map(|o| ["--storage-option".to_string(), o.clone()])
        .collect();
    status.extend(flags.iter().map(String::as_str));
    let out = Command::new(BIN).args(&status).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The documented keys, right: the run lands in the store.
    let out = run(&options);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = Command::new(BIN).args(&status).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // Keyed by position: every line of the input is a row.
    let lines: usize = std::fs::read_dir(&input)
        .unwrap()
        .map(|f| {
            std::fs::read_to_string(f.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("data      {lines} rows")), "{text}");
}

/// Every object of `bucket` on `s3`, with its size and ETag, listed with boto3.
fn objects(s3: &crate::servers::Server, bucket: &str) -> Vec<String> {
    let script = "import sys, boto3\n\
                  pages = boto3.client('s3').get_paginator('list_objects_v2').paginate(Bucket=sys.argv[1])\n\
                  for page in pages:\n    \
                      for o in page.get('Contents', []):\n        \
                          print(o['Key'], o['Size'], o['ETag'])\n";
    let out = Command::new(crate::common::python())
        .args(["-c", script, bucket])
        .envs(crate::servers::s3_env(s3))
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// `sluice run --dry-run` on an S3 table (moto) reports what the run then publishes and
/// leaves every object of the bucket as it was.
#[test]
fn a_dry_run_leaves_the_bucket_as_it_was() {
    let moto = crate::servers::moto("lake");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let source = format!("ndjson:{}", input.display());
    let run = |extra: &[&str]| {
        let mut args = crate::common::run_args(&source, "s3://lake/events", &["--key", "event_id"]);
        args.extend_from_slice(extra);
        let out = Command::new(BIN)
            .args(&args)
            .envs(crate::servers::s3_env(&moto))
            .output()
            .expect("sluice runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    let slices = crate::common::stream_slices(2_000, 2, 13, 2, 0);
    for (i, (name, bytes)) in slices.iter().enumerate() {
        std::fs::write(input.join(name), bytes).unwrap();
        let before = objects(&moto, "lake");
        let report: serde_json::Value =
            serde_json::from_str(&run(&["--dry-run", "--format", "json"])).unwrap();
        assert_eq!(objects(&moto, "lake"), before, "slice {i}");
        assert_eq!(report["table_exists"], i > 0, "{report}");
        let rows: i64 = (report["windows"].as_array().unwrap().iter())
            .map(|w| w["rows"].as_i64().unwrap())
            .sum();
        assert!(rows > 0, "{report}");
        run(&[]);
        assert_ne!(objects(&moto, "lake"), before, "the run writes");
    }
}
