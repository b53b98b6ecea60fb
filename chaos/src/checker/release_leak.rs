//! Release leaks: a key of a *granted* lease left on a node after its release should have
//! removed it.
//!
//! [`super::leak`] judges the keys of attempts that were never granted; this module judges
//! the rest. A release must delete the lease's key on every node that may hold it — the
//! ones that said yes to the acquire, and the ones whose answer had not come or was a
//! timeout (their `SET` may have landed, or land later: the delete follows it on the same
//! connection). A release that deletes only where the acquire got a yes, gives up on a node
//! whose connection is being made again, or a drop path that forgets the delete, leaves the
//! key on a minority until it expires: the next acquire still finds a quorum, so no other
//! check sees it, but that node is blocked for the key's remaining TTL.
//!
//! # The rule
//! The history names each grant's owner token (its `acquire`) and its section, and the
//! section's `release` (or `retire`, which releases before it completes) with its times
//! and outcome. A sample of the mode's key ([`KeySample`]) holding a granted token is a
//! **release leak** when it was read at or after the key's *due* time plus
//! [`RELEASE_ALLOWANCE`] of the TTL, before the end of the watch, where *due* is:
//!
//! | the history shows | due |
//! |---|---|
//! | a release (or retirement) that succeeded | its completion |
//! | one that failed or is indeterminate | its completion or the lease's validity end, whichever is later |
//! | none, and the worker went on (its next operation) | that operation's start or the validity end, whichever is later |
//! | none, and the worker did nothing after (cut off by the end) | not judged |
//!
//! pushed later by every fault on the key's node (or on every node) that began before the
//! delete was due and ended after it was sent ([`Windows::held`]): a delete held up by a
//! frozen node lands when it thaws, and is judged from then.
//!
//! Each (node, token) counts once, at its first judged read.
//!
//! # Excuses, as for never-granted keys
//! - A fault of an exempt kind ([`super::leak::exempt`], [`super::leak::exempt_at_heal`]) on
//!   that node or every node, from the acquire's start to the read: it may have kept the
//!   delete from the node, or broken the connection so that the delete overtook a `SET`
//!   still on its way. Not counted, as [`super::leak::leaks`] does not count them.
//! - A stall the watcher saw on that node or the machine ([`crate::run::leaks`]), from the
//!   release's start (when its deletes were sent) to the read: the delete may be late.
//!   Counted apart ([`ReleaseLeaks::excused`]). A stall before the release delays the
//!   `SET` and the delete behind it alike; it breaks no connection.
//!
//! # Why a correct lock cannot fire it
//! - *A release never sent* (the section lost its lease, the worker failed): the workload
//!   releases on every path that returns (our lock's release still deletes everywhere when
//!   the lease was lost), and a lease dropped unreleased has its deletes sent on drop (our
//!   lock's `Drop`). Judged only once the worker has gone on, and not before the validity
//!   end plus the allowance, by when a key set by the lease has (but for a fault) expired or
//!   been deleted.
//! - *A release cut off by the end*: a grant without a release and without a later operation
//!   of its worker is not judged, nor is any read after the watch's end.
//! - *Keys read before the release completed*: nothing is judged before the due time.
//! - *A node that was unreachable*: exempt faults excuse the whole lease; order-keeping
//!   faults (freeze, muted or split replies, clock jumps, a late retirement's held requests)
//!   move the due time to their heal.
//! - *A reconnecting connection*: a connection breaks only under a fault (exempt for the
//!   whole lease) or at an exempt heal; a reconnect on a healthy node takes well under a
//!   node deadline, and a delete that missed its deadline is tried again after one — both
//!   inside the allowance.
//! - *A failed release*: our lock tries a delete that timed out again in the background
//!   until the keys' end (about the validity end), so a failed release is judged from the
//!   later of its completion and the validity end.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::history::{Op, OpKind, OpOutcome};
use super::keys::{Exempt, KeySample};

/// A granted lease's key may stand for this share of the TTL after its release was due
/// (100 ms of the rig's 200 ms TTL): a delete still in flight when the release returned is
/// answered within the node deadline (the lock's default, a tenth of the TTL: 20 ms); the
/// watcher's read that found the key may have been sent up to its own deadline (20 ms)
/// before it completed; a delete that missed its deadline is tried again after a pause of
/// one node deadline, within another (40 ms); the last 20 ms are scheduling. A key left by
/// a release stands its remaining TTL — set at the acquire, most of the second half of it.
pub const RELEASE_ALLOWANCE: f64 = 0.5;

/// Examples kept per mode.
const EXAMPLES: usize = 5;

