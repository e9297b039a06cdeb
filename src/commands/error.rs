//! How a command failed, by kind: the exit status follows the kind, never the
//! message's wording. The message is printed as one line either way.

use ps_apps::recordio::ConvertError;

/// Exit status of a command refused for its input: options, variables, files that are
/// not what they should be.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status of a command whose input was fine but whose work failed (a file that
/// could not be read or written).
pub const EXIT_FAILED: u8 = 1;

/// A command's error.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The input is wrong ([`EXIT_BAD_INPUT`]).
    #[error("{0}")]
    BadInput(String),
    /// The work failed ([`EXIT_FAILED`]).
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// The process's exit status for this kind of error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::BadInput(_) => EXIT_BAD_INPUT,
            CliError::Failed(_) => EXIT_FAILED,
        }
    }
}

/// A command's one-line refusal: bad input, as every command's text error has been.
impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::BadInput(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> CliError {
        CliError::BadInput(message.to_string())
    }
}

/// A conversion's input that is not its format is bad input; a file that cannot be
/// opened, read or written is a failure.
impl From<ConvertError> for CliError {
    fn from(e: ConvertError) -> CliError {
        match e {
            ConvertError::BadInput(_) => CliError::BadInput(e.to_string()),
            ConvertError::Io(_) => CliError::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_follows_the_kind() {
        let io = CliError::from(ConvertError::Io("cannot open a.csv: No such file".into()));
        assert_eq!(
            (io.exit_code(), io.to_string().as_str()),
            (1, "cannot open a.csv: No such file")
        );
        // a bad line whose text happens to mention a file error is still bad input
        let bad = CliError::from(ConvertError::BadInput(
            "a.csv:3: cannot open: 'x' is not a number".into(),
        ));
        assert_eq!(bad.exit_code(), 2);
        assert_eq!(CliError::from("--labels is required".to_string()).exit_code(), 2);
    }
}
