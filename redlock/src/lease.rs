//! The held lock: what it knows, how it is extended and released.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::cleanup::{self, Cleanup};
use crate::client::Redlock;
use crate::dialect::NativeDelete;
use crate::error::{LockError, NodeError};
use crate::extend;
use crate::fence::FenceToken;
use crate::node::{Link, Node};
use crate::notify;
use crate::quorum::{self, Tally, Until};
use crate::renew::{RenewOptions, RenewingLease};
use crate::room::Writes;
use crate::script;
use crate::token::Token;
use crate::validity;

/// How one node answered the acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOutcome {
    /// It set our key.
    Granted,
    /// Another owner holds the key there.
    Held,
    /// It failed or missed its deadline.
    Failed(NodeError),
    /// The quorum was decided before it answered (its answer is still consumed; if it
    /// granted, the key is part of this lease and is released with it).
    NoAnswer,
}

/// One node's part in an acquire ([`NodeOutcome`]) or a release ([`ReleaseOutcome`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeReport<O = NodeOutcome> {
    /// `host:port`.
    pub addr: String,
    /// What it said.
    pub outcome: O,
    /// How long it took to say it (both rounds of a fenced acquire); `None` if it had not
    /// answered.
    pub latency: Option<Duration>,
}

/// How one node answered a release.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// Our key was there and is deleted.
    Released,
    /// No key: it expired, the node lost it, or it was never set there.
    AlreadyGone,
    /// The key holds another owner's token; it was left alone.
    NotOurs,
    /// The node failed or missed its deadline. A release's delete that may still succeed
    /// (the node refused it with [`NodeError::Backlog`], did not answer in time, or its
    /// connection failed) is tried again in the background, as a failed attempt's
    /// clean-up is, until the node answers or the key's TTL has passed
    /// ([`Redlock::shutdown`] stops the tries); otherwise the key expires by itself.
    Failed(NodeError),
    /// [`Lease::release`] returned before this node answered: a majority had already
    /// answered. The delete is still on its way, behind everything sent to this node before
    /// it, and finishes in the background ([`Redlock::shutdown`] waits for it), tried
    /// again there as [`Failed`](ReleaseOutcome::Failed) says.
    /// [`Lease::release_all`] never reports this.
    Pending,
    /// No answer before the deadline, for a request that does not undo itself (the
    /// deletion of a fence counter by [`Lease::retire_fence`]): it may have been carried
    /// out, or may still be.
    Unknown(NodeError),
}

/// What a release did on each node, in node order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// Per node: its address, what it said and how long that took.
    pub nodes: Vec<NodeReport<ReleaseOutcome>>,
}

impl ReleaseReport {
    /// Nodes where our key was deleted.
    pub fn released(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.outcome == ReleaseOutcome::Released)
            .count()
    }
}

/// A held lock. It is valid until [`Lease::valid_until`] on this process's monotonic clock;
/// do the protected work before then, or [`extend`](Lease::extend) it, or let
/// [`auto_renew`](Lease::auto_renew) do so.
///
/// Release it with [`release`](Lease::release). If it is only dropped, a best-effort
/// release is spawned on the current Tokio runtime (if there is one) and its result is
/// not reported ([`Redlock::shutdown`] waits for it); without a runtime the keys simply
/// expire after the TTL, and until then nobody else can take the lock.
#[must_use = "a lease is released only by release().await (dropping it releases in the background, unreported)"]
#[derive(Debug)]
pub struct Lease {
    client: Redlock,
    resource: String,
    key: Arc<str>,
    token: Token,
    fence: Option<FenceToken>,
    acquired_at: Instant,
    valid_until: Instant,
    elapsed: Duration,
    nodes: Vec<NodeReport>,
    pub(crate) attempts: u32,
    done: bool,
    /// Adopted from a handle and not extended since: no validity is known here, yet an
    /// extend may still find the keys ours.
    unverified: bool,
    /// Per node, the epoch of the server whose yes the lease counts on (its last
    /// successful round), `None` where it has none (see `quarantine`).
    voters: Vec<Option<u64>>,
    /// What the acquire and the extends sent each node: where the release's deletes go,
    /// and which of them a place is kept for (see `room`).
    writes: Writes,
    /// When the keys expire at the latest, had every write that may have set them landed
    /// when it was sent: a release tried again stops then (see `cleanup`).
    keys_end: Instant,
}

