//! The cluster secret and the keys derived from it.
//!
//! Source precedence: `PS_SECRET_FILE` (the file's bytes, surrounding whitespace
//! trimmed) wins over `PS_SECRET` (the variable's value). A secret from the
//! environment is visible in `/proc/PID/environ` and in launcher logs, so the node
//! warns about it once at start. Neither set: the cluster is open (as before).

use super::error::AuthError;
use crate::var_error::VarError;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// Shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// Where the secret came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// `PS_SECRET_FILE`.
    File,
    /// `PS_SECRET` (the environment: warned about).
    Env,
}

/// The shared cluster secret. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    bytes: Vec<u8>,
    /// Where it came from.
    pub source: SecretSource,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes from {:?})", self.bytes.len(), self.source)
    }
}

impl Secret {
    /// A secret from raw bytes; [`AuthError::TooShort`] when shorter than
    /// [`MIN_SECRET_BYTES`].
    pub fn new(bytes: Vec<u8>, source: SecretSource) -> Result<Secret, AuthError> {
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(AuthError::TooShort {
                len: bytes.len(),
                min: MIN_SECRET_BYTES,
            });
        }
        Ok(Secret { bytes, source })
    }

    /// HMAC-SHA256 keyed by the secret over `parts` concatenated.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// Checks `tag` against the HMAC over `parts` in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }

    /// A 32-byte key for `label`, from HKDF-SHA256 over the secret with `salt`.
    pub fn derive(&self, salt: &[u8], label: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        Hkdf::<Sha256>::new(Some(salt), &self.bytes)
            .expand(label.as_bytes(), &mut out)
            .expect("32 bytes is a valid HKDF length");
        out
    }

    /// The HTTP bearer token of this cluster (hex of a key derived with the label
    /// `psrs http token`): state-changing HTTP calls must carry it.
    pub fn http_token(&self) -> String {
        self.derive(b"psrs", "psrs http token")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Reads the secret from the variables (see the module doc for precedence); `read`
/// reads a file. `Ok(None)`: no secret, the cluster is open. Errors name the variable.
pub fn from_vars(
    file: Option<&str>,
    env: Option<&str>,
    read: impl Fn(&str) -> std::io::Result<Vec<u8>>,
) -> Result<Option<Secret>, VarError> {
    if let Some(path) = file {
        let bytes = read(path).map_err(|e| VarError::new("PS_SECRET_FILE", format!("cannot read '{path}': {e}")))?;
        let text = trim(&bytes);
        return Secret::new(text.to_vec(), SecretSource::File)
            .map(Some)
            .map_err(|e| VarError::new("PS_SECRET_FILE", e.to_string()));
    }
    match env {
        Some(v) => Secret::new(v.trim().as_bytes().to_vec(), SecretSource::Env)
            .map(Some)
            .map_err(|e| VarError::new("PS_SECRET", e.to_string())),
        None => Ok(None),
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_file(_: &str) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
    }

    #[test]
    fn file_wins_over_env_and_short_secrets_are_refused() {
        let read = |_: &str| Ok(b"  file-secret-0123456789\n".to_vec());
        let s = from_vars(Some("/s"), Some("env-secret-0123456789"), read)
            .unwrap()
            .unwrap();
        assert_eq!(s.source, SecretSource::File);
        assert_eq!(
            s,
            Secret::new(b"file-secret-0123456789".to_vec(), SecretSource::File).unwrap()
        );
        let s = from_vars(None, Some("env-secret-0123456789"), no_file)
            .unwrap()
            .unwrap();
        assert_eq!(s.source, SecretSource::Env);
        assert_eq!(from_vars(None, None, no_file).unwrap(), None);
        assert_eq!(from_vars(Some("/x"), None, no_file).unwrap_err().var, "PS_SECRET_FILE");
        assert_eq!(from_vars(None, Some("short"), no_file).unwrap_err().var, "PS_SECRET");
        assert_eq!(
            Secret::new(b"short".to_vec(), SecretSource::Env),
            Err(AuthError::TooShort {
                len: 5,
                min: MIN_SECRET_BYTES
            })
        );
        assert!(!format!("{s:?}").contains("env-secret"));
    }

    #[test]
    fn macs_verify_and_keys_differ_by_label_and_salt() {
        let s = Secret::new(vec![7; 32], SecretSource::File).unwrap();
        let t = s.mac(&[b"a", b"bc"]);
        assert!(s.verify(&[b"ab", b"c"], &t));
        assert!(!s.verify(&[b"ab", b"d"], &t));
        assert!(!s.verify(&[b"ab", b"c"], &t[..31]));
        let other = Secret::new(vec![8; 32], SecretSource::File).unwrap();
        assert!(!other.verify(&[b"abc"], &t));
        assert_ne!(s.derive(b"1", "x"), s.derive(b"2", "x"));
        assert_ne!(s.derive(b"1", "x"), s.derive(b"1", "y"));
        assert_eq!(s.http_token().len(), 64);
        assert_ne!(s.http_token(), other.http_token());
    }
}
