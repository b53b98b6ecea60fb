//! Background renewal, and the signal that tells a holder its lease is gone.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Shared;
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
    /// A node whose yes the lease counted restarted (a new `run_id`, seen when this client
    /// next connected to it), and fewer than a quorum of the lease's votes are from
    /// servers that have not: the keys may be gone there, and someone else may hold the
    /// lock once that node's restart quarantine ends (see
    /// [`RestartQuarantine`](crate::config::RestartQuarantine)).
    NodeRestarted,
    /// A node whose yes the lease counted was seen with its clock leapt forward (the
    /// clock-jump guard), and fewer than a quorum of the lease's votes were given since
    /// or by nodes that did not jump: the keys may have expired early there, and someone
    /// else may hold the lock once that node's quarantine ends.
    ClockJumped,
    /// The configured cap on total hold time was reached; renewal stopped and the lease
    /// ends at its current validity.
    MaxHoldReached,
    /// The client was shut down ([`Redlock::shutdown`](crate::Redlock::shutdown)): the
    /// renewer stopped and released the lease.
    Shutdown,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::Expired => "validity ran out before it could be renewed",
            LossReason::Gone => "a majority of nodes no longer hold our token",
            LossReason::NodeRestarted => {
                "a node that counted toward the majority restarted and may have forgotten our key"
            }
            LossReason::ClockJumped => {
                "the clock of a node that counted toward the majority jumped forward: our key there may have expired early"
            }
            LossReason::MaxHoldReached => "the maximum hold time was reached",
            LossReason::Shutdown => "the lock client was shut down",
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

impl LeaseStatus {
    fn held_until(&self) -> Option<Instant> {
        match self {
            LeaseStatus::Held { valid_until } => Some(*valid_until),
            LeaseStatus::Lost(_) => None,
        }
    }
}

/// Options of [`Lease::auto_renew`].
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RenewOptions {
    /// Time between renewals (default: a third of the TTL). One not shorter than the
    /// validity a renewal gives (TTL − drift allowance) is replaced by the default: see
    /// [`interval`](RenewOptions::interval).
    pub interval: Option<Duration>,
    /// Stop renewing after this total hold time (default: no cap).
    pub max_hold: Option<Duration>,
}

