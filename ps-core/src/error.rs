//! Why the postoffice or one of its customers could not be set up, join or leave, by
//! kind: the caller decides by the kind (a configuration to fix, a customer id taken
//! twice, the van's failures by their own kinds), never by the message.

use crate::config::ConfigError;
use crate::van::error::VanError;

/// An error of the postoffice and its customers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PostofficeError {
    /// The configuration is invalid (names the variable).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Joining or leaving the cluster failed (see [`VanError`]'s kinds).
    #[error(transparent)]
    Van(#[from] VanError),
    /// A customer of these ids is already registered (a conflict: one app id is used
    /// twice in this process).
    #[error("customer {customer_id} of app {app_id} is already registered")]
    CustomerTaken {
        /// The app id.
        app_id: i32,
        /// The customer id.
        customer_id: i32,
    },
    /// A customer's thread could not be started (the operating system's reason).
    #[error("{0}")]
    Thread(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = PostofficeError::CustomerTaken {
            app_id: 3,
            customer_id: 3,
        };
        assert_eq!(e.to_string(), "customer 3 of app 3 is already registered");
        let v = PostofficeError::from(VanError::Timeout("no node table".into()));
        assert!(matches!(v, PostofficeError::Van(VanError::Timeout(_))));
        assert_eq!(v.to_string(), "no node table");
    }
}
