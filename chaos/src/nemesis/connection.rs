//! Faults on the lock's own connections: one Toxiproxy toxic on a node's proxy, so the
//! pipelined transport — where the order of requests and replies is what keeps a reply
//! with its request — meets resets mid-pipeline, replies split anywhere, streams cut
//! mid-reply and replies that vanish while requests still arrive.
//!
//! | fault | toxic | what the client sees |
//! |---|---|---|
//! | `reset-peer` | `reset_peer` upstream, `after_ms` | every connection RST `after_ms` after its first request, pipeline in flight |
//! | `slicer` | `slicer` downstream | replies in pieces of ~`bytes`, `delay_us` apart: RESP frames split at every byte boundary |
//! | `limit-data` | `limit_data` downstream | each connection closed after `bytes` bytes of replies, usually mid-reply |
//! | `mute-replies` | `timeout` 0 downstream | requests reach the node (keys are set!), no reply ever comes back |
//!
//! Heal removes the toxic; connections a toxic held (`mute-replies`) close then, as in
//! Toxiproxy, and clients reconnect.

use std::fmt;

use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::proxy::api::{Stream, Toxic, ToxicKind};

/// One fault on a node's connections, its parameters drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "toxic", rename_all = "kebab-case")]
pub enum ConnectionFault {
    /// TCP RST `after_ms` after data arrives.
    ResetPeer {
        /// Milliseconds.
        after_ms: u64,
    },
    /// Replies cut into pieces of about `bytes` (± half), `delay_us` apart.
    Slicer {
        /// Average piece, bytes.
        bytes: u64,
        /// Microseconds between pieces.
        delay_us: u64,
    },
    /// Each connection closed once `bytes` bytes of replies went through.
    LimitData {
        /// Byte budget of a connection's replies.
        bytes: u64,
    },
    /// Replies dropped, the connection held open.
    MuteReplies,
}

/// The kinds, as scenario files name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionKind {
    /// See [`ConnectionFault::ResetPeer`].
    ResetPeer,
    /// See [`ConnectionFault::Slicer`].
    Slicer,
    /// See [`ConnectionFault::LimitData`].
    LimitData,
    /// See [`ConnectionFault::MuteReplies`].
    MuteReplies,
}

impl ConnectionKind {
    /// Every kind.
    pub const ALL: [ConnectionKind; 4] = [
        ConnectionKind::ResetPeer,
        ConnectionKind::Slicer,
        ConnectionKind::LimitData,
        ConnectionKind::MuteReplies,
    ];

    /// Its name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            ConnectionKind::ResetPeer => "reset-peer",
            ConnectionKind::Slicer => "slicer",
            ConnectionKind::LimitData => "limit-data",
            ConnectionKind::MuteReplies => "mute-replies",
        }
    }

    /// The fault with its parameters drawn: resets 5-100 ms into a connection (tens of
    /// requests of a busy worker in flight), pieces of 1-8 bytes 50-500 µs apart (a reply
    /// of the lock's takes 1-40 pieces, within the node deadline), budgets of 16-2,048
    /// bytes (a connection dies after a few to a few hundred replies).
    pub fn draw(self, rng: &mut StdRng) -> ConnectionFault {
        match self {
            ConnectionKind::ResetPeer => ConnectionFault::ResetPeer {
                after_ms: rng.random_range(5..=100),
            },
            ConnectionKind::Slicer => ConnectionFault::Slicer {
                bytes: rng.random_range(1..=8),
                delay_us: rng.random_range(50..=500),
            },
            ConnectionKind::LimitData => ConnectionFault::LimitData {
                bytes: rng.random_range(16..=2_048),
            },
            ConnectionKind::MuteReplies => ConnectionFault::MuteReplies,
        }
    }
}

/// The one toxic each fault adds; heal removes it by this name.
pub const TOXIC_NAME: &str = "chaos_connection";

impl ConnectionFault {
    /// Its kind.
    pub fn kind(self) -> ConnectionKind {
        match self {
            ConnectionFault::ResetPeer { .. } => ConnectionKind::ResetPeer,
            ConnectionFault::Slicer { .. } => ConnectionKind::Slicer,
            ConnectionFault::LimitData { .. } => ConnectionKind::LimitData,
            ConnectionFault::MuteReplies => ConnectionKind::MuteReplies,
        }
    }

    /// The toxic that makes it, named [`TOXIC_NAME`].
    pub fn toxic(self) -> Toxic {
        let (kind, stream) = match self {
            ConnectionFault::ResetPeer { after_ms } => {
                (ToxicKind::ResetPeer { timeout: after_ms }, Stream::Upstream)
            }
            ConnectionFault::Slicer { bytes, delay_us } => (
                ToxicKind::Slicer {
                    average_size: bytes,
                    size_variation: bytes / 2,
                    delay: delay_us,
                },
                Stream::Downstream,
            ),
            ConnectionFault::LimitData { bytes } => {
                (ToxicKind::LimitData { bytes }, Stream::Downstream)
            }
            ConnectionFault::MuteReplies => (ToxicKind::Timeout { timeout: 0 }, Stream::Downstream),
        };
        Toxic::new(kind, stream).named(TOXIC_NAME)
    }
}

impl fmt::Display for ConnectionFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConnectionFault::ResetPeer { after_ms } => write!(f, "reset-peer ({after_ms} ms)"),
            ConnectionFault::Slicer { bytes, delay_us } => {
                write!(f, "slicer ({bytes} B, {delay_us} µs)")
            }
            ConnectionFault::LimitData { bytes } => write!(f, "limit-data ({bytes} B)"),
            ConnectionFault::MuteReplies => f.write_str("mute-replies"),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn each_kind_draws_itself_and_one_named_toxic() {
        let mut rng = StdRng::seed_from_u64(3);
        for kind in ConnectionKind::ALL {
            for _ in 0..100 {
                let fault = kind.draw(&mut rng);
                assert_eq!(fault.kind(), kind);
                assert_eq!(fault.toxic().name, TOXIC_NAME);
            }
        }
        assert_eq!(
            ConnectionFault::MuteReplies.toxic().kind,
            ToxicKind::Timeout { timeout: 0 }
        );
    }
}
