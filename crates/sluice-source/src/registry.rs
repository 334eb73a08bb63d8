//! A Confluent schema registry as sluice reads it: a message's schema by the id its wire
//! format carries (`GET /schemas/ids/{id}`), fetched once and kept for the run.
//!
//! The registry is part of the source: when it cannot be reached (refused connections,
//! timeouts, 5xx and 429 answers) the fetch is retried until it answers, so a registry that
//! is down delays the run and loses nothing. An id the registry does not know (404) is an
//! answer about the message: its record is a dead letter. Credentials (basic auth, a bearer
//! token, or a user and password in the URL) are sent with every request and never written
//! to logs or errors: [`RegistryOptions`] prints the URL without them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How requests to the registry authenticate.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum RegistryAuth {
    #[default]
    None,
    Basic {
        user: String,
        password: String,
    },
    Bearer(String),
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RegistryAuth::None => "None",
            RegistryAuth::Basic { .. } => "Basic(<redacted>)",
            RegistryAuth::Bearer(_) => "Bearer(<redacted>)",
        })
    }
}

/// Where the registry is and how to authenticate.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// The base URL, without credentials (those are in `auth`).
    url: url::Url,
    pub auth: RegistryAuth,
}

impl std::fmt::Debug for RegistryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegistryOptions({}, {:?})", self.url, self.auth)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryOptionsError {
    #[error("{0:?} is not a URL: {1}")]
    NotAUrl(String, url::ParseError),
    #[error("{0}: a schema registry URL is http:// or https://")]
    Scheme(String),
    #[error("{0}: give credentials once: in the URL or as an option, not both")]
    TwoCredentials(String),
}

impl RegistryOptions {
    /// The registry at `url` (`http(s)://[user:password@]host[:port][/path]`); credentials
    /// in the URL are basic auth, unless `auth` gives others (which is an error).
    pub fn new(url: &str, auth: RegistryAuth) -> Result<RegistryOptions, RegistryOptionsError> {
        let mut parsed =
            url::Url::parse(url).map_err(|e| RegistryOptionsError::NotAUrl(redact(url), e))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RegistryOptionsError::Scheme(redact(url)));
        }
        let mut auth = auth;
        if !parsed.username().is_empty() {
            if auth != RegistryAuth::None {
                return Err(RegistryOptionsError::TwoCredentials(redact(url)));
            }
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            auth = RegistryAuth::Basic {
                user: decode(parsed.username()),
                password: decode(parsed.password().unwrap_or("")),
            };
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
        }
        Ok(RegistryOptions { url: parsed, auth })
    }

    /// The URL without credentials.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    fn schema_url(&self, id: u32) -> String {
        format!(
            "{}/schemas/ids/{id}",
            self.url.as_str().trim_end_matches('/')
        )
    }

    /// The URL of a subject's version (`latest` or a number); the subject escaped as a path
    /// segment.
    fn version_url(&self, subject: &str, version: &str) -> String {
        format!(
            "{}/subjects/{}/versions/{version}",
            self.url.as_str().trim_end_matches('/'),
            url::form_urlencoded::byte_serialize(subject.as_bytes()).collect::<String>()
        )
    }
}

/// `url` with anything between `://` and `@` hidden (for an error about a URL that did not
/// parse: it may hold a password).
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://<redacted>@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// The kind of a registered schema (`schemaType`; absent means Avro).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    Avro,
    Protobuf,
    Json,
}

impl SchemaKind {
    /// How people call the format.
    pub fn label(self) -> &'static str {
        match self {
            SchemaKind::Avro => "Avro",
            SchemaKind::Protobuf => "Protobuf",
            SchemaKind::Json => "JSON Schema",
        }
    }

    /// The registry's `schemaType`.
    pub fn name(self) -> &'static str {
        match self {
            SchemaKind::Avro => "AVRO",
            SchemaKind::Protobuf => "PROTOBUF",
            SchemaKind::Json => "JSON",
        }
    }
}

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    pub id: u32,
    pub kind: SchemaKind,
    /// The schema's text (Avro: its JSON; Protobuf: `.proto` text, or a serialized
    /// `FileDescriptorProto` in base64 as confluent-kafka's Python serializer registers it).
    pub text: String,
    /// The schemas it imports (Protobuf `import`s, Avro named types of other subjects).
    pub references: Vec<SchemaReference>,
}

/// A schema's import: the name it is imported by, and the subject version that holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("the schema registry at {url} cannot be reached (asked for {what}): {source}")]
    Unreachable {
        url: String,
        what: String,
        source: Box<reqwest::Error>,
    },
    #[error("the schema registry at {url} answered {status} for {what}: {body}")]
    Status {
        url: String,
        what: String,
        status: u16,
        body: String,
    },
    #[error("the schema registry at {url} answered {what} with what sluice cannot read: {why}")]
    BadAnswer {
        url: String,
        what: String,
        why: String,
    },
}