/// What the release-leak check found in one mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseLeaks {
    /// Grants whose keys could be judged: their release (or the worker's next operation)
    /// was due before the end of the watch.
    #[serde(default)]
    pub judged: u64,
    /// (node, token) pairs of granted leases found standing past their release's due time
    /// plus the allowance.
    #[serde(default)]
    pub leaked: u64,
    /// A few of them, e.g. `n2 at 3.412 s: token 9f3a12…, released (ok) at 3.300 s, 40 ms
    /// of its 200 ms TTL left`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// (node, token) pairs that would be leaks but for a stall the watcher saw on that node
    /// or machine after the release was sent: not judged.
    #[serde(default)]
    pub excused: u64,
}

/// The fault and stall windows the rule reads, in µs on the scenario clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Windows<'a> {
    /// Faults that may keep a delete from a node (see [`super::leak::exempt`]).
    pub exempt: &'a [Exempt],
    /// Every fault window (any kind): a delete may be held while one lasts.
    pub held: &'a [Exempt],
    /// Stalls the watcher saw outside faults.
    pub stalls: &'a [Exempt],
}

/// One granted lease, as the history tells it.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// The acquire's start: the first write that may have set a key of the lease.
    acquired_us: u64,
    /// When the lease's key must be gone (before faults and the allowance).
    due_us: u64,
    /// When its deletes were sent (the release's start, or `due_us`).
    sent_us: u64,
    /// How it ended, for examples.
    how: &'static str,
}

/// The release leaks of mode `mode` among `samples` (its key's reads), by its grants and
/// releases in `history`, excused by `windows`, for keys set with `ttl`; reads from
/// `until_us` on are not judged.
pub fn release_leaks(
    samples: &[KeySample],
    history: &[Op],
    mode: &str,
    windows: Windows<'_>,
    ttl: Duration,
    until_us: u64,
) -> ReleaseLeaks {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let allowance = u64::try_from(ttl.mul_f64(RELEASE_ALLOWANCE).as_micros()).unwrap_or(u64::MAX);
    let leases = leases(history, mode);
    let mut out = ReleaseLeaks {
        judged: leases
            .values()
            .filter(|l| l.due_us.saturating_add(allowance) < until_us)
            .count() as u64,
        ..ReleaseLeaks::default()
    };
    // Per (node, token): its first judged read, the lease, and whether a stall explains it.
    let mut judged: BTreeMap<(usize, &str), (&KeySample, Lease, bool)> = BTreeMap::new();
    for s in samples {
        let Some(lease) = leases.get(s.token.as_str()) else {
            continue;
        };
        // A key without expiry is not one of the lock's.
        if s.at_us >= until_us || s.pttl_ms < 0 {
            continue;
        }
        let on_node = |e: &Exempt| e.node.is_none_or(|n| n == s.node);
        let overlaps =
            |e: &Exempt, from_us: u64| on_node(e) && e.from_us <= s.at_us && e.to_us >= from_us;
        if windows
            .exempt
            .iter()
            .any(|e| overlaps(e, lease.acquired_us))
        {
            continue;
        }
        let due = held_until(lease, s.node, windows.held, allowance);
        if s.at_us < due.saturating_add(allowance) {
            continue;
        }
        let late = windows.stalls.iter().any(|e| overlaps(e, lease.sent_us));
        let entry = judged
            .entry((s.node, s.token.as_str()))
            .or_insert((s, *lease, false));
        entry.2 |= late;
    }
    for (s, lease, late) in judged.into_values() {
        if late {
            out.excused += 1;
            continue;
        }
        out.leaked += 1;
        if out.examples.len() < EXAMPLES {
            let short: String = s.token.chars().take(12).collect();
            out.examples.push(format!(
                "n{} at {:.3} s: token {short}…, {} at {:.3} s, {} ms of its {ttl_ms} ms TTL left",
                s.node,
                s.at_us as f64 / 1e6,
                lease.how,
                lease.due_us as f64 / 1e6,
                s.pttl_ms
            ));
        }
    }
    out
}

