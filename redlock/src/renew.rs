//! Background renewal, and the signal that tells a holder its lease is gone.

use std::fmt;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::fence::FenceToken;
use crate::lease::{Lease, ReleaseReport};

/// Why a lease stopped being held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// Validity ran out before a renewal succeeded (nodes slow, down or partitioned).
    Expired,
    /// A majority of nodes no longer hold our token: the keys were deleted, expired or
    /// lost with a node's data, and someone else may hold the lock now.
    Gone,
    /// The configured cap on total hold time was reached; renewal stopped and the lease
    /// ends at its current validity.
    MaxHoldReached,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::Expired => "validity ran out before it could be renewed",
            LossReason::Gone => "a majority of nodes no longer hold our token",
            LossReason::MaxHoldReached => "the maximum hold time was reached",
        })
    }
}

/// The lease's state as the renewer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseStatus {
    /// Held, valid until this instant.
    Held {
        /// End of validity.
        valid_until: Instant,
    },
    /// Not held any more.
    Lost(LossReason),
}

/// Options of [`Lease::auto_renew`].
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RenewOptions {
    /// Time between renewals (default: a third of the TTL).
    pub interval: Option<Duration>,
    /// Stop renewing after this total hold time (default: no cap).
    pub max_hold: Option<Duration>,
}

impl RenewOptions {
    /// Renew every `interval`.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// Stop renewing after holding for `max_hold`.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }
}

/// A lease kept alive by a background task. Await [`lost`](RenewingLease::lost) (e.g. in a
/// `select!` beside the work) or poll [`status`](RenewingLease::status), and stop work
/// when it is lost. [`release`](RenewingLease::release) stops the renewer and releases.
/// Dropping it stops the renewer and releases in the background.
#[must_use = "dropping a renewing lease stops renewal and releases it"]
#[derive(Debug)]
pub struct RenewingLease {
    resource: String,
    fence: Option<FenceToken>,
    status: watch::Receiver<LeaseStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Lease>>,
}

impl RenewingLease {
    pub(crate) fn start(mut lease: Lease, options: RenewOptions) -> Self {
        let interval = options
            .interval
            .unwrap_or(lease.ttl() / 3)
            .max(Duration::from_millis(1));
        let (status_tx, status) = watch::channel(LeaseStatus::Held {
            valid_until: lease.valid_until(),
        });
        let (stop, stopped) = oneshot::channel();
        let resource = lease.resource().to_owned();
        let fence = lease.fence();
        // The task owns the lease now; it hands it back for the release.
        lease.disarm();
        let task = tokio::spawn(renew_loop(
            lease,
            interval,
            options.max_hold,
            status_tx,
            stopped,
        ));
        RenewingLease {
            resource,
            fence,
            status,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The fencing token, fixed across renewals.
    pub fn fence(&self) -> Option<FenceToken> {
        self.fence
    }

    /// The state now.
    pub fn status(&self) -> LeaseStatus {
        *self.status.borrow()
    }

    /// Whether the lease is still held now (renewed and within validity).
    pub fn is_held(&self) -> bool {
        match self.status() {
            LeaseStatus::Held { valid_until } => Instant::now() < valid_until,
            LeaseStatus::Lost(_) => false,
        }
    }

    /// Resolves when the lease is lost, with the reason.
    pub async fn lost(&self) -> LossReason {
        let mut rx = self.status.clone();
        loop {
            if let LeaseStatus::Lost(reason) = *rx.borrow_and_update() {
                return reason;
            }
            if rx.changed().await.is_err() {
                // The renewer ended without a verdict: treat as expired at its validity.
                return LossReason::Expired;
            }
        }
    }

    /// Stops the renewer and releases on every node.
    pub async fn release(mut self) -> ReleaseReport {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => match task.await {
                Ok(mut lease) => {
                    lease.rearm();
                    lease.release().await
                }
                Err(_) => ReleaseReport { nodes: Vec::new() },
            },
            None => ReleaseReport { nodes: Vec::new() },
        }
    }
}

impl Drop for RenewingLease {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let (Some(task), Ok(rt)) = (self.task.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(async move {
                if let Ok(mut lease) = task.await {
                    lease.rearm();
                    let _ = lease.release().await;
                }
            });
        }
    }
}

/// Retry pause after a failed renewal that may still succeed.
fn retry_pause(interval: Duration) -> Duration {
    (interval / 4).max(Duration::from_millis(1))
}

async fn renew_loop(
    mut lease: Lease,
    interval: Duration,
    max_hold: Option<Duration>,
    status: watch::Sender<LeaseStatus>,
    mut stopped: oneshot::Receiver<()>,
) -> Lease {
    let hold_until = max_hold.map(|m| lease.acquired_at() + m);
    let mut next = Instant::now() + interval;
    loop {
        let wake = next.min(lease.valid_until());
        let wake = hold_until.map_or(wake, |h| wake.min(h));
        tokio::select! {
            _ = &mut stopped => return lease,
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        if hold_until.is_some_and(|h| now >= h) {
            let _ = status.send(LeaseStatus::Lost(LossReason::MaxHoldReached));
            let _ = stopped.await;
            return lease;
        }
        if now >= lease.valid_until() {
            let _ = status.send(LeaseStatus::Lost(LossReason::Expired));
            let _ = stopped.await;
            return lease;
        }
        if now < next {
            continue;
        }
        let nodes = lease.client().nodes();
        let required = lease.client().quorum();
        match lease.extend_inner().await {
            Ok(_) => {
                let _ = status.send(LeaseStatus::Held {
                    valid_until: lease.valid_until(),
                });
                next = Instant::now() + interval;
            }
            Err(crate::LockError::QuorumNotReached { failures, .. })
                if failures
                    .iter()
                    .filter(|f| f.reason == crate::error::NodeFailureReason::NotOurs)
                    .count()
                    > nodes - required =>
            {
                tracing::warn!(resource = %lease.resource(), "lease lost: keys gone on a majority");
                let _ = status.send(LeaseStatus::Lost(LossReason::Gone));
                let _ = stopped.await;
                return lease;
            }
            Err(e) => {
                tracing::debug!(resource = %lease.resource(), error = %e, "renewal failed; retrying");
                next = Instant::now() + retry_pause(interval);
            }
        }
    }
}
