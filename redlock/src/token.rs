//! The owner token: 128 random bits from a cryptographically secure generator.

use std::fmt;

/// Identifies one grant. Stored as the lock key's value; compared before any release
/// or extend. Its `Debug` output is redacted: tokens are capabilities and are never logged.
///
/// Held inline as its 32 hex digits: it is copied into every node's call, so it costs no
/// allocation to clone.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token([u8; 32]);

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Token {
    /// A fresh token from the thread-local CSPRNG (`rand`'s ChaCha, seeded and reseeded
    /// from the operating system): no system call per token, unlike reading the OS
    /// generator each time.
    pub(crate) fn random() -> Self {
        let bytes: [u8; 16] = rand::random();
        let mut hex = [0u8; 32];
        for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
            if let [high, low] = pair {
                *high = hex_digit(b >> 4);
                *low = hex_digit(b & 0x0f);
            }
        }
        Token(hex)
    }

    /// A token this crate made, as read back from a lease handle: 32 hex digits.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let bytes: [u8; 32] = text.as_bytes().try_into().ok()?;
        bytes
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then_some(Token(bytes))
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored (`random`, `parse`).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

fn hex_digit(nibble: u8) -> u8 {
    HEX.get(usize::from(nibble)).copied().unwrap_or(b'0')
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
        let tokens: HashSet<String> = (0..10_000)
            .map(|_| Token::random().as_str().to_owned())
            .collect();
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