impl RegistryError {
    /// Whether asking again later may succeed: the registry is down, overloaded or failing
    /// (not: it refused our credentials, or answered with something that is not a schema).
    pub fn is_transient(&self) -> bool {
        match self {
            RegistryError::Unreachable { .. } => true,
            RegistryError::Status { status, .. } => *status >= 500 || *status == 429,
            RegistryError::BadAnswer { .. } => false,
        }
    }
}

/// What the registry says about an id.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(Arc<RegisteredSchema>),
    /// The registry does not know the id (404).
    Unknown,
}

/// The first wait after a failed fetch; it doubles up to [`RETRY_MS_MAX`].
pub const RETRY_MS_FIRST: u64 = 250;
/// The longest wait between two tries of a registry that cannot be reached.
pub const RETRY_MS_MAX: u64 = 5_000;
/// How long one request may take.
pub const REQUEST_MS_MAX: u64 = 10_000;

/// The most schemas one schema may reference, all references counted (a bound on what a
/// registry's answers can make sluice fetch).
pub const REFERENCES_MAX: usize = 256;

/// A registry client with its caches: schemas by id, and by subject and version (a numbered
/// version of a subject never changes).
pub struct SchemaRegistry {
    options: RegistryOptions,
    client: reqwest::Client,
    schemas: HashMap<u32, Arc<RegisteredSchema>>,
    versions: HashMap<(String, i64), RegisteredSchema>,
}

