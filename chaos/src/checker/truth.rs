//! Server truth: how long a grant's keys really lived, from the servers' own answers, set
//! against the validity the lock reported. The lock is not asked anything but its owner
//! token (to tell its keys from another holder's).
//!
//! Right after a grant, before its section's release, the worker reads on every node
//! through the admin connection (past the proxies, so a partition or a latency toxic does
//! not hide the key) the key's value and remaining TTL in one transaction
//! (`MULTI GET PTTL EXEC`) and records each node's [`NodeRead`]:
//!
//! - the key holds our token: the node holds the grant until at most `complete + r`, where
//!   *r* is the time the key had left when the server answered (it answered before
//!   `complete`). The read also asks the key's absolute expiry (`PEXPIRETIME`, whole
//!   milliseconds) and the server's clock (`TIME`, microseconds) in the same transaction: a
//!   key is gone once the server's millisecond clock passes its expiry, so *r* is
//!   `(expiry + 1 ms) − time`, to the microsecond. A server without `PEXPIRETIME` (before
//!   Redis 7) is read with `PTTL` alone, which truncates to the millisecond: then *r* is
//!   `PTTL + 2 ms`. *r* is in the server's clock: where the nemesis made that clock run at
//!   another rate ([`ClockRates`]), *r* of its time lasts `r / (1 + rate)` of ours;
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
//! it rather than fail on it. A rate skew inside the lock's drift allowance is one the lock
//! must absorb; read without the rate, a fast clock's `PTTL` would promise the key
//! longer than it lives (a 1 % fast clock: 2 ms of a 200 ms TTL), and a validity too long
//! by its drift allowance would pass.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Added to a read's completion + `PTTL` for the server's whole-millisecond clock: `PTTL`
/// truncates, and a key expires once the clock is past its expiry.
pub const PTTL_RESOLUTION_US: u64 = 2_000;

/// A key whose absolute expiry is `expiry_ms` (server clock, ms) is still there while the
/// server's millisecond clock reads `expiry_ms`: it lives until `expiry_ms + 1 ms`.
pub const EXPIRY_TICK_US: u64 = 1_000;

/// What one node said of a grant's key; times are µs since the scenario start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum NodeRead {
    /// Our token, with `pttl_ms` of the server's milliseconds left (`None`: no TTL) when
    /// the read completed at `at_us`.
    Holds {
        /// The read's completion.
        at_us: u64,
        /// `PTTL`, in the server's clock.
        pttl_ms: Option<u64>,
        /// The server's microseconds until the key is gone, from its expiry and its `TIME`
        /// (none: the server has no `PEXPIRETIME`, or the key no TTL); preferred to
        /// `pttl_ms`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        left_us: Option<u64>,
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
            (Some(v), -1) if v == token => NodeRead::Holds {
                at_us: complete_us,
                pttl_ms: None,
                left_us: None,
            },
            (Some(v), ms) if v == token && ms >= 0 => NodeRead::Holds {
                at_us: complete_us,
                pttl_ms: Some(ms.unsigned_abs()),
                left_us: None,
            },
            _ => NodeRead::Lacks { at_us: complete_us },
        }
    }

    /// Like [`from_answer`](Self::from_answer), with the key's absolute expiry
    /// (`PEXPIRETIME`, ms) and the server's `TIME` (µs) read in the same transaction.
    pub fn from_precise_answer(
        value: Option<&[u8]>,
        pttl_ms: i64,
        expiry_ms: i64,
        server_now_us: u64,
        token: &[u8],
        complete_us: u64,
    ) -> Self {
        match NodeRead::from_answer(value, pttl_ms, token, complete_us) {
            NodeRead::Holds {
                at_us,
                pttl_ms: Some(ms),
                ..
            } if expiry_ms >= 0 => NodeRead::Holds {
                at_us,
                pttl_ms: Some(ms),
                left_us: Some(
                    expiry_ms
                        .unsigned_abs()
                        .saturating_mul(1_000)
                        .saturating_add(EXPIRY_TICK_US)
                        .saturating_sub(server_now_us),
                ),
            },
            read => read,
        }
    }

    /// The latest moment this node can have held the key (`u64::MAX`: unbounded), its
    /// clock running `rate_ppm` parts per million fast (negative: slow).
    fn end_bound(self, rate_ppm: i64) -> u64 {
        match self {
            NodeRead::Holds {
                at_us,
                left_us: Some(left),
                ..
            } => at_us.saturating_add(real_us(left, rate_ppm)),
            NodeRead::Holds {
                at_us,
                pttl_ms: Some(ms),
                left_us: None,
            } => at_us
                .saturating_add(real_us(ms.saturating_mul(1_000), rate_ppm))
                .saturating_add(PTTL_RESOLUTION_US),
            NodeRead::Holds { pttl_ms: None, .. } | NodeRead::Unknown => u64::MAX,
            NodeRead::Lacks { at_us } => at_us,
        }
    }

    /// When the read completed (`None`: no answer).
    fn at_us(self) -> Option<u64> {
        match self {
            NodeRead::Holds { at_us, .. } | NodeRead::Lacks { at_us } => Some(at_us),
            NodeRead::Unknown => None,
        }
    }
}

