//! The validity a lease announced, over time: what a write is judged stale against, and
//! where a renewed grant's holding window ends.
//!
//! A plain grant announces one validity, with its acquire. A renewed one announces more:
//! each explicit extend (`extend` operations carry the validity the lease claimed after
//! them, a failed one included: it may have shortened the keys) and each renewal its
//! background renewer made (`renew` operations: the validity `status()` said, seen by
//! `complete_us` on the section's watch or at the holder's check before its write). The
//! most recent announcement is what the lock stands behind at any moment, so:
//!
//! - a write is **stale** when it completed after the validity announced last before it
//!   was *invoked* — a renewal that lands while the write is in flight does not cover it,
//!   one the holder saw before writing does (judged against the first validity alone,
//!   every renewed write after it looked stale, and every loss a stale write's doing);
//! - a renewed grant's **holding window** ends at the validity announced last before its
//!   section ended, or before its renewer reported a loss when it did (then, not the
//!   validity the lease had when renewal started), or at the section's end if that came
//!   first.
//!
//! Old histories carry no `renew` operations and no validity on `extend`: their sections
//! are judged against their acquire's validity, as before.

use std::collections::HashMap;

use super::history::{Op, OpKind, OpOutcome};

/// One section's announcements: `(at_us, valid_until_us)`, oldest first — the validity
/// announced, and the time by which it was seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announced {
    points: Vec<(u64, u64)>,
}

impl Announced {
    /// Every section's announcements in `ops` (one mode's history, in any order).
    pub fn by_section(ops: &[Op]) -> HashMap<u64, Announced> {
        let mut out: HashMap<u64, Announced> = HashMap::new();
        for op in ops {
            let (Some(section), Some(valid_until)) = (op.section, op.valid_until_us) else {
                continue;
            };
            let announces = match op.f {
                OpKind::Acquire | OpKind::Renew => op.outcome == OpOutcome::Ok,
                // Whatever its outcome: a failed extend may have cut the validity.
                OpKind::Extend => true,
                _ => false,
            };
            if announces {
                out.entry(section)
                    .or_default()
                    .points
                    .push((op.complete_us, valid_until));
            }
        }
        for a in out.values_mut() {
            // Stable: of two seen at the same µs, the one recorded later stands.
            a.points.sort_by_key(|&(at, _)| at);
        }
        out
    }

    /// The validity announced last at or before `at_us` (`None`: nothing by then).
    pub fn at(&self, at_us: u64) -> Option<u64> {
        let n = self.points.partition_point(|&(at, _)| at <= at_us);
        n.checked_sub(1).map(|i| self.points[i].1)
    }

    /// Whether a write invoked at `invoke_us` that completed at `complete_us` was stale:
    /// completed after the validity announced last before it was invoked.
    pub fn stale(&self, invoke_us: u64, complete_us: u64) -> bool {
        self.at(invoke_us).is_some_and(|v| complete_us > v)
    }

    /// Where a grant whose section ended at `done_us`, and whose renewer reported a loss
    /// at `loss_us` if it did, stopped holding: at the validity announced last before the
    /// earlier of the two, or at `done_us` if that came first. `None`: nothing announced.
    pub fn holding_end(&self, done_us: u64, loss_us: Option<u64>) -> Option<u64> {
        let last = loss_us.map_or(done_us, |l| l.min(done_us));
        self.at(last).map(|v| v.min(done_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(f: OpKind, outcome: OpOutcome, at: u64, valid_until: Option<u64>) -> Op {
        let mut op = Op::new(0, f, outcome, at.saturating_sub(5), at).section(1);
        op.valid_until_us = valid_until;
        op
    }

    /// Granted at 0 valid to 200; renewed, seen at 70 (to 270), at 140 (to 340).
    fn renewed() -> Announced {
        let ops = [
            op(OpKind::Acquire, OpOutcome::Ok, 0, Some(200)),
            op(OpKind::Renew, OpOutcome::Ok, 140, Some(340)),
            op(OpKind::Renew, OpOutcome::Ok, 70, Some(270)),
            // Neither announces: a failed acquire, a read.
            op(OpKind::Acquire, OpOutcome::Fail, 150, Some(900)),
            op(OpKind::Read, OpOutcome::Ok, 150, Some(900)),
        ];
        Announced::by_section(&ops).remove(&1).expect("section 1")
    }

    #[test]
    fn a_write_is_judged_against_the_validity_announced_last_before_it_started() {
        let a = renewed();
        assert_eq!(
            (a.at(0), a.at(69), a.at(70), a.at(500)),
            (Some(200), Some(200), Some(270), Some(340))
        );
        // Landed after the first validity, before the latest announced one: not stale.
        assert!(!a.stale(150, 250));
        assert!(!a.stale(150, 340));
        // After the latest announced before it started: stale.
        assert!(a.stale(150, 341));
        // A renewal seen while the write was in flight does not cover it.
        assert!(a.stale(60, 260));
    }

    #[test]
    fn a_renewed_window_ends_at_the_validity_announced_before_the_loss() {
        let a = renewed();
        // Held to the end of the section, which came first.
        assert_eq!(a.holding_end(300, None), Some(300));
        // Section ran on past every validity: the latest announced one.
        assert_eq!(a.holding_end(900, None), Some(340));
        // The renewer reported a loss at 100: the validity it had announced then.
        assert_eq!(a.holding_end(900, Some(100)), Some(270));
        assert_eq!(Announced::default().holding_end(900, None), None);
    }

    #[test]
    fn an_extend_announces_whatever_its_outcome() {
        // A failed shortening extend at 50 cut the validity to 120.
        let ops = [
            op(OpKind::Acquire, OpOutcome::Ok, 0, Some(200)),
            op(OpKind::Extend, OpOutcome::Fail, 50, Some(120)),
            // An old history's extend, without a validity: nothing.
            op(OpKind::Extend, OpOutcome::Ok, 60, None),
        ];
        let a = Announced::by_section(&ops).remove(&1).expect("section 1");
        assert_eq!(a.at(100), Some(120));
        assert!(a.stale(100, 150));
    }
}
