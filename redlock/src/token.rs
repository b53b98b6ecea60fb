//! The owner token: 128 random bits from the operating system's CSPRNG.

use std::fmt;

/// Identifies one grant. Stored as the lock key's value; compared before any release
/// or extend. Its `Debug` output is redacted: tokens are capabilities and are never logged.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl Token {
    /// A fresh token. Falls back to a time-and-counter mix only if the OS RNG is
    /// unavailable, which `getrandom` reports on exotic targets and never here.
    pub(crate) fn random() -> Self {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // The thread-local RNG is seeded from the OS too; this path is a last resort.
            bytes = rand::random();
        }
        let mut hex = String::with_capacity(32);
        for b in bytes {
            use fmt::Write;
            let _ = write!(hex, "{b:02x}");
        }
        Token(hex)
    }

    /// A token this crate made, as read back from a lease handle: 32 hex digits.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Token(text.to_owned()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_128_bits_of_hex_and_distinct() {
        let tokens: HashSet<String> = (0..10_000).map(|_| Token::random().0).collect();
        assert_eq!(tokens.len(), 10_000);
        assert!(
            tokens
                .iter()
                .all(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn debug_hides_the_token() {
        assert_eq!(format!("{:?}", Token::random()), "Token(***)");
    }
}
