//! What the key watcher records, and what the leak checks read: a read of a mode's lock
//! key on a node that found it ([`KeySample`]), and a window in which a node could not be
//! expected to receive a delete ([`Exempt`]). A leaf: [`super::leak`] and
//! [`super::release_leak`] both judge these.

use serde::{Deserialize, Serialize};

/// One read of a mode's lock key on one node that found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySample {
    /// Node index.
    pub node: usize,
    /// When the read completed, µs on the scenario clock.
    pub at_us: u64,
    /// The owner token in the key.
    pub token: String,
    /// Its remaining TTL, ms (`PTTL`; negative: no expiry).
    pub pttl_ms: i64,
}

/// When a node could not be expected to receive a delete: `[from_us, to_us)` on the
/// scenario clock, `node: None` for every node (a stalled client cannot send its clean-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exempt {
    /// The node, or every node.
    pub node: Option<usize>,
    /// From.
    pub from_us: u64,
    /// To.
    pub to_us: u64,
}
