//! Hand-offs and take-overs inside one client: whether a lease released, or kept past its
//! validity, still holds its client's own waiters back.
//!
//! Our client keeps a record of the keys its own leases hold (`redlock/src/held.rs`), so
//! that its waiters do not ask the nodes for a lock a sibling holds: a waiter that finds
//! the key recorded waits for the release notice or for the record's validity end. A lease
//! that is released must leave that record at once; one that stays (a forgotten `forget`)
//! holds every sibling back until the released lease's validity would have ended — the
//! nodes are free, the lock is idle, and nothing in exclusion, tokens or losses shows it.
//!
//! What shows it: in a mode whose workers share one client, a **hand-off** is a release
//! followed by the grant of a worker that was already waiting when the release began (its
//! acquire invoked before, completed after). It is **eligible** when the released lease
//! still had [`HANDOFF_SLACK_US`] of validity when its release returned: time for the
//! waiter's wake-up (the release notice, or at worst its retry pause, 25-75 ms by default)
//! and one round. It is **early** when the waiter was granted before the released lease's
//! validity end. A client that keeps the record grants almost none early: its polling
//! waiters cannot ask the nodes before that end (a waiter that heard a release notice
//! asks anyway, which is why the shared-client scenarios run half their modes polling).
//! A correct one grants nearly all of them early: in `connection-minority` all of them (749-751 per mode woken by release notices,
//! slowest 16 ms; 146-150 per polling mode, slowest 75 ms), in `connection-majority` 104 of
//! 108 to 538 of 542 (where a quorum's connections were broken, up to 717 ms) — 8 s, seed
//! 24, 2026-12-06, docs/mutants.md run P. The verdict asks for [`MIN_EARLY_SHARE`] of them
//! early once [`MIN_ELIGIBLE`] were eligible — so how many sections a busy machine managed
//! decides only whether it is judged, never how.
//!
//! The other way a client's record can hold its waiters back: a lease its holder keeps past
//! the validity (a task stuck before its write, `task-pause`) must stop counting at its
//! validity end — the nodes' keys expire right after, and a waiting sibling must get in
//! then, not when the stuck task finally lets go. A **take-over** is the grant of the first
//! sibling after a lease's validity end, the sibling waiting since before that end, where
//! the holder began its release at least [`TAKEOVER_SLACK_US`] after it; it is **prompt**
//! when the sibling was granted before the holder's release began. The correct client made
//! all of them prompt, 9-21 per mode, the slowest 81 ms after the validity end; one whose
//! record outlives the validity 0-2 of 7-13, its siblings granted 371-417 ms after that
//! end, when the stuck task let go (8 s, seed 24, 2026-12-06, docs/mutants.md run Q).

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::history::{Op, OpKind, OpOutcome};

/// Validity a released lease must have left when its release returns for its hand-off to
/// count: the default retry pause's longest (50 ms + 50 % jitter) plus 25 ms for a round.
pub const HANDOFF_SLACK_US: u64 = 100_000;

/// Eligible hand-offs below which a mode is not judged.
pub const MIN_ELIGIBLE: u64 = 10;

/// Share of the eligible hand-offs that must be early: half, where the correct client
/// made 96-100 % (above) and one that keeps released records 1 in 31 to 41 (run P: not
/// none — "at least one" would have let it pass).
pub const MIN_EARLY_SHARE: f64 = 0.5;

/// How long after its validity end a holder must still have held (its release not begun)
/// for a take-over to count: the keys outlive the validity by the drift allowance (a few
/// ms), then a refused waiter's retry pause (at most 75 ms by default) and a round, with
/// room for a busy machine.
pub const TAKEOVER_SLACK_US: u64 = 150_000;

/// Eligible take-overs below which a mode is not judged.
pub const MIN_TAKEOVERS: u64 = 5;

/// Whether `good` is at least [`MIN_EARLY_SHARE`] of `of`.
fn enough(good: u64, of: u64) -> bool {
    good as f64 >= MIN_EARLY_SHARE * of as f64
}

/// How a mode's releases handed the lock to waiting siblings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HandOffs {
    /// Hand-offs whose released lease had at least [`HANDOFF_SLACK_US`] of validity left
    /// when its release returned.
    pub eligible: u64,
    /// Of those, the waiter granted before the released lease's validity end.
    pub early: u64,
    /// The latest of the eligible ones: µs from the release's return to the waiter's grant.
    pub worst_us: Option<u64>,
}

impl HandOffs {
    /// Whether there were enough hand-offs to judge ([`MIN_ELIGIBLE`]).
    pub fn judged(&self) -> bool {
        self.eligible >= MIN_ELIGIBLE
    }

    /// Whether at least [`MIN_EARLY_SHARE`] of the eligible hand-offs were early (true
    /// when none was eligible).
    pub fn prompt(&self) -> bool {
        enough(self.early, self.eligible)
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        format!(
            "{} of {} hand-offs to a waiting sibling granted before the released lease's validity end (eligible: {} ms of it left at the release){}",
            self.early,
            self.eligible,
            HANDOFF_SLACK_US / 1000,
            self.worst_us
                .map_or_else(String::new, |w| format!("; slowest {} ms", w / 1000)),
        )
    }
}

