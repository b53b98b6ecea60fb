//! Server truth: how long a grant's keys really lived, from the servers' own answers, set
//! against the validity the lock reported. The lock is not asked anything but its owner
//! token (to tell its keys from another holder's).
//!
//! Right after a grant, before its section's release, the worker reads on every node
//! through the admin connection (past the proxies, so a partition or a latency toxic does
//! not hide the key) the key's value and remaining TTL in one transaction
//! (`MULTI GET PTTL EXEC`) and records each node's [`NodeRead`]:
//!
//! - the key holds our token with `PTTL` *r*: the node holds the grant until at most
//!   `complete + r + 2 ms` — the server answered before `complete`, `PTTL` is whole
//!   milliseconds (1 ms), and a key is gone once the server's millisecond clock passes
//!   its expiry (1 ms more);
//! - the key is absent or another's: the node held it until at most `complete`;
//! - no answer within the read's deadline: it may hold the key for as long as it likes.
//!
//! The lease truly ends when fewer than a quorum hold it: at the quorum-th latest of the
//! nodes' ends ([`true_end_bound`]), an upper bound since every node's end is one. It is
//! valid for every vote the grant counted: a node's yes came back before the grant, so its
//! key was there before the read. A grant whose `valid_until` lies past the bound had its
//! holder work while a majority of its keys were already gone: another client could have
//! held the lock. Where a node that did not answer decides the bound, the sample is
//! inconclusive ([`TruthSummary::inconclusive`]).
//!
//! A correct lock's margin (`bound − valid_until`) is at least its drift allowance, plus
//! the time its `SET`s took to reach the quorum, when the servers' clocks run at ours; a
//! validity counted from the replies instead of the send, or without the elapsed time,
//! shows as a negative margin once replies or acquires take longer than the allowance.
//! Clock faults make the servers' keys expire early on purpose: there the margin is the
//! truth of what they did to the lock, and scenarios that expect the lock to break report
//! it rather than fail on it.

use serde::{Deserialize, Serialize};

/// Added to a read's completion + `PTTL` for the server's whole-millisecond clock: `PTTL`
/// truncates, and a key expires once the clock is past its expiry.
pub const PTTL_RESOLUTION_US: u64 = 2_000;

/// What one node said of a grant's key; times are µs since the scenario start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum NodeRead {
    /// Our token, living until at most `until_us` (`u64::MAX`: the key has no TTL).
    Holds {
        /// Latest possible expiry.
        until_us: u64,
    },
    /// Absent or another's when the read completed at `at_us`.
    Lacks {
        /// The read's completion.
        at_us: u64,
    },
    /// No answer in time (down, frozen, unreachable).
    Unknown,
}

impl NodeRead {
    /// A node that answered `value` and `pttl_ms` to a read that completed at
    /// `complete_us`, for a lease whose owner token is `token`.
    pub fn from_answer(value: Option<&[u8]>, pttl_ms: i64, token: &[u8], complete_us: u64) -> Self {
        match (value, pttl_ms) {
            (Some(v), -1) if v == token => NodeRead::Holds { until_us: u64::MAX },
            (Some(v), ms) if v == token && ms >= 0 => NodeRead::Holds {
                until_us: complete_us
                    .saturating_add(ms.unsigned_abs().saturating_mul(1_000))
                    .saturating_add(PTTL_RESOLUTION_US),
            },
            _ => NodeRead::Lacks { at_us: complete_us },
        }
    }

    /// The latest moment this node can have held the key (`u64::MAX`: unbounded).
    fn end_bound(self) -> u64 {
        match self {
            NodeRead::Holds { until_us } => until_us,
            NodeRead::Lacks { at_us } => at_us,
            NodeRead::Unknown => u64::MAX,
        }
    }
}

/// Latest moment a quorum can have held the lease: the quorum-th latest node end. `None`
/// when that is unbounded (nodes that did not answer decide it), or when there are fewer
/// nodes than a quorum.
pub fn true_end_bound(reads: &[NodeRead], quorum: usize) -> Option<u64> {
    if quorum == 0 {
        return None;
    }
    let mut ends: Vec<u64> = reads.iter().map(|r| r.end_bound()).collect();
    ends.sort_unstable();
    ends.get(ends.len().checked_sub(quorum)?)
        .copied()
        .filter(|&e| e != u64::MAX)
}

/// Server truth of one grant, as recorded with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantTruth {
    /// Latest moment a quorum can have held the keys; `None`: inconclusive.
    pub end_bound_us: Option<u64>,
    /// Nodes that held our token.
    pub holders: usize,
    /// Nodes that did not answer.
    pub unknown: usize,
}

impl GrantTruth {
    /// The truth of `reads` (one per node) for a lock with `quorum`.
    pub fn of(reads: &[NodeRead], quorum: usize) -> Self {
        GrantTruth {
            end_bound_us: true_end_bound(reads, quorum),
            holders: reads
                .iter()
                .filter(|r| matches!(r, NodeRead::Holds { .. }))
                .count(),
            unknown: reads
                .iter()
                .filter(|r| matches!(r, NodeRead::Unknown))
                .count(),
        }
    }

