//! A variable whose value cannot be used: which one, and why. The rooms below the
//! configuration (the address rules, the cluster secret, the certificate files) read
//! their own variables and report this; the configuration turns it into its own error
//! with the node's role.

/// A variable's value that cannot be used; `Display` is one line, `VAR: reason`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct VarError {
    /// The variable to fix (e.g. `PS_SECRET_FILE`).
    pub var: &'static str,
    /// What is wrong with its value and what to do.
    pub reason: String,
}

impl VarError {
    /// The error of `var`, for `reason`.
    pub fn new(var: &'static str, reason: impl Into<String>) -> VarError {
        VarError {
            var,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_the_variable_first() {
        let e = VarError::new("PS_TLS_CA", "cannot read 'ca.pem': no such file");
        assert_eq!(e.to_string(), "PS_TLS_CA: cannot read 'ca.pem': no such file");
        assert_eq!(e.var, "PS_TLS_CA");
    }
}
