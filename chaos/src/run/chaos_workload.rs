//! The time-bounded fenced counter: one worker of one mode, looping until the scenario's
//! end, recording everything it does as [`WorkerEvent`]s.
//!
//! Unlike [`crate::workload::counter`] (a fixed number of sections, any lock failure fatal),
//! a chaos worker must live through faults: an acquire that fails — quorum unreachable,
//! wait timed out — is recorded and retried; only harness faults (PostgreSQL, a lock
//! setting, a closed database connection) end it. Each grant runs one section on the
//! [`Ledger`] and is recorded with its holding window `[granted_at, min(release,
//! valid_until)]`; every operation — acquire, read or claim, write, release — also goes to
//! the history ([`WorkerEvent::Op`]) with its invoke and complete times and outcome. A
//! PostgreSQL error on a statement is an indeterminate operation (`info`), not the end of
//! the worker: the ledger's log tells later whether such a write landed.
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

use fenced_redlock::{LeaseStatus, RenewOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use super::lease_watch::LeaseWatch;
use super::pause::{PauseBy, PausePlan};
use super::renewal_truth::RenewalTruth;
use super::retire::{self, LateRetire};
use super::truth::TruthReader;
use crate::checker::history::{Op, OpKind, OpOutcome};
use crate::judge::events::{GrantOutcome, WorkerEvent};
use crate::lockut::{Lease, LockUnderTest};
use crate::report::model::RENEWAL_WATCH_TICK_MS;
use crate::workload::Mode;
use crate::workload::ledger::{Ledger, State, section_id};

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
    /// Instead of `work`, 2-5 × the TTL under `auto_renew` (our lock; see
    /// [`crate::scenario::Work::Renewed`]).
    pub renewed: bool,
    /// Budget of one waiting acquire.
    pub acquire_wait: Duration,
    /// Seed of this worker (its start offset).
    pub seed: u64,
    /// Stop starting sections at this offset from the scenario start.
    pub until: Duration,
    /// Pauses while holding a lease (worker processes only: the worker stops itself).
    pub pause: Option<PausePlan>,
    /// The nodes' admin URLs, in node order: each grant's keys are read there before its
    /// release ([`super::truth`]). Empty: no server truth.
    pub truth_urls: Vec<String>,
    /// End each section with a late fence retirement instead of a release (worker 0 of a
    /// `late_retire` scenario, our lock: [`super::retire`]).
    pub late_retire: Option<LateRetire>,
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
    let deadline = clock.instant_at(spec.until);
    // A small seeded head start, so workers of a mode do not hit the nodes in lockstep.
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let head = Duration::from_micros(rng.random_range(0..=20_000));
    let mut pauses = spec.pause.map(|p| p.start(&mut rng));
    let mut sections = 0u64;
    let mut truth = (!spec.truth_urls.is_empty()).then(|| TruthReader::new(&spec.truth_urls));
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
        let acquire = |outcome| {
            let mut op = Op::new(
                worker,
                OpKind::Acquire,
                outcome,
                clock.us(started),
                clock.us(Instant::now()),
            );
            op.mode = spec.mode.name().into();
            op
        };
        match result {
            Ok(Ok(lease)) => {
                let g = lease.granted();
                sections += 1;
                let section = section_id(worker, sections);
                let mut op = acquire(OpOutcome::Ok).section(section);
                op.fence = g.fence;
                op.owner = Some(String::from_utf8_lossy(lease.owner().1).into_owned());
                op.valid_until_us = Some(clock.us(g.valid_until));
                emit(WorkerEvent::Op(op));
                emit(WorkerEvent::Acquire {
                    worker,
                    at_us: clock.us(Instant::now()),
                    latency_us: us(g.elapsed()),
                    ok: true,
                    rounds: g.attempts,
                    node_fault: false,
                });
                let work = if spec.renewed {
                    spec.ttl.mul_f64(rng.random_range(2.0..=5.0))
                } else if spec.work_to_validity {
                    work_to_validity(g.valid_until, spec.ttl, &mut rng)
                } else {
                    spec.work
                };
                // Half or twice the TTL in two renewed sections of three, asked for after up
                // to half the TTL of work: an extend right after the grant meets the quorum
                // that just answered and practically never fails, while one a little later
                // may meet a fault that began since (and a failed shortening extend is
                // where a lock can keep a validity its keys no longer have).
                let renewal = spec.renewed.then(|| {
                    let ttl = match rng.random_range(0..3) {
                        0 => return None,
                        1 => spec.ttl / 2,
                        _ => spec.ttl.saturating_mul(2),
                    };
                    let after = spec.ttl.mul_f64(rng.random_range(0.0..=0.5));
                    Some(ExtendFor { ttl, after })
                });
                let held = Held {
                    spec,
                    section,
                    work,
                    client,
                    clock,
                    pause: pauses
                        .as_mut()
                        .and_then(|p| p.next_section(&mut rng))
                        .zip(spec.pause.map(|p| p.by)),
                    pause_self,
                    truth: truth.as_mut(),
                    renewal,
                };
                if let Err(message) = held.run(lock, lease, &mut emit).await {
                    emit(WorkerEvent::Failed { worker, message });
                    return;
                }
            }
            Ok(Err(failure)) => {
                emit(WorkerEvent::Op(acquire(OpOutcome::Fail)));
                emit(WorkerEvent::Acquire {
                    worker,
                    at_us: clock.us(Instant::now()),
                    latency_us: us(started.elapsed()),
                    ok: false,
                    rounds: failure.rounds,
                    node_fault: failure.node_fault,
                });
            }
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
    spec: &'a WorkerSpec,
    /// Its id in the ledger and the history.
    section: u64,
    /// This section's work.
    work: Duration,
    client: &'a Client,
    clock: ScenarioClock,
    /// Drawn before the section: pause this long right before the write, this way.
    pause: Option<(Duration, PauseBy)>,
    pause_self: &'a (dyn Fn() + Sync),
    /// Reads the grant's keys on the servers beside the section, before the release.
    truth: Option<&'a mut TruthReader>,
    /// Renew the lease through the section (our lock), after an `extend_for` when there
    /// is one.
    renewal: Option<Option<ExtendFor>>,
}

/// A renewed section's `extend_for`: its TTL, asked for this long after the grant.
#[derive(Debug, Clone, Copy)]
struct ExtendFor {
    ttl: Duration,
    after: Duration,
}

impl Held<'_> {
    /// An operation of this section that was invoked at `invoke` and completed now.
    fn op(&self, f: OpKind, outcome: OpOutcome, invoke: Instant) -> Op {
        let mut op = Op::new(
            self.spec.worker,
            f,
            outcome,
            self.clock.us(invoke),
            self.clock.us(Instant::now()),
        )
        .section(self.section);
        op.mode = self.spec.mode.name().into();
        op
    }

    /// Runs the section under `lease` (and reads its keys' truth beside it), records the
    /// grant, releases. `Err` only when the worker cannot go on (a closed database
    /// connection, a fenced mode without a token).
    async fn run(
        mut self,
        lock: &LockUnderTest,
        lease: Lease,
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<(), String> {
        let lease = match (self.renewal, lease) {
            (Some(extend), Lease::Ours(l)) => {
                return self.run_renewed(l, extend, emit).await;
            }
            (_, lease) => lease,
        };
        let granted = lease.granted();
        let valid_until = granted.valid_until;
        let (key, token) = lease.owner();
        let clock = self.clock;
        let reader = self.truth.take();
        let read_truth = async move {
            match reader {
                Some(r) => Some(r.read(key, token, clock).await),
                None => None,
            }
        };
        let still_valid = || Some(valid_until).filter(|v| Instant::now() < *v);
        let (truth, outcome) = tokio::join!(
            read_truth,
            self.section(granted.fence, valid_until, &still_valid, emit)
        );
        let outcome = outcome.map(|(o, _)| o);
        let done = Instant::now();
        emit(WorkerEvent::Grant {
            worker: self.spec.worker,
            fence: granted.fence,
            start_us: self.clock.us(granted.granted_at),
            end_us: self.clock.us(done.min(valid_until)),
            valid_until_us: self.clock.us(valid_until),
            done_us: self.clock.us(done),
            outcome: *outcome.as_ref().unwrap_or(&GrantOutcome::Indeterminate),
            truth,
            validity_cut_us: None,
            renewal: None,
            section: Some(self.section),
        });
        let lease = match (self.spec.late_retire.as_ref(), lease) {
            (Some(late), Lease::Ours(l)) => match late.hold().await {
                Ok(Some(path)) => {
                    let invoke = Instant::now();
                    let retired = l.retire_fence().await;
                    let (result, said) = retire::outcome(&retired);
                    let cleared = path.clear_after(invoke).await;
                    let mut op = self.op(OpKind::Retire, result, invoke);
                    op.error = Some(said);
                    emit(WorkerEvent::Op(op));
                    cleared?;
                    return outcome.map(drop);
                }
                Ok(None) => Lease::Ours(l),
                Err(e) => {
                    let _ = lock.release(Lease::Ours(l)).await;
                    return Err(e);
                }
            },
            (_, lease) => lease,
        };
        let invoke = Instant::now();
        // Not needed for safety: keys we could not delete expire with the TTL.
        let released = lock.release(lease).await;
        let result = match released {
            Some(true) => OpOutcome::Ok,
            Some(false) => OpOutcome::Fail,
            None => OpOutcome::Info,
        };
        emit(WorkerEvent::Op(self.op(OpKind::Release, result, invoke)));
        outcome.map(drop)
    }

    /// A renewed section of our lock: an `extend_for` when drawn (after a little work),
    /// then `auto_renew` through the section; the holder's check before its write asks the
    /// renewer. Every validity the lease announced is recorded with when it was seen (the
    /// extend's, and each renewal's as a `renew` operation): writes are judged stale, and
    /// the holding window ends, against them ([`crate::checker::announced`]). While the
    /// renewer holds, its keys are read on the servers after a renewal now and then
    /// ([`super::renewal_truth`]), and before the release — a renewer that believes in
    /// keys the servers no longer keep is caught.
    async fn run_renewed(
        mut self,
        mut lease: fenced_redlock::Lease,
        extend: Option<ExtendFor>,
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<(), String> {
        let fence = lease.fence().map(|f| f.get());
        let granted_at = lease.granted_at();
        let (key, token) = (lease.key().to_owned(), lease.owner_token().to_owned());
        if let Some(extend) = extend {
            self.extend_first(&mut lease, extend, (&key, &token), emit)
                .await;
        }
        let valid_until = lease.valid_until();
        let renewing = lease.auto_renew(RenewOptions::default());
        // Beside the section, and at the holder's check: every validity the renewer
        // announces while it holds must be at least the last one (the holder may be
        // working on that one), and a loss must be heard in time.
        let watch = std::sync::Mutex::new(LeaseWatch::new(valid_until));
        let look = |f: &mut dyn FnMut(&mut LeaseWatch)| {
            f(&mut watch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner));
        };
        let held = || {
            let status = renewing.status();
            look(&mut |w| {
                w.look(status, Instant::now());
            });
            match status {
                LeaseStatus::Held { valid_until } => Some(valid_until),
                _ => None,
            }
        };
        let mut truths = RenewalTruth::new(
            self.truth.take(),
            key.as_bytes(),
            token.as_bytes(),
            self.clock,
            self.spec.ttl,
        );
        let outcome = {
            let section = self.section(fence, valid_until, &held, emit);
            tokio::pin!(section);
            let mut tick = tokio::time::interval(Duration::from_millis(RENEWAL_WATCH_TICK_MS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    outcome = &mut section => break outcome,
                    () = truths.next() => {}
                    _ = tick.tick() => {
                        let now = Instant::now();
                        let mut renewed = None;
                        look(&mut |w| renewed = w.saw(renewing.status(), now));
                        if let Some(vu) = renewed {
                            truths.renewed(vu, now);
                        }
                    }
                }
            }
        };
        let done = Instant::now();
        look(&mut |w| {
            w.saw(renewing.status(), done);
        });
        let (reader, truth_events) = truths.finish().await;
        let watch = watch
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let known = match renewing.status() {
            LeaseStatus::Held { valid_until } => Some(valid_until),
            _ => None,
        };
        let end_truth = match (known, reader) {
            (Some(vu), Some(reader)) => Some((
                reader
                    .read(key.as_bytes(), token.as_bytes(), self.clock)
                    .await,
                vu,
            )),
            _ => None,
        };
        for event in truth_events {
            emit(event);
        }
        self.emit_renewals(&watch, emit);
        // The window ends at the validity announced last before the section ended, or
        // before the loss; a truth read is judged against what was claimed when it began.
        let announced = watch.last_announced(done);
        let (truth, claimed) = match end_truth {
            Some((t, vu)) => (Some(t), vu),
            None => (None, announced),
        };
        emit(WorkerEvent::Grant {
            worker: self.spec.worker,
            fence,
            start_us: self.clock.us(granted_at),
            end_us: self.clock.us(done.min(announced)),
            valid_until_us: self.clock.us(claimed),
            done_us: self.clock.us(done),
            outcome: outcome
                .as_ref()
                .map_or(GrantOutcome::Indeterminate, |(o, _)| *o),
            truth,
            validity_cut_us: watch.worst_cut().map(us),
            renewal: Some(watch.seen(self.clock)),
            section: Some(self.section),
        });
        let invoke = Instant::now();
        let report = renewing.release().await;
        let result = if report.released() > report.nodes.len() / 2 {
            OpOutcome::Ok
        } else {
            OpOutcome::Fail
        };
        emit(WorkerEvent::Op(self.op(OpKind::Release, result, invoke)));
        outcome.map(drop)
    }

    /// The drawn `extend_for`, `after` the grant: its operation carries the validity the
    /// lease claims after it, and the keys are read against that validity.
    async fn extend_first(
        &mut self,
        lease: &mut fenced_redlock::Lease,
        ExtendFor { ttl, after }: ExtendFor,
        (key, token): (&str, &str),
        emit: &mut impl FnMut(WorkerEvent),
    ) {
        tokio::time::sleep_until(lease.granted_at() + after).await;
        let invoke = Instant::now();
        let outcome = match lease.extend_for(ttl).await {
            Ok(_) => OpOutcome::Ok,
            Err(e) => {
                tracing::debug!(error = %e, "extend_for failed");
                OpOutcome::Fail
            }
        };
        // Whatever the outcome, the validity the lease claims now must not outlast a
        // quorum of its keys: a failed extend may have shortened them.
        let claimed = lease.valid_until();
        let mut op = self.op(OpKind::Extend, outcome, invoke);
        op.valid_until_us = Some(self.clock.us(claimed));
        emit(WorkerEvent::Op(op));
        if let Some(reader) = self.truth.as_deref_mut()
            && Instant::now() < claimed
        {
            let truth = reader
                .read(key.as_bytes(), token.as_bytes(), self.clock)
                .await;
            emit(WorkerEvent::Truth {
                truth,
                valid_until_us: self.clock.us(claimed),
            });
        }
    }

    /// One `renew` operation per validity the renewer announced, as `watch` saw them.
    fn emit_renewals(&self, watch: &LeaseWatch, emit: &mut impl FnMut(WorkerEvent)) {
        for (before, seen, end) in watch.renewals(self.clock) {
            let mut op = Op::new(self.spec.worker, OpKind::Renew, OpOutcome::Ok, before, seen)
                .section(self.section);
            op.mode = self.spec.mode.name().into();
            op.valid_until_us = Some(end);
            emit(WorkerEvent::Op(op));
        }
    }

    /// Read (or claim), work, check, maybe pause, write: each statement an operation.
    /// `valid` is the lease's end of validity now (`None`: expired or lost), `valid_until`
    /// the one known at the grant; also returns the end the holder knew last, at its check.
    async fn section(
        &self,
        fence: Option<u64>,
        valid_until: Instant,
        valid: &(dyn Fn() -> Option<Instant> + Sync),
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<(GrantOutcome, Instant), String> {
        let (mode, row, ledger) = (self.spec.mode, self.spec.row, Ledger);
        let fence = match (mode.is_fenced(), fence) {
            (false, _) => 0,
            (true, Some(f)) => f,
            (true, None) => return Err("the lock returned no fencing token".into()),
        };
        let (f, invoke) = if mode == Mode::ClaimFirst {
            (OpKind::Claim, Instant::now())
        } else {
            (OpKind::Read, Instant::now())
        };
        let read = if mode == Mode::ClaimFirst {
            ledger.claim(self.client, row, fence).await
        } else {
            ledger.read(self.client, row).await
        };
        let read: State = match read {
            Ok(Some(state)) => {
                emit(WorkerEvent::Op(
                    self.op(f, OpOutcome::Ok, invoke)
                        .values(state.value, state.last),
                ));
                state
            }
            // A refused claim (or a missing row, which the final read reports).
            Ok(None) => {
                emit(WorkerEvent::Op(self.op(f, OpOutcome::Fail, invoke)));
                return Ok((GrantOutcome::Rejected, valid_until));
            }
            Err(e) => {
                return self
                    .indeterminate(f, invoke, &e, emit)
                    .map(|o| (o, valid_until));
            }
        };
        tokio::time::sleep(self.work).await;
        // What the holder knows at its check: a renewed lease may have moved on, or been
        // lost (then it held no later than now, and no later than what it knew before).
        let known = valid();
        let believed = known.unwrap_or_else(|| valid_until.min(Instant::now()));
        if mode != Mode::None && known.is_none() {
            return Ok((GrantOutcome::Abandoned, believed));
        }
        // Right after the check: the one moment a pause turns into a stale write.
        if let Some((length, by)) = self.pause {
            emit(WorkerEvent::Pausing {
                worker: self.spec.worker,
                at_us: self.clock.us(Instant::now()),
                resume_after_us: us(length),
            });
            match by {
                PauseBy::Signal => (self.pause_self)(),
                PauseBy::Sleep => {
                    tokio::time::sleep(length).await;
                    emit(WorkerEvent::Resumed {
                        worker: self.spec.worker,
                        at_us: self.clock.us(Instant::now()),
                    });
                }
            }
        }
        let next = read.value.saturating_add(1);
        let invoke = Instant::now();
        match ledger
            .write(self.client, mode, row, self.section, read.last, next, fence)
            .await
        {
            Ok(accepted) => {
                let outcome = if accepted {
                    OpOutcome::Ok
                } else {
                    OpOutcome::Fail
                };
                emit(WorkerEvent::Op(
                    self.op(OpKind::Write, outcome, invoke)
                        .values(next, read.last),
                ));
                let outcome = if accepted {
                    GrantOutcome::Accepted
                } else {
                    GrantOutcome::Rejected
                };
                Ok((outcome, believed))
            }
            Err(e) => {
                let mut op = self.op(OpKind::Write, OpOutcome::Info, invoke);
                op = op.values(next, read.last);
                self.indeterminate_op(op, &e, emit).map(|o| (o, believed))
            }
        }
    }

    /// A statement that failed: an `info` operation; the worker goes on unless the
    /// connection is gone.
    fn indeterminate(
        &self,
        f: OpKind,
        invoke: Instant,
        e: &tokio_postgres::Error,
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<GrantOutcome, String> {
        let op = self.op(f, OpOutcome::Info, invoke);
        self.indeterminate_op(op, e, emit)
    }

    fn indeterminate_op(
        &self,
        op: Op,
        e: &tokio_postgres::Error,
        emit: &mut impl FnMut(WorkerEvent),
    ) -> Result<GrantOutcome, String> {
        emit(WorkerEvent::Op(op.error(e.to_string())));
        if self.client.is_closed() {
            return Err(format!(
                "the PostgreSQL connection of row {} closed: {e}",
                self.spec.row
            ));
        }
        Ok(GrantOutcome::Indeterminate)
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
