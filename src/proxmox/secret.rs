//! A string wrapper for credentials that never shows its value in `Debug` or `Display`.

use std::fmt;

/// A secret value (token secret, password, ticket, CSRF token).
///
/// `Debug` and `Display` print `Secret(***)`; the value is only reachable through
/// [`Secret::expose`], which callers use at the single spot where the value goes on the wire.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// Returns the secret value. Do not log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact() {
        let s = Secret::new("hunter2-very-secret");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(format!("{s}"), "***");
        assert!(!format!("{:?}", Some(&s)).contains("hunter2"));
        assert_eq!(s.expose(), "hunter2-very-secret");
    }

    #[test]
    fn nested_debug_redacts() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Creds {
            user: String,
            password: Secret,
        }
        let c = Creds {
            user: "root@pam".into(),
            password: "pw-123".into(),
        };
        let out = format!("{c:?} {c:#?}");
        assert!(out.contains("root@pam"));
        assert!(!out.contains("pw-123"));
    }
}
