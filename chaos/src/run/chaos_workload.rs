//! The time-bounded fenced counter: one worker of one mode, looping until the scenario's
//! end, recording everything it does as [`WorkerEvent`]s.
//!
//! Unlike [`crate::workload::counter`] (a fixed number of sections, any lock failure fatal),
//! a chaos worker must live through faults: an acquire that fails — quorum unreachable,
//! wait timed out — is recorded and retried; only harness faults (PostgreSQL, a lock
//! setting) end it. Each grant runs one section ([`run_section`], shared with the fencing
//! table) and is recorded with its holding window `[granted_at, min(release, valid_until)]`.
//!
//! Before writing, a worker of every mode but the naive `none` checks that its lease is
//! still valid and abandons the section otherwise (the lock crate's advice, "check
//! `is_valid` between steps"): it narrows the unfenced window to the write itself. `none`
//! writes whatever happened, as most users' code does. A real pause (SIGSTOP, see
//! [`super::pause`]) can still land between check and write; fencing must cover that.
//!
//! The same loop runs as a task of the runner or as a `chaos worker` process; events carry
//! times as microseconds since the scenario start on the shared monotonic clock
//! ([`super::clock`]).

use std::time::Duration;

use fenced_redlock::pg::CounterTable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use super::pause::PausePlan;
use crate::lockut::{Lease, LockUnderTest};
use crate::workload::Mode;
use crate::workload::section::{SectionOutcome, SectionSpec, run_section};

/// Longest single waiting acquire; a worker retries after it (recording the failure).
pub const DEFAULT_ACQUIRE_WAIT: Duration = Duration::from_secs(1);

/// What one worker runs.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Index of the worker within its mode.
    pub worker: usize,
    /// Write mode.
    pub mode: Mode,
    /// Counter row.
    pub row: i32,
    /// Lock resource (also the client's key prefix, so modes never contend).
    pub resource: String,
    /// Lease TTL.
    pub ttl: Duration,
    /// Work inside a section.
    pub work: Duration,
    /// Instead of `work`, work until shortly before the end of the validity the lock
    /// reported (see [`work_to_validity`]): a lock that overstates validity is caught.
    pub work_to_validity: bool,
    /// Budget of one waiting acquire.
    pub acquire_wait: Duration,
    /// Seed of this worker (its start offset).
    pub seed: u64,
    /// Stop starting sections at this offset from the scenario start.
    pub until: Duration,
    /// Pauses while holding a lease (worker processes only: the worker stops itself).
    pub pause: Option<PausePlan>,
}

/// How a grant's section ended (see [`SectionOutcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantOutcome {
    /// The increment was written.
    Accepted,
    /// The resource refused the claim or write.
    Rejected,
    /// Validity ran out before the write; nothing written.
    Abandoned,
}

impl From<SectionOutcome> for GrantOutcome {
    fn from(o: SectionOutcome) -> Self {
        match o {
            SectionOutcome::Accepted => GrantOutcome::Accepted,
            SectionOutcome::Rejected => GrantOutcome::Rejected,
            SectionOutcome::Abandoned => GrantOutcome::Abandoned,
        }
    }
}

/// One thing a worker did; times are µs since the scenario start. One JSON line each on a
/// `chaos worker`'s stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkerEvent {
    /// A waiting acquire ended.
    Acquire {
        /// Worker index.
        worker: usize,
        /// When it ended.
        at_us: u64,
        /// Success: the winning round's time; failure: the whole wait.
        latency_us: u64,
        /// Whether it got the lock.
        ok: bool,
        /// Quorum rounds it made.
        rounds: u32,
        /// Failed because nodes failed or were unreachable (not mere contention).
        node_fault: bool,
    },
    /// A grant and its section.
    Grant {
        /// Worker index.
        worker: usize,
        /// Fencing token.
        fence: Option<u64>,
        /// When the acquire returned.
        start_us: u64,
        /// End of holding: release start or end of validity, whichever came first.
        end_us: u64,
        /// End of validity.
        valid_until_us: u64,
        /// When the section's last statement returned.
        done_us: u64,
        /// How the section ended.
        outcome: GrantOutcome,
    },
    /// The worker, holding a lease, is about to stop itself (`SIGSTOP`); the runner resumes
    /// it `resume_after_us` later.
    Pausing {
        /// Worker index.
        worker: usize,
        /// When it decided to pause.
        at_us: u64,
        /// The drawn pause length.
        resume_after_us: u64,
    },
    /// The runner resumed (`SIGCONT`) a worker that had paused itself; written by the
    /// runner, never by a worker.
    Resumed {
        /// Worker index.
        worker: usize,
        /// When it was resumed.
        at_us: u64,
    },
    /// The worker reached its end cleanly.
    Done {
        /// Worker index.
        worker: usize,
    },
    /// The worker stopped on a harness failure.
    Failed {
        /// Worker index.
        worker: usize,
        /// What failed.
        message: String,
    },
}

