//! One scenario judged from its evidence and its history: each mode's numbers, the fault
//! windows as the report shows them, and the verdict. A pure function — the live run calls
//! it on what it just recorded, `chaos judge DIR` on the files, and both get the same
//! answer.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use super::derived;
use super::evidence::Evidence;
use super::record::tally;
use super::verdict::{judge_late_retire, judge_quorum_probe, verdict_for};
use crate::checker::availability::{self, idle_fault_windows, recovery};
use crate::checker::exemptions::{exemptions, held, outside_faults};
use crate::checker::handoff;
use crate::checker::history::{Op, OpKind};
use crate::checker::quorum_probe::QuorumProbe;
use crate::checker::renewal::{self, Bound};
use crate::checker::{leak, release_leak};
use crate::report::{FaultWindow, ModeReport, ModeTimeline, Verdict};

/// A scenario judged: what its report shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// Faults as applied, then the client pauses and late retirements the record shows.
    pub faults: Vec<FaultWindow>,
    /// Each mode's numbers.
    pub modes: BTreeMap<String, ModeReport>,
    /// What happened when, per mode.
    pub timeline: BTreeMap<String, ModeTimeline>,
    /// The verdict.
    pub verdict: Verdict,
    /// The quorum probe's tally, as recorded.
    pub quorum_probe: Option<QuorumProbe>,
    /// Every operation, each mode's final read included, in mode order.
    pub history: Vec<Op>,
}

/// Judges the scenario `e` records, whose history holds `ops` (the final reads among them
/// are ignored: `e` holds them).
pub fn judge(e: &Evidence, ops: &[Op]) -> Judged {
    let setup = &e.setup;
    let scenario = &e.scenario;
    let mut harness = e.harness.clone();
    let mut faults = e.faults.clone();
    let ttl = Duration::from_micros(setup.ttl_us);
    // Every stall the key watcher saw, a forget's included (a forget stalls nothing itself).
    let rig_stalls: Vec<(u64, u64)> = e.stalls.iter().map(|s| (s.from_us, s.to_us)).collect();
    let mut history = Vec::new();
    let mut modes: BTreeMap<String, ModeReport> = BTreeMap::new();
    let mut timeline: BTreeMap<String, ModeTimeline> = BTreeMap::new();
    for m in &e.modes {
        let own: Vec<Op> = ops
            .iter()
            .filter(|op| op.mode == m.name && op.f != OpKind::Final)
            .cloned()
            .collect();
        let done = tally(&m.name, &m.log, own, m.end.clone(), &e.clock_rates);
        harness.extend(done.anomalies);
        // Late retirements and client pauses are faults too: worker 0's own requests held
        // at its proxies, and workers stopped holding a lease.
        faults.extend(derived::retirements(
            &m.name,
            &done.history,
            setup.retire_hold_ms,
        ));
        faults.extend(derived::pauses(&m.name, &done.timeline.pauses, setup));
        history.extend(done.history);
        let (mut report, t) = (done.report, done.timeline);
        report.lock = m.lock.clone();
        report.loss_heard = renewal::loss_heard(
            &done.renewed,
            &e.forgets,
            &rig_stalls,
            Bound::for_ttl_us(setup.ttl_us),
        );
        modes.insert(m.name.clone(), report);
        timeline.insert(m.name.clone(), t);
    }
    let end_ms = setup.duration_us / 1000;
    let blocked = availability::blocked(&e.stalls, &faults, setup.nodes, end_ms);
    for (name, m) in modes.iter_mut() {
        if let Some(t) = timeline.get(name) {
            m.idle_fault_windows = idle_fault_windows(&faults, t, &blocked);
            m.recovery = recovery(&faults, t, end_ms, setup.nodes, &blocked);
        }
    }
    // Hand-offs inside one client: only where a mode's workers share one.
    if setup.shared_client {
        for (name, m) in modes.iter_mut() {
            m.hand_offs = handoff::hand_offs(&history, name);
            m.take_overs = handoff::take_overs(&history, name);
        }
    }
    let exempt = exemptions(&faults);
    let stalls = outside_faults(&e.stalls, &faults);
    let held = held(&faults);
    for m in &e.modes {
        let Some(samples) = &m.keys else { continue };
        let granted: HashSet<String> = history
            .iter()
            .filter(|op| op.mode == m.name && op.f == OpKind::Acquire)
            .filter_map(|op| op.owner.clone())
            .collect();
        if let Some(report) = modes.get_mut(&m.name) {
            report.leaks = leak::leaks(samples, &granted, &exempt, &stalls, ttl, setup.duration_us);
            let windows = release_leak::Windows {
                exempt: &exempt,
                held: &held,
                stalls: &stalls,
            };
            report.leaks.released = release_leak::release_leaks(
                samples,
                &history,
                &m.name,
                windows,
                ttl,
                setup.duration_us,
            );
        }
    }
    let mut verdict = verdict_for(
        scenario.expectation,
        &modes,
        &harness,
        setup.fences,
        setup.promises,
    );
    judge_quorum_probe(&mut verdict, scenario.expectation, e.quorum_probe.as_ref());
    if scenario.late_retire {
        judge_late_retire(&mut verdict, &modes);
    }
    Judged {
        faults,
        modes,
        timeline,
        verdict,
        quorum_probe: e.quorum_probe.clone(),
        history,
    }
}
