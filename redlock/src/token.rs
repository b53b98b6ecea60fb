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

    /// A token this crate made, as read back from a lease handle: 32 hex digits, in
    /// lower case whatever case they came in. The servers hold the token as `random`
    /// wrote it (lower case) and compare bytes, so a handle upper-cased in transit (hex is
    /// case-blind to many systems) would otherwise be adopted and then match nothing.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut bytes: [u8; 32] = text.as_bytes().try_into().ok()?;
        if !bytes.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        bytes.make_ascii_lowercase();
        Some(Token(bytes))
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

    /// What `random` wrote reads back as the same token, in whichever case it travelled:
    /// the servers hold it in lower case and compare bytes.
    #[test]
    fn parse_gives_back_the_lower_case_token_the_servers_hold() {
        let token = Token::random();
        let written = token.as_str();
        for text in [
            written.to_owned(),
            written.to_ascii_uppercase(),
            written
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect(),
        ] {
            assert_eq!(
                Token::parse(&text).as_ref().map(Token::as_str),
                Some(written),
                "{text}"
            );
        }
        for not_ours in [
            &written[1..],
            &format!("{written}0"),
            "0123456789abcdef0123456789abcdeg",
            "0123456789abcdef0123456789abcdé",
            "",
        ] {
            assert!(Token::parse(not_ours).is_none(), "{not_ours}");
        }
    }

    #[test]
    fn debug_hides_the_token() {
        assert_eq!(format!("{:?}", Token::random()), "Token(***)");
    }
}
