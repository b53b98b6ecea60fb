//! Turns one mode's [`WorkerEvent`]s into its [`ModeReport`] (the numbers verdicts use) and
//! [`ModeTimeline`] (what renderers draw).

use std::time::Duration;

use super::chaos_workload::{GrantOutcome, WorkerEvent};
use crate::checker::{self, Window};
use crate::report::{
    CounterSample, GrantSpan, LatencySample, ModeReport, ModeTimeline, Ms, RejectedWrite,
    ViolationMark,
};

/// Violation marks kept per mode for drawing (the count is always exact).
const MAX_MARKS: usize = 500;

/// Everything one mode's workers reported so far.
#[derive(Debug, Default)]
pub struct ModeRecord {
    timeline: ModeTimeline,
    sections: u64,
    attempts: u64,
    successes: u64,
    errors: u64,
    ok_latencies_us: Vec<u64>,
    stalls: u64,
    done: usize,
    failures: Vec<String>,
}

impl ModeRecord {
    /// Completed sections so far.
    pub fn sections(&self) -> u64 {
        self.sections
    }

    /// Workers that reported their end (cleanly or not).
    pub fn finished_workers(&self) -> usize {
        self.done + self.failures.len()
    }

    /// Harness failures reported by workers.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// A client stall hit one of this mode's workers.
    pub fn count_stall(&mut self) {
        self.stalls += 1;
    }

    /// Record a failure found outside the events (a worker process that died, say).
    pub fn fail(&mut self, message: String) {
        self.failures.push(message);
    }

    /// A counter sample.
    pub fn sample(&mut self, at: Duration, value: i64) {
        self.timeline.counter.push(CounterSample {
            at_ms: Ms::from_duration(at),
            value,
            expected: i64::try_from(self.sections).unwrap_or(i64::MAX),
        });
    }

    /// Take in one event.
    pub fn push(&mut self, ev: WorkerEvent) {
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
            } => {
                match outcome {
                    GrantOutcome::Accepted => self.sections += 1,
                    GrantOutcome::Rejected => self.timeline.rejected.push(RejectedWrite {
                        worker,
                        fence,
                        at_ms: Ms(done_us),
                    }),
                    GrantOutcome::Abandoned => {}
                }
                self.timeline.grants.push(GrantSpan {
                    worker,
                    fence,
                    start_ms: Ms(start_us),
                    end_ms: Ms(end_us),
                    valid_until_ms: Ms(valid_until_us),
                    accepted: outcome == GrantOutcome::Accepted,
                });
            }
            WorkerEvent::Done { .. } => self.done += 1,
            WorkerEvent::Failed { worker, message } => {
                self.failures.push(format!("worker {worker}: {message}"));
            }
        }
    }

    /// The summary and timeline, given the counter's final value.
    pub fn finish(mut self, final_value: i64) -> (ModeReport, ModeTimeline) {
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
        self.ok_latencies_us.sort_unstable();
        let report = ModeReport {
            sections: self.sections,
            lost: checker::lost(self.sections, final_value),
            rejected: self.timeline.rejected.len() as u64,
            exclusion_violations: violations,
            acquire_attempts: self.attempts,
            acquire_failures: self.attempts.saturating_sub(self.successes),
            acquire_errors: self.errors,
            acquire_p50_us: percentile(&self.ok_latencies_us, 0.50),
            acquire_p99_us: percentile(&self.ok_latencies_us, 0.99),
            stalls: self.stalls,
            final_value,
        };
        (report, self.timeline)
    }
}

/// Nearest-rank percentile of sorted values (0 when there are none).
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(worker: usize, start: u64, end: u64, outcome: GrantOutcome) -> WorkerEvent {
        WorkerEvent::Grant {
            worker,
            fence: Some(start),
            start_us: start,
            end_us: end,
            valid_until_us: end + 100,
            done_us: end,
            outcome,
        }
    }

    #[test]
    fn counts_sections_rejections_overlaps_and_latency() {
        let mut r = ModeRecord::default();
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
        let (m, t) = r.finish(1);
        assert_eq!((m.sections, m.lost, m.rejected), (2, 1, 1));
        assert_eq!(m.exclusion_violations, 1);
        assert_eq!(t.violations.len(), 1);
        assert_eq!(
            (m.acquire_attempts, m.acquire_failures, m.acquire_errors),
            (11, 7, 1)
        );
        assert_eq!((m.acquire_p50_us, m.acquire_p99_us), (200, 400));
        assert_eq!(t.grants.len(), 4);
    }
}