impl RenewOptions {
    /// Renew every `interval`, counted from the end of the previous renewal.
    ///
    /// It must be shorter than the validity a renewal gives, the lease's TTL less the
    /// drift allowance ([`Redlock::drift`](crate::Redlock::drift)): a lease renewed less
    /// often expires before each renewal is due. `auto_renew` replaces a longer interval
    /// by the default (a third of the TTL) and logs a warning, rather than hand back a
    /// renewer that never renews. Leave room for the renewal's own round trip, and for a
    /// failed renewal to be retried: the default allows two failures before the lease
    /// expires.
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

/// What the renewer hands back when it stops: the lease to release, or the report of
/// the release it already made (at shutdown).
type Handback = Result<Lease, ReleaseReport>;

/// A lease kept alive by a background task. Await [`lost`](RenewingLease::lost) (e.g. in a
/// `select!` beside the work) or poll [`status`](RenewingLease::status), and stop work
/// when it is lost. [`release`](RenewingLease::release) stops the renewer and releases.
/// Dropping it stops the renewer and releases in the background.
///
/// The loss signal is never late: [`lost`](RenewingLease::lost) resolves and
/// [`status`](RenewingLease::status) says [`LossReason::Expired`] at the end of validity
/// at the latest, whatever the renewer is doing (a renewal still waiting on slow nodes
/// cannot make the holder believe it holds the lock past its validity).
///
/// Nor does a validity it announced shrink: after an
/// [`extend_for`](Lease::extend_for) longer than the client's TTL, renewals (with the
/// client's TTL) start only once they no longer end the lease earlier. A holder that read
/// `Held { valid_until }` can count on that instant; only keys found gone on a majority,
/// or a voting node's restart, end the lease before it.
#[must_use = "dropping a renewing lease stops renewal and releases it"]
#[derive(Debug)]
pub struct RenewingLease {
    resource: String,
    fence: Option<FenceToken>,
    status: watch::Receiver<LeaseStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Handback>>,
    /// The lease itself when no runtime could run a renewer (see `start`).
    idle: Option<Lease>,
    shared: Arc<Shared>,
}

impl RenewingLease {
    pub(crate) fn start(mut lease: Lease, options: RenewOptions) -> Self {
        let settings = lease.client().settings();
        let interval = renewal_interval(options.interval, settings.ttl, settings.drift);
        // Subscribed before the lease's votes are checked: a restart seen after the check
        // wakes the renewer, one seen before it (by any call of this client, before or
        // after the lease was handed over) is in the check. The holder hears of a void
        // lease at once, not at the first renewal.
        let restarts = lease.client().shared().restarts();
        let (status_tx, status) = watch::channel(if lease.restart_voided() {
            LeaseStatus::Lost(lease.void_reason())
        } else {
            LeaseStatus::Held {
                valid_until: lease.valid_until(),
            }
        });
        let (stop, stopped) = oneshot::channel();
        let resource = lease.resource().to_owned();
        let fence = lease.fence();
        let shared = Arc::clone(lease.client().shared());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Nothing can renew without a runtime: the lease is held until its validity
            // ends, and `release` releases it.
            return RenewingLease {
                resource,
                fence,
                status,
                stop: None,
                task: None,
                idle: Some(lease),
                shared,
            };
        };
        // The task owns the lease now; it hands it back for the release.
        lease.disarm();
        let task = shared.tasks().spawn_on(
            renew_loop(
                lease,
                interval,
                options.max_hold,
                restarts,
                status_tx,
                stopped,
                shared.closing().clone(),
            ),
            &runtime,
        );
        RenewingLease {
            resource,
            fence,
            status,
            stop: Some(stop),
            task: Some(task),
            idle: None,
            shared,
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

    /// The state now. Past the end of validity it is [`LossReason::Expired`] even if the
    /// renewer has not said so yet (a renewal may still be waiting on slow nodes).
    pub fn status(&self) -> LeaseStatus {
        match *self.status.borrow() {
            LeaseStatus::Held { valid_until } if Instant::now() >= valid_until => {
                LeaseStatus::Lost(LossReason::Expired)
            }
            status => status,
        }
    }

    /// Whether the lease is still held now (renewed and within validity).
    pub fn is_held(&self) -> bool {
        match self.status() {
            LeaseStatus::Held { valid_until } => Instant::now() < valid_until,
            LeaseStatus::Lost(_) => false,
        }
    }

    /// Resolves when the lease is lost, with the reason — at the end of validity at the
    /// latest, whatever the renewer is doing.
    pub async fn lost(&self) -> LossReason {
        let mut rx = self.status.clone();
        loop {
            let valid_until = match *rx.borrow_and_update() {
                LeaseStatus::Lost(reason) => return reason,
                LeaseStatus::Held { valid_until } => valid_until,
            };
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        // The renewer ended without a verdict: expired at its validity.
                        tokio::time::sleep_until(valid_until).await;
                        return LossReason::Expired;
                    }
                }
                () = tokio::time::sleep_until(valid_until) => return LossReason::Expired,
            }
        }
    }

    /// Stops the renewer and releases as [`Lease::release`] does (returns once a majority
    /// answered). After a shutdown, the report of the release the renewer made then.
    ///
    /// Cancel-safe: dropping the returned future before it finishes has the outcome of
    /// dropping the lease (the renewer stops and the keys are released in the background).
    pub async fn release(self) -> ReleaseReport {
        self.release_with(false).await
    }

    /// Stops the renewer and releases as [`Lease::release_all`] does (waits for every
    /// node).
    pub async fn release_all(self) -> ReleaseReport {
        self.release_with(true).await
    }

    async fn release_with(mut self, all: bool) -> ReleaseReport {
        let release = |lease: Lease| async move {
            if all {
                lease.release_all().await
            } else {
                lease.release().await
            }
        };
        if let Some(lease) = self.idle.take() {
            return release(lease).await;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The task stays ours until it has handed the lease back: if this future is
        // dropped while waiting, `Drop` still finds it and releases in the background.
        let Some(task) = self.task.as_mut() else {
            return ReleaseReport::default();
        };
        let handback = task.await;
        self.task = None;
        match handback {
            Ok(Ok(mut lease)) => {
                lease.rearm();
                release(lease).await
            }
            Ok(Err(report)) => report,
            Err(_) => ReleaseReport::default(),
        }
    }
}

