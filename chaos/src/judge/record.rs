//! Turns one mode's recorded entries ([`ModeLog`]: its workers' [`WorkerEvent`]s, the
//! counter samples, stalls and failures, as they came) and its history into its
//! [`ModeReport`] (the numbers verdicts use) and [`ModeTimeline`] (what renderers draw).
//!
//! Besides lost updates and overlapping holding windows it counts what explains them: stale
//! writes (accepted, but completed after the lease's `valid_until`: the holder had lost the
//! lock), abandoned grants, client pauses, and grants whose fencing token did not grow
//! ([`checker::fence`], from the history's acquires).
//!
//! A renewed grant's validity moves: its window and its write are judged from its
//! section's announcements in the history ([`checker::announced`]) — stale only when the
//! write completed after the validity announced last before it began, holding until the
//! validity announced last before its section ended or its renewer reported a loss. Grants
//! recorded before issue 49 (no section named) keep the window their event carries.

use std::collections::HashMap;
use std::time::Duration;

use super::events::{GrantOutcome, WorkerEvent};
use super::evidence::{Entry, FinalRead, ModeLog};
use crate::bench::stats::percentile;
use crate::checker::announced::Announced;
use crate::checker::history::{Op, OpKind, OpOutcome};
use crate::checker::renewal::RenewedGrant;
use crate::checker::truth::{ClockRates, GrantTruth, TruthSummary};
use crate::checker::{self, TokenGrant, Window, Written};
use crate::workload::ledger::Final;

use crate::report::{
    CounterSample, FenceMark, GrantSpan, LatencySample, ModeReport, ModeTimeline, Ms, PauseSpan,
    RejectedWrite, ViolationMark,
};

/// Violation marks kept per mode for drawing (the count is always exact).
const MAX_MARKS: usize = 500;

/// Everything one mode's workers reported, added up.
#[derive(Debug, Default)]
struct Tally {
    timeline: ModeTimeline,
    sections: u64,
    attempts: u64,
    successes: u64,
    errors: u64,
    ok_latencies_us: Vec<u64>,
    stalls: u64,
    abandoned: u64,
    failures: Vec<String>,
    indeterminate: u64,
    history: Vec<Op>,
    /// Server truth of each read grant, and of each renewed lease after its extend and
    /// its renewals, with the validity the lock claimed.
    truths: Vec<(GrantTruth, u64)>,
    /// Renewed grants whose renewer cut an announced validity.
    validity_cuts: u64,
    /// Renewed grants, as their sections' watches saw them.
    renewed: Vec<RenewedGrant>,
    /// Renewed grants that name their section: (index in the timeline's grants, section,
    /// when the renewer reported a loss), judged from the history's announcements.
    renewed_sections: Vec<(usize, u64, Option<u64>)>,
}

/// A mode's record, judged.
#[derive(Debug)]
pub struct Finished {
    /// The numbers verdicts use.
    pub report: ModeReport,
    /// What renderers draw.
    pub timeline: ModeTimeline,
    /// Every operation, then the final read of the row.
    pub history: Vec<Op>,
    /// Breaks in the rig's own records (harness problems, not the lock's): the failures
    /// workers reported, then the history's anomalies.
    pub anomalies: Vec<String>,
    /// Renewed grants, for [`crate::checker::renewal`] (which needs the run's faults).
    pub renewed: Vec<RenewedGrant>,
}

/// `mode`'s numbers from its `log` and `ops` (the history's operations of the mode, in the
/// order they came, without the final read), given the row's final state (`None`: it could
/// not be read, and nothing is said about losses) and the clock rates the nemesis set (for
/// server truth).
pub fn tally(
    mode: &str,
    log: &ModeLog,
    ops: Vec<Op>,
    end: Option<FinalRead>,
    rates: &ClockRates,
) -> Finished {
    let mut t = Tally {
        history: ops,
        ..Tally::default()
    };
    for e in &log.entries {
        t.take(e.clone());
    }
    t.finish(mode, end, rates)
}

impl Tally {
    /// Take in one recorded entry.
    fn take(&mut self, entry: Entry) {
        match entry {
            Entry::Event(ev) => self.push(ev),
            Entry::Sample {
                at_us,
                value,
                expected,
            } => self.timeline.counter.push(CounterSample {
                at_ms: Ms(at_us),
                value,
                expected: i64::try_from(expected).unwrap_or(i64::MAX),
            }),
            Entry::Stall => self.stalls += 1,
            Entry::Failure(message) => self.failures.push(message),
        }
    }

