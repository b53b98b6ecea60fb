//! What the lock reports about itself: metrics through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`) and the outcome fields of its tracing spans.
//!
//! The crate only emits; the application chooses the exporter (Prometheus, StatsD, …) by
//! installing a `metrics` recorder. Without one, or without the feature, every call here
//! does nothing (without the feature it compiles to nothing).
//! [`describe`] registers the descriptions and units below with the installed recorder.
//!
//! | name | type | labels | moves when |
//! |---|---|---|---|
//! | `redlock_acquire_total` | counter | `outcome` | an `acquire` or `try_acquire` call returns |
//! | `redlock_acquire_seconds` | histogram (s) | `outcome` | the same: time from the call to its return, waiting included |
//! | `redlock_acquire_attempts` | histogram | – | an acquire call is granted, times out or runs out of retries: attempts (quorum rounds) it made |
//! | `redlock_wait_seconds` | histogram (s) | `outcome` | an `acquire` (the waiting one) returns granted, timed out or out of retries: time before its last attempt began, i.e. spent waiting for the holder |
//! | `redlock_node_errors_total` | counter | `node`, `kind` | a call to one node fails or misses its deadline (acquire, fence, extend, release and clean-up calls alike) |
//! | `redlock_extend_failures_total` | counter | – | a [`Lease::extend`](crate::Lease::extend) or [`Lease::extend_for`](crate::Lease::extend_for) call fails |
//! | `redlock_renew_failures_total` | counter | – | a background renewal of a [`RenewingLease`](crate::RenewingLease) fails (it is retried while validity is left) |
//! | `redlock_leases_lost_total` | counter | `reason` | a [`RenewingLease`](crate::RenewingLease) is lost: the moment [`lost`](crate::RenewingLease::lost) learns why |
//! | `redlock_handoff_wakeups_total` | counter | – | a release notice wakes a waiting `acquire` of this client before its retry delay (once per release, not once per node) |
//! | `redlock_held_back_total` | counter | – | a waiting `acquire` skips an attempt because a lease of this client holds the resource (the nodes would refuse it; see [`Redlock::acquire`](crate::Redlock::acquire)) |
//! | `redlock_quarantined_votes_total` | counter | `node` | a node's yes (acquire, fence write or extend) does not count because the node is in its restart quarantine or restarted since (see [`RestartQuarantine`](crate::config::RestartQuarantine)) |
//! | `redlock_not_durable_votes_total` | counter | `node` | with [`Durability::Fsync`](crate::Durability::Fsync), a node's yes (acquire, fence write or extend) does not count because the node did not report it fsynced to its append-only file: not in time, `appendonly no`, or a server without `WAITAOF` (the `kind` of the same failure in `redlock_node_errors_total` says which) |
//! | `redlock_node_restarts_total` | counter | `node` | a new connection to a node finds another `run_id` than the one before: the server restarted, and the votes it gave before are void |
//!
//! Label values:
//! - `outcome`: `granted`; `contended` (the resource is held: every node that answered
//!   without granting holds another owner's key, see [`LockError::is_contended`]);
//!   `unreachable` (nodes, not a holder, stood in the way: [`LockError::QuorumNotReached`]
//!   with failing or slow nodes, or [`LockError::NoValidityLeft`]); `error` (anything
//!   else: shut down, empty resource name, fence exhausted). A timed-out `acquire` counts
//!   as the outcome of its last attempt.
//! - `kind`: `timeout`, `redis` (an error reply or a broken connection), `auth`,
//!   `protocol` (a reply that is not RESP2, or of the wrong type), `backlog` (the node's
//!   connection is full of requests it has not answered), `same_server`, `fence_ahead` (a
//!   fence write found the counter already at or above the token: the attempt is refused),
//!   `quarantined`, `clock_jumped`, `not_durable`, `aof_disabled`, `no_waitaof`
//!   (see [`NodeError`]).
//! - `node`: the node's `host:port`.
//! - `reason`: `expired`, `gone`, `node_restarted`, `max_hold`, `shutdown` (see
//!   [`LossReason`]).
//!
//! Only acquire calls that return are counted: a dropped (cancelled) acquire future is not.
//! A plain [`Lease`] that runs out of validity is not a lost lease here:
//! only a renewing one is watched.
//!
//! # Tracing
//! The spans `redlock.acquire` and `redlock.try_acquire` record `outcome` (the values
//! above) and, when known, `attempts`; `redlock.extend` records `outcome` (`extended`,
//! `expired`, `gone`, `unreachable`, `error`); `redlock.release` records `released` (nodes
//! where our key was deleted) and `outcome`: `released` (on a majority), `partial` (on
//! fewer) or `none` (our key was nowhere: it had expired or was taken).

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{LockError, NodeError};
use crate::lease::{Lease, ReleaseReport};
use crate::renew::LossReason;