impl Drop for RenewingLease {
    fn drop(&mut self) {
        // An idle lease drops with us and releases in the background by itself.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            // The renewer is tracked; so is the release that follows it. A renewer that
            // already released (shutdown) hands back its report, nothing to do.
            self.shared.spawn(async move {
                if let Ok(Ok(mut lease)) = task.await {
                    lease.rearm();
                    let _ = lease.release().await;
                }
            });
        }
    }
}

/// The time between renewals of a lease whose client has `ttl` and `drift`: `asked`, or
/// a third of the TTL when nothing was asked or when `asked` is not shorter than the
/// validity a renewal gives (`ttl − drift`). Such an interval never renews: the lease
/// expires before the renewal is due (`interval(ttl)` was lost as expired after one
/// validity, with no extend sent). `auto_renew` cannot refuse it (it returns no error, and
/// its caller's lease would be lost with the refusal), so it renews as if no interval had
/// been asked, and says so.
fn renewal_interval(asked: Option<Duration>, ttl: Duration, drift: Duration) -> Duration {
    let default = ttl.checked_div(3).unwrap_or(Duration::ZERO);
    let every = match (asked, crate::validity::validity(ttl, Duration::ZERO, drift)) {
        (Some(asked), Some(longest)) if asked >= longest => {
            tracing::warn!(
                ?asked,
                ?longest,
                instead = ?default,
                "renewal interval not shorter than the validity a renewal gives: the lease \
                 would expire before each renewal; renewing every third of the TTL instead \
                 (ask for an interval under the TTL less the drift allowance)"
            );
            default
        }
        (Some(asked), _) => asked,
        (None, _) => default,
    };
    every.max(Duration::from_millis(1))
}

/// Retry pause after a failed renewal that may still succeed.
fn retry_pause(interval: Duration) -> Duration {
    interval
        .checked_div(4)
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_millis(1))
}

/// The earliest moment a renewal with the lease's client TTL ends no earlier than the
/// lease's validity does now (`None`: at once — the TTL leaves no validity, or the
/// subtraction would leave the clock).
fn first_renewal_that_keeps(lease: &Lease) -> Option<Instant> {
    let settings = lease.client().settings();
    let fresh = crate::validity::validity(settings.ttl, Duration::ZERO, settings.drift)?;
    lease.valid_until().checked_sub(fresh)
}