    /// Take in one event.
    fn push(&mut self, ev: WorkerEvent) {
        match ev {
            WorkerEvent::Acquire {
                at_us,
                latency_us,
                ok,
                rounds,
                node_fault,
                ..
            } => {
                self.attempts += u64::from(rounds.max(1));
                if ok {
                    self.successes += 1;
                    self.ok_latencies_us.push(latency_us);
                } else if node_fault {
                    self.errors += 1;
                }
                self.timeline.acquire.push(LatencySample {
                    at_ms: Ms(at_us),
                    latency_us,
                    ok,
                });
            }
            WorkerEvent::Grant {
                worker,
                fence,
                start_us,
                end_us,
                valid_until_us,
                done_us,
                outcome,
                truth,
                validity_cut_us,
                renewal,
                section,
            } => {
                self.validity_cuts += u64::from(validity_cut_us.is_some());
                if let (Some(seen), Some(section)) = (&renewal, section) {
                    let loss = seen.loss.map(|(_, at)| at);
                    let index = self.timeline.grants.len();
                    self.renewed_sections.push((index, section, loss));
                }
                if let Some(seen) = renewal {
                    self.renewed.push(RenewedGrant {
                        start_us,
                        done_us,
                        loss: seen.loss,
                        stalls: seen.stalls_us,
                    });
                }
                if let Some(t) = truth {
                    self.truths.push((t, valid_until_us));
                }
                let stale = outcome == GrantOutcome::Accepted && done_us > valid_until_us;
                match outcome {
                    GrantOutcome::Accepted => self.sections += 1,
                    GrantOutcome::Rejected => self.timeline.rejected.push(RejectedWrite {
                        worker,
                        fence,
                        at_ms: Ms(done_us),
                    }),
                    GrantOutcome::Abandoned => self.abandoned += 1,
                    GrantOutcome::Indeterminate => self.indeterminate += 1,
                }
                self.timeline.grants.push(GrantSpan {
                    worker,
                    fence,
                    start_ms: Ms(start_us),
                    end_ms: Ms(end_us),
                    valid_until_ms: Ms(valid_until_us),
                    accepted: outcome == GrantOutcome::Accepted,
                    done_ms: Ms(done_us),
                    abandoned: outcome == GrantOutcome::Abandoned,
                    stale,
                });
            }
            WorkerEvent::Pausing { worker, at_us, .. } => {
                self.timeline.pauses.push(PauseSpan {
                    worker,
                    from_ms: Ms(at_us),
                    to_ms: None,
                });
            }
            WorkerEvent::Resumed { worker, at_us } => {
                if let Some(p) = self
                    .timeline
                    .pauses
                    .iter_mut()
                    .rev()
                    .find(|p| p.worker == worker && p.to_ms.is_none())
                {
                    p.to_ms = Some(Ms(at_us));
                }
            }
            WorkerEvent::Truth {
                truth,
                valid_until_us,
            } => self.truths.push((truth, valid_until_us)),
            WorkerEvent::Op(op) => self.history.push(op),
            WorkerEvent::Done { .. } => {}
            WorkerEvent::Failed { worker, message } => {
                self.failures.push(format!("worker {worker}: {message}"));
            }
        }
    }

    /// Renewed grants judged from their sections' announcements in the history: the
    /// write against the validity announced last before it began, the window ending at
    /// the validity announced last before the section's end or the loss (or at the end,
    /// if that came first). `valid_until` becomes the validity the write was judged
    /// against (without a write: the one the window ends at).
    fn judge_renewed(&mut self) {
        if self.renewed_sections.is_empty() {
            return;
        }
        let announced = Announced::by_section(&self.history);
        let writes: HashMap<u64, (u64, u64)> = self
            .history
            .iter()
            .filter(|op| op.f == OpKind::Write)
            .filter_map(|op| Some((op.section?, (op.invoke_us, op.complete_us))))
            .collect();
        for &(i, section, loss) in &self.renewed_sections {
            let (Some(a), Some(g)) = (announced.get(&section), self.timeline.grants.get_mut(i))
            else {
                continue;
            };
            let done = g.done_ms.0;
            if let Some(end) = a.holding_end(done, loss) {
                g.end_ms = Ms(end.max(g.start_ms.0));
            }
            let judged = match writes.get(&section) {
                Some(&(invoked, written)) => {
                    g.stale = g.accepted && a.stale(invoked, written);
                    a.at(invoked)
                }
                None => {
                    g.stale = false;
                    a.at(loss.map_or(done, |l| l.min(done)))
                }
            };
            if let Some(v) = judged {
                g.valid_until_ms = Ms(v);
            }
        }
    }