/// Counter, label `outcome`: acquire calls by how they ended.
pub const ACQUIRE_TOTAL: &str = "redlock_acquire_total";
/// Histogram (seconds), label `outcome`: how long acquire calls took.
pub const ACQUIRE_SECONDS: &str = "redlock_acquire_seconds";
/// Histogram: attempts made by acquire calls that were granted or timed out.
pub const ACQUIRE_ATTEMPTS: &str = "redlock_acquire_attempts";
/// Histogram (seconds), label `outcome`: time a waiting acquire spent before its last attempt.
pub const WAIT_SECONDS: &str = "redlock_wait_seconds";
/// Counter, labels `node`, `kind`: failed node calls.
pub const NODE_ERRORS_TOTAL: &str = "redlock_node_errors_total";
/// Counter: failed `Lease::extend` calls.
pub const EXTEND_FAILURES_TOTAL: &str = "redlock_extend_failures_total";
/// Counter: failed background renewals.
pub const RENEW_FAILURES_TOTAL: &str = "redlock_renew_failures_total";
/// Counter, label `reason`: renewing leases lost.
pub const LEASES_LOST_TOTAL: &str = "redlock_leases_lost_total";
/// Counter: waiting acquires woken by a release notice.
pub const HANDOFF_WAKEUPS_TOTAL: &str = "redlock_handoff_wakeups_total";
/// Counter: attempts a waiting acquire skipped because a lease of this client held the
/// resource.
pub const HELD_BACK_TOTAL: &str = "redlock_held_back_total";
/// Counter, label `node`: yes votes that did not count (restart quarantine).
pub const QUARANTINED_VOTES_TOTAL: &str = "redlock_quarantined_votes_total";
/// Counter, label `node`: yes votes that did not count (not reported fsynced, see
/// [`Durability::Fsync`](crate::Durability::Fsync)).
pub const NOT_DURABLE_VOTES_TOTAL: &str = "redlock_not_durable_votes_total";
/// Counter, label `node`: restarts seen (a new `run_id` on a new connection).
pub const NODE_RESTARTS_TOTAL: &str = "redlock_node_restarts_total";
/// Counter, labels `node` and `direction` (`forward`, `backward`): clock jumps seen by the
/// clock-jump guard.
pub const NODE_CLOCK_JUMPS_TOTAL: &str = "redlock_node_clock_jumps_total";

