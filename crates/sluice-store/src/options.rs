//! The options of an object store (`--storage-option` for a table, `--source-option` for a
//! source), checked before anything is opened. A key no store of the URL's scheme takes is
//! refused with the nearest one it takes: otherwise it is ignored, and the store fails later
//! with a message about something else ("an error occurred while loading credentials"). A
//! plain-HTTP S3 endpoint without `allow_http` is named as such (the client otherwise says
//! "builder error").
//!
//! Taken: what deltalake reads itself (retries, limits, its runtime, certificates), then what
//! the store's builder reads (object_store's keys for the scheme in any of their spellings,
//! any case, and deltalake's own S3 keys).

use std::collections::HashMap;
use std::str::FromStr;

use url::Url;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreOptionError {
    #[error("{key:?} is not an option of {store}{}", nearest.as_ref().map(|n| format!(" (did you mean {n:?}?)")).unwrap_or_default())]
    Unknown {
        key: String,
        store: &'static str,
        nearest: Option<String>,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("the endpoint {endpoint} is plain HTTP: give allow_http=true too (S3 clients refuse http:// otherwise)")]
    PlainHttp { endpoint: String },
}

/// The object store a URL's scheme names; `None` for a local path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    S3,
    Gcs,
    Azure,
}

impl StoreKind {
    pub fn of(url: &Url) -> Option<StoreKind> {
        match url.scheme() {
            "s3" | "s3a" => Some(StoreKind::S3),
            "gs" => Some(StoreKind::Gcs),
            "az" | "adl" | "azure" | "abfs" | "abfss" => Some(StoreKind::Azure),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::S3 => "S3",
            StoreKind::Gcs => "GCS",
            StoreKind::Azure => "Azure",
        }
    }

    /// The keys a misspelt one is matched against and docs/operations.md lists (each is also
    /// taken in its other spellings: `aws_region`, `AWS_REGION`).
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            StoreKind::S3 => &[
                "access_key_id",
                "secret_access_key",
                "session_token",
                "region",
                "endpoint",
                "allow_http",
                "virtual_hosted_style_request",
                "skip_signature",
                "conditional_put",
                "aws_profile",
                "role_arn",
                "role_session_name",
                "web_identity_token_file",
                "s3_express",
                "request_payer",
                "sse_kms_key_id",
                "server_side_encryption",
                "aws_s3_locking_provider",
            ],
            StoreKind::Gcs => &[
                "service_account",
                "service_account_key",
                "application_credentials",
                "base_url",
                "skip_signature",
                "allow_http",
            ],
            StoreKind::Azure => &[
                "account_name",
                "access_key",
                "sas_token",
                "client_id",
                "client_secret",
                "tenant_id",
                "token",
                "endpoint",
                "use_emulator",
                "use_azure_cli",
                "use_fabric_endpoint",
                "allow_http",
            ],
        }
    }

    /// Whether the store's builder takes `key` (any case).
    fn takes(self, key: &str) -> bool {
        let lower = key.to_ascii_lowercase();
        match self {
            StoreKind::S3 => {
                object_store::aws::AmazonS3ConfigKey::from_str(&lower).is_ok()
                    || deltalake_s3_key(&lower)
            }
            #[cfg(feature = "gcs")]
            StoreKind::Gcs => object_store::gcp::GoogleConfigKey::from_str(&lower).is_ok(),
            #[cfg(feature = "azure")]
            StoreKind::Azure => object_store::azure::AzureConfigKey::from_str(&lower).is_ok(),
            // A build without the store cannot open its URLs at all; that says so later.
            #[allow(unreachable_patterns)]
            _ => true,
        }
    }
}

/// deltalake's own S3 keys (locking, DynamoDB, addressing, credentials loading).
fn deltalake_s3_key(lower: &str) -> bool {
    use deltalake::aws::constants as c;
    let own = [
        c::AWS_ENDPOINT_URL_DYNAMODB,
        c::AWS_REGION_DYNAMODB,
        c::AWS_ACCESS_KEY_ID_DYNAMODB,
        c::AWS_SECRET_ACCESS_KEY_DYNAMODB,
        c::AWS_SESSION_TOKEN_DYNAMODB,
        c::AWS_S3_ADDRESSING_STYLE,
        c::AWS_S3_ALLOW_UNSAFE_RENAME,
        c::AWS_FORCE_CREDENTIAL_LOAD,
        c::LOCK_TABLE_KEY_NAME,
        c::BILLING_MODE_KEY_NAME,
        c::MAX_ELAPSED_REQUEST_TIME_KEY_NAME,
    ];
    c::S3_OPTS
        .iter()
        .chain(own.iter())
        .any(|k| k.eq_ignore_ascii_case(lower))
}

/// Checks `options` for the store at `url` (nothing for a local path). `env` reads the
/// process environment (AWS_ALLOW_HTTP, AWS_ENDPOINT_URL), which the stores read too.
pub fn check_store_options(
    url: &Url,
    options: &HashMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), StoreOptionError> {
    let Some(kind) = StoreKind::of(url) else {
        return Ok(());
    };
    let rest = deltalake::logstore::StorageConfig::parse_options(options.clone())
        .map_err(|e| StoreOptionError::Invalid(e.to_string()))?
        .unknown_properties;
    let mut keys: Vec<&String> = rest.keys().collect();
    keys.sort();
    if let Some(key) = keys.into_iter().find(|k| !kind.takes(k)) {
        return Err(StoreOptionError::Unknown {
            key: key.clone(),
            store: kind.name(),
            nearest: nearest(key, kind.keys()),
        });
    }
    if kind == StoreKind::S3 {
        check_plain_http(options, env)?;
    }
    Ok(())
}