impl SchemaRegistry {
    pub fn new(options: RegistryOptions) -> SchemaRegistry {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(REQUEST_MS_MAX))
            .build()
            .unwrap_or_default();
        SchemaRegistry {
            options,
            client,
            schemas: HashMap::new(),
            versions: HashMap::new(),
        }
    }

    /// Keeps `schema` as if fetched (tests, and schemas known before the run).
    pub fn keep(&mut self, schema: RegisteredSchema) {
        self.schemas.insert(schema.id, Arc::new(schema));
    }

    /// Keeps `schema` as version `version` of `subject`, as if fetched.
    pub fn keep_version(&mut self, subject: &str, version: i64, schema: RegisteredSchema) {
        self.versions.insert((subject.to_string(), version), schema);
    }

    /// The schema `id`: from the cache, else fetched, trying again for as long as the
    /// registry cannot be reached (a registry that is down delays the run; dropping the
    /// future stops the waiting).
    pub async fn schema(&mut self, id: u32) -> Result<Lookup, RegistryError> {
        if let Some(s) = self.schemas.get(&id) {
            return Ok(Lookup::Found(s.clone()));
        }
        let url = self.options.schema_url(id);
        match self.retrying(&url, &format!("schema id {id}"), id).await? {
            Some(s) => {
                let s = Arc::new(s);
                self.schemas.insert(id, s.clone());
                Ok(Lookup::Found(s))
            }
            None => Ok(Lookup::Unknown),
        }
    }

    /// The latest version of `subject`'s schema (`None`: no such subject), waiting for the
    /// registry as [`SchemaRegistry::schema`] does.
    pub async fn latest(
        &mut self,
        subject: &str,
    ) -> Result<Option<RegisteredSchema>, RegistryError> {
        let what = format!("the latest schema of subject {subject}");
        self.retrying(&self.options.version_url(subject, "latest"), &what, 0)
            .await
    }

    /// Version `version` of `subject`'s schema (`None`: the registry does not have it; `-1`
    /// is the latest), as a reference names it; waiting as [`SchemaRegistry::schema`] does.
    pub async fn version(
        &mut self,
        subject: &str,
        version: i64,
    ) -> Result<Option<RegisteredSchema>, RegistryError> {
        let key = (subject.to_string(), version);
        if let Some(found) = self.versions.get(&key) {
            return Ok(Some(found.clone()));
        }
        let what = format!("version {version} of subject {subject}");
        let path = match version {
            -1 => "latest".to_string(),
            v => v.to_string(),
        };
        let found = self
            .retrying(&self.options.version_url(subject, &path), &what, 0)
            .await?;
        if let Some(found) = found.as_ref().filter(|_| version >= 1) {
            self.versions.insert(key, found.clone());
        }
        Ok(found)
    }

    /// The schemas `main` references, transitively (each with the reference that names it,
    /// in the order met), or why they cannot all be had (one the registry does not have, more
    /// than [`REFERENCES_MAX`]); waiting for the registry as [`SchemaRegistry::schema`] does.
    pub async fn references(
        &mut self,
        main: &RegisteredSchema,
    ) -> Result<Result<Vec<(SchemaReference, RegisteredSchema)>, String>, RegistryError> {
        let id = main.id;
        let mut found = Vec::new();
        let mut asked = std::collections::HashSet::new();
        let mut pending: Vec<SchemaReference> = main.references.iter().rev().cloned().collect();
        while let Some(reference) = pending.pop() {
            if !asked.insert((reference.subject.clone(), reference.version)) {
                continue;
            }
            if asked.len() > REFERENCES_MAX {
                return Ok(Err(format!(
                    "schema id {id} references more than {REFERENCES_MAX} schemas"
                )));
            }
            let Some(schema) = self.version(&reference.subject, reference.version).await? else {
                return Ok(Err(format!(
                    "schema id {id} references {:?}, which the registry does not have (version {} of subject {})",
                    reference.name, reference.version, reference.subject
                )));
            };
            pending.extend(schema.references.iter().rev().cloned());
            found.push((reference, schema));
        }
        Ok(Ok(found))
    }

    /// A GET of a schema at `url`, tried again while the registry cannot be reached.
    async fn retrying(
        &self,
        url: &str,
        what: &str,
        id: u32,
    ) -> Result<Option<RegisteredSchema>, RegistryError> {
        let mut wait_ms = RETRY_MS_FIRST;
        let mut tries = 0u32;
        loop {
            tries += 1;
            match self.fetch(url, what, id).await {
                Ok(found) => {
                    if tries > 1 {
                        tracing::info!(url = %self.options.url, what, tries, "the schema registry answered");
                    }
                    return Ok(found);
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, tries, wait_ms, "the schema registry failed; trying again");
                    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                    wait_ms = (wait_ms * 2).min(RETRY_MS_MAX);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One GET of a schema at `url` (`None`: 404); `id` unless the answer names its own.
    async fn fetch(
        &self,
        url: &str,
        what: &str,
        id: u32,
    ) -> Result<Option<RegisteredSchema>, RegistryError> {
        let base = self.options.url.to_string();
        let mut request = self
            .client
            .get(url)
            .header("Accept", "application/vnd.schemaregistry.v1+json");
        request = match &self.options.auth {
            RegistryAuth::None => request,
            RegistryAuth::Basic { user, password } => request.basic_auth(user, Some(password)),
            RegistryAuth::Bearer(token) => request.bearer_auth(token),
        };
        let unreachable = |source: reqwest::Error| RegistryError::Unreachable {
            url: base.clone(),
            what: what.to_string(),
            // The request's URL has no credentials in it (they go in a header).
            source: Box::new(source.without_url()),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(unreachable)?;
        match status {
            200 => parse_schema(id, &body)
                .map(Some)
                .map_err(|why| RegistryError::BadAnswer {
                    url: base,
                    what: what.to_string(),
                    why,
                }),
            404 => Ok(None),
            _ => Err(RegistryError::Status {
                url: base,
                what: what.to_string(),
                status,
                body: String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned(),
            }),
        }
    }
}

/// The registry's answer for a schema: `{"schema": "...", "schemaType": "AVRO"}` (with its
/// `id` when asked by subject; else `id`).
fn parse_schema(id: u32, body: &[u8]) -> Result<RegisteredSchema, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        schema: String,
        schema_type: Option<String>,
        id: Option<u32>,
        #[serde(default)]
        references: Vec<SchemaReference>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let kind = match answer.schema_type.as_deref() {
        None | Some("AVRO") => SchemaKind::Avro,
        Some("PROTOBUF") => SchemaKind::Protobuf,
        Some("JSON") => SchemaKind::Json,
        Some(other) => return Err(format!("schemaType {other:?}")),
    };
    Ok(RegisteredSchema {
        id: answer.id.unwrap_or(id),
        kind,
        text: answer.schema,
        references: answer.references,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_url_are_basic_auth_and_never_printed() {
        let o = RegistryOptions::new("https://us%40r:p%3Ass@registry:8081/", RegistryAuth::None)
            .unwrap();
        assert_eq!(
            o.auth,
            RegistryAuth::Basic {
                user: "us@r".into(),
                password: "p:ss".into()
            }
        );
        assert_eq!(o.url().as_str(), "https://registry:8081/");
        assert_eq!(o.schema_url(7), "https://registry:8081/schemas/ids/7");
        let printed = format!("{o:?}");
        assert!(
            !printed.contains("p:ss") && !printed.contains("p%3Ass"),
            "{printed}"
        );
        let bearer =
            RegistryOptions::new("http://r", RegistryAuth::Bearer("t0k3n".into())).unwrap();
        assert!(!format!("{bearer:?}").contains("t0k3n"));
        let both = RegistryOptions::new("http://u:secret@r", RegistryAuth::Bearer("t".into()));
        assert!(matches!(both, Err(RegistryOptionsError::TwoCredentials(_))));
        assert!(!both.unwrap_err().to_string().contains("secret"));
        let bad = RegistryOptions::new("ftp://u:secret@r", RegistryAuth::None).unwrap_err();
        assert!(!bad.to_string().contains("secret"), "{bad}");
    }

    #[test]
    fn answers_name_their_kind() {
        let avro = parse_schema(1, br#"{"schema":"\"long\""}"#).unwrap();
        assert_eq!(
            (avro.kind, avro.text.as_str()),
            (SchemaKind::Avro, "\"long\"")
        );
        let proto = parse_schema(2, br#"{"schema":"syntax","schemaType":"PROTOBUF"}"#).unwrap();
        assert_eq!(proto.kind, SchemaKind::Protobuf);
        assert!(parse_schema(3, b"<html>").is_err());
        assert!(parse_schema(3, br#"{"schema":"x","schemaType":"XML"}"#).is_err());
    }
}