/// The granted leases of `mode` in `history`, by owner token, with when their keys are due
/// to be gone (see the module docs); leases cut off by the end are left out.
fn leases<'a>(history: &'a [Op], mode: &str) -> HashMap<&'a str, Lease> {
    let ops: Vec<&Op> = history.iter().filter(|op| op.mode == mode).collect();
    // Each section's release (or retirement): the last to complete.
    let mut ends: HashMap<u64, &Op> = HashMap::new();
    for op in &ops {
        if let (OpKind::Release | OpKind::Retire, Some(section)) = (op.f, op.section) {
            let e = ends.entry(section).or_insert(op);
            if op.complete_us > e.complete_us {
                *e = op;
            }
        }
    }
    let mut out = HashMap::new();
    for a in &ops {
        let (OpKind::Acquire, OpOutcome::Ok, Some(token), Some(section)) =
            (a.f, a.outcome, a.owner.as_deref(), a.section)
        else {
            continue;
        };
        let valid_until = a.valid_until_us.unwrap_or(a.complete_us);
        let lease = match ends.get(&section) {
            Some(r) if r.outcome == OpOutcome::Ok => Lease {
                acquired_us: a.invoke_us,
                due_us: r.complete_us,
                sent_us: r.invoke_us,
                how: "released (ok)",
            },
            Some(r) => Lease {
                acquired_us: a.invoke_us,
                due_us: r.complete_us.max(valid_until),
                sent_us: r.invoke_us,
                how: "released (failed), due",
            },
            None => {
                // The worker's next operation outside the section: the lease was dropped
                // by then.
                let next = ops
                    .iter()
                    .filter(|o| o.worker == a.worker && o.section != Some(section))
                    .filter(|o| o.invoke_us >= a.complete_us)
                    .map(|o| o.invoke_us)
                    .min();
                let Some(next) = next else { continue };
                let due = next.max(valid_until);
                Lease {
                    acquired_us: a.invoke_us,
                    due_us: due,
                    sent_us: due,
                    how: "never released, due",
                }
            }
        };
        out.insert(token, lease);
    }
    out
}

