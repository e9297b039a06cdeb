//! Errors of reading and writing datasets and model files by location.

/// What went wrong with a location, in one line.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The object or file does not exist (HTTP 404, S3 NoSuchKey/NoSuchBucket, ENOENT).
    #[error("{location}: not found")]
    NotFound {
        /// The location as given.
        location: String,
    },
    /// The URL itself is malformed.
    #[error(transparent)]
    BadLocation(#[from] super::location::BadLocation),
    /// The object store's settings (`AWS_*`, `PS_OBJECT_*`) are invalid.
    #[error("{0}")]
    Config(String),
    /// Reading or writing failed (after the retries, for a remote location).
    #[error("{location}: {message}")]
    Io {
        /// The location as given.
        location: String,
        /// One line: what the store or the file system said.
        message: String,
    },
}

impl StorageError {
    /// An I/O error on `location`, its message flattened to one line.
    pub fn io(location: impl ToString, message: impl ToString) -> StorageError {
        StorageError::Io {
            location: location.to_string(),
            message: one_line(&message.to_string()),
        }
    }
}

impl StorageError {
    /// The message without the location (for errors that name it themselves).
    pub fn reason(&self) -> String {
        match self {
            StorageError::NotFound { .. } => "not found".into(),
            StorageError::BadLocation(b) => b.reason.into(),
            StorageError::Config(m) => m.clone(),
            StorageError::Io { message, .. } => message.clone(),
        }
    }
}

/// `text` with its line breaks and runs of blanks folded into single spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An I/O error of the kind (not found, invalid input, other) with [`StorageError::reason`]
/// as its message: the caller names the location.
impl From<StorageError> for std::io::Error {
    fn from(e: StorageError) -> std::io::Error {
        let kind = match &e {
            StorageError::NotFound { .. } => std::io::ErrorKind::NotFound,
            StorageError::BadLocation(_) | StorageError::Config(_) => std::io::ErrorKind::InvalidInput,
            StorageError::Io { .. } => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e.reason())
    }
}
