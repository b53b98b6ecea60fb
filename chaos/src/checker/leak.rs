//! Leaked keys: a lock key left on a node by an attempt that was never granted.
//!
//! A failed attempt must remove its key from every node that may hold it — the ones that
//! said yes, and the ones whose answer had not come (their `SET` may still land; the delete
//! follows it on the same connection). A correct lock's key of a failed attempt therefore
//! lives for about the attempt's length; a forgotten one lives its whole TTL and blocks
//! every other client on that node until it expires.
//!
//! The runner samples each mode's key on every node through the admin addresses
//! ([`crate::run::leaks`]); a sample is a leak when it holds a token no grant of the mode
//! was handed (the history's acquires name their tokens) and its remaining TTL says it has
//! stood for most of its life ([`LEAK_AGE`]), on a node that no fault could have kept from
//! receiving the delete (see [`exempt`]). Each (node, token) counts once.
//!
//! A stall the watcher saw on that node or on the whole machine (see
//! [`crate::run::leaks`]), or a thread of the lock's processes held off the CPU
//! ([`crate::run::cpu_stall`]), within the key's life excuses it as a `slow` fault would: the
//! delete may have been sent in time and be on its way. Such keys are counted apart
//! ([`LeakSummary::excused`]), so a run on a machine too busy to judge clean-ups says so.
//!
//! Keys of granted leases are [`super::release_leak`]'s: a release must remove them.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::keys::{Exempt, KeySample};

use super::release_leak::ReleaseLeaks;

/// A key that has stood for this share of its TTL without its attempt being granted is
/// leaked: a correct clean-up comes within the attempt (a node deadline, 20 ms in the
/// rig's runs) and a leaked key stands the whole TTL.
pub const LEAK_AGE: f64 = 0.8;

/// Examples kept per mode.
const EXAMPLES: usize = 5;

/// Fault kinds whose heal closes the lock's connections to the node: removing a proxy
/// `timeout` toxic that held data closes the connection (Toxiproxy's behaviour, and the
/// rig's proxy's), so a delete sent as the heal lands is lost with it. Only the heal moment
/// is exempt ([`HEAL_CLOSE`]); during the window requests still flow in order.
pub fn exempt_at_heal(kind: &str) -> bool {
    kind == "mute-replies"
}

/// How long after a connection-closing heal a delete may still be lost with the closed
/// connection (the lock learns of the close on its next write and reconnects).
pub const HEAL_CLOSE: Duration = Duration::from_millis(100);

/// Fault kinds (as in the report) under which a delete may not reach a node that got the
/// `SET` for the whole window: the node is killed or restarted, its link is cut, reset or truncated, or its
/// traffic is delayed with jitter (a later chunk may be held longer than an earlier one);
/// and client stalls and pauses, which stop the clean-up itself. A freeze, muted replies, split replies
/// and clock jumps keep the order of one connection's requests: a delete sent after a `SET`
/// lands after it — except when muted replies are healed (see [`exempt_at_heal`]).
pub fn exempt(kind: &str) -> bool {
    matches!(
        kind,
        "kill"
            | "restart-keep"
            | "restart-wipe"
            | "amnesia"
            | "partition"
            | "black-hole"
            | "slow"
            | "reset-peer"
            | "limit-data"
            | "client-stall"
            | "client-pause"
    )
}

/// What the leak check found in one mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeakSummary {
    /// Reads of the mode's key that found it.
    pub samples: u64,
    /// (node, token) pairs of never-granted attempts found after they should have been
    /// removed.
    pub leaked: u64,
    /// A few of them, e.g. `n2 at 3.412 s: token 9f3a12…, never granted, 12 ms of its TTL left`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// (node, token) pairs that would be leaks but for a stall the watcher saw on that
    /// node or machine within the key's life: not judged.
    #[serde(default)]
    pub excused: u64,
    /// Stall windows the watcher saw, over all nodes.
    #[serde(default)]
    pub stalls: u64,
    /// Their total length, ms.
    #[serde(default)]
    pub stalled_ms: u64,
    /// Of those stalls, the ones of a process of the lock held off the CPU (every node's;
    /// see `run::cpu_stall`).
    #[serde(default)]
    pub cpu_stalls: u64,
    /// Keys of granted leases left standing after their release
    /// ([`crate::checker::release_leak`]; absent from older reports).
    #[serde(default)]
    pub released: ReleaseLeaks,
}