    /// `bound − valid_until` in µs (negative: validity overstated); `None` if inconclusive.
    pub fn margin_us(&self, valid_until_us: u64) -> Option<i64> {
        self.end_bound_us
            .map(|e| i128::from(e) - i128::from(valid_until_us))
            .map(|m| i64::try_from(m).unwrap_or(if m < 0 { i64::MIN } else { i64::MAX }))
    }
}

/// A mode's server-truth numbers: how many grants were read, how many of them overstated
/// their validity, and the margins' distribution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TruthSummary {
    /// Grants whose keys were read.
    pub read: u64,
    /// Of those, how many could not be bounded (a node that did not answer decides).
    pub inconclusive: u64,
    /// Grants whose `valid_until` lay past the latest moment a quorum held their keys.
    pub overstated: u64,
    /// Smallest margin (`bound − valid_until`), µs; `None` without a conclusive read.
    pub margin_min_us: Option<i64>,
    /// Median margin, µs.
    pub margin_p50_us: Option<i64>,
}

impl TruthSummary {
    /// The summary of `(truth, valid_until_us)` per read grant.
    pub fn of<'a>(grants: impl IntoIterator<Item = (&'a GrantTruth, u64)>) -> Self {
        let mut s = TruthSummary::default();
        let mut margins = Vec::new();
        for (truth, valid_until_us) in grants {
            s.read += 1;
            match truth.margin_us(valid_until_us) {
                Some(m) => margins.push(m),
                None => s.inconclusive += 1,
            }
        }
        margins.sort_unstable();
        s.overstated = margins.iter().take_while(|&&m| m < 0).count() as u64;
        s.margin_min_us = margins.first().copied();
        s.margin_p50_us = margins.get(margins.len() / 2).copied();
        s
    }

    /// One line for a verdict's reason.
    pub fn describe(&self) -> String {
        let ms =
            |m: Option<i64>| m.map_or_else(|| "-".into(), |m| format!("{:.1}", m as f64 / 1e3));
        format!(
            "{} grants read on the servers ({} inconclusive), margin min {} ms, median {} ms",
            self.read,
            self.inconclusive,
            ms(self.margin_min_us),
            ms(self.margin_p50_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &[u8] = b"ours";

    #[test]
    fn an_answer_becomes_a_node_end() {
        let holds = NodeRead::from_answer(Some(TOKEN), 150, TOKEN, 1_000);
        assert_eq!(holds, NodeRead::Holds { until_us: 153_000 });
        assert_eq!(
            NodeRead::from_answer(Some(TOKEN), -1, TOKEN, 1_000),
            NodeRead::Holds { until_us: u64::MAX }
        );
        for (value, pttl) in [(Some(&b"theirs"[..]), 150), (None, -2), (Some(TOKEN), -2)] {
            assert_eq!(
                NodeRead::from_answer(value, pttl, TOKEN, 1_000),
                NodeRead::Lacks { at_us: 1_000 }
            );
        }
    }

    #[test]
    fn the_quorum_th_latest_end_bounds_the_lease() {
        let h = |until_us| NodeRead::Holds { until_us };
        let reads = [h(200), h(210), NodeRead::Lacks { at_us: 5 }, h(190), h(220)];
        assert_eq!(true_end_bound(&reads, 3), Some(200));
        // Two holders of five: the quorum was gone when the read completed.
        let reads = [
            h(200),
            NodeRead::Lacks { at_us: 5 },
            h(220),
            NodeRead::Lacks { at_us: 7 },
            NodeRead::Lacks { at_us: 6 },
        ];
        assert_eq!(true_end_bound(&reads, 3), Some(7));
        // A silent node may hold to the end of time: it lifts the bound one place.
        let reads = [
            h(200),
            NodeRead::Unknown,
            h(220),
            h(190),
            NodeRead::Lacks { at_us: 5 },
        ];
        assert_eq!(true_end_bound(&reads, 3), Some(200));
        let reads = [
            h(200),
            NodeRead::Unknown,
            NodeRead::Unknown,
            NodeRead::Unknown,
            h(190),
        ];
        assert_eq!(true_end_bound(&reads, 3), None);
        assert_eq!(true_end_bound(&[h(1)], 0), None);
        assert_eq!(true_end_bound(&[h(1)], 2), None);
    }

    #[test]
    fn summary_counts_overstated_grants_and_margins() {
        let truth = |e| GrantTruth {
            end_bound_us: e,
            holders: 3,
            unknown: 0,
        };
        let (a, b, c, d) = (
            truth(Some(1_000)),
            truth(Some(500)),
            truth(None),
            truth(Some(2_000)),
        );
        let s = TruthSummary::of([(&a, 900), (&b, 600), (&c, 100), (&d, 1_000)]);
        assert_eq!(
            s,
            TruthSummary {
                read: 4,
                inconclusive: 1,
                overstated: 1,
                margin_min_us: Some(-100),
                margin_p50_us: Some(100),
            }
        );
        assert_eq!(TruthSummary::of([]).margin_min_us, None);
    }
}
