//! A moto S3 server for the long log on S3: the binary `scripts/servers install` puts in the
//! cache (or `SLUICE_MOTO`), started on a free loopback port with one bucket, killed when
//! dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::alternatives::BenchError;

/// A running moto server with one bucket.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub bucket: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Object store options (as `--storage-option` keys and as the environment the `sluice`
    /// binary reads) that point deltalake at this server.
    pub fn options(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// Starts moto with bucket `bucket`; `None` when moto is not installed.
pub fn start(bucket: &str) -> Result<Option<Moto>, BenchError> {
    start_logged(bucket, None)
}

/// [`start`], moto's request log (one line per request) written to `log`.
pub fn start_logged(
    bucket: &str,
    log: Option<&std::path::Path>,
) -> Result<Option<Moto>, BenchError> {
    let Some(binary) = crate::server::cached_binary("SLUICE_MOTO", "venv/bin/moto_server") else {
        return Ok(None);
    };
    let port = crate::server::free_port()?;
    let mut child = Command::new(binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(match log {
            Some(path) => Stdio::from(std::fs::File::create(path)?),
            None => Stdio::null(),
        })
        .spawn()?;
    crate::server::wait_listening(&mut child, port, "moto", Duration::from_secs(60))?;
    let moto = Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
        bucket: bucket.to_string(),
    };
    // Create the bucket (moto takes unsigned requests).
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    if !reply.starts_with("HTTP/1.1 200") {
        return Err(format!("creating bucket {bucket} on moto: {reply}").into());
    }
    Ok(Some(moto))
}
