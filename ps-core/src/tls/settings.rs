//! The certificate files of the configuration: `PS_TLS_CA` (the cluster's CA
//! certificate), `PS_TLS_CERT` and `PS_TLS_KEY` (this node's certificate chain and
//! key), read once when the configuration is read. A node needs all three; a client
//! of the HTTP API (`psrs job`) may give the CA alone and authenticate with a token.

use super::creds::{Credentials, Trust};
use super::error::TlsError;
use crate::var_error::VarError;

/// A file read: its path and its bytes.
pub type Loaded = (String, Vec<u8>);

/// The PEM texts of the certificate variables.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `PS_TLS_CA`: the path and its PEM text.
    pub ca: Loaded,
    /// `PS_TLS_CERT` and `PS_TLS_KEY`: their paths and PEM texts; None when only the
    /// CA is given.
    pub identity: Option<(Loaded, Loaded)>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = self.identity.as_ref().map(|((c, _), (k, _))| (c, k));
        write!(f, "TlsFiles(ca {}, cert and key {:?})", self.ca.0, id)
    }
}

/// Reads the variables' files (`get` returns a variable's value, `read` a file's
/// bytes, with `true` for the private key, which must be its owner's alone:
/// [`crate::auth::private_file`]). `Ok(None)`: none set. Errors name the variable.
pub fn from_vars(
    get: impl Fn(&str) -> Option<String>,
    read: impl Fn(&str, bool) -> std::io::Result<Vec<u8>>,
) -> Result<Option<TlsFiles>, VarError> {
    let (ca, cert, key) = (get("PS_TLS_CA"), get("PS_TLS_CERT"), get("PS_TLS_KEY"));
    let load = |var: &'static str, path: String| -> Result<Loaded, VarError> {
        let bytes =
            read(&path, var == "PS_TLS_KEY").map_err(|e| VarError::new(var, format!("cannot read '{path}': {e}")))?;
        Ok((path, bytes))
    };
    let identity = match (cert, key) {
        (None, None) => None,
        (Some(c), Some(k)) => Some((load("PS_TLS_CERT", c)?, load("PS_TLS_KEY", k)?)),
        (Some(_), None) => return Err(VarError::new("PS_TLS_KEY", "is needed with PS_TLS_CERT")),
        (None, Some(_)) => return Err(VarError::new("PS_TLS_CERT", "is needed with PS_TLS_KEY")),
    };
    match ca {
        Some(path) => Ok(Some(TlsFiles {
            ca: load("PS_TLS_CA", path)?,
            identity,
        })),
        None if identity.is_some() => Err(VarError::new(
            "PS_TLS_CA",
            "is needed with PS_TLS_CERT (the CA certificate peers are checked against)",
        )),
        None => Ok(None),
    }
}

impl TlsFiles {
    /// The CA alone.
    pub fn trust(&self) -> Result<Trust, VarError> {
        Trust::from_pem(&self.ca.1, &self.ca.0).map_err(|e| VarError::new("PS_TLS_CA", e.to_string()))
    }

    /// The node's credentials; errors name the variable at fault (`PS_TLS_CERT` for a
    /// certificate not valid under the CA, or naming no role).
    pub fn credentials(&self) -> Result<Credentials, VarError> {
        let Some(((cp, cert), (kp, key))) = &self.identity else {
            return Err(VarError::new(
                "PS_TLS_CERT",
                "a node needs its certificate and key (PS_TLS_CERT, PS_TLS_KEY) with PS_TLS_CA",
            ));
        };
        // the CA first: whatever fails after it is the certificate's or the key's fault
        self.trust()?;
        Credentials::from_pem(cert, key, &self.ca.1).map_err(|e| match e {
            TlsError::NoKey(_) => VarError::new("PS_TLS_KEY", format!("'{kp}': {e}")),
            TlsError::Setup(_) => VarError::new("PS_TLS_KEY", format!("'{kp}' with '{cp}': {e}")),
            _ => VarError::new("PS_TLS_CERT", format!("'{cp}': {e}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(vars: &[(&str, &str)], files: &HashMap<&str, Vec<u8>>) -> Result<Option<TlsFiles>, VarError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        from_vars(
            |v| vars.get(v).cloned(),
            |p, _| {
                files
                    .get(p)
                    .cloned()
                    .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
            },
        )
    }

    #[test]
    fn partial_settings_name_the_missing_variable() {
        let files: HashMap<&str, Vec<u8>> =
            [("/ca", b"ca".to_vec()), ("/c", b"c".to_vec()), ("/k", b"k".to_vec())].into();
        assert_eq!(run(&[], &files).unwrap(), None);
        assert_eq!(run(&[("PS_TLS_CERT", "/c")], &files).unwrap_err().var, "PS_TLS_KEY");
        assert_eq!(run(&[("PS_TLS_KEY", "/k")], &files).unwrap_err().var, "PS_TLS_CERT");
        assert_eq!(
            run(&[("PS_TLS_CERT", "/c"), ("PS_TLS_KEY", "/k")], &files)
                .unwrap_err()
                .var,
            "PS_TLS_CA"
        );
        let e = run(&[("PS_TLS_CA", "/nope")], &files).unwrap_err();
        assert_eq!(e.var, "PS_TLS_CA");
        assert!(e.reason.contains("/nope"), "{e}");
        let ca_only = run(&[("PS_TLS_CA", "/ca")], &files).unwrap().unwrap();
        assert!(ca_only.identity.is_none());
        assert_eq!(ca_only.credentials().unwrap_err().var, "PS_TLS_CERT");
        let all = run(
            &[("PS_TLS_CA", "/ca"), ("PS_TLS_CERT", "/c"), ("PS_TLS_KEY", "/k")],
            &files,
        )
        .unwrap()
        .unwrap();
        assert!(all.identity.is_some());
        assert!(!format!("{all:?}").contains("[99"), "no key bytes in Debug");
    }
}
