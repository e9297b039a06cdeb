//! The configuration's error: one line naming the variable to fix.

use crate::node::Role;
use crate::var_error::VarError;
use std::fmt;

/// A missing or malformed variable; its `Display` is one line naming the variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The node's role, when `DMLC_ROLE` (or Slurm) names one: error lines start with it.
    pub role: Option<Role>,
    /// The offending variable.
    pub var: String,
    /// What is wrong with it and what to do.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.var, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// A variable read below the configuration (addresses, the secret, the certificate
/// files) that cannot be used: the same line, the role filled in by the caller.
impl From<VarError> for ConfigError {
    fn from(e: VarError) -> ConfigError {
        err(e.var, e.reason)
    }
}

/// A configuration error about `var` (the role is filled in by the caller that knows it).
pub(crate) fn err(var: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        role: None,
        var: var.to_string(),
        reason: reason.into(),
    }
}
