//! Lost updates by name, with the write that erased each one.
//!
//! The ledger (`crate::workload::ledger`) logs every write a row accepted, in the row's own
//! order, as `(section, prev, value)`: the section that wrote, the section whose write it
//! had read, the value it wrote. Replaying the log rebuilds the row's history exactly: a
//! write whose `prev` is the row's current head extends the chain; any other write sets the
//! row back to what it read plus itself, erasing every section written on top of `prev` —
//! those sections were lost *to it*. (A later write that had read an erased state brings that
//! state back, and erases in its turn.) At the end, what the chain holds survived; every
//! acknowledged write not on it is a lost update, and the last write that erased it is its
//! culprit.
//!
//! A loss is *explained* when a stale write (one completed after the validity its lease had
//! announced last before the write began, [`super::announced`]: the holder had lost the
//! lock, as a pause makes it; a renewal it saw before writing counts, one that landed while
//! the write was in flight does not) is part of it: the lost write itself, its
//! culprit, or a write that landed between the culprit's read and its write (the culprit
//! then restored the state it had read — a stale write had brought back an old one). When
//! none is, the culprit and the writes that landed while it was in flight all wrote inside
//! their holding windows, and one of them landed between the culprit's read and write: two
//! holders at once, which a correct lock never allows.
//!
//! The replay also checks the rig: every value must be the value read plus one, the chain
//! must end where the row says and be as long as its value, every acknowledged write must
//! be in the log and every logged write in the history. A break is an anomaly — the rig, not
//! the lock — and makes the verdict unknown.

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::announced::Announced;
use super::history::{Op, OpKind, OpOutcome};
use crate::workload::ledger::{Applied, ORIGIN};

/// A write that erased a lost update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Culprit {
    /// Its section.
    pub section: u64,
    /// Its worker (`None`: not in the history).
    pub worker: Option<usize>,
    /// The value it read (it wrote this + 1).
    pub read_value: i64,
    /// When its write completed, µs (`None`: not in the history).
    pub written_us: Option<u64>,
    /// It completed after the validity its lease announced last before it began.
    pub stale: bool,
    /// A stale write that landed between its read and its write, if any (the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_stale: Option<u64>,
}

/// An acknowledged write the row did not keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LostUpdate {
    /// Its section.
    pub section: u64,
    /// Its worker.
    pub worker: usize,
    /// The value it wrote.
    pub value: i64,
    /// When its write completed, µs.
    pub written_us: u64,
    /// It completed after the validity its lease announced last before it began.
    pub stale: bool,
    /// The write that erased it.
    pub culprit: Option<Culprit>,
}

impl LostUpdate {
    /// The lost write or its culprit was stale: a holder that had lost the lock.
    pub fn explained(&self) -> bool {
        self.stale
            || self
                .culprit
                .as_ref()
                .is_some_and(|c| c.stale || c.after_stale.is_some())
    }
}

/// What the replay found for one mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LostReport {
    /// Every acknowledged write that was lost, in the order they were erased.
    pub lost: Vec<LostUpdate>,
    /// Indeterminate writes (PostgreSQL errors) the log shows committed.
    pub indeterminate_committed: u64,
    /// Indeterminate writes that never committed.
    pub indeterminate_absent: u64,
    /// Breaks in the rig's own records (see the module docs).
    pub anomalies: Vec<String>,
}

impl LostReport {
    /// Lost updates that no stale write explains.
    pub fn unexplained(&self) -> impl Iterator<Item = &LostUpdate> {
        self.lost.iter().filter(|l| !l.explained())
    }
}

/// One section's write, from the history.
#[derive(Debug, Clone, Copy, Default)]
struct Section {
    worker: Option<usize>,
    invoked_us: Option<u64>,
    written_us: Option<u64>,
    outcome: Option<OpOutcome>,
    /// Completed after the validity announced last before it was invoked.
    stale: bool,
}