/// `now + d`, or a year from now when that does not fit the clock (a renewal due that
/// far away is practically never due).
fn after(now: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(365 * 24 * 3600);
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

async fn renew_loop(
    mut lease: Lease,
    interval: Duration,
    max_hold: Option<Duration>,
    mut restarts: watch::Receiver<u64>,
    status: watch::Sender<LeaseStatus>,
    mut stopped: oneshot::Receiver<()>,
    closing: CancellationToken,
) -> Handback {
    // A cap too far away to represent is no cap.
    let hold_until = max_hold.and_then(|m| lease.acquired_at().checked_add(m));
    let mut next = after(Instant::now(), interval);
    let verdict = loop {
        // A restart seen by any call of this client may void the lease at once: the holder
        // hears of it then, not at the next renewal. Checked before the first wait too,
        // for one seen before the renewer started (`start` subscribed before its check).
        if lease.restart_voided() {
            break lease.void_reason();
        }
        let wake = next.min(lease.valid_until());
        let wake = hold_until.map_or(wake, |h| wake.min(h));
        tokio::select! {
            _ = &mut stopped => return Ok(lease),
            () = closing.cancelled() => break LossReason::Shutdown,
            Ok(()) = restarts.changed() => continue,
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        if hold_until.is_some_and(|h| now >= h) {
            break LossReason::MaxHoldReached;
        }
        if now >= lease.valid_until() {
            break LossReason::Expired;
        }
        if now < next {
            continue;
        }
        // A renewal with the client's TTL must not end the lease before the validity it
        // already has (after an `extend_for` longer than the TTL): a holder may have read
        // that validity from `status` a moment ago and be writing on it. Wait until a
        // renewal keeps it.
        if let Some(keeps) = first_renewal_that_keeps(&lease)
            && now < keeps
        {
            next = keeps;
            continue;
        }
        let nodes = lease.client().nodes();
        let required = lease.client().quorum();
        // The end this renewal's keys will have, from now: after the wait above it is no
        // earlier than the validity (the bound is the extend's own rule, kept as a net);
        // the holder hears of any change before the renewal is sent.
        let client = lease.client().clone();
        let valid_until = lease.bound_validity_for(&client, Instant::now());
        if status.borrow().held_until() != Some(valid_until) {
            let _ = status.send(LeaseStatus::Held { valid_until });
        }
        // The renewal races the end of validity: the holder must hear of the loss then,
        // not when the slowest node's deadline has passed.
        let renewed = tokio::select! {
            r = lease.extend_inner() => r,
            () = tokio::time::sleep_until(valid_until) => break LossReason::Expired,
            () = closing.cancelled() => break LossReason::Shutdown,
            _ = &mut stopped => return Ok(lease),
        };
        if renewed.is_err() {
            crate::metrics::renew_failed();
        }
        match renewed {
            // Done, but only after validity ended: the holder has been told (or may have
            // been: `status` and `lost` watch the clock) that the lease is lost, and a loss
            // is final.
            Ok(_) if Instant::now() >= valid_until => break LossReason::Expired,
            Ok(_) => {
                let _ = status.send(LeaseStatus::Held {
                    valid_until: lease.valid_until(),
                });
                next = after(Instant::now(), interval);
            }
            Err(crate::LockError::LeaseLost {
                reason: reason @ (LossReason::NodeRestarted | LossReason::ClockJumped),
                ..
            }) => {
                tracing::warn!(resource = %lease.resource(), %reason, "lease lost: its majority's votes were voided");
                break reason;
            }
            Err(crate::LockError::QuorumNotReached { failures, .. })
                if failures
                    .iter()
                    .filter(|f| f.reason == crate::error::NodeFailureReason::NotOurs)
                    .count()
                    > nodes.saturating_sub(required) =>
            {
                tracing::warn!(resource = %lease.resource(), "lease lost: keys gone on a majority");
                break LossReason::Gone;
            }
            Err(e) => {
                tracing::debug!(resource = %lease.resource(), error = %e, "renewal failed; retrying");
                next = after(Instant::now(), retry_pause(interval));
            }
        }
    };
    crate::metrics::lease_lost(verdict);
    let _ = status.send(LeaseStatus::Lost(verdict));
    if verdict != LossReason::Shutdown {
        // Keep the lease until the holder releases it, or the client shuts down.
        tokio::select! {
            _ = &mut stopped => return Ok(lease),
            () = closing.cancelled() => {}
        }
    }
    // Shutdown: release here, so that `shutdown` covers it.
    lease.rearm();
    Err(lease.release().await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_that_could_never_renew_is_replaced_by_the_default() {
        let (ttl, drift) = (Duration::from_secs(3), Duration::from_millis(32));
        let default = Duration::from_secs(1);
        assert_eq!(renewal_interval(None, ttl, drift), default);
        let just_under = ttl - drift - Duration::from_millis(1);
        for kept in [Duration::from_millis(100), just_under] {
            assert_eq!(renewal_interval(Some(kept), ttl, drift), kept);
        }
        for never in [ttl - drift, ttl, Duration::MAX] {
            assert_eq!(
                renewal_interval(Some(never), ttl, drift),
                default,
                "{never:?}"
            );
        }
        assert_eq!(
            renewal_interval(Some(Duration::ZERO), ttl, drift),
            Duration::from_millis(1),
            "a busy loop is no interval either"
        );
    }
}
