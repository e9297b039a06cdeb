//! The client side of a cluster's HTTP API, as `psrs job` and `psrs bench-api` reach
//! it: with security on (certificates or a cluster secret in the environment, as the
//! nodes read them) over HTTPS, the server checked against the cluster's CA,
//! presenting a client certificate (`PS_TLS_CERT`/`PS_TLS_KEY`, or one issued from the
//! secret); with the bearer token `PSRS_API_TOKEN`, else the one derived from the
//! secret, else (no security) the one the cluster at that URL made and published for
//! this host ([`ps_apps::stats::find_token`]).

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// `psrs cluster`'s default work dir, where a cluster started in the current
/// directory keeps its token.
const DEFAULT_WORK_DIR: &str = "psrs-cluster";

/// A client of one API.
pub struct ApiClient {
    /// The API's URL without a trailing `/` (`https://` whenever security is on).
    pub base: String,
    agent: ureq::Agent,
    /// The bearer token sent with every request.
    pub token: Option<String>,
    /// Security is on: the API speaks HTTPS.
    pub https: bool,
    /// With security on, the TLS configuration of a caller without a client
    /// certificate (the CA trusted, nothing presented), for benchmarks of strangers.
    pub anonymous_tls: Option<Arc<rustls::ClientConfig>>,
}

impl ApiClient {
    /// A client of the API at `api` (`http://HOST:PORT`, `HOST:PORT`) with this
    /// process's environment. Unusable security variables are the error.
    pub fn from_env(api: &str) -> Result<ApiClient, String> {
        let vars: std::collections::HashMap<String, String> = std::env::vars().collect();
        let sec = ps_core::config::Security::from_vars(&vars).map_err(|e| e.to_string())?;
        let mut token = sec.secret.as_ref().map(|s| s.http_token());
        if !sec.is_on() {
            let runtime = ps_apps::stats::RuntimeDir::from_vars(|k| vars.get(k).cloned());
            token = ps_apps::stats::find_token(api, runtime.as_ref(), std::path::Path::new(DEFAULT_WORK_DIR));
        }
        if let Some(t) = vars.get("PSRS_API_TOKEN").filter(|t| !t.trim().is_empty()) {
            token = Some(t.trim().to_string());
        }
        let (tls, anonymous_tls) = match (&sec.tls, &sec.secret) {
            (Some(files), _) => {
                let trust = files.trust().map_err(|e| e.to_string())?;
                let id = match files.identity {
                    Some(_) => Some(files.credentials().map_err(|e| e.to_string())?),
                    None => None,
                };
                (
                    Some(trust.http_client_config(id.as_ref()).map_err(|e| e.to_string())?),
                    Some(trust.http_client_config(None).map_err(|e| e.to_string())?),
                )
            }
            (None, Some(secret)) => {
                let id = ps_core::tls::Credentials::from_secret(secret, ps_core::tls::CertRole::Client).map_err(|e| e.to_string())?;
                (
                    Some(id.trust().http_client_config(Some(&id)).map_err(|e| e.to_string())?),
                    Some(id.trust().http_client_config(None).map_err(|e| e.to_string())?),
                )
            }
            (None, None) => (None, None),
        };
        let https = tls.is_some();
        let mut b = ureq::AgentBuilder::new().timeout(Duration::from_secs(30));
        if let Some(cfg) = tls {
            b = b.tls_config(cfg);
        }
        let trimmed = api.trim_end_matches('/');
        let base = match trimmed.split_once("://") {
            // with security the API speaks HTTPS only
            Some(("http", rest)) if https => format!("https://{rest}"),
            Some(_) => trimmed.to_string(),
            None => format!("{}://{trimmed}", if https { "https" } else { "http" }),
        };
        Ok(ApiClient {
            base,
            agent: b.build(),
            token,
            https,
            anonymous_tls,
        })
    }

    /// `method url` with the token, and `body` as JSON; every change is sent as JSON
    /// (the API refuses any other, as it refuses a browser's cross-site form). The
    /// answer's JSON, or one line: the status and the API's error, or why the
    /// scheduler could not be reached.
    pub fn request(&self, method: &str, url: &str, body: Option<&str>) -> Result<Value, String> {
        let text = self.call(method, url, body)?;
        serde_json::from_str(&text).map_err(|e| format!("bad answer from {url}: {e}"))
    }

    /// Like [`ApiClient::request`], the answer's text as it came.
    pub fn call(&self, method: &str, url: &str, body: Option<&str>) -> Result<String, String> {
        let mut req = self.agent.request(method, url);
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        let resp = match (body, method) {
            (Some(b), _) => req.set("Content-Type", "application/json").send_string(b),
            (None, "GET") => req.call(),
            (None, _) => req.set("Content-Type", "application/json").call(),
        };
        match resp {
            Ok(r) => r.into_string().map_err(|e| e.to_string()),
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                let why = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                    .unwrap_or(text);
                if code == 401 && self.token.is_none() && !self.https {
                    return Err(format!(
                        "{code}: {}; no token found for {url} on this host: set PSRS_API_TOKEN (the cluster's WORK_DIR/api-token)",
                        why.trim()
                    ));
                }
                Err(format!("{code}: {}", why.trim()))
            }
            // ureq's error names the URL already
            Err(e) => Err(format!("cannot reach the scheduler: {e}")),
        }
    }
}