/// `lease`'s due time on `node`, moved to the end of every fault window there that began
/// before the delete was due (with `allowance`) and ended after it was sent: the delete
/// was held while it lasted.
fn held_until(lease: &Lease, node: usize, held: &[Exempt], allowance: u64) -> u64 {
    let mut due = lease.due_us;
    // Each pass moves `due` to a later window's end or stops: bounded by the windows.
    for _ in 0..=held.len() {
        let later = held
            .iter()
            .filter(|e| e.node.is_none_or(|n| n == node))
            .filter(|e| e.from_us <= due.saturating_add(allowance) && e.to_us >= lease.sent_us)
            .map(|e| e.to_us)
            .filter(|to| *to > due)
            .max();
        match later {
            Some(to) => due = to,
            None => break,
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_millis(200);
    const UNTIL: u64 = 60_000_000;
    const MODE: &str = "checked";

    fn sample(node: usize, at_ms: u64, token: &str, pttl_ms: i64) -> KeySample {
        KeySample {
            node,
            at_us: at_ms * 1000,
            token: token.into(),
            pttl_ms,
        }
    }

    fn op(worker: usize, f: OpKind, outcome: OpOutcome, from_ms: u64, to_ms: u64) -> Op {
        let mut op = Op::new(worker, f, outcome, from_ms * 1000, to_ms * 1000).section(7);
        op.mode = MODE.into();
        op
    }

    /// Worker 0's grant of token `a` at 1.000–1.010 s (valid until 1.190 s), released
    /// `outcome` at 1.030–1.040 s.
    fn granted_and_released(outcome: Option<OpOutcome>) -> Vec<Op> {
        let mut acquire = op(0, OpKind::Acquire, OpOutcome::Ok, 1_000, 1_010);
        acquire.owner = Some("a".into());
        acquire.valid_until_us = Some(1_190_000);
        let mut ops = vec![acquire];
        if let Some(outcome) = outcome {
            ops.push(op(0, OpKind::Release, outcome, 1_030, 1_040));
        }
        ops
    }

    fn window(node: Option<usize>, from_ms: u64, to_ms: u64) -> Exempt {
        Exempt {
            node,
            from_us: from_ms * 1000,
            to_us: to_ms * 1000,
        }
    }

    fn judge(samples: &[KeySample], history: &[Op], windows: Windows<'_>) -> ReleaseLeaks {
        release_leaks(samples, history, MODE, windows, TTL, UNTIL)
    }

    #[test]
    fn a_correct_release_leaves_nothing_to_find() {
        let history = granted_and_released(Some(OpOutcome::Ok));
        // Read while held, and while the release was in flight: not judged.
        let samples = [sample(0, 1_020, "a", 180), sample(3, 1_060, "a", 140)];
        let r = judge(&samples, &history, Windows::default());
        assert_eq!((r.judged, r.leaked, r.excused), (1, 0, 0), "{r:?}");
    }

    #[test]
    fn a_release_to_the_yes_voters_only_leaves_a_leak_per_node() {
        let history = granted_and_released(Some(OpOutcome::Ok));
        // n3 and n4 got the SET but no delete: still there 100 ms after the release.
        let samples = [
            sample(3, 1_120, "a", 80),
            sample(3, 1_145, "a", 55),
            sample(4, 1_145, "a", 60),
            // Another mode's or a never-granted token: not this rule's.
            sample(2, 1_145, "b", 55),
        ];
        let r = judge(&samples, &history, Windows::default());
        assert_eq!((r.leaked, r.excused), (2, 0), "{r:?}");
        assert_eq!(
            r.examples[0],
            "n3 at 1.145 s: token a…, released (ok) at 1.040 s, 55 ms of its 200 ms TTL left"
        );
        // Before the allowance ran out: not yet.
        let r = judge(&[sample(3, 1_130, "a", 70)], &history, Windows::default());
        assert_eq!(r.leaked, 0, "{r:?}");
    }

    #[test]
    fn a_failed_release_is_judged_from_the_validity_end() {
        let history = granted_and_released(Some(OpOutcome::Fail));
        // Past the release and its allowance, before the validity end and its allowance:
        // its deletes may still be tried again.
        let r = judge(&[sample(1, 1_200, "a", 10)], &history, Windows::default());
        assert_eq!(r.leaked, 0, "{r:?}");
        // A key kept alive past that (a renewer that outlived its lease) is a leak.
        let r = judge(&[sample(1, 1_300, "a", 150)], &history, Windows::default());
        assert_eq!(r.leaked, 1, "{r:?}");
        assert!(
            r.examples[0].contains("released (failed), due at 1.190 s"),
            "{r:?}"
        );
    }

    #[test]
    fn an_unreleased_grant_is_judged_once_its_worker_went_on_and_not_if_cut_off() {
        let history = granted_and_released(None);
        let late = [sample(1, 1_400, "a", 150)];
        // Nothing after it: cut off by the end of the run.
        let r = judge(&late, &history, Windows::default());
        assert_eq!((r.judged, r.leaked), (0, 0), "{r:?}");
        // The worker acquired again at 1.200 s: the lease was dropped by then.
        let mut history = history;
        let mut next = op(0, OpKind::Acquire, OpOutcome::Fail, 1_200, 1_250);
        next.section = None;
        history.push(next);
        let r = judge(&late, &history, Windows::default());
        assert_eq!((r.judged, r.leaked), (1, 1), "{r:?}");
        assert!(
            r.examples[0].contains("never released, due at 1.200 s"),
            "{r:?}"
        );
        // Reads after the watch's end are not judged.
        let r = release_leaks(&late, &history, MODE, Windows::default(), TTL, 1_300_000);
        assert_eq!(r.leaked, 0, "{r:?}");
    }

    #[test]
    fn an_exempt_fault_on_the_node_during_the_lease_excuses_it_uncounted() {
        let history = granted_and_released(Some(OpOutcome::Ok));
        let samples = [sample(3, 1_145, "a", 55)];
        // A partition of n3 while the lease was held: the delete may not have reached it.
        let exempt = [window(Some(3), 500, 1_020)];
        let windows = Windows {
            exempt: &exempt,
            ..Windows::default()
        };
        let r = judge(&samples, &history, windows);
        assert_eq!((r.leaked, r.excused), (0, 0), "{r:?}");
        // One of another node, or one that ended before the acquire, excuses nothing.
        for e in [window(Some(2), 500, 1_020), window(Some(3), 500, 990)] {
            let exempt = [e];
            let windows = Windows {
                exempt: &exempt,
                ..Windows::default()
            };
            assert_eq!(judge(&samples, &history, windows).leaked, 1, "{e:?}");
        }
    }

    #[test]
    fn an_order_keeping_fault_moves_the_due_time_to_its_heal() {
        let history = granted_and_released(Some(OpOutcome::Ok));
        // n3 frozen from 1.020 to 1.100 s: the delete lands when it thaws.
        let held = [window(Some(3), 1_020, 1_100)];
        let windows = Windows {
            held: &held,
            ..Windows::default()
        };
        let r = judge(&[sample(3, 1_150, "a", 50)], &history, windows);
        assert_eq!(r.leaked, 0, "{r:?}");
        let r = judge(&[sample(3, 1_205, "a", 90)], &history, windows);
        assert_eq!(r.leaked, 1, "{r:?}");
        // A freeze that began after the delete was due holds nothing back.
        let held = [window(Some(3), 1_150, 1_400)];
        let windows = Windows {
            held: &held,
            ..Windows::default()
        };
        let r = judge(&[sample(3, 1_145, "a", 55)], &history, windows);
        assert_eq!(r.leaked, 1, "{r:?}");
    }

    #[test]
    fn a_stall_after_the_release_was_sent_excuses_it_and_is_counted() {
        let history = granted_and_released(Some(OpOutcome::Ok));
        let samples = [sample(3, 1_120, "a", 80), sample(3, 1_145, "a", 55)];
        let stalls = [window(None, 1_035, 1_060)];
        let windows = Windows {
            stalls: &stalls,
            ..Windows::default()
        };
        let r = judge(&samples, &history, windows);
        assert_eq!((r.leaked, r.excused), (0, 1), "{r:?}");
        // One that ended before the release was sent delayed no delete.
        let stalls = [window(Some(3), 900, 1_020)];
        let windows = Windows {
            stalls: &stalls,
            ..Windows::default()
        };
        let r = judge(&samples, &history, windows);
        assert_eq!((r.leaked, r.excused), (1, 0), "{r:?}");
    }
}
