//! `Secret<T>`: a value that must never reach a log, a status report or an error message.
//!
//! Its `Debug` and `Display` print `REDACTED`; the only way to the inner value is
//! [`Secret::expose`], so every use of a secret is greppable.

use std::fmt;

/// A wrapper whose formatting never shows the value (cargo-credential's `Secret<T>`).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a sensitive value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The sensitive value itself. Call it only where the value is handed to AWS or a container.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Secret<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Secret)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("REDACTED")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("REDACTED")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn formatting_never_shows_the_value() {
        let s = Secret::new("AKIAEXAMPLE".to_string());
        assert_eq!(format!("{s:?} {s}"), "REDACTED REDACTED");
        assert_eq!(s.expose(), "AKIAEXAMPLE");
    }
}