    /// The summary, timeline and history of `mode`, given the row's final state (`None`: it
    /// could not be read, and nothing is said about losses) and the clock rates the
    /// nemesis set (for server truth).
    fn finish(mut self, mode: &str, end: Option<FinalRead>, rates: &ClockRates) -> Finished {
        let final_value = end.as_ref().and_then(|e| e.state.state.map(|s| s.value));
        let mut anomalies = Vec::new();
        let lost = match &end {
            Some(FinalRead {
                state:
                    Final {
                        state: Some(state),
                        applied,
                    },
                ..
            }) => {
                let r = checker::lost_updates(&self.history, applied, state.value, state.last);
                anomalies.extend(r.anomalies.iter().map(|a| format!("{mode}: {a}")));
                Some(r)
            }
            _ => None,
        };
        if let Some(e) = &end {
            let mut op = Op::new(0, OpKind::Final, OpOutcome::Ok, e.invoke_us, e.complete_us);
            op.worker = None;
            op.mode = mode.into();
            if let Some(s) = e.state.state {
                op = op.values(s.value, s.last);
            }
            op.applied = Some(e.state.applied.clone());
            self.history.push(op);
        }
        self.judge_renewed();
        self.timeline.lost_updates = lost
            .as_ref()
            .map(|r| r.lost.iter().take(MAX_MARKS).cloned().collect())
            .unwrap_or_default();
        let windows: Vec<Window> = self
            .timeline
            .grants
            .iter()
            .map(|g| {
                Window::new(
                    Duration::from_micros(g.start_ms.0),
                    Duration::from_micros(g.end_ms.0),
                )
            })
            .collect();
        let violations = checker::exclusion_violations(&windows);
        self.timeline.violations = checker::overlapping_pairs(&windows, MAX_MARKS)
            .into_iter()
            .map(|(a, b, w)| ViolationMark {
                first_worker: self.timeline.grants[a].worker,
                second_worker: self.timeline.grants[b].worker,
                from_ms: Ms::from_duration(w.start),
                to_ms: Ms::from_duration(w.end),
            })
            .collect();
        // Of the first MAX_MARKS pairs (all of them wherever a check wants none).
        let longest_overlap_us = self
            .timeline
            .violations
            .iter()
            .map(|v| v.to_ms.0.saturating_sub(v.from_ms.0))
            .max()
            .unwrap_or(0);
        // From the history: when each granted acquire was asked for and returned.
        let acquires: Vec<&Op> = self
            .history
            .iter()
            .filter(|op| op.f == OpKind::Acquire && op.outcome == OpOutcome::Ok)
            .filter(|op| op.fence.is_some())
            .collect();
        let tokens: Vec<TokenGrant> = acquires
            .iter()
            .map(|op| TokenGrant {
                invoke: op.invoke_us,
                complete: op.complete_us,
                token: op.fence.unwrap_or_default(),
            })
            .collect();
        let regressions = checker::fence_regressions(&tokens);
        self.timeline.fence_regressions = regressions
            .iter()
            .take(MAX_MARKS)
            .map(|&(i, earlier_max)| FenceMark {
                worker: acquires[i].worker.unwrap_or_default(),
                fence: tokens[i].token,
                earlier_max,
                at_ms: Ms(tokens[i].complete),
            })
            .collect();
        let written: Vec<Written> = self
            .timeline
            .grants
            .iter()
            .filter(|g| g.accepted)
            .map(|g| Written {
                read_at: g.start_ms.0,
                done_at: g.done_ms.0,
                stale: g.stale,
            })
            .collect();
        self.ok_latencies_us.sort_unstable();
        let report = ModeReport {
            // Known to the runner, which fills it in.
            lock: String::new(),
            sections: self.sections,
            lost: final_value.map(|v| checker::lost(self.sections, v)),
            rejected: self.timeline.rejected.len() as u64,
            exclusion_violations: violations,
            longest_overlap_us,
            acquire_attempts: self.attempts,
            acquire_failures: self.attempts.saturating_sub(self.successes),
            acquire_errors: self.errors,
            acquire_p50_us: percentile(&self.ok_latencies_us, 50.0),
            acquire_p99_us: percentile(&self.ok_latencies_us, 99.0),
            stalls: self.stalls,
            final_value,
            abandoned: self.abandoned,
            stale_writes: self.timeline.grants.iter().filter(|g| g.stale).count() as u64,
            fence_regressions: regressions.len() as u64,
            pauses: self.timeline.pauses.len() as u64,
            // Needs the fault windows: filled in by the runner.
            idle_fault_windows: 0,
            stale_reach: checker::stale_reach(&written),
            unexplained_losses: lost.as_ref().map(|r| r.unexplained().count() as u64),
            indeterminate_writes: self.indeterminate,
            server_truth: TruthSummary::of(self.truths.iter().map(|(t, v)| (t, *v)), rates),
            validity_cuts: self.validity_cuts,
            // Needs the key samples and the fault windows: filled in by the runner.
            leaks: Default::default(),
            // Needs the fault windows: filled in by the runner.
            recovery: Default::default(),
            // Needs the nemesis's forgets: filled in by the runner.
            loss_heard: Default::default(),
            // Only where the workers share a client: filled in by the runner.
            hand_offs: Default::default(),
            take_overs: Default::default(),
            late_retirements: checker::retire::late_retirements(&self.history),
        };
        let mut failures: Vec<String> = self
            .failures
            .iter()
            .map(|f| format!("{mode}: {f}"))
            .collect();
        failures.extend(anomalies);
        Finished {
            report,
            timeline: self.timeline,
            history: self.history,
            anomalies: failures,
            renewed: self.renewed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A final read of value `value` (no log: the events here carry no operations).
    fn end(value: i64) -> FinalRead {
        FinalRead {
            state: Final {
                state: Some(crate::workload::ledger::State { value, last: 0 }),
                applied: Vec::new(),
            },
            invoke_us: 0,
            complete_us: 0,
        }
    }

    /// A grant valid until `end + 100` whose keys the servers kept 50 µs longer.
    fn grant(worker: usize, start: u64, end: u64, outcome: GrantOutcome) -> WorkerEvent {
        let truth = GrantTruth {
            end_bound_us: Some(end + 150),
            holders: 3,
            unknown: 0,
            reads: Vec::new(),
        };
        grant_read(worker, start, end, outcome, truth)
    }

    fn grant_read(
        worker: usize,
        start: u64,
        end: u64,
        outcome: GrantOutcome,
        truth: GrantTruth,
    ) -> WorkerEvent {
        WorkerEvent::Grant {
            worker,
            fence: Some(start),
            start_us: start,
            end_us: end,
            valid_until_us: end + 100,
            done_us: end,
            outcome,
            truth: Some(truth),
            validity_cut_us: None,
            renewal: None,
            section: None,
        }
    }

    #[test]
    fn counts_renewed_grants_whose_validity_was_cut() {
        let mut r = Tally::default();
        for cut in [None, Some(120_000), None, Some(5_000)] {
            r.push(WorkerEvent::Grant {
                worker: 0,
                fence: Some(1),
                start_us: 0,
                end_us: 10,
                valid_until_us: 10,
                done_us: 10,
                outcome: GrantOutcome::Accepted,
                truth: None,
                validity_cut_us: cut,
                renewal: None,
                section: None,
            });
        }
        assert_eq!(
            r.finish("ours", None, &ClockRates::default())
                .report
                .validity_cuts,
            2
        );
    }

    #[test]
    fn a_read_after_an_extend_is_judged_like_a_grant_read() {
        let mut r = Tally::default();
        // The grant's own read keeps 50 µs of margin; after a failed shortening extend the
        // lease still claims 900 µs while a quorum of its keys is gone at 400.
        r.push(grant(0, 0, 10, GrantOutcome::Accepted));
        r.push(WorkerEvent::Truth {
            truth: GrantTruth {
                end_bound_us: Some(400),
                holders: 3,
                unknown: 0,
                reads: Vec::new(),
            },
            valid_until_us: 900,
        });
        let t = r
            .finish("ours", None, &ClockRates::default())
            .report
            .server_truth;
        assert_eq!((t.read, t.overstated, t.margin_min_us), (2, 1, Some(-500)));
    }

    #[test]
    fn counts_sections_rejections_overlaps_and_latency() {
        let mut r = Tally::default();
        for (i, lat) in [100u64, 200, 300, 400].iter().enumerate() {
            r.push(WorkerEvent::Acquire {
                worker: i,
                at_us: 0,
                latency_us: *lat,
                ok: true,
                rounds: 2,
                node_fault: false,
            });
        }
        r.push(WorkerEvent::Acquire {
            worker: 0,
            at_us: 0,
            latency_us: 1_000_000,
            ok: false,
            rounds: 3,
            node_fault: true,
        });
        r.push(grant(0, 0, 10, GrantOutcome::Accepted));
        r.push(grant(1, 5, 20, GrantOutcome::Rejected));
        r.push(grant(2, 30, 40, GrantOutcome::Accepted));
        r.push(grant(3, 50, 60, GrantOutcome::Abandoned));
        // Keys gone on a quorum 30 µs before the reported validity ended; one unbounded.
        for (start, bound) in [(70, Some(150)), (90, None)] {
            r.push(grant_read(
                0,
                start,
                start + 10,
                GrantOutcome::Abandoned,
                GrantTruth {
                    end_bound_us: bound,
                    holders: 2,
                    unknown: 1,
                    reads: Vec::new(),
                },
            ));
        }
        let Finished {
            report: m,
            timeline: t,
            ..
        } = r.finish("none", Some(end(1)), &ClockRates::default());
        assert_eq!(
            (m.sections, m.lost, m.rejected, m.abandoned),
            (2, Some(1), 1, 3)
        );
        assert_eq!((m.stale_writes, m.fence_regressions), (0, 0));
        assert_eq!(m.exclusion_violations, 1);
        assert_eq!(t.violations.len(), 1);
        // [0, 10) and [5, 20).
        assert_eq!(m.longest_overlap_us, 5);
        assert_eq!(
            (m.acquire_attempts, m.acquire_failures, m.acquire_errors),
            (11, 7, 1)
        );
        assert_eq!((m.acquire_p50_us, m.acquire_p99_us), (200, 400));
        assert_eq!(t.grants.len(), 6);
        assert_eq!(
            m.server_truth,
            TruthSummary {
                read: 6,
                inconclusive: 1,
                overstated: 1,
                margin_min_us: Some(-30),
                margin_p50_us: Some(50),
            }
        );
    }

    #[test]
    fn stale_writes_pauses_and_fence_duplicates() {
        let mut r = Tally::default();
        // Paused past its validity (100..300), then wrote at 900: stale.
        r.push(WorkerEvent::Pausing {
            worker: 0,
            at_us: 150,
            resume_after_us: 700,
        });
        r.push(WorkerEvent::Resumed {
            worker: 0,
            at_us: 850,
        });
        r.push(WorkerEvent::Grant {
            worker: 0,
            fence: Some(4),
            start_us: 100,
            end_us: 300,
            valid_until_us: 300,
            done_us: 900,
            outcome: GrantOutcome::Accepted,
            truth: None,
            validity_cut_us: None,
            renewal: None,
            section: None,
        });
        // A later grant with the same token (amnesia): a duplicate. The token check reads
        // the history's acquires.
        for (worker, invoke, complete) in [(0, 90, 100), (1, 390, 400)] {
            let mut op = Op::new(worker, OpKind::Acquire, OpOutcome::Ok, invoke, complete);
            op.fence = Some(4);
            r.push(WorkerEvent::Op(op));
        }
        r.push(WorkerEvent::Grant {
            worker: 1,
            fence: Some(4),
            start_us: 400,
            end_us: 450,
            valid_until_us: 600,
            done_us: 450,
            outcome: GrantOutcome::Accepted,
            truth: None,
            validity_cut_us: None,
            renewal: None,
            section: None,
        });
        let Finished {
            report: m,
            timeline: t,
            ..
        } = r.finish("none", Some(end(1)), &ClockRates::default());
        assert_eq!((m.stale_writes, m.pauses, m.fence_regressions), (1, 1, 1));
        // Itself, and worker 1's write, which landed while it was away.
        assert_eq!(m.stale_reach, 2);
        assert_eq!(t.pauses[0].to_ms, Some(Ms(850)));
        assert_eq!(
            (
                t.fence_regressions[0].worker,
                t.fence_regressions[0].earlier_max
            ),
            (1, 4)
        );
        assert!(t.grants[0].stale && !t.grants[1].stale);
        assert!((m.lost_share() - 0.5).abs() < 1e-9);
    }

    /// One operation of `mode` `none`, section `section` of worker `section / 10`.
    fn op(section: u64, f: OpKind, invoke: u64, complete: u64) -> Op {
        let worker = usize::try_from(section / 10).expect("small");
        let mut op = Op::new(worker, f, OpOutcome::Ok, invoke, complete).section(section);
        op.mode = "none".into();
        op
    }

    /// Two grants of mode `none` that the lock let hold at once. 11 (worker 1) is renewed:
    /// granted at 0 valid to 100, its renewer announced 160 (seen at 60) and 220 (seen
    /// at 120), then reported its keys gone at 125; it wrote 100..130 over the origin.
    /// Its event is as the rig recorded it before issue 49: its window ending at the
    /// validity from `auto_renew`'s start. 21 (worker 2), a plain grant at 105 valid to
    /// 205, wrote 140..150 over the origin too: 11 is lost.
    fn two_holders() -> (Tally, FinalRead) {
        let mut t = Tally::default();
        for (section, fence, at, valid, read, write) in [
            (11, 1, 0, 100, 5, (100, 130)),
            (21, 2, 105, 205, 106, (140, 150)),
        ] {
            let mut acquire = op(section, OpKind::Acquire, at, at);
            acquire.fence = Some(fence);
            acquire.valid_until_us = Some(valid);
            t.push(WorkerEvent::Op(acquire));
            t.push(WorkerEvent::Op(
                op(section, OpKind::Read, read, read + 1).values(0, 0),
            ));
            t.push(WorkerEvent::Op(
                op(section, OpKind::Write, write.0, write.1).values(1, 0),
            ));
        }
        for (seen, until) in [(60, 160), (120, 220)] {
            let mut renew = op(11, OpKind::Renew, seen - 5, seen);
            renew.valid_until_us = Some(until);
            t.push(WorkerEvent::Op(renew));
        }
        t.push(WorkerEvent::Grant {
            worker: 1,
            fence: Some(1),
            start_us: 0,
            end_us: 100,
            valid_until_us: 100,
            done_us: 130,
            outcome: GrantOutcome::Accepted,
            truth: None,
            validity_cut_us: None,
            renewal: Some(crate::judge::events::RenewalSeen {
                loss: Some((crate::checker::renewal::Heard::Told, 125)),
                stalls_us: Vec::new(),
            }),
            section: Some(11),
        });
        t.push(WorkerEvent::Grant {
            worker: 2,
            fence: Some(2),
            start_us: 105,
            end_us: 150,
            valid_until_us: 205,
            done_us: 150,
            outcome: GrantOutcome::Accepted,
            truth: None,
            validity_cut_us: None,
            renewal: None,
            section: Some(21),
        });
        let applied = [(11, 0, 1), (21, 0, 1)]
            .map(|(section, prev, value)| crate::workload::ledger::Applied {
                section,
                prev,
                value,
            })
            .to_vec();
        let end = FinalRead {
            state: Final {
                state: Some(crate::workload::ledger::State { value: 1, last: 21 }),
                applied,
            },
            invoke_us: 1_000,
            complete_us: 1_001,
        };
        (t, end)
    }

    #[test]
    fn a_renewed_window_ends_at_the_validity_announced_before_the_loss() {
        let (t, end) = two_holders();
        let Finished {
            report: m,
            timeline,
            ..
        } = t.finish("none", Some(end), &ClockRates::default());
        // Held until its section ended (130), inside the validity announced before the
        // loss (220): it overlaps 21's [105, 150).
        assert_eq!(timeline.grants[0].end_ms, Ms(130));
        assert_eq!(m.exclusion_violations, 1);
        // Its write began after the renewal to 160 was seen: not stale.
        assert_eq!(
            (timeline.grants[0].valid_until_ms, timeline.grants[0].stale),
            (Ms(160), false)
        );
        assert_eq!((m.stale_writes, m.stale_reach), (0, 0));
        assert_eq!(m.unexplained_losses, Some(1));
    }

    #[test]
    fn a_loss_no_stale_write_explains_fails_the_renewal_verdict() {
        let (t, end) = two_holders();
        let mut done = t.finish("none", Some(end), &ClockRates::default());
        done.report.lock = "ours".into();
        let renewal = crate::scenario::find("renewal").expect("the renewal scenario");
        let modes = std::collections::BTreeMap::from([("none".to_owned(), done.report)]);
        // Only `none` ran (as if the lock handed out no tokens, so the fenced modes did
        // not): the verdict is this mode's.
        let v = crate::judge::verdict::verdict_for(
            renewal.expectation,
            &modes,
            &[],
            false,
            crate::judge::verdict::Promises::default(),
        );
        assert_eq!(v.outcome, crate::report::Outcome::Fail, "{:?}", v.reasons);
        assert!(
            v.reasons.iter().any(|r| r.starts_with(
                "FAILED (safety): none: lost 1, 1 of them with neither the lost write nor the one that erased it after its lease"
            )),
            "{:?}",
            v.reasons
        );
    }
}