impl Lease {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: Redlock,
        resource: String,
        key: Arc<str>,
        token: Token,
        fence: Option<FenceToken>,
        acquired_at: Instant,
        valid_until: Instant,
        elapsed: Duration,
        nodes: Vec<NodeReport>,
        voters: Vec<Option<u64>>,
        writes: Writes,
        keys_end: Instant,
    ) -> Self {
        client.shared().held.hold(&key, token, valid_until);
        Lease {
            client,
            resource,
            key,
            token,
            fence,
            acquired_at,
            valid_until,
            elapsed,
            nodes,
            attempts: 1,
            done: false,
            unverified: false,
            voters,
            writes,
            keys_end,
        }
    }

    /// A lease taken over from a [`LeaseHandle`](crate::handle::LeaseHandle): held as far
    /// as the keys go, with no validity known until an extend succeeds. Its keys may be on
    /// any node, set by another client: its release asks every node.
    pub(crate) fn adopted(
        client: Redlock,
        resource: String,
        key: Arc<str>,
        token: Token,
        fence: Option<FenceToken>,
    ) -> Self {
        let now = Instant::now();
        let writes = Writes::anywhere(client.nodes());
        let keys_end = now.checked_add(client.ttl()).unwrap_or(now);
        Lease {
            client,
            resource,
            key,
            token,
            fence,
            acquired_at: now,
            valid_until: now,
            elapsed: Duration::ZERO,
            nodes: Vec::new(),
            attempts: 0,
            done: false,
            unverified: true,
            voters: Vec::new(),
            writes,
            keys_end,
        }
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The key set on the nodes (prefix + resource).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token, when the client has fencing on. Fixed for the lease's life.
    pub fn fence(&self) -> Option<FenceToken> {
        self.fence
    }

    /// The random owner token stored as the value of this lease's keys, which release and
    /// extend compare against: for audits that read the servers directly (a node holds
    /// the lease while `GET key` returns it; the chaos rig checks `valid_until` against
    /// the keys' `PTTL` that way). Whoever has it can extend and release the lease, as
    /// with a [handle](crate::handle): do not log it.
    pub fn owner_token(&self) -> &str {
        self.token.as_str()
    }

    /// When the winning attempt started (monotonic clock). Validity is counted from here.
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// When the acquire returned: the moment the holder could know it held the lock.
    /// Holding intervals `[granted_at, min(release, valid_until)]` of successive holders
    /// never overlap while the lock's assumptions hold; `acquired_at` may precede a
    /// previous holder's release, since an attempt can start before the key is freed.
    pub fn granted_at(&self) -> Instant {
        // Fits: the grant computed `acquired_at + elapsed + validity` without overflow.
        self.acquired_at
            .checked_add(self.elapsed)
            .unwrap_or(self.valid_until)
    }

    /// The end of validity: `attempt start + ttl − drift`, moved on by each extend.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Validity left now (zero once passed, zero once a restart has voided the lease's
    /// majority (see [`is_valid`](Lease::is_valid)), and zero for a lease
    /// [adopted](Redlock::adopt) from a handle until an extend succeeds).
    pub fn remaining(&self) -> Duration {
        if self.restart_voided() {
            return Duration::ZERO;
        }
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Whether validity is left now. Check it before each step of protected work.
    ///
    /// With the restart quarantine on (it is off by default: see
    /// [`Builder::restart_quarantine`](crate::Builder::restart_quarantine)), also `false`
    /// once this client has seen that nodes whose yes the lease counted restarted, leaving
    /// fewer than a quorum of its votes (they may have forgotten its keys). A restart is
    /// seen when this client next connects to the node, for any call.
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.valid_until && !self.restart_voided()
    }

    /// Whether restarts (or clock jumps, with the clock-jump guard) seen since the lease's
    /// last successful round leave fewer than a quorum of its votes from servers that have
    /// not restarted or jumped (see `quarantine`). Never for a lease with no round of its
    /// own yet (adopted), or with both guards off.
    pub(crate) fn restart_voided(&self) -> bool {
        let shared = self.client.shared();
        if self.unverified || shared.guards().is_none() {
            return false;
        }
        let standing = shared
            .nodes
            .iter()
            .zip(&self.voters)
            .filter(|(node, voted)| voted.is_some_and(|e| e == node.epoch()))
            .count();
        standing < self.client.quorum()
    }

    /// Why a voided lease lost its majority: a clock jump if one voided any of its votes,
    /// else a restart.
    pub(crate) fn void_reason(&self) -> crate::LossReason {
        let jumped = self
            .client
            .shared()
            .nodes
            .iter()
            .zip(&self.voters)
            .any(|(node, voted)| voted.is_some_and(|e| node.jumped_since(e)));
        if jumped {
            crate::LossReason::ClockJumped
        } else {
            crate::LossReason::NodeRestarted
        }
    }

    /// The error of an extend on a lease that a restart or clock jump voided.
    fn restarted(&self) -> LockError {
        LockError::LeaseLost {
            resource: self.resource.clone(),
            reason: self.void_reason(),
        }
    }

    /// How long the winning attempt took.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Attempts made by the acquire that returned this lease.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// What each node said to the winning attempt.
    pub fn nodes(&self) -> &[NodeReport] {
        &self.nodes
    }

    /// The client's TTL.
    pub fn ttl(&self) -> Duration {
        self.client.ttl()
    }

    pub(crate) fn client(&self) -> &Redlock {
        &self.client
    }

    /// Resets the TTL on every node where our token still holds the key, and succeeds
    /// only with a majority and validity left, measured from this call's start. Returns
    /// the new validity.
    ///
    /// On failure nothing is deleted, and validity ends at the earlier of the old end and
    /// this extend's own (`start + ttl − drift`): the extend may have reached some nodes,
    /// and where its TTL is shorter than what was left (an [`extend_for`](Lease::extend_for)
    /// with less time, or `extend` after a longer `extend_for`) it shortened our keys
    /// there. The same holds for an extend whose future is dropped: validity is cut before
    /// the first request is sent. An extend never makes the lease believe it holds the
    /// lock for longer than the keys it may have touched live.
    ///
    /// A lease [adopted](Redlock::adopt) from a handle has no known validity; its first
    /// successful extend gives it one (the check for run-out validity is skipped until then).
    ///
    /// A node in its restart quarantine (see
    /// [`Builder::restart_quarantine`](crate::Builder::restart_quarantine)) does not count
    /// toward the majority, as in an acquire.
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when validity had already run out
    /// ([`LossReason::Expired`](crate::LossReason::Expired)), or when nodes whose votes the
    /// lease counted restarted and too few votes are left
    /// ([`LossReason::NodeRestarted`](crate::LossReason::NodeRestarted): seen before the
    /// extend, or by its own round, which is the next contact with those nodes); else
    /// [`LockError::QuorumNotReached`] / [`LockError::NoValidityLeft`].
    pub async fn extend(&mut self) -> Result<Duration, LockError> {
        let span = tracing::debug_span!(
            "redlock.extend",
            resource = %self.resource,
            outcome = tracing::field::Empty
        );
        let result = self
            .extend_inner()
            .instrument(span.clone())
            .await
            .map(|(v, _)| v);
        crate::metrics::extended(&span, &result);
        result
    }

    /// Like [`extend`](Lease::extend), with a TTL of your choosing for this extend only:
    /// the keys live `ttl` from now on the servers and validity is counted from `ttl`
    /// (less its own drift allowance). Later [`extend`](Lease::extend) calls go back to
    /// the client's TTL — which shortens validity at once if it ends earlier than this
    /// one, before anything is sent (see `extend` for why).
    /// [`auto_renew`](Lease::auto_renew) keeps this validity instead: its first renewal
    /// waits until one with the client's TTL no longer ends earlier, since a holder may be
    /// working on the validity it read from the renewer's
    /// [`status`](crate::RenewingLease::status). A `ttl` shorter than the validity left shortens it the same way,
    /// even if this extend fails or is dropped. It behaves as
    /// `extend` on a client made by [`Redlock::with_ttl`]`(ttl)`: the same node deadline
    /// rules, the same connections.
    ///
    /// `ttl` is checked as [`Builder::build`](crate::Builder::build) checks a TTL (at least
    /// 1 ms, at most [`MAX_TTL`](crate::config::MAX_TTL), above the drift allowance and an
    /// explicit node timeout) before anything is sent.
    ///
    /// ```no_run
    /// # async fn demo(mut lease: fenced_redlock::Lease) -> Result<(), fenced_redlock::LockError> {
    /// use std::time::Duration;
    /// // The last step is slow: hold the lock a minute longer for it.
    /// let validity = lease.extend_for(Duration::from_secs(60)).await?;
    /// assert!(validity <= Duration::from_secs(60));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidTtl`] for a TTL the builder would refuse (the servers are not
    /// touched); otherwise as [`extend`](Lease::extend).
    pub async fn extend_for(&mut self, ttl: Duration) -> Result<Duration, LockError> {
        let span = tracing::debug_span!(
            "redlock.extend",
            resource = %self.resource,
            ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            outcome = tracing::field::Empty
        );
        let result = async {
            let client = self
                .client
                .with_ttl(ttl)
                .map_err(|reason| LockError::InvalidTtl {
                    resource: self.resource.clone(),
                    ttl,
                    reason,
                })?;
            self.extend_on(&client).await.map(|(v, _)| v)
        }
        .instrument(span.clone())
        .await;
        crate::metrics::extended(&span, &result);
        result
    }

    /// Like `extend`, also telling how many nodes said "not ours".
    pub(crate) async fn extend_inner(&mut self) -> Result<(Duration, usize), LockError> {
        let client = self.client.clone();
        self.extend_on(&client).await
    }

    /// Cuts validity, before an extend with `client`'s TTL starting at `started` sends
    /// anything, to the end that extend's keys would have: `started + ttl − drift`. A
    /// node that gets the extend's `PEXPIRE` keeps our key that long from (after)
    /// `started` and no longer, whatever the extend's outcome, so a lease that had more
    /// validity left must not count on it any more. Returns the (possibly earlier) end.
    pub(crate) fn bound_validity_for(&mut self, client: &Redlock, started: Instant) -> Instant {
        let settings = client.settings();
        let end = validity::validity(settings.ttl, Duration::ZERO, settings.drift)
            .and_then(|v| started.checked_add(v))
            .unwrap_or(started);
        self.set_valid_until(self.valid_until.min(end));
        self.valid_until
    }

    /// Every change of validity goes here, so the client's waiters know it (see `held`).
    fn set_valid_until(&mut self, until: Instant) {
        self.valid_until = until;
        self.client
            .shared()
            .held
            .update(&self.key, self.token, until);
    }

    /// Extends with `client`'s TTL and node deadline (this lease's client, or one made
    /// from it by `with_ttl`).
    async fn extend_on(&mut self, client: &Redlock) -> Result<(Duration, usize), LockError> {
        let started = Instant::now();
        if !self.unverified && started >= self.valid_until {
            return Err(LockError::LeaseLost {
                resource: self.resource.clone(),
                reason: crate::LossReason::Expired,
            });
        }
        if self.restart_voided() {
            self.set_valid_until(self.valid_until.min(started));
            return Err(self.restarted());
        }
        // Before the first request can leave: from here on the keys may be shortened.
        self.bound_validity_for(client, started);
        let settings = client.settings();
        // And lengthened, where they are still ours.
        self.keys_end = self
            .keys_end
            .max(started.checked_add(settings.ttl).unwrap_or(started));
        let ttl_ms = settings.ttl_ms();
        let deadline = settings.node_timeout;
        let shared = client.shared();
        let nodes = &shared.nodes;
        let required = client.quorum();
        let guards = shared.guards();
        let durability = settings.durability;
        let tally: Tally<((), u64)> = quorum::fan_out(
            nodes,
            required,
            Until::Decided,
            deadline,
            shared.tasks(),
            |node| {
                let (key, token) = (Arc::clone(&self.key), self.token);
                let writes = self.writes.clone();
                async move {
                    node.vote_on(&writes, guards, durability, |mut c, link| {
                        let node = &node;
                        async move {
                            let r = extend::extend_one(&mut c, node, link, &key, &token, ttl_ms)
                                .await?;
                            Ok((r == 1).then_some(()))
                        }
                    })
                    .await
                }
            },
        )
        .await;
        if !tally.reached() {
            // The round is the next contact with every node: a restart it found may have
            // taken the majority the lease had.
            if self.restart_voided() {
                self.set_valid_until(self.valid_until.min(Instant::now()));
                return Err(self.restarted());
            }
            return Err(tally.quorum_error(&self.resource, nodes));
        }
        let elapsed = started.elapsed();
        let validity = validity::validity(settings.ttl, elapsed, settings.drift);
        let valid_until = validity.and_then(|v| started.checked_add(elapsed)?.checked_add(v));
        let (Some(validity), Some(valid_until)) = (validity, valid_until) else {
            return Err(LockError::NoValidityLeft {
                resource: self.resource.clone(),
                elapsed,
                ttl: settings.ttl,
            });
        };
        if self.unverified {
            // Adopted, and now verified: from here this client holds it.
            self.valid_until = valid_until;
            self.client
                .shared()
                .held
                .hold(&self.key, self.token, valid_until);
        } else {
            self.set_valid_until(valid_until);
        }
        self.unverified = false;
        self.voters = crate::client::epochs(&tally);
        Ok((validity, tally.not_ours()))
    }

    /// Deletes our key on every node (compare-and-delete: a key holding another token is
    /// left alone) and wakes waiters. Returns as soon as a **majority** of the nodes has
    /// answered; the deletes still in flight finish in the background, up to their
    /// deadlines, and show as [`ReleaseOutcome::Pending`] in the report.
    ///
    /// Why that is the default: once a majority no longer holds our key, another client
    /// can gather its quorum, so waiting longer only makes the caller pay for the slowest
    /// node (a node 50 ms slow made every release 50 ms slow). Nothing is skipped: every
    /// node our key may be on still gets its delete, on the same connection and so after
    /// everything this client sent it before, and [`Redlock::shutdown`] waits for the
    /// stragglers. A node that no write of this lease ever reached (its vote was refused
    /// unsent, see [`NodeError::Backlog`]) gets none and reports
    /// [`ReleaseOutcome::AlreadyGone`]. A delete that fails in a way another try may mend
    /// is tried again in the background (see [`ReleaseOutcome::Failed`]). Use
    /// [`release_all`](Lease::release_all) when you want every node's answer.
    ///
    /// Cancel-safe: dropping the returned future before it finishes has the outcome of
    /// dropping the lease (the deletes go out in the background; see [`Lease`]).
    pub async fn release(self) -> ReleaseReport {
        let quorum = self.client.quorum();
        let tasks = self.client.shared().tasks().clone();
        self.release_until(Wait::Quorum(quorum, &tasks)).await
    }

    /// Like [`release`](Lease::release), but waits for every node's answer (or its
    /// deadline): the report has no [`ReleaseOutcome::Pending`]. As slow as the slowest
    /// node; use it for diagnostics and tests, or before exiting without
    /// [`Redlock::shutdown`].
    pub async fn release_all(self) -> ReleaseReport {
        self.release_until(Wait::All).await
    }

    /// Cancel-safe: the lease counts as released only once the deletes were handed to
    /// every node's connection (the fan-out has returned). A release future dropped
    /// before that drops the lease, whose `Drop` sends the deletes again in the background
    /// — behind any that did leave, and harmless where they already deleted the key.
    async fn release_until(mut self, wait: Wait<'_>) -> ReleaseReport {
        let span = tracing::debug_span!(
            "redlock.release",
            resource = %self.resource,
            outcome = tracing::field::Empty,
            released = tracing::field::Empty
        );
        let shared = self.client.shared();
        let job = self.cleanup();
        // Deletes that answer after `wait` is met, and need another try, get it from the
        // task that drove them; those that answered before, from a task of their own.
        let late = {
            let (job, shared) = (job.clone(), Arc::clone(shared));
            move |late: Vec<(usize, ReleaseOutcome)>| {
                let again = late
                    .iter()
                    .filter(|(_, outcome)| cleanup::try_again(outcome))
                    .filter_map(|(i, _)| shared.nodes.get(*i).cloned());
                job.again(again.collect())
            }
        };
        let report = delete_everywhere(&shared.nodes, &job, wait, late)
            .instrument(span.clone())
            .await;
        self.done = true;
        if report.nodes.iter().any(|n| cleanup::try_again(&n.outcome)) {
            let outcomes = report.nodes.iter().map(|n| &n.outcome);
            shared.spawn(job.again(cleanup::unanswered(shared.nodes.clone(), outcomes)));
        }
        crate::metrics::released(&span, &report, self.client.quorum());
        report
    }

    /// Retires the resource's fence counter, then releases: deletes the counter on every
    /// node while this lease still holds the lock, then releases as
    /// [`release`](Lease::release) does. The next grant of the resource gets token 1.
    ///
    /// Use it when the entity the resource fences is gone for good (an `order:{id}`
    /// deleted), so that one counter per entity does not stay behind forever. Never use
    /// it for a resource that still stores tokens: it would reject every later write as
    /// stale (see "The counter's life" in [`fence`](crate::fence)). A lease without
    /// fencing can retire the counter too (a client with fencing off shares the keys).
    ///
    /// Each node deletes its counter only if our token still holds the lock key there, in
    /// one atomic step: a deletion that arrives late (after our key expired and another
    /// holder wrote its token) leaves the counter alone.
    ///
    /// The report is the counter deletion's: [`ReleaseOutcome::Released`] where a counter
    /// was deleted, [`ReleaseOutcome::AlreadyGone`] where there was none,
    /// [`ReleaseOutcome::NotOurs`] where the lock key was no longer ours (nothing deleted),
    /// [`ReleaseOutcome::Unknown`] where no answer came in time (the deletion may still
    /// happen, but only where the key is still ours when it arrives).
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when validity had already run out: then nothing is
    /// deleted (another holder may be using the counter), and the lease is released.
    pub async fn retire_fence(self) -> Result<ReleaseReport, LockError> {
        let span = tracing::debug_span!("redlock.retire_fence", resource = %self.resource);
        async {
            if !self.is_valid() {
                let resource = self.resource.clone();
                let _ = self.release().await;
                return Err(LockError::LeaseLost {
                    resource,
                    reason: crate::LossReason::Expired,
                });
            }
            let deadline = self.client.settings().node_timeout;
            let shared = self.client.shared();
            let counter: Arc<[u8]> = Arc::from(crate::fence::counter_key(&self.key));
            let tally: Tally<i64> = quorum::fan_out(
                &shared.nodes,
                shared.nodes.len(),
                Until::All,
                deadline,
                shared.tasks(),
                |node| {
                    let (key, token) = (Arc::clone(&self.key), self.token);
                    let counter = Arc::clone(&counter);
                    async move {
                        node.call_unbounded(|mut c| async move {
                            script::RETIRE_FENCE
                                .call(&[key.as_bytes(), &counter])
                                .arg(token.as_str())
                                .query_async(&mut c)
                                .await
                                .map(Some)
                        })
                        .await
                    }
                },
            )
            .await;
            let mut report = report_of(&shared.nodes, tally);
            for node in &mut report.nodes {
                if let ReleaseOutcome::Failed(e @ NodeError::Timeout(_)) = &node.outcome {
                    node.outcome = ReleaseOutcome::Unknown(e.clone());
                }
            }
            let _ = self.release().await;
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Hands the lease over for another process to [adopt](Redlock::adopt): a
    /// [`LeaseHandle`](crate::handle::LeaseHandle) with the resource, key, owner token,
    /// fencing token and a wall-clock hint of the validity end. This lease is then done:
    /// nothing here extends or releases the keys any more (dropping the handle leaves
    /// them to expire with their TTL). See [`handle`](crate::handle) for what the
    /// adopter may and may not assume.
    pub fn into_handle(mut self) -> crate::handle::LeaseHandle {
        self.done = true;
        crate::handle::LeaseHandle::new(
            std::mem::take(&mut self.resource),
            self.key.to_string(),
            self.token.as_str().to_owned(),
            self.fence,
            self.remaining(),
        )
    }

    /// Hands the lease to a background renewer (see [`RenewingLease`]).
    pub fn auto_renew(self, options: RenewOptions) -> RenewingLease {
        RenewingLease::start(self, options)
    }

    /// The deletes of this lease's keys, tried again where a node does not answer, until
    /// the keys' end (see `cleanup`); a delete that removes a key announces it.
    fn cleanup(&self) -> Cleanup {
        let settings = self.client.settings();
        Cleanup {
            key: Arc::clone(&self.key),
            token: self.token,
            writes: self.writes.clone(),
            announce: settings.notify,
            deadline: settings.node_timeout,
            give_up_at: self.keys_end,
            closing: self.client.shared().closing().clone(),
        }
    }

    /// Marks the lease as handed over (renewer owns the release).
    pub(crate) fn disarm(&mut self) {
        self.done = true;
    }

    pub(crate) fn rearm(&mut self) {
        self.done = false;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let shared = self.client.shared();
        // Released, handed over or about to be: this client's waiters may ask the nodes.
        shared.held.forget(&self.key, self.token);
        if self.done {
            return;
        }
        shared.spawn(self.cleanup().run(shared.nodes.clone()));
    }
}

/// How long [`delete_everywhere`] waits.
#[derive(Clone, Copy)]
pub(crate) enum Wait<'a> {
    /// For every node's answer or deadline.
    All,
    /// Until this many nodes answered; the rest go on as tasks of this tracker.
    Quorum(usize, &'a tokio_util::task::TaskTracker),
}

/// One round of `job`'s compare-and-delete on `nodes`, each up to `job`'s deadline,
/// waiting as `wait` says; where no write of `job`'s was ever sent, nothing is sent (the
/// node answers [`ReleaseOutcome::AlreadyGone`] at once, and counts as answered), and
/// elsewhere each delete takes the
/// places of the line its writes left it (see `room`). When `job` announces, each node
/// that deletes our key publishes the same release id to the key's waiters. The deletes
/// still in flight when `wait` is met are driven to their deadline in the background,
/// which then hands their outcomes (by node index) to `late`, and waits for it.
pub(crate) async fn delete_everywhere<L, LFut>(
    nodes: &[Arc<Node>],
    job: &Cleanup,
    wait: Wait<'_>,
    late: L,
) -> ReleaseReport
where
    L: FnOnce(Vec<(usize, ReleaseOutcome)>) -> LFut + Send + 'static,
    LFut: std::future::Future<Output = ()> + Send + 'static,
{
    let (key, token, deadline) = (&job.key, &job.token, job.deadline);
    let (channel, release_id) = if job.announce {
        (notify::channel(key), notify::release_id())
    } else {
        (String::new(), String::new())
    };
    // The script's request is the same for every node: built once.
    let mut script = script::RELEASE.call(&[key.as_bytes()]);
    script.arg(token.as_str()).arg(&channel).arg(&release_id);
    let announce = Arc::new(Announce {
        channel,
        release_id,
        script,
    });
    // Until::All leaves nothing in flight, so its tracker never gets a task.
    let untracked;
    let (until, required, tasks) = match wait {
        Wait::All => {
            untracked = tokio_util::task::TaskTracker::new();
            (Until::All, nodes.len(), &untracked)
        }
        Wait::Quorum(required, tasks) => (Until::Decided, required, tasks),
    };
    let late = |answers: Vec<(usize, quorum::Answer<i64>)>| {
        late(
            answers
                .into_iter()
                .map(|(i, answer)| (i, outcome_of(Some(answer))))
                .collect(),
        )
    };
    // Every answer is a "yes" here: a release is decided when `required` nodes answered.
    let tally: Tally<i64> = quorum::fan_out_then(
        nodes,
        required,
        until,
        deadline,
        tasks,
        |node| {
            let (key, token, announce) = (Arc::clone(key), *token, Arc::clone(&announce));
            let writes = job.writes.clone();
            async move {
                node.learn_delete(deadline);
                let on = &node;
                let (deleted, took) = node
                    .delete_after(&writes, |mut c, link| async move {
                        delete_one(&mut c, on, link, &key, &token, &announce).await
                    })
                    .await;
                // Not sent, as nothing of ours is there: an answer like any other.
                (deleted.map(|d| Some(d.unwrap_or(0))), took)
            }
        },
        late,
    )
    .await;
    report_of(nodes, tally)
}

/// What a release says to every node: the channel and release id its notice carries
/// (empty: no notice), and the compare-and-delete script's request, which is the same
/// bytes for every node that runs it.
struct Announce {
    channel: String,
    release_id: String,
    script: redis::Cmd,
}

/// Per node: 1 deleted, 0 (or no value: nothing sent) nothing there, anything else not
/// ours.
fn report_of(nodes: &[Arc<Node>], tally: Tally<i64>) -> ReleaseReport {
    ReleaseReport {
        nodes: nodes
            .iter()
            .zip(tally.answers)
            .map(|(node, answer)| NodeReport {
                addr: node.addr().to_owned(),
                latency: answer.as_ref().map(|(_, took)| *took),
                outcome: outcome_of(answer),
            })
            .collect(),
    }
}

/// What one node's answer to a delete (`None`: none yet) says.
fn outcome_of(answer: Option<quorum::Answer<i64>>) -> ReleaseOutcome {
    match answer {
        Some((Ok(Some(1)), _)) => ReleaseOutcome::Released,
        Some((Ok(Some(0) | None), _)) => ReleaseOutcome::AlreadyGone,
        Some((Ok(Some(_)), _)) => ReleaseOutcome::NotOurs,
        Some((Err(e), _)) => ReleaseOutcome::Failed(e),
        None => ReleaseOutcome::Pending,
    }
}

/// 1 released, 0 gone, −1 not ours (the native commands cannot tell gone from not ours
/// and report 0 for both). On `link`'s connection: the native command its server has, or
/// the script.
///
/// A server that answers the native command as unknown (or its syntax as wrong) deleted
/// nothing: it is no longer the server the probe asked (a proxy in front failed over to an
/// older one). The script follows on the same connection, so the release still deletes at
/// once, and still after everything sent before it (the `SET` it must follow). A request
/// sent after the release may reach the server before the script; that is harmless, as
/// the script deletes only a key that holds our token (a later `SET NX` of ours that comes
/// first finds our key and is refused, as it would have been a moment earlier). The
/// connection keeps to the script from then on.
async fn delete_one(
    c: &mut crate::conn::Conn,
    node: &Node,
    link: Link,
    key: &str,
    token: &Token,
    announce: &Announce,
) -> redis::RedisResult<i64> {
    let (channel, release_id) = (&announce.channel, &announce.release_id);
    let native_cmd = match link.dialect.delete {
        NativeDelete::None => return announce.script.query_async(c).await,
        NativeDelete::DelIfEq => {
            let mut cmd = redis::cmd("DELIFEQ");
            cmd.arg(key).arg(token.as_str());
            cmd
        }
        NativeDelete::DelEx => {
            let mut cmd = redis::cmd("DELEX");
            cmd.arg(key).arg("IFEQ").arg(token.as_str());
            cmd
        }
    };
    let deleted: i64 = match native_cmd.query_async(c).await {
        Ok(deleted) => deleted,
        Err(e) if crate::dialect::unknown_command(&e) || crate::dialect::not_understood(&e) => {
            node.delete_by_script(link);
            return announce.script.query_async(c).await;
        }
        Err(e) => return Err(e),
    };
    if deleted == 1 && !channel.is_empty() {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(release_id)
            .query_async(c)
            .await?;
    }
    Ok(deleted)
}