/// How a mode's waiting siblings got in after a holder kept its lease past the validity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TakeOvers {
    /// Leases held at least [`TAKEOVER_SLACK_US`] past their validity end with a sibling
    /// waiting at that end.
    pub eligible: u64,
    /// Of those, the sibling granted before the holder began its release.
    pub prompt: u64,
    /// The latest of the eligible ones: µs from the validity end to the sibling's grant.
    pub worst_us: Option<u64>,
}

impl TakeOvers {
    /// Whether there were enough take-overs to judge ([`MIN_TAKEOVERS`]).
    pub fn judged(&self) -> bool {
        self.eligible >= MIN_TAKEOVERS
    }

    /// Whether at least [`MIN_EARLY_SHARE`] of the eligible take-overs were prompt (true
    /// when none was eligible).
    pub fn in_time(&self) -> bool {
        enough(self.prompt, self.eligible)
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        format!(
            "{} of {} leases kept past their validity end (by {} ms or more) taken over by a waiting sibling before the holder let go{}",
            self.prompt,
            self.eligible,
            TAKEOVER_SLACK_US / 1000,
            self.worst_us.map_or_else(String::new, |w| format!(
                "; slowest {} ms after the validity end",
                w / 1000
            )),
        )
    }
}

/// The take-overs of one mode's operations `ops` (the other modes' are ignored).
pub fn take_overs(ops: &[Op], mode: &str) -> TakeOvers {
    let mine = || ops.iter().filter(|o| o.mode == mode);
    let mut grants: Vec<&Op> = mine()
        .filter(|o| o.f == OpKind::Acquire && o.outcome == OpOutcome::Ok)
        .collect();
    grants.sort_by_key(|g| g.complete_us);
    let released: HashMap<u64, u64> = mine()
        .filter(|o| o.f == OpKind::Release)
        .filter_map(|o| Some((o.section?, o.invoke_us)))
        .collect();
    let mut out = TakeOvers::default();
    for held in &grants {
        let (Some(end), Some(section)) = (held.valid_until_us, held.section) else {
            continue;
        };
        let Some(&let_go) = released.get(&section) else {
            continue;
        };
        if let_go < end.saturating_add(TAKEOVER_SLACK_US) {
            continue;
        }
        // The first sibling granted after the validity end, if it was waiting at that end.
        let i = grants.partition_point(|g| g.complete_us <= end);
        let Some(next) = grants[i..].iter().find(|g| g.worker != held.worker) else {
            continue;
        };
        if next.invoke_us >= end {
            continue;
        }
        out.eligible += 1;
        if next.complete_us < let_go {
            out.prompt += 1;
        }
        let took = next.complete_us.saturating_sub(end);
        out.worst_us = Some(out.worst_us.map_or(took, |w| w.max(took)));
    }
    out
}

