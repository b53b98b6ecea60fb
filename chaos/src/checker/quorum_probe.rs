//! The quorum probe: whether the lock grants while exactly `N − quorum` nodes are down.
//!
//! With two of five nodes down, the other three are still a quorum, and an uncontended
//! acquire must get all three. That is the edge where an off-by-one in "is a quorum still
//! possible?" shows: a lock that gives up once `N − quorum` nodes have failed never grants
//! there, and the workers' pace cannot show it reliably — their gaps during a fault are
//! also stretched by contention and by a busy machine, so they are only reported
//! ([`super::availability`]).
//!
//! So, while such a fault lasts, the rig makes a few acquires of its own (a handful per
//! fault window, a count the rig controls) on a resource nobody else uses, with a node
//! deadline and TTL long enough that no stall of a busy machine fails them. The lock under
//! test must grant at least half of them ([`QuorumProbe::holds`]): a correct lock grants
//! them all unless the machine stalls for half a second; the off-by-one grants one only
//! when the three yes votes outrun both failures, which a refused connection never lets
//! happen.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// At most this many of a probe's failures are kept, with their error.
pub const FAILURES_KEPT: usize = 5;

/// What the probe saw in one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuorumProbe {
    /// Nodes down at once when the probe ran (`N − quorum`: 2 of 5).
    pub down: u64,
    /// Node count.
    pub nodes: u64,
    /// Fault windows in which it ran.
    pub windows: u64,
    /// Acquires made (one attempt each, no retry).
    pub tried: u64,
    /// Of those, granted.
    pub granted: u64,
    /// The first few failures: `<ms since the scenario start>: <error>`.
    pub failures: Vec<String>,
}

impl QuorumProbe {
    /// Whether the lock granted at least half of the probe's acquires (vacuously true when
    /// no fault took exactly `N − quorum` nodes down).
    pub fn holds(&self) -> bool {
        self.granted.saturating_mul(2) >= self.tried
    }

    /// Records one acquire: granted, or failed with `error` at `at_ms`.
    pub fn record(&mut self, at_ms: u64, outcome: Result<(), String>) {
        self.tried += 1;
        match outcome {
            Ok(()) => self.granted += 1,
            Err(e) if self.failures.len() < FAILURES_KEPT => {
                self.failures.push(format!("{at_ms} ms: {e}"));
            }
            Err(_) => {}
        }
    }

    /// One sentence for the verdict.
    pub fn describe(&self) -> String {
        let first = self
            .failures
            .first()
            .map_or_else(String::new, |f| format!("; first failure at {f}"));
        format!(
            "quorum probe: {} of {} uncontended acquires granted while exactly {} of {} nodes were down ({} fault windows; want at least half: the other {} are a quorum){first}",
            self.granted,
            self.tried,
            self.down,
            self.nodes,
            self.windows,
            self.nodes.saturating_sub(self.down),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(granted: u64, failed: u64) -> QuorumProbe {
        let mut p = QuorumProbe {
            down: 2,
            nodes: 5,
            windows: 1,
            ..QuorumProbe::default()
        };
        for _ in 0..granted {
            p.record(10, Ok(()));
        }
        for i in 0..failed {
            p.record(20 + i, Err("quorum not reached".into()));
        }
        p
    }

    #[test]
    fn half_granted_holds_fewer_does_not() {
        assert!(probe(5, 0).holds());
        assert!(probe(3, 3).holds());
        assert!(!probe(2, 3).holds());
        assert!(!probe(0, 5).holds());
        assert!(
            QuorumProbe::default().holds(),
            "nothing probed: nothing to judge"
        );
    }

    #[test]
    fn keeps_the_first_failures_only() {
        let p = probe(0, 9);
        assert_eq!(p.tried, 9);
        assert_eq!(p.failures.len(), FAILURES_KEPT);
        assert_eq!(p.failures[0], "20 ms: quorum not reached");
        assert!(p.describe().contains("0 of 9"), "{}", p.describe());
        assert!(p.describe().contains("first failure at 20 ms"));
    }
}