impl LeakSummary {
    /// Whether the key was watched at all (a run without admin addresses is not).
    pub fn watched(&self) -> bool {
        self.samples > 0
    }
}

/// The leaks among `samples` of one mode's key, given the tokens of its grants, the windows
/// in which a delete could not be expected to land (the faults') and those in which it may
/// have been late (the stalls the watcher saw), and the TTL keys are set with. Samples
/// taken from `until_us` on (workers stopping, acquires cancelled mid-way) are not judged.
pub fn leaks(
    samples: &[KeySample],
    granted: &HashSet<String>,
    exempt: &[Exempt],
    stalls: &[Exempt],
    ttl: Duration,
    until_us: u64,
) -> LeakSummary {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    // Left of its TTL once it has stood LEAK_AGE of it.
    let old = (ttl_ms as f64 * (1.0 - LEAK_AGE)) as i64;
    let reach_us = u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX);
    let mut summary = LeakSummary {
        samples: samples.len() as u64,
        stalls: stalls.len() as u64,
        cpu_stalls: stalls.iter().filter(|s| s.node.is_none()).count() as u64,
        stalled_ms: stalls
            .iter()
            .map(|s| s.to_us.min(until_us).saturating_sub(s.from_us) / 1000)
            .sum(),
        ..LeakSummary::default()
    };
    // Per (node, token): its first judged read, and whether a stall could explain it.
    let mut judged: BTreeMap<(usize, &str), (&KeySample, bool)> = BTreeMap::new();
    for s in samples {
        if s.at_us >= until_us || granted.contains(&s.token) {
            continue;
        }
        // A key without expiry is not one of the lock's; an old key is judged.
        if s.pttl_ms < 0 || s.pttl_ms > old {
            continue;
        }
        let on_node = |e: &&Exempt, from_us: u64| {
            e.node.is_none_or(|n| n == s.node) && e.from_us <= s.at_us && e.to_us >= from_us
        };
        // Set within the last TTL: any fault window overlapping [at - ttl, at] excuses it.
        if exempt
            .iter()
            .any(|e| on_node(&e, s.at_us.saturating_sub(reach_us)))
        {
            continue;
        }
        // A stall delays a delete sent while the key stood: from when it was set on.
        let age_us = u64::try_from(ttl_ms.saturating_sub(s.pttl_ms))
            .unwrap_or(0)
            .saturating_mul(1000);
        let set_at = s.at_us.saturating_sub(age_us);
        let late = stalls.iter().any(|e| on_node(&e, set_at));
        let entry = judged
            .entry((s.node, s.token.as_str()))
            .or_insert((s, false));
        entry.1 |= late;
    }
    for (s, late) in judged.into_values() {
        if late {
            summary.excused += 1;
            continue;
        }
        summary.leaked += 1;
        if summary.examples.len() < EXAMPLES {
            let short: String = s.token.chars().take(12).collect();
            summary.examples.push(format!(
                "n{} at {:.3} s: token {short}…, never granted, {} ms of its {ttl_ms} ms TTL left",
                s.node,
                s.at_us as f64 / 1e6,
                s.pttl_ms
            ));
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_millis(200);
    const UNTIL: u64 = 60_000_000;

    fn sample(node: usize, at_ms: u64, token: &str, pttl_ms: i64) -> KeySample {
        KeySample {
            node,
            at_us: at_ms * 1000,
            token: token.into(),
            pttl_ms,
        }
    }

    fn granted(tokens: &[&str]) -> HashSet<String> {
        tokens.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn an_ungranted_key_that_stood_most_of_its_ttl_is_a_leak_once_per_node() {
        let samples = [
            // Young: not judged yet.
            sample(1, 1_000, "a", 190),
            sample(1, 1_150, "a", 30),
            sample(1, 1_175, "a", 10),
            sample(2, 1_175, "a", 10),
        ];
        let s = leaks(&samples, &granted(&[]), &[], &[], TTL, UNTIL);
        assert_eq!(s.samples, 4);
        assert_eq!(s.leaked, 2, "{s:?}");
        assert!(
            s.examples[0].starts_with("n1 at 1.150 s: token a…"),
            "{s:?}"
        );
    }

    #[test]
    fn granted_young_persistent_and_late_keys_are_not_leaks() {
        let samples = [
            // A grant's key, however old.
            sample(0, 1_000, "held", 5),
            // A failed attempt's key seen young (cleaned up right after).
            sample(0, 2_000, "failed", 185),
            // No expiry: not the lock's.
            sample(0, 3_000, "other", -1),
            // After the workers' end.
            sample(0, 60_000, "cancelled", 5),
        ];
        let s = leaks(&samples, &granted(&["held"]), &[], &[], TTL, UNTIL);
        assert_eq!(s.leaked, 0, "{s:?}");
    }

    #[test]
    fn exempt_windows_excuse_their_node_or_every_node_within_a_ttl() {
        let on_n1 = Exempt {
            node: Some(1),
            from_us: 900_000,
            to_us: 1_000_000,
        };
        // The window ended 100 ms before the sample: the SET may have landed in it.
        let s = leaks(
            &[sample(1, 1_100, "x", 10)],
            &granted(&[]),
            &[on_n1],
            &[],
            TTL,
            UNTIL,
        );
        assert_eq!(s.leaked, 0);
        // Another node is not excused.
        let s = leaks(
            &[sample(2, 1_100, "x", 10)],
            &granted(&[]),
            &[on_n1],
            &[],
            TTL,
            UNTIL,
        );
        assert_eq!(s.leaked, 1);
        // Ended more than a TTL before: the key was set after it.
        let s = leaks(
            &[sample(1, 1_300, "x", 10)],
            &granted(&[]),
            &[on_n1],
            &[],
            TTL,
            UNTIL,
        );
        assert_eq!(s.leaked, 1);
        // A client stall excuses every node.
        let stall = Exempt {
            node: None,
            ..on_n1
        };
        let s = leaks(
            &[sample(3, 1_100, "x", 10)],
            &granted(&[]),
            &[stall],
            &[],
            TTL,
            UNTIL,
        );
        assert_eq!(s.leaked, 0);
    }

    #[test]
    fn a_stall_seen_while_the_key_stood_excuses_it_and_is_counted() {
        // Set at 1.0 s (190 ms left at 1.01 s), judged at 1.175 s with 15 ms left.
        let samples = [sample(1, 1_010, "x", 190), sample(1, 1_175, "x", 15)];
        let stall = |node, from_ms: u64, to_ms: u64| Exempt {
            node,
            from_us: from_ms * 1000,
            to_us: to_ms * 1000,
        };
        // A stall of that node while the key stood: excused, counted apart.
        let s = leaks(
            &samples,
            &granted(&[]),
            &[],
            &[stall(Some(1), 1_050, 1_120)],
            TTL,
            UNTIL,
        );
        assert_eq!(
            (s.leaked, s.excused, s.stalls, s.stalled_ms),
            (0, 1, 1, 70),
            "{s:?}"
        );
        // One that ended before the key was set cannot have delayed its delete.
        let s = leaks(
            &samples,
            &granted(&[]),
            &[],
            &[stall(Some(1), 900, 980)],
            TTL,
            UNTIL,
        );
        assert_eq!((s.leaked, s.excused), (1, 0), "{s:?}");
        // Another node's stall excuses nothing here.
        let s = leaks(
            &samples,
            &granted(&[]),
            &[],
            &[stall(Some(2), 1_050, 1_120)],
            TTL,
            UNTIL,
        );
        assert_eq!((s.leaked, s.excused), (1, 0), "{s:?}");
    }

    #[test]
    fn order_keeping_faults_are_not_exempt() {
        for kind in ["freeze", "mute-replies", "slicer", "clock-jump"] {
            assert!(!exempt(kind), "{kind}");
        }
        for kind in ["kill", "partition", "slow", "reset-peer", "client-stall"] {
            assert!(exempt(kind), "{kind}");
        }
    }
}