/// How many of our µs `server_us` µs of a clock running `rate_ppm` fast last. A rate at
/// or below −100 % (a clock that stands or runs back) has no such answer: unbounded.
fn real_us(server_us: u64, rate_ppm: i64) -> u64 {
    let per_million = 1_000_000_i128 + i128::from(rate_ppm);
    if per_million <= 0 {
        return u64::MAX;
    }
    let us = i128::from(server_us) * 1_000_000 / per_million;
    u64::try_from(us).unwrap_or(u64::MAX)
}

/// The clock rates the nemesis set on nodes, as windows on the scenario clock: a node's
/// `PTTL` read inside a window is converted at its rate. Outside every window a node's
/// clock runs at ours.
///
/// Windows are drawn so that a wrong one can only make server truth more lenient: a fast
/// clock (which shortens the bound) counts from when its rate was confirmed on that node
/// until the heal was due to start; a slow one (which lengthens it) from when the fault was
/// due to start until its heal finished (to the end of the run if it never did).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockRates {
    windows: Vec<RateWindow>,
}

/// One node's clock rate over a span of the scenario clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateWindow {
    /// Node index.
    pub node: usize,
    /// Parts per million fast (negative: slow).
    pub rate_ppm: i64,
    /// Start, µs since the scenario start.
    pub from_us: u64,
    /// End (exclusive), µs.
    pub until_us: u64,
}

impl ClockRates {
    /// Rates of `windows`.
    pub fn new(windows: Vec<RateWindow>) -> Self {
        ClockRates { windows }
    }

    /// The rate `node`'s clock ran at when a read completed at `at_us`.
    pub fn at(&self, node: usize, at_us: u64) -> i64 {
        self.windows
            .iter()
            .find(|w| w.node == node && (w.from_us..w.until_us).contains(&at_us))
            .map_or(0, |w| w.rate_ppm)
    }
}

/// Latest moment a quorum can have held the lease: the quorum-th latest node end, each
/// node's `PTTL` read at its clock's rate in `rates`. `None` when that is unbounded (nodes
/// that did not answer decide it), or when there are fewer nodes than a quorum.
pub fn true_end_bound(reads: &[NodeRead], quorum: usize, rates: &ClockRates) -> Option<u64> {
    if quorum == 0 {
        return None;
    }
    let mut ends: Vec<u64> = reads
        .iter()
        .enumerate()
        .map(|(node, r)| r.end_bound(r.at_us().map_or(0, |at| rates.at(node, at))))
        .collect();
    ends.sort_unstable();
    ends.get(ends.len().checked_sub(quorum)?)
        .copied()
        .filter(|&e| e != u64::MAX)
}

/// Server truth of one grant, as recorded with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantTruth {
    /// Latest moment a quorum can have held the keys, every clock taken to run at ours;
    /// `None`: inconclusive. [`GrantTruth::end_bound`] corrects it for skewed clocks.
    pub end_bound_us: Option<u64>,
    /// Nodes that held our token.
    pub holders: usize,
    /// Nodes that did not answer.
    pub unknown: usize,
    /// What each node said, in node order (none in reports of older versions: then
    /// `end_bound_us` is all there is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<NodeRead>,
}

impl GrantTruth {
    /// The truth of `reads` (one per node) for a lock of a majority quorum.
    pub fn of(reads: &[NodeRead]) -> Self {
        GrantTruth {
            end_bound_us: true_end_bound(reads, quorum(reads.len()), &ClockRates::default()),
            holders: reads
                .iter()
                .filter(|r| matches!(r, NodeRead::Holds { .. }))
                .count(),
            unknown: reads
                .iter()
                .filter(|r| matches!(r, NodeRead::Unknown))
                .count(),
            reads: reads.to_vec(),
        }
    }