/// Registers each metric's description and unit with the installed recorder. Call it once
/// after installing the recorder (exporters show the descriptions as help text).
#[cfg(feature = "metrics")]
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_histogram};
    describe_counter!(
        ACQUIRE_TOTAL,
        Unit::Count,
        "Acquire calls by outcome (granted, contended, unreachable, error)."
    );
    describe_histogram!(
        ACQUIRE_SECONDS,
        Unit::Seconds,
        "Time from an acquire call to its return, waiting included, by outcome."
    );
    describe_histogram!(
        ACQUIRE_ATTEMPTS,
        Unit::Count,
        "Attempts (quorum rounds) made by acquire calls that were granted or timed out."
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "Time a waiting acquire spent before its last attempt began, by outcome."
    );
    describe_counter!(
        NODE_ERRORS_TOTAL,
        Unit::Count,
        "Node calls that failed or missed their deadline, by node and kind."
    );
    describe_counter!(
        EXTEND_FAILURES_TOTAL,
        Unit::Count,
        "Lease::extend calls that failed."
    );
    describe_counter!(
        RENEW_FAILURES_TOTAL,
        Unit::Count,
        "Background renewals that failed."
    );
    describe_counter!(
        LEASES_LOST_TOTAL,
        Unit::Count,
        "Renewing leases lost, by reason (expired, gone, max_hold, shutdown)."
    );
    describe_counter!(
        HANDOFF_WAKEUPS_TOTAL,
        Unit::Count,
        "Waiting acquires woken by a release notice before their retry delay."
    );
    describe_counter!(
        HELD_BACK_TOTAL,
        Unit::Count,
        "Attempts a waiting acquire skipped because a lease of this client held the resource."
    );
    describe_counter!(
        QUARANTINED_VOTES_TOTAL,
        Unit::Count,
        "Yes votes not counted because the node restarted less than the restart quarantine ago, by node."
    );
    describe_counter!(
        NOT_DURABLE_VOTES_TOTAL,
        Unit::Count,
        "Yes votes not counted because the node did not report them fsynced to its append-only file, by node."
    );
    describe_counter!(
        NODE_RESTARTS_TOTAL,
        Unit::Count,
        "Node restarts seen (a new run_id on a new connection), by node."
    );
    describe_counter!(
        NODE_CLOCK_JUMPS_TOTAL,
        Unit::Count,
        "Server clock jumps seen by the clock-jump guard, by node and direction."
    );
}

/// The `outcome` label of an acquire's result.
fn acquire_outcome(error: Option<&LockError>) -> &'static str {
    match error {
        None => "granted",
        Some(LockError::WaitTimeout { last, .. } | LockError::RetriesExhausted { last, .. }) => {
            acquire_outcome(Some(last))
        }
        Some(e) if e.is_contended() => "contended",
        Some(LockError::QuorumNotReached { .. } | LockError::NoValidityLeft { .. }) => {
            "unreachable"
        }
        Some(_) => "error",
    }
}