/// The hand-offs of one mode's operations `ops` (the other modes' are ignored if present).
pub fn hand_offs(ops: &[Op], mode: &str) -> HandOffs {
    let mine = || ops.iter().filter(|o| o.mode == mode);
    let mut valid_until: HashMap<u64, u64> = HashMap::new();
    let mut grants: Vec<&Op> = Vec::new();
    for op in mine().filter(|o| o.f == OpKind::Acquire && o.outcome == OpOutcome::Ok) {
        if let (Some(s), Some(v)) = (op.section, op.valid_until_us) {
            valid_until.insert(s, v);
        }
        grants.push(op);
    }
    grants.sort_by_key(|g| g.complete_us);
    let mut out = HandOffs::default();
    for release in mine().filter(|o| o.f == OpKind::Release) {
        let Some(end) = release.section.and_then(|s| valid_until.get(&s)).copied() else {
            continue;
        };
        // The first grant after the release began: a hand-off when a sibling had been
        // waiting since before it.
        let i = grants.partition_point(|g| g.complete_us <= release.invoke_us);
        let Some(next) = grants.get(i) else { continue };
        if next.worker == release.worker || next.invoke_us >= release.invoke_us {
            continue;
        }
        if end < release.complete_us.saturating_add(HANDOFF_SLACK_US) {
            continue;
        }
        out.eligible += 1;
        if next.complete_us < end {
            out.early += 1;
        }
        let took = next.complete_us.saturating_sub(release.complete_us);
        out.worst_us = Some(out.worst_us.map_or(took, |w| w.max(took)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000;

    fn acquire(worker: usize, section: u64, invoke: u64, granted: u64) -> Op {
        let mut op =
            Op::new(worker, OpKind::Acquire, OpOutcome::Ok, invoke, granted).section(section);
        op.mode = "checked".into();
        op.valid_until_us = Some(granted + 190 * MS);
        op
    }

    fn release(worker: usize, section: u64, at: u64) -> Op {
        let mut op = Op::new(worker, OpKind::Release, OpOutcome::Ok, at, at + MS).section(section);
        op.mode = "checked".into();
        op
    }

    /// Worker 0 holds from `t`, releases 10 ms later; worker 1, waiting since `t`, is
    /// granted `wait` after the release returned.
    fn turn(t: u64, wait: u64, section: u64) -> [Op; 3] {
        [
            acquire(0, section, t - 5 * MS, t),
            release(0, section, t + 10 * MS),
            acquire(1, section + 1, t, t + 11 * MS + wait),
        ]
    }

    #[test]
    fn a_waiter_granted_at_once_is_early_and_one_held_to_the_validity_end_is_not() {
        let prompt: Vec<Op> = (0..12)
            .flat_map(|i| turn(1_000 * MS * (i + 1), 2 * MS, 10 * i))
            .collect();
        let h = hand_offs(&prompt, "checked");
        assert_eq!((h.eligible, h.early), (12, 12));
        assert!(h.judged() && h.prompt());
        assert_eq!(h.worst_us, Some(2 * MS));
        // Held back until the released lease's validity end (190 ms after its grant).
        let held: Vec<Op> = (0..12)
            .flat_map(|i| turn(1_000 * MS * (i + 1), 180 * MS, 10 * i))
            .collect();
        let h = hand_offs(&held, "checked");
        assert_eq!((h.eligible, h.early), (12, 0));
        assert!(!h.prompt());
        // Half early is prompt enough; fewer is not.
        let half = HandOffs {
            eligible: 12,
            early: 6,
            worst_us: None,
        };
        assert!(half.prompt());
        assert!(!HandOffs { early: 5, ..half }.prompt());
    }

    /// Worker 0 is granted at `t` (valid 190 ms) and begins its release at `t + held`;
    /// worker 1, waiting since `t`, is granted at `t + granted`.
    fn overstay(t: u64, held: u64, granted: u64, section: u64) -> [Op; 3] {
        [
            acquire(0, section, t - 5 * MS, t),
            release(0, section, t + held),
            acquire(1, section + 1, t, t + granted),
        ]
    }

    #[test]
    fn a_sibling_must_get_in_after_the_validity_end_not_after_the_stuck_holder() {
        // Held to 500 ms; the sibling is granted 40 ms after the validity end (190 ms).
        let prompt: Vec<Op> = (0..6)
            .flat_map(|i| overstay(1_000 * MS * (i + 1), 500 * MS, 230 * MS, 10 * i))
            .collect();
        let o = take_overs(&prompt, "checked");
        assert_eq!((o.eligible, o.prompt), (6, 6));
        assert!(o.judged() && o.in_time());
        assert_eq!(o.worst_us, Some(40 * MS));
        // Held back until the holder lets go.
        let held: Vec<Op> = (0..6)
            .flat_map(|i| overstay(1_000 * MS * (i + 1), 500 * MS, 502 * MS, 10 * i))
            .collect();
        let o = take_overs(&held, "checked");
        assert_eq!((o.eligible, o.prompt), (6, 0));
        assert!(!o.in_time());
        // Released less than the slack after the validity end: not eligible.
        let short = overstay(1_000 * MS, 300 * MS, 302 * MS, 1);
        assert_eq!(take_overs(&short, "checked").eligible, 0);
        // A sibling that began asking only after the validity end: not eligible.
        let t = 1_000 * MS;
        let late = [
            acquire(0, 1, t - 5 * MS, t),
            release(0, 1, t + 500 * MS),
            acquire(1, 2, t + 300 * MS, t + 502 * MS),
        ];
        assert_eq!(take_overs(&late, "checked").eligible, 0);
        // Too few to judge; another mode's are not counted.
        assert!(!take_overs(&overstay(t, 500 * MS, 230 * MS, 1), "checked").judged());
        assert_eq!(
            take_overs(&overstay(t, 500 * MS, 230 * MS, 1), "none"),
            TakeOvers::default()
        );
    }

    #[test]
    fn only_waiting_siblings_with_validity_to_spare_count() {
        let t = 1_000 * MS;
        // The releaser itself asks again and wins: no hand-off.
        let again = [
            acquire(0, 1, t - 5 * MS, t),
            release(0, 1, t + 10 * MS),
            acquire(0, 2, t + 12 * MS, t + 13 * MS),
        ];
        assert_eq!(hand_offs(&again, "checked").eligible, 0);
        // A sibling that started asking only after the release began: no hand-off.
        let late = [
            acquire(0, 1, t - 5 * MS, t),
            release(0, 1, t + 10 * MS),
            acquire(1, 2, t + 12 * MS, t + 13 * MS),
        ];
        assert_eq!(hand_offs(&late, "checked").eligible, 0);
        // Released with less than the slack left: not eligible.
        let short = [
            acquire(0, 1, t - 5 * MS, t),
            release(0, 1, t + 120 * MS),
            acquire(1, 2, t, t + 125 * MS),
        ];
        assert_eq!(hand_offs(&short, "checked").eligible, 0);
        // Another mode's operations are not this one's.
        let mut other = turn(t, 2 * MS, 1);
        for op in &mut other {
            op.mode = "none".into();
        }
        assert_eq!(hand_offs(&other, "checked"), HandOffs::default());
        // Fewer than MIN_ELIGIBLE: reported, not judged.
        assert!(!hand_offs(&turn(t, 2 * MS, 1), "checked").judged());
    }
}
