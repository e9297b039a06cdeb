//! Settings of the object stores, read once from the environment: the usual AWS
//! variables for S3-compatible stores and psrs's retry and timeout settings.

use super::error::StorageError;
use std::time::Duration;

/// How psrs reaches S3-compatible stores and HTTP servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectStoreConfig {
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (both or neither; without them
    /// requests are unsigned, for public buckets).
    pub credentials: Option<(String, String)>,
    /// `AWS_SESSION_TOKEN`: a temporary credential's token.
    pub session_token: Option<String>,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: String,
    /// `AWS_ENDPOINT_URL` (else `AWS_ENDPOINT`): an S3-compatible store's address, e.g.
    /// `http://minio:9000`; unset: AWS S3 itself. Buckets are addressed by path.
    pub endpoint: Option<String>,
    /// `AWS_ALLOW_HTTP`: allow plain HTTP to the store (default: true when the endpoint
    /// is an `http://` URL, false otherwise).
    pub allow_http: bool,
    /// `PS_OBJECT_RETRIES` (default 10): retries of a request that failed transiently
    /// (connection error, timeout, HTTP 5xx or 429), with exponential backoff.
    pub retries: usize,
    /// `PS_OBJECT_TIMEOUT` (seconds, default 30): a single request's time limit.
    pub timeout: Duration,
}

fn parse_bool(var: &str, v: &str) -> Result<bool, StorageError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(StorageError::Config(format!("{var}: '{v}' is not true or false"))),
    }
}

impl ObjectStoreConfig {
    /// Reads the settings through `get` (the environment in [`Self::from_env`]) and
    /// validates them.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<ObjectStoreConfig, StorageError> {
        let get = |k: &str| get(k).filter(|v| !v.is_empty());
        let credentials = match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some((id, secret)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(StorageError::Config(
                    "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(StorageError::Config(
                    "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".into(),
                ))
            }
        };
        let endpoint = get("AWS_ENDPOINT_URL").or_else(|| get("AWS_ENDPOINT"));
        let allow_http = match get("AWS_ALLOW_HTTP") {
            Some(v) => parse_bool("AWS_ALLOW_HTTP", &v)?,
            None => endpoint
                .as_deref()
                .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://")),
        };
        let retries = match get("PS_OBJECT_RETRIES") {
            Some(v) => v
                .trim()
                .parse::<usize>()
                .map_err(|_| StorageError::Config(format!("PS_OBJECT_RETRIES: '{v}' is not a whole number")))?,
            None => 10,
        };
        let timeout = match get("PS_OBJECT_TIMEOUT") {
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    StorageError::Config(format!("PS_OBJECT_TIMEOUT: '{v}' is not a positive number of seconds"))
                })?,
            None => Duration::from_secs(30),
        };
        let cfg = ObjectStoreConfig {
            credentials,
            session_token: get("AWS_SESSION_TOKEN"),
            region: get("AWS_REGION")
                .or_else(|| get("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
            endpoint,
            allow_http,
            retries,
            timeout,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// [`Self::from_vars`] over this process's environment.
    pub fn from_env() -> Result<ObjectStoreConfig, StorageError> {
        ObjectStoreConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// Checks the settings fit together.
    pub fn validate(&self) -> Result<(), StorageError> {
        if self.retries > 100 {
            return Err(StorageError::Config(format!(
                "PS_OBJECT_RETRIES: {} is more than 100",
                self.retries
            )));
        }
        if let Some(e) = &self.endpoint {
            let l = e.to_ascii_lowercase();
            if !(l.starts_with("http://") || l.starts_with("https://")) {
                return Err(StorageError::Config(format!(
                    "AWS_ENDPOINT_URL: '{e}' is not an http:// or https:// URL"
                )));
            }
            if l.starts_with("http://") && !self.allow_http {
                return Err(StorageError::Config(format!(
                    "AWS_ENDPOINT_URL: '{e}' is plain HTTP but AWS_ALLOW_HTTP is false"
                )));
            }
        }
        if self.session_token.is_some() && self.credentials.is_none() {
            return Err(StorageError::Config(
                "AWS_SESSION_TOKEN is set without AWS_ACCESS_KEY_ID".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<ObjectStoreConfig, String> {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ObjectStoreConfig::from_vars(|k| m.get(k).cloned()).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_aws_variables() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.region.as_str(), c.retries, c.timeout),
            ("us-east-1", 10, Duration::from_secs(30))
        );
        assert!(c.credentials.is_none() && c.endpoint.is_none() && !c.allow_http);
        let c = cfg(&[
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "key"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"),
            ("PS_OBJECT_RETRIES", "3"),
            ("PS_OBJECT_TIMEOUT", "2.5"),
        ])
        .unwrap();
        assert_eq!(c.credentials, Some(("id".into(), "key".into())));
        assert_eq!(c.region, "eu-west-1");
        assert!(c.allow_http, "an http:// endpoint allows HTTP");
        assert_eq!((c.retries, c.timeout), (3, Duration::from_millis(2500)));
        assert_eq!(
            cfg(&[("AWS_REGION", "a"), ("AWS_DEFAULT_REGION", "b")]).unwrap().region,
            "a"
        );
        assert_eq!(
            cfg(&[("AWS_ENDPOINT", "https://s3.local")])
                .unwrap()
                .endpoint
                .as_deref(),
            Some("https://s3.local")
        );
    }

    #[test]
    fn bad_settings_are_one_line_naming_the_variable() {
        for (vars, want) in [
            (&[("AWS_ACCESS_KEY_ID", "id")][..], "AWS_SECRET_ACCESS_KEY is not"),
            (&[("AWS_SECRET_ACCESS_KEY", "k")][..], "AWS_ACCESS_KEY_ID is not"),
            (&[("PS_OBJECT_RETRIES", "many")][..], "PS_OBJECT_RETRIES"),
            (&[("PS_OBJECT_RETRIES", "1000")][..], "more than 100"),
            (&[("PS_OBJECT_TIMEOUT", "0")][..], "PS_OBJECT_TIMEOUT"),
            (&[("PS_OBJECT_TIMEOUT", "-1")][..], "PS_OBJECT_TIMEOUT"),
            (&[("AWS_ENDPOINT_URL", "ftp://x")][..], "not an http"),
            (
                &[("AWS_ENDPOINT_URL", "http://x"), ("AWS_ALLOW_HTTP", "false")][..],
                "plain HTTP",
            ),
            (&[("AWS_ALLOW_HTTP", "maybe")][..], "AWS_ALLOW_HTTP"),
            (&[("AWS_SESSION_TOKEN", "t")][..], "without AWS_ACCESS_KEY_ID"),
        ] {
            let e = cfg(vars).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{vars:?}: {e}");
        }
    }
}
