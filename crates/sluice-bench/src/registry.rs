//! The schema registry of the Kafka bench's registry cases: the suite's own
//! (tests/servers/registry.py, in the Python the bench's S3 case uses), its state written
//! beforehand so the flat schema is id 1 as Avro ([`crate::avro`]) and id 2 as Protobuf
//! ([`crate::protobuf`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::alternatives::BenchError;

/// A running registry, killed when dropped.
pub struct Registry {
    child: Child,
    pub url: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the registry with the flat schema as id 1 (Avro, subject `events-avro-value`) and
/// id 2 (Protobuf, subject `events-protobuf-value`); `None` when the Python the test command
/// installs is missing.
pub fn start_registry(work: &Path) -> Result<Option<Registry>, BenchError> {
    let Some(python) = crate::server::cached_binary("SLUICE_PYTHON", "venv/bin/python") else {
        eprintln!("kafka avro, protobuf: no Python (run the test command once); skipped");
        return Ok(None);
    };
    let state = work.join("registry.json");
    let seeded = serde_json::json!({
        "schemas": [
            {"schema": crate::avro::schema(), "schemaType": "AVRO", "references": []},
            {"schema": crate::protobuf::SCHEMA, "schemaType": "PROTOBUF", "references": []},
        ],
        "subjects": {
            format!("{}-value", crate::avro::TOPIC): [1],
            format!("{}-value", crate::protobuf::TOPIC): [2],
        },
    });
    std::fs::write(&state, seeded.to_string())?;
    let script: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/servers/registry.py");
    let port = crate::server::free_port()?;
    let mut child = Command::new(python)
        .arg(script)
        .args(["--port", &port.to_string(), "--state"])
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    crate::server::wait_listening(&mut child, port, "the registry", Duration::from_secs(30))?;
    Ok(Some(Registry {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }))
}
