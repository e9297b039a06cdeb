//! Where a dataset or model file lives: a local path, an object in an S3-compatible
//! store (`s3://bucket/key`), or a file on an HTTP(S) server. Pure parsing, no I/O.

use std::fmt;
use std::path::{Path, PathBuf};

/// A parsed location. Anything that is not an `s3://`, `http://` or `https://` URL is a
/// local path, as before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A file on this host.
    Local(PathBuf),
    /// Object `key` of `bucket` in the S3-compatible store the `AWS_*` variables name.
    S3 {
        /// The bucket.
        bucket: String,
        /// The object's key (never empty, no leading `/`).
        key: String,
    },
    /// A file served over HTTP or HTTPS: `base` is `scheme://host[:port]`, `path` the
    /// rest without its leading `/` (never empty).
    Http {
        /// `http://host:port` or `https://host:port`.
        base: String,
        /// The path on the server, without the leading `/`.
        path: String,
    },
}

/// Why a URL is not a location psrs can read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {reason}")]
pub struct BadLocation {
    /// The text given.
    pub url: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Location {
    /// Parses `text`: `s3://bucket/key`, `http(s)://host[:port]/path`, else a local path.
    /// A URL without a bucket, host or key is an error; query strings and fragments are
    /// refused (they would be silently dropped otherwise).
    pub fn parse(text: &str) -> Result<Location, BadLocation> {
        let bad = |reason| BadLocation {
            url: text.to_string(),
            reason,
        };
        let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("s3://") {
            ("s3", &text[5..])
        } else if lower.starts_with("http://") {
            ("http", &text[7..])
        } else if lower.starts_with("https://") {
            ("https", &text[8..])
        } else {
            return Ok(Location::Local(PathBuf::from(text)));
        };
        if rest.contains(['?', '#']) {
            return Err(bad("query strings and fragments are not supported"));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(bad(if scheme == "s3" { "no bucket" } else { "no host" }));
        }
        let path = path.trim_start_matches('/');
        if path.is_empty() || path.ends_with('/') {
            return Err(bad(if scheme == "s3" {
                "no object key"
            } else {
                "no file path"
            }));
        }
        Ok(if scheme == "s3" {
            Location::S3 {
                bucket: authority.to_string(),
                key: path.to_string(),
            }
        } else {
            Location::Http {
                base: format!("{scheme}://{authority}"),
                path: path.to_string(),
            }
        })
    }

    /// [`Location::parse`] of a path as clap or a job spec holds it.
    pub fn of_path(path: &Path) -> Result<Location, BadLocation> {
        match path.to_str() {
            Some(s) => Location::parse(s),
            None => Ok(Location::Local(path.to_path_buf())),
        }
    }

    /// True for an object store or HTTP location.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Location::Local(_))
    }
}

/// True if `text` names an object store or HTTP location rather than a local path
/// (whether or not it is well formed).
pub fn is_url(text: &str) -> bool {
    let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
    lower.starts_with("s3://") || lower.starts_with("http://") || lower.starts_with("https://")
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            Location::Http { base, path } => write!(f, "{base}/{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        assert_eq!(
            Location::parse("s3://data/fashion/train.rio").unwrap(),
            Location::S3 {
                bucket: "data".into(),
                key: "fashion/train.rio".into()
            }
        );
        assert_eq!(
            Location::parse("HTTP://127.0.0.1:8000/d/t.rio").unwrap(),
            Location::Http {
                base: "http://127.0.0.1:8000".into(),
                path: "d/t.rio".into()
            }
        );
        assert_eq!(Location::parse("https://h/x").unwrap().to_string(), "https://h/x");
        assert_eq!(
            Location::parse("/data/train.rio").unwrap(),
            Location::Local("/data/train.rio".into())
        );
        // a relative path with a colon is still a path
        assert_eq!(
            Location::parse("s3:data/x").unwrap(),
            Location::Local("s3:data/x".into())
        );
        assert!(!Location::parse("rel/x.rio").unwrap().is_remote());
        assert!(Location::parse("s3://b/k").unwrap().is_remote());
        assert!(is_url("S3://b") && !is_url("/s3://b"));
    }

    #[test]
    fn refuses_incomplete_urls() {
        for (url, why) in [
            ("s3://", "no bucket"),
            ("s3:///key", "no bucket"),
            ("s3://bucket", "no object key"),
            ("s3://bucket/", "no object key"),
            ("s3://bucket/dir/", "no object key"),
            ("http://", "no host"),
            ("http://host", "no file path"),
            ("https://host/a?b=c", "query strings and fragments are not supported"),
            ("https://host/a#b", "query strings and fragments are not supported"),
        ] {
            let e = Location::parse(url).unwrap_err();
            assert_eq!(e.reason, why, "{url}");
            assert!(e.to_string().starts_with(url), "{e}");
        }
    }
}