/// An acquire call returned. `waiting`: it was `acquire` (which waits), not `try_acquire`.
pub(crate) fn acquired(
    span: &tracing::Span,
    started: Instant,
    result: &Result<Lease, LockError>,
    waiting: bool,
) {
    let outcome = acquire_outcome(result.as_ref().err());
    let attempts = match result {
        Ok(lease) => Some(lease.attempts()),
        Err(
            LockError::WaitTimeout { attempts, .. } | LockError::RetriesExhausted { attempts, .. },
        ) => Some(*attempts),
        Err(_) if !waiting => Some(1),
        Err(_) => None,
    };
    span.record("outcome", outcome);
    if let Some(a) = attempts {
        span.record("attempts", a);
    }
    // Time before the last attempt began: until the winning attempt's start, or all of it.
    let waited = match result {
        Ok(lease) if waiting => Some(lease.acquired_at().saturating_duration_since(started)),
        Err(LockError::WaitTimeout { waited, .. } | LockError::RetriesExhausted { waited, .. }) => {
            Some(*waited)
        }
        _ => None,
    };
    #[cfg(feature = "metrics")]
    {
        ::metrics::counter!(ACQUIRE_TOTAL, "outcome" => outcome).increment(1);
        ::metrics::histogram!(ACQUIRE_SECONDS, "outcome" => outcome).record(started.elapsed());
        if let Some(a) = attempts.filter(|_| waiting || result.is_ok()) {
            ::metrics::histogram!(ACQUIRE_ATTEMPTS).record(f64::from(a));
        }
        if let Some(w) = waited {
            ::metrics::histogram!(WAIT_SECONDS, "outcome" => outcome).record(w);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (started, waited);
}

/// One node call failed.
pub(crate) fn node_error(node: &str, error: &NodeError) {
    #[cfg(feature = "metrics")]
    {
        let kind = match error {
            NodeError::Timeout(_) => "timeout",
            NodeError::Redis(_) => "redis",
            NodeError::Auth(_) => "auth",
            NodeError::Protocol(_) => "protocol",
            NodeError::SameServer(_) => "same_server",
            NodeError::FenceAhead(_) => "fence_ahead",
            NodeError::Backlog(_) => "backlog",
            NodeError::Quarantined { .. } => "quarantined",
            NodeError::ClockJumped { .. } => "clock_jumped",
            NodeError::NotDurable { .. } => "not_durable",
            NodeError::AofDisabled => "aof_disabled",
            NodeError::NoWaitAof(_) => "no_waitaof",
        };
        ::metrics::counter!(NODE_ERRORS_TOTAL, "node" => node.to_owned(), "kind" => kind)
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (node, error);
}

/// A `Lease::extend` call returned.
pub(crate) fn extended(span: &tracing::Span, result: &Result<Duration, LockError>) {
    let outcome = match result {
        Ok(_) => "extended",
        Err(LockError::LeaseLost { .. }) => "expired",
        Err(e) if e.is_contended() => "gone",
        Err(LockError::QuorumNotReached { .. } | LockError::NoValidityLeft { .. }) => "unreachable",
        Err(_) => "error",
    };
    span.record("outcome", outcome);
    #[cfg(feature = "metrics")]
    if result.is_err() {
        ::metrics::counter!(EXTEND_FAILURES_TOTAL).increment(1);
    }
}

/// A background renewal failed.
pub(crate) fn renew_failed() {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RENEW_FAILURES_TOTAL).increment(1);
}

/// A renewing lease was lost.
pub(crate) fn lease_lost(reason: LossReason) {
    #[cfg(feature = "metrics")]
    {
        let reason = match reason {
            LossReason::Expired => "expired",
            LossReason::Gone => "gone",
            LossReason::NodeRestarted => "node_restarted",
            LossReason::ClockJumped => "clock_jumped",
            LossReason::MaxHoldReached => "max_hold",
            LossReason::Shutdown => "shutdown",
        };
        ::metrics::counter!(LEASES_LOST_TOTAL, "reason" => reason).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A node's yes did not count: it is in its restart quarantine.
pub(crate) fn quarantined_vote(node: &str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(QUARANTINED_VOTES_TOTAL, "node" => node.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = node;
}

/// A node's yes did not count: it was not reported fsynced (see `durable`).
pub(crate) fn not_durable_vote(node: &str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(NOT_DURABLE_VOTES_TOTAL, "node" => node.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = node;
}

/// A new connection found that a node's server restarted.
pub(crate) fn node_restarted(node: &str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(NODE_RESTARTS_TOTAL, "node" => node.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = node;
}

/// The clock-jump guard saw a node's clock jump (`forward` or `backward`).
pub(crate) fn clock_jumped(node: &str, direction: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(NODE_CLOCK_JUMPS_TOTAL, "node" => node.to_owned(), "direction" => direction)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (node, direction);
}

/// A release notice woke a waiting acquire.
pub(crate) fn handoff_wakeup() {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(HANDOFF_WAKEUPS_TOTAL).increment(1);
}

/// A waiting acquire skipped an attempt: a lease of this client holds the resource.
pub(crate) fn attempt_held_back() {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(HELD_BACK_TOTAL).increment(1);
}

/// A release returned; `quorum` is the client's majority.
pub(crate) fn released(span: &tracing::Span, report: &ReleaseReport, quorum: usize) {
    let released = report.released();
    let outcome = if released >= quorum {
        "released"
    } else if released > 0 {
        "partial"
    } else {
        "none"
    };
    span.record("released", released);
    span.record("outcome", outcome);
}