/// Work that ends between [`WRITE_ALLOWANCE`] and [`TO_VALIDITY_MARGIN`] of the TTL before
/// `valid_until`, uniformly: the write comes — and, taking less than the allowance,
/// completes — while a correct lock's keys are still there, and after a lock that
/// overstated its validity by more than the margin has lost them.
///
/// The allowance is the write's own time (a check and a PostgreSQL round trip). Without
/// it, margins near zero had a correct lock's writes complete after its validity: a CI run
/// on 2026-12-01 (Docker, loaded machine, latency scenario, TTL 200 ms) saw 15 such stale
/// writes in 105 sections of `none` and one lost update in `checked`, failing the lock for
/// the harness's own timing. Overstatements the margin is there to catch (elapsed time of
/// slow acquires not subtracted: 100–800 ms here) are far larger than the allowance.
pub fn work_to_validity(valid_until: Instant, ttl: Duration, rng: &mut StdRng) -> Duration {
    let left = valid_until.saturating_duration_since(Instant::now());
    let margin = ttl.mul_f64(rng.random_range(WRITE_ALLOWANCE..=TO_VALIDITY_MARGIN));
    left.saturating_sub(margin)
}

/// See [`work_to_validity`]: the largest share of the TTL left after the work.
pub const TO_VALIDITY_MARGIN: f64 = 0.1;

/// See [`work_to_validity`]: the smallest share of the TTL left after the work, for the
/// write itself (10 ms of a 200 ms TTL).
pub const WRITE_ALLOWANCE: f64 = 0.05;

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Runs one worker until `spec.until` (or `stop`), calling `emit` for every event; the
/// last event is [`WorkerEvent::Done`] or [`WorkerEvent::Failed`]. A section in progress
/// when `stop` fires is finished, so the counts stay exact. `pause_self` stops the calling
/// process when `spec.pause` draws a pause, right after it emitted
/// [`WorkerEvent::Pausing`] (only worker processes have a pause plan).
///
/// Nothing happens before the scenario's zero: every grant lands on the scenario clock.
pub async fn run_worker(
    spec: &WorkerSpec,
    lock: &LockUnderTest,
    client: &Client,
    clock: ScenarioClock,
    stop: &CancellationToken,
    pause_self: &(dyn Fn() + Sync),
    mut emit: impl FnMut(WorkerEvent),
) {
    let worker = spec.worker;
    let section = SectionSpec::new(CounterTable::default(), spec.mode, spec.row, spec.work);
    let deadline = clock.instant_at(spec.until);
    // A small seeded head start, so workers of a mode do not hit the nodes in lockstep.
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let head = Duration::from_micros(rng.random_range(0..=20_000));
    let mut pauses = spec.pause.map(|p| p.start(&mut rng));
    tokio::select! {
        () = tokio::time::sleep_until(clock.instant_at(Duration::ZERO) + head) => {}
        () = stop.cancelled() => {}
    }
    // Bounded by the deadline: every pass either acquires (bounded wait) or stops.
    loop {
        let now = Instant::now();
        if stop.is_cancelled() || now + Duration::from_millis(1) >= deadline {
            break;
        }
        let wait = spec.acquire_wait.min(deadline - now);
        let started = Instant::now();
        let result = tokio::select! {
            r = lock.acquire(&spec.resource, wait) => r,
            () = stop.cancelled() => break,
        };
        match result {
            Ok(Ok(lease)) => {
                let g = lease.granted();
                emit(WorkerEvent::Acquire {
                    worker,
                    at_us: clock.us(Instant::now()),
                    latency_us: us(g.elapsed()),
                    ok: true,
                    rounds: g.attempts,
                    node_fault: false,
                });
                let work = if spec.work_to_validity {
                    work_to_validity(g.valid_until, spec.ttl, &mut rng)
                } else {
                    spec.work
                };
                let held = Held {
                    section: &section,
                    work,
                    client,
                    clock,
                    worker,
                    pause: pauses.as_mut().and_then(|p| p.next_section(&mut rng)),
                    pause_self,
                };
                if let Err(message) = held.run(lock, lease, &mut emit).await {
                    emit(WorkerEvent::Failed { worker, message });
                    return;
                }
            }
            Ok(Err(failure)) => emit(WorkerEvent::Acquire {
                worker,
                at_us: clock.us(Instant::now()),
                latency_us: us(started.elapsed()),
                ok: false,
                rounds: failure.rounds,
                node_fault: failure.node_fault,
            }),
            Err(fatal) => {
                emit(WorkerEvent::Failed {
                    worker,
                    message: fatal.to_string(),
                });
                return;
            }
        }
    }
    emit(WorkerEvent::Done { worker });
}