    /// The latest moment a quorum can have held the keys, the nodes' clocks running at
    /// `rates`.
    pub fn end_bound(&self, rates: &ClockRates) -> Option<u64> {
        if self.reads.is_empty() {
            return self.end_bound_us;
        }
        true_end_bound(&self.reads, quorum(self.reads.len()), rates)
    }

    /// `bound − valid_until` in µs (negative: validity overstated); `None` if inconclusive.
    pub fn margin_us(&self, valid_until_us: u64, rates: &ClockRates) -> Option<i64> {
        self.end_bound(rates)
            .map(|e| i128::from(e) - i128::from(valid_until_us))
            .map(|m| i64::try_from(m).unwrap_or(if m < 0 { i64::MIN } else { i64::MAX }))
    }
}

/// A majority of `nodes`, whatever the lock under test counts (a mutant's smaller quorum is
/// what the truth is there to catch).
fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// A mode's server-truth numbers: how many grants were read, how many of them overstated
/// their validity, and the margins' distribution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TruthSummary {
    /// Reads of a grant's keys: one right after each grant, one after a renewed
    /// section's `extend_for`, and after its renewals (at most one a TTL per worker).
    pub read: u64,
    /// Of those, how many could not be bounded (a node that did not answer decides).
    pub inconclusive: u64,
    /// Reads whose claimed `valid_until` lay past the latest moment a quorum held the keys.
    pub overstated: u64,
    /// Smallest margin (`bound − valid_until`), µs; `None` without a conclusive read.
    pub margin_min_us: Option<i64>,
    /// Median margin, µs.
    pub margin_p50_us: Option<i64>,
}

