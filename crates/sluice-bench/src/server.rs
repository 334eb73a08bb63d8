//! What the bench's test servers (tansu, moto) share: finding the binary `scripts/servers
//! install` cached, a free loopback port, and waiting until the server listens.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::alternatives::BenchError;

/// The binary named by environment variable `env`, else `~/.cache/sluice/<cached>`; `None`
/// when it is not there.
pub fn cached_binary(env: &str, cached: &str) -> Option<PathBuf> {
    let path = std::env::var_os(env).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/sluice").join(cached))
    })?;
    path.exists().then_some(path)
}

/// A loopback port free now.
pub fn free_port() -> Result<u16, BenchError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until `child` (server `what`) accepts connections on `port`, for up to `limit`;
/// kills it when it does not.
pub fn wait_listening(
    child: &mut Child,
    port: u16,
    what: &str,
    limit: Duration,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + limit;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait()? {
            return Err(format!("{what} exited before listening: {status}").into());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!("{what} did not listen within {} s", limit.as_secs()).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