/// An `http://` S3 endpoint needs `allow_http`.
fn check_plain_http(
    options: &HashMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), StoreOptionError> {
    use object_store::aws::AmazonS3ConfigKey as K;
    let mut endpoint = env("AWS_ENDPOINT_URL");
    let mut allow = env("AWS_ALLOW_HTTP");
    for (k, v) in options {
        match K::from_str(&k.to_ascii_lowercase()) {
            Ok(K::Endpoint) => endpoint = Some(v.clone()),
            Ok(K::Client(object_store::ClientConfigKey::AllowHttp)) => allow = Some(v.clone()),
            _ => {}
        }
    }
    let allowed = allow.is_some_and(|a| a.trim().eq_ignore_ascii_case("true"));
    match endpoint {
        Some(e) if !allowed && e.trim().to_ascii_lowercase().starts_with("http://") => {
            Err(StoreOptionError::PlainHttp { endpoint: e })
        }
        _ => Ok(()),
    }
}

/// The key of `keys` nearest `given` (case and `aws_`/`google_`/`azure_` prefixes aside), if
/// it is near enough to be a misspelling: at most a third of its letters differ.
fn nearest(given: &str, keys: &[&str]) -> Option<String> {
    let lower = given.to_ascii_lowercase();
    let bare = ["aws_", "google_", "azure_storage_", "azure_"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    keys.iter()
        .map(|k| (distance(bare, k), *k))
        .min()
        .filter(|(d, k)| *d <= k.len().max(3) / 3)
        .map(|(_, k)| k.to_string())
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, kvs: &[(&str, &str)]) -> Result<(), StoreOptionError> {
        let options = kvs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_store_options(&Url::parse(url).unwrap(), &options, &|_| None)
    }

    #[test]
    fn every_spelling_of_a_key_is_taken_and_a_misspelt_one_is_named() {
        let ok = [
            ("endpoint", "https://s3.example"),
            ("AWS_ENDPOINT_URL", "https://s3.example"),
            ("aws_access_key_id", "a"),
            ("SECRET_ACCESS_KEY", "b"),
            ("allow_http", "true"),
            ("timeout", "30s"),
            ("max_retries", "3"),
            ("AWS_S3_LOCKING_PROVIDER", "dynamodb"),
            ("conditional_put", "etag"),
        ];
        assert_eq!(check("s3://b/t", &ok), Ok(()));
        assert_eq!(check("file:///tmp/t", &[("endpointt", "x")]), Ok(()));
        assert_eq!(
            check("s3://b/t", &[("endpointt", "https://x")]),
            Err(StoreOptionError::Unknown {
                key: "endpointt".into(),
                store: "S3",
                nearest: Some("endpoint".into()),
            })
        );
        let Err(StoreOptionError::Unknown { nearest, .. }) =
            check("s3://b/t", &[("aws_acess_key_id", "a")])
        else {
            panic!("refused");
        };
        assert_eq!(nearest.as_deref(), Some("access_key_id"));
        let Err(StoreOptionError::Unknown { nearest, .. }) = check("s3://b/t", &[("colour", "x")])
        else {
            panic!("refused");
        };
        assert_eq!(nearest, None, "nothing is near");
        assert!(matches!(
            check("s3://b/t", &[("max_retries", "many")]),
            Err(StoreOptionError::Invalid(_))
        ));
    }

    #[test]
    fn every_listed_key_is_taken() {
        let kinds = [StoreKind::S3, StoreKind::Gcs, StoreKind::Azure];
        for kind in kinds {
            for key in kind.keys() {
                assert!(
                    kind.takes(key),
                    "{} lists {key} but does not take it",
                    kind.name()
                );
            }
        }
    }

    #[test]
    fn a_plain_http_s3_endpoint_needs_allow_http() {
        let http = ("endpoint", "http://localhost:5000");
        assert_eq!(
            check("s3://b/t", &[http]),
            Err(StoreOptionError::PlainHttp {
                endpoint: "http://localhost:5000".into()
            })
        );
        assert_eq!(check("s3://b/t", &[http, ("allow_http", "true")]), Ok(()));
        assert_eq!(
            check("s3://b/t", &[http, ("AWS_ALLOW_HTTP", "TRUE")]),
            Ok(())
        );
        let options = [("endpoint".to_string(), "http://x".to_string())].into();
        let env = |k: &str| (k == "AWS_ALLOW_HTTP").then(|| "true".to_string());
        let url = Url::parse("s3://b/t").unwrap();
        assert_eq!(check_store_options(&url, &options, &env), Ok(()));
        let from_env = |k: &str| (k == "AWS_ENDPOINT_URL").then(|| "http://moto".to_string());
        assert!(check_store_options(&url, &HashMap::new(), &from_env).is_err());
    }
}