/// One grant's section: what it runs on, and whether it pauses.
struct Held<'a> {
    section: &'a SectionSpec,
    /// This section's work.
    work: Duration,
    client: &'a Client,
    clock: ScenarioClock,
    worker: usize,
    /// Drawn before the section: pause this long right before the write.
    pause: Option<Duration>,
    pause_self: &'a (dyn Fn() + Sync),
}

impl Held<'_> {
    /// Runs the section under `lease`, records the grant, releases.
    async fn run(
        self,
        lock: &LockUnderTest,
        lease: Lease,
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<(), String> {
        let Held {
            section,
            work,
            client,
            clock,
            worker,
            pause,
            pause_self,
        } = self;
        let granted = lease.granted();
        let valid_until = granted.valid_until;
        let before_write = async {
            if section.mode != Mode::None && Instant::now() >= valid_until {
                return false;
            }
            // Right after the check: the one moment a pause turns into a stale write.
            if let Some(length) = pause {
                emit(WorkerEvent::Pausing {
                    worker,
                    at_us: clock.us(Instant::now()),
                    resume_after_us: us(length),
                });
                pause_self();
            }
            true
        };
        let fence = granted.fence.map(fenced_redlock::FenceToken::new);
        let outcome = if work == section.work {
            run_section(section, client, fence, before_write).await
        } else {
            run_section(&section.with_work(work), client, fence, before_write).await
        };
        let done = Instant::now();
        let event_outcome = match &outcome {
            Ok(o) => GrantOutcome::from(*o),
            // The write may or may not have landed: the run is a harness failure anyway.
            Err(_) => GrantOutcome::Abandoned,
        };
        emit(WorkerEvent::Grant {
            worker,
            fence: granted.fence,
            start_us: clock.us(granted.granted_at),
            end_us: clock.us(done.min(valid_until)),
            valid_until_us: clock.us(valid_until),
            done_us: clock.us(done),
            outcome: event_outcome,
        });
        // Not needed: keys we could not delete expire with the TTL.
        lock.release(lease).await;
        outcome
            .map(drop)
            .map_err(|e| format!("section on row {}: {e}", section.row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_to_validity_leaves_the_write_its_allowance_and_no_more_than_the_margin() {
        let ttl = Duration::from_millis(200);
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1_000 {
            let valid_until = Instant::now() + Duration::from_millis(150);
            let before = Instant::now();
            let work = work_to_validity(valid_until, ttl, &mut rng);
            let after = Instant::now();
            let left = valid_until.saturating_duration_since(after + work);
            // The function read the clock between `before` and `after`, so what it left is
            // at most that much more than `left` (measured: a preempted test waits longer).
            let slack = after - before;
            assert!(left + slack >= ttl.mul_f64(WRITE_ALLOWANCE), "{left:?}");
            assert!(
                left <= ttl.mul_f64(TO_VALIDITY_MARGIN) + Duration::from_millis(5),
                "{left:?}"
            );
        }
    }
}