/// Replays `applied` (the row's log, in the row's order) against `ops` (one mode's
/// history) and the row's final `value` and `last`.
pub fn lost_updates(ops: &[Op], applied: &[Applied], value: i64, last: u64) -> LostReport {
    let mut out = LostReport::default();
    let mut sections: HashMap<u64, Section> = HashMap::new();
    for op in ops {
        let Some(id) = op.section else { continue };
        let s = sections.entry(id).or_default();
        s.worker = s.worker.or(op.worker);
        if op.f == OpKind::Write {
            s.invoked_us = Some(op.invoke_us);
            s.written_us = Some(op.complete_us);
            s.outcome = Some(op.outcome);
        }
    }
    let announced = Announced::by_section(ops);
    for (id, s) in sections.iter_mut() {
        s.stale = match (s.invoked_us, s.written_us, announced.get(id)) {
            (Some(invoked), Some(written), Some(a)) => a.stale(invoked, written),
            _ => false,
        };
    }
    let by_id: HashMap<u64, &Applied> = applied.iter().map(|a| (a.section, a)).collect();
    if by_id.len() != applied.len() {
        out.anomalies.push("the log holds a section twice".into());
    }
    let value_of = |id: u64| -> Option<i64> {
        if id == ORIGIN {
            Some(0)
        } else {
            by_id.get(&id).map(|a| a.value)
        }
    };
    // The row's chain, position of each member, and who last erased each section.
    let mut chain: Vec<u64> = Vec::new();
    let mut position: HashMap<u64, usize> = HashMap::new();
    let mut erased_by: HashMap<u64, (u64, Option<u64>)> = HashMap::new();
    let index: HashMap<u64, usize> = applied
        .iter()
        .enumerate()
        .map(|(i, a)| (a.section, i))
        .collect();
    let stale = |id: &u64| sections.get(id).is_some_and(|s| s.stale);
    for (i, a) in applied.iter().enumerate() {
        if value_of(a.prev).map(|v| v.saturating_add(1)) != Some(a.value) {
            out.anomalies.push(format!(
                "section {} wrote {} over section {}'s {:?}: not the value read + 1",
                a.section,
                a.value,
                a.prev,
                value_of(a.prev)
            ));
        }
        let head = chain.last().copied().unwrap_or(ORIGIN);
        if a.prev != head {
            let old = if a.prev == ORIGIN {
                std::mem::take(&mut chain)
            } else if let Some(&p) = position.get(&a.prev) {
                chain.split_off(p.saturating_add(1).min(chain.len()))
            } else {
                // It read a state erased earlier: that branch comes back.
                std::mem::replace(&mut chain, ancestry(a.prev, &by_id))
            };
            position = chain.iter().enumerate().map(|(i, s)| (*s, i)).collect();
            // The writes that landed while it was in flight: after its read (of `prev`,
            // then the head) and before it.
            let from = index.get(&a.prev).map_or(0, |j| j + 1);
            let between = applied
                .get(from..i)
                .unwrap_or_default()
                .iter()
                .map(|w| w.section)
                .find(|w| stale(w));
            for s in old.into_iter().filter(|s| !position.contains_key(s)) {
                erased_by.insert(s, (a.section, between));
            }
            for s in &chain {
                erased_by.remove(s);
            }
        }
        position.insert(a.section, chain.len());
        chain.push(a.section);
        erased_by.remove(&a.section);
    }
    if chain.last().copied().unwrap_or(ORIGIN) != last {
        out.anomalies.push(format!(
            "the row holds section {last}, but its log ends with {:?}",
            chain.last()
        ));
    }
    if i64::try_from(chain.len()).ok() != Some(value) {
        out.anomalies.push(format!(
            "the row's value is {value}, but {} writes survive in its log",
            chain.len()
        ));
    }
    for (id, s) in &sections {
        let logged = by_id.contains_key(id);
        match s.outcome {
            Some(OpOutcome::Ok) if !logged => out.anomalies.push(format!(
                "section {id}'s write was acknowledged but is not in the log"
            )),
            Some(OpOutcome::Fail) if logged => out.anomalies.push(format!(
                "section {id}'s write was refused but is in the log"
            )),
            Some(OpOutcome::Info) if logged => out.indeterminate_committed += 1,
            Some(OpOutcome::Info) => out.indeterminate_absent += 1,
            _ => {}
        }
    }
    for a in applied {
        let s = sections.get(&a.section).copied().unwrap_or_default();
        if s.outcome.is_none() {
            out.anomalies.push(format!(
                "the log holds section {}, which no worker wrote",
                a.section
            ));
        }
        let Some((culprit, between)) = erased_by.get(&a.section) else {
            continue;
        };
        if s.outcome != Some(OpOutcome::Ok) {
            continue;
        }
        let c = sections.get(culprit).copied().unwrap_or_default();
        out.lost.push(LostUpdate {
            section: a.section,
            worker: s.worker.unwrap_or(0),
            value: a.value,
            written_us: s.written_us.unwrap_or(0),
            stale: s.stale,
            culprit: by_id.get(culprit).map(|ca| Culprit {
                section: *culprit,
                worker: c.worker,
                read_value: ca.value.saturating_sub(1),
                written_us: c.written_us,
                stale: c.stale,
                after_stale: *between,
            }),
        });
    }
    out
}