impl TruthSummary {
    /// The summary of `(truth, valid_until_us)` per read grant, the nodes' clocks running
    /// at `rates`.
    pub fn of<'a>(
        grants: impl IntoIterator<Item = (&'a GrantTruth, u64)>,
        rates: &ClockRates,
    ) -> Self {
        let mut s = TruthSummary::default();
        let mut margins = Vec::new();
        for (truth, valid_until_us) in grants {
            s.read += 1;
            match truth.margin_us(valid_until_us, rates) {
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

    /// A node holding our key until `end_us` (read at 0, its clock at ours).
    fn h(end_us: u64) -> NodeRead {
        NodeRead::Holds {
            at_us: end_us % 1_000,
            pttl_ms: Some(end_us / 1_000),
            left_us: None,
        }
    }

    fn none() -> ClockRates {
        ClockRates::default()
    }

    #[test]
    fn an_answer_becomes_a_node_end() {
        let holds = NodeRead::from_answer(Some(TOKEN), 150, TOKEN, 1_000);
        assert_eq!(
            holds,
            NodeRead::Holds {
                at_us: 1_000,
                pttl_ms: Some(150),
                left_us: None,
            }
        );
        assert_eq!(holds.end_bound(0), 153_000);
        // With the expiry and the server's clock: to the microsecond. Expiry at 10,150 ms,
        // the server's clock at 10,000.25 ms: the key lives 150.75 ms more.
        let precise =
            NodeRead::from_precise_answer(Some(TOKEN), 150, 10_150, 10_000_250, TOKEN, 1_000);
        assert_eq!(precise.end_bound(0), 1_000 + 150_750);
        // No TTL, or not ours: as without.
        let forever = NodeRead::from_precise_answer(Some(TOKEN), -1, -1, 10_000_250, TOKEN, 1_000);
        assert_eq!(forever.end_bound(0), u64::MAX);
        let theirs = NodeRead::from_precise_answer(Some(b"theirs"), 150, 10_150, 0, TOKEN, 1_000);
        assert_eq!(theirs, NodeRead::Lacks { at_us: 1_000 });
        let forever = NodeRead::from_answer(Some(TOKEN), -1, TOKEN, 1_000);
        assert_eq!(forever.end_bound(0), u64::MAX);
        for (value, pttl) in [(Some(&b"theirs"[..]), 150), (None, -2), (Some(TOKEN), -2)] {
            assert_eq!(
                NodeRead::from_answer(value, pttl, TOKEN, 1_000),
                NodeRead::Lacks { at_us: 1_000 }
            );
        }
    }

    #[test]
    fn a_skewed_clock_s_milliseconds_are_read_at_its_rate() {
        let holds = NodeRead::from_answer(Some(TOKEN), 202, TOKEN, 0);
        // 1 % fast: 202 of its ms are 200 of ours.
        assert_eq!(holds.end_bound(10_000), 200_000 + PTTL_RESOLUTION_US);
        // 1 % slow: they last longer.
        assert_eq!(holds.end_bound(-10_000), 204_040 + PTTL_RESOLUTION_US);
        // A clock that stands: no bound.
        assert_eq!(holds.end_bound(-1_000_000), u64::MAX);
        let precise = NodeRead::from_precise_answer(Some(TOKEN), 201, 10_201, 10_000_000, TOKEN, 0);
        assert_eq!(precise.end_bound(10_000), 200_000);
        assert_eq!(real_us(u64::MAX, 0), u64::MAX);
    }

    #[test]
    fn rates_apply_to_their_node_inside_their_window() {
        let rates = ClockRates::new(vec![RateWindow {
            node: 1,
            rate_ppm: 10_000,
            from_us: 100,
            until_us: 200,
        }]);
        assert_eq!(rates.at(1, 100), 10_000);
        assert_eq!(rates.at(1, 199), 10_000);
        assert_eq!(rates.at(1, 200), 0);
        assert_eq!(rates.at(1, 99), 0);
        assert_eq!(rates.at(0, 150), 0);
        // Three nodes 1 % fast: the bound moves 2 ms earlier.
        let reads = [
            NodeRead::from_answer(Some(TOKEN), 202, TOKEN, 150),
            NodeRead::from_answer(Some(TOKEN), 202, TOKEN, 150),
            NodeRead::from_answer(Some(TOKEN), 202, TOKEN, 150),
        ];
        let fast = ClockRates::new(
            (0..3)
                .map(|node| RateWindow {
                    node,
                    rate_ppm: 10_000,
                    from_us: 100,
                    until_us: 200,
                })
                .collect(),
        );
        let truth = GrantTruth::of(&reads);
        assert_eq!(truth.end_bound(&none()), Some(150 + 202_000 + 2_000));
        assert_eq!(truth.end_bound(&fast), Some(150 + 200_000 + 2_000));
        assert_eq!(truth.margin_us(201_000, &fast), Some(1_150));
        // A record of an older version: only its bound.
        let old = GrantTruth {
            reads: Vec::new(),
            ..truth
        };
        assert_eq!(old.end_bound(&fast), Some(204_150));
    }

    #[test]
    fn the_quorum_th_latest_end_bounds_the_lease() {
        let reads = [
            h(200_000),
            h(210_000),
            NodeRead::Lacks { at_us: 5 },
            h(190_000),
            h(220_000),
        ];
        let bound = |reads: &[NodeRead], q| true_end_bound(reads, q, &none());
        assert_eq!(bound(&reads, 3), Some(202_000));
        // Two holders of five: the quorum was gone when the read completed.
        let reads = [
            h(200_000),
            NodeRead::Lacks { at_us: 5 },
            h(220_000),
            NodeRead::Lacks { at_us: 7 },
            NodeRead::Lacks { at_us: 6 },
        ];
        assert_eq!(bound(&reads, 3), Some(7));
        // A silent node may hold to the end of time: it lifts the bound one place.
        let reads = [
            h(200_000),
            NodeRead::Unknown,
            h(220_000),
            h(190_000),
            NodeRead::Lacks { at_us: 5 },
        ];
        assert_eq!(bound(&reads, 3), Some(202_000));
        let reads = [
            h(200_000),
            NodeRead::Unknown,
            NodeRead::Unknown,
            NodeRead::Unknown,
            h(190_000),
        ];
        assert_eq!(bound(&reads, 3), None);
        assert_eq!(bound(&[h(1_000)], 0), None);
        assert_eq!(bound(&[h(1_000)], 2), None);
    }

    #[test]
    fn summary_counts_overstated_grants_and_margins() {
        let truth = |e| GrantTruth {
            end_bound_us: e,
            holders: 3,
            unknown: 0,
            reads: Vec::new(),
        };
        let (a, b, c, d) = (
            truth(Some(1_000)),
            truth(Some(500)),
            truth(None),
            truth(Some(2_000)),
        );
        let s = TruthSummary::of([(&a, 900), (&b, 600), (&c, 100), (&d, 1_000)], &none());
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
        assert_eq!(TruthSummary::of([], &none()).margin_min_us, None);
    }
}