/// The chain that ends with `id`, oldest first (stops at a missing link or a cycle).
fn ancestry(id: u64, by_id: &HashMap<u64, &Applied>) -> Vec<u64> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut at = id;
    while at != ORIGIN && seen.insert(at) {
        out.push(at);
        match by_id.get(&at) {
            Some(a) => at = a.prev,
            None => break,
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(section: u64, prev: u64, value: i64) -> Applied {
        Applied {
            section,
            prev,
            value,
        }
    }

    /// Section `id` of worker `id / 10`: granted at `at`, valid 100 µs, written at `done`.
    fn section(id: u64, at: u64, done: u64, outcome: OpOutcome) -> Vec<Op> {
        let w = (id / 10) as usize;
        let mut acquire = Op::new(w, OpKind::Acquire, OpOutcome::Ok, at, at).section(id);
        acquire.valid_until_us = Some(at + 100);
        let write = Op::new(w, OpKind::Write, outcome, done, done).section(id);
        vec![acquire, write]
    }

    /// [`section`] renewed: its renewer's announcements `(seen at, valid until)`, its
    /// write invoked at `invoke` and done at `done`.
    fn renewed(id: u64, at: u64, renewals: &[(u64, u64)], invoke: u64, done: u64) -> Vec<Op> {
        let w = (id / 10) as usize;
        let mut ops = section(id, at, done, OpOutcome::Ok);
        ops[1].invoke_us = invoke;
        for &(seen, until) in renewals {
            let mut op = Op::new(
                w,
                OpKind::Renew,
                OpOutcome::Ok,
                seen.saturating_sub(5),
                seen,
            )
            .section(id);
            op.valid_until_us = Some(until);
            ops.push(op);
        }
        ops
    }

    #[test]
    fn a_renewed_write_before_the_latest_announced_validity_is_not_stale() {
        // 11, granted at 0 (valid to 100), renewed (seen at 60: to 160), writes 120..130 —
        // after its first validity, before the one announced since. 21, granted at 105,
        // reads the origin too and writes 140..150: two holders at once, and 11 lost to a
        // write that no stale write explains.
        let mut ops = renewed(11, 0, &[(60, 160)], 120, 130);
        ops.extend(section(21, 105, 150, OpOutcome::Ok));
        let r = lost_updates(&ops, &[a(11, 0, 1), a(21, 0, 1)], 1, 21);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(r.lost.len(), 1);
        assert!(!r.lost[0].stale, "written before its latest validity");
        assert_eq!(r.unexplained().map(|l| l.section).collect::<Vec<_>>(), [11]);
    }

    #[test]
    fn a_write_after_the_latest_validity_announced_before_it_is_stale() {
        // Announced to 160 at 60; the write starts at 150 and completes at 170. An extend
        // that completed while it was in flight (at 165, to 300) does not cover it.
        let mut ops = renewed(11, 0, &[(60, 160)], 150, 170);
        let mut extend = Op::new(1, OpKind::Extend, OpOutcome::Ok, 155, 165).section(11);
        extend.valid_until_us = Some(300);
        ops.push(extend);
        ops.extend(section(21, 165, 180, OpOutcome::Ok));
        let r = lost_updates(&ops, &[a(11, 0, 1), a(21, 0, 1)], 1, 21);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert!(
            r.lost[0].stale,
            "completed after 160, announced before it started"
        );
        assert_eq!(r.unexplained().count(), 0);
    }

    #[test]
    fn a_chain_without_gaps_loses_nothing() {
        let ops: Vec<Op> = [(1, 0, 10), (2, 20, 30), (3, 40, 50)]
            .iter()
            .flat_map(|(s, at, done)| section(*s, *at, *done, OpOutcome::Ok))
            .collect();
        let log = [a(1, 0, 1), a(2, 1, 2), a(3, 2, 3)];
        let r = lost_updates(&ops, &log, 3, 3);
        assert_eq!(r, LostReport::default());
    }

    #[test]
    fn a_paused_write_is_named_with_the_write_that_erased_it() {
        // 11 reads 0 at 0 and pauses; 21 is granted after 11's lease, reads 0, and writes
        // 1 at 250 — after 11's stale write of 1 at 200. 11 is lost to 21.
        let mut ops = section(11, 0, 200, OpOutcome::Ok);
        ops.extend(section(21, 150, 250, OpOutcome::Ok));
        let log = [a(11, 0, 1), a(21, 0, 1)];
        let r = lost_updates(&ops, &log, 1, 21);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(r.lost.len(), 1);
        let l = &r.lost[0];
        assert_eq!((l.section, l.worker, l.stale), (11, 1, true));
        let c = l.culprit.as_ref().expect("culprit");
        assert_eq!(
            (c.section, c.worker, c.read_value, c.stale),
            (21, Some(2), 0, false)
        );
        assert!(l.explained());
        assert_eq!(r.unexplained().count(), 0);
    }

    #[test]
    fn a_loss_between_two_valid_writes_is_unexplained() {
        // Both wrote within their leases: their holding windows overlapped.
        let mut ops = section(11, 0, 50, OpOutcome::Ok);
        ops.extend(section(21, 10, 60, OpOutcome::Ok));
        let r = lost_updates(&ops, &[a(11, 0, 1), a(21, 0, 1)], 1, 21);
        assert_eq!(r.unexplained().map(|l| l.section).collect::<Vec<_>>(), [11]);
    }

    #[test]
    fn a_stale_write_erases_everything_written_since_its_read() {
        // 1, 2, 3 in a row; then 4 (stale, had read 1's state) writes 2 over them.
        let mut ops: Vec<Op> = [(1, 0, 10), (2, 20, 30), (3, 40, 50)]
            .iter()
            .flat_map(|(s, at, done)| section(*s, *at, *done, OpOutcome::Ok))
            .collect();
        ops.extend(section(4, 5, 500, OpOutcome::Ok));
        let log = [a(1, 0, 1), a(2, 1, 2), a(3, 2, 3), a(4, 1, 2)];
        let r = lost_updates(&ops, &log, 2, 4);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        let lost: Vec<(u64, Option<u64>)> = r
            .lost
            .iter()
            .map(|l| (l.section, l.culprit.as_ref().map(|c| c.section)))
            .collect();
        assert_eq!(lost, [(2, Some(4)), (3, Some(4))]);
        assert!(r.lost.iter().all(LostUpdate::explained));
    }

    #[test]
    fn an_erased_branch_can_come_back_and_then_its_eraser_is_lost() {
        // 2 erases 1 (both read origin); then 3, which had read 1's state, writes over 2.
        let mut ops = section(1, 0, 10, OpOutcome::Ok);
        ops.extend(section(2, 1, 20, OpOutcome::Ok));
        ops.extend(section(3, 12, 300, OpOutcome::Ok));
        let log = [a(1, 0, 1), a(2, 0, 1), a(3, 1, 2)];
        let r = lost_updates(&ops, &log, 2, 3);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        let lost: Vec<(u64, u64)> = r
            .lost
            .iter()
            .map(|l| (l.section, l.culprit.as_ref().map_or(0, |c| c.section)))
            .collect();
        assert_eq!(lost, [(2, 3)]);
    }

    #[test]
    fn a_write_that_restores_what_a_stale_write_replaced_is_explained_by_it() {
        // 1, 2 in a row; 3 (stale, had read 1) writes over 2; 4 (in its lease, had read 2
        // before 3 landed) writes over 3 and brings 2 back. The loss is 3's, erased by 4,
        // which restored what it read: 3 was stale.
        let mut ops = section(1, 0, 10, OpOutcome::Ok);
        ops.extend(section(2, 20, 30, OpOutcome::Ok));
        ops.extend(section(3, 5, 400, OpOutcome::Ok));
        ops.extend(section(4, 380, 410, OpOutcome::Ok));
        let log = [a(1, 0, 1), a(2, 1, 2), a(3, 1, 2), a(4, 2, 3)];
        let r = lost_updates(&ops, &log, 3, 4);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(r.lost.len(), 1);
        assert_eq!(r.lost[0].section, 3);
        assert!(r.lost[0].explained());
        // The same with 3 in its lease: 3 and 4 both held the lock while 3 wrote.
        let mut ops = section(1, 0, 10, OpOutcome::Ok);
        ops.extend(section(2, 20, 30, OpOutcome::Ok));
        ops.extend(section(3, 5, 90, OpOutcome::Ok));
        ops.extend(section(4, 25, 95, OpOutcome::Ok));
        let r = lost_updates(&ops, &log, 3, 4);
        assert_eq!(r.unexplained().count(), 1);
        // A loss erased by an innocent write right after a stale one landed in between.
        let mut ops = section(1, 0, 10, OpOutcome::Ok);
        ops.extend(section(2, 20, 30, OpOutcome::Ok));
        ops.extend(section(3, 25, 35, OpOutcome::Ok));
        ops.extend(section(4, 0, 500, OpOutcome::Ok));
        ops.extend(section(5, 490, 510, OpOutcome::Ok));
        // 4 (stale, read 1) lands after 3; 5 had read 3 and writes over 4: 4 lost, and 2,
        // 3 come back. 4's loss: stale itself.
        let log = [a(1, 0, 1), a(2, 1, 2), a(3, 2, 3), a(4, 1, 2), a(5, 3, 4)];
        let r = lost_updates(&ops, &log, 4, 5);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        let c = r.lost[0].culprit.as_ref().expect("culprit");
        assert_eq!(
            (r.lost[0].section, c.section, c.after_stale),
            (4, 5, Some(4))
        );
    }

    #[test]
    fn indeterminate_writes_are_settled_by_the_log() {
        let mut ops = section(1, 0, 10, OpOutcome::Info);
        ops.extend(section(2, 20, 30, OpOutcome::Info));
        let r = lost_updates(&ops, &[a(1, 0, 1)], 1, 1);
        assert_eq!((r.indeterminate_committed, r.indeterminate_absent), (1, 1));
        assert!(r.anomalies.is_empty() && r.lost.is_empty());
    }

    /// A recorded history's ops and its final read.
    fn recorded(jsonl: &str) -> (Vec<Op>, Vec<Applied>, i64, u64) {
        let ops = crate::checker::history::read_jsonl(jsonl.as_bytes()).expect("history");
        let end = ops.iter().find(|o| o.f == OpKind::Final).expect("final");
        let applied = end.applied.clone().expect("log");
        let (value, last) = (end.value.expect("value"), end.prev.expect("last"));
        (ops, applied, value, last)
    }

    #[test]
    fn a_recorded_client_pause_names_every_lost_increment_of_none() {
        // `chaos run --scenario client-pause --duration 3s --backend local --seed 11`, our
        // lock, mode none: 93 acknowledged, 36 kept, 9 pauses.
        let (ops, applied, value, last) =
            recorded(include_str!("fixtures/client-pause-none.jsonl"));
        let r = lost_updates(&ops, &applied, value, last);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        let acknowledged = ops
            .iter()
            .filter(|o| o.f == OpKind::Write && o.outcome == OpOutcome::Ok)
            .count();
        assert_eq!((acknowledged, value), (93, 36));
        assert_eq!(r.lost.len(), 93 - 36, "every lost increment by name");
        assert!(r.lost.iter().all(|l| l.culprit.is_some()));
        assert_eq!(
            r.unexplained().count(),
            0,
            "each loss is a paused holder's doing"
        );
    }

    #[test]
    fn a_recorded_claim_first_run_loses_nothing() {
        let (ops, applied, value, last) =
            recorded(include_str!("fixtures/client-pause-claim_first.jsonl"));
        let r = lost_updates(&ops, &applied, value, last);
        assert_eq!(r, LostReport::default());
        // The same history with one acknowledged write dropped from the log: caught.
        let r = lost_updates(&ops, &applied[..applied.len() - 1], value, last);
        assert!(!r.anomalies.is_empty());
    }

    #[test]
    fn the_rigs_own_breaks_are_anomalies() {
        let ops = section(1, 0, 10, OpOutcome::Ok);
        // Acknowledged but missing; a row that disagrees with its log; a value not read + 1.
        assert!(!lost_updates(&ops, &[], 0, 0).anomalies.is_empty());
        assert!(!lost_updates(&ops, &[a(1, 0, 1)], 2, 1).anomalies.is_empty());
        assert!(!lost_updates(&ops, &[a(1, 0, 5)], 5, 1).anomalies.is_empty());
        assert!(!lost_updates(&[], &[a(1, 0, 1)], 1, 1).anomalies.is_empty());
    }
}
