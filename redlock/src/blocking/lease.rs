//! Blocking leases: the held lock and the renewing one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Home;
use crate::error::LockError;
use crate::fence::FenceToken;
use crate::lease::{NodeReport, ReleaseReport};
use crate::renew::{LeaseStatus, LossReason, RenewOptions};

/// A held lock, from [`Redlock::acquire`](super::Redlock::acquire): the async
/// [`crate::Lease`] with blocking calls.
///
/// Release it with [`release`](Lease::release). If it is only dropped, it is released in
/// the background on the client's thread (the client's shutdown, explicit or on the last
/// drop, waits for that release).
#[must_use = "a lease is released by release() (dropping it releases in the background, unreported)"]
#[derive(Debug)]
pub struct Lease {
    // Dropped before `home`: its background release is spawned while the runtime lives.
    inner: crate::Lease,
    home: Arc<Home>,
}

impl Lease {
    pub(super) fn new(inner: crate::Lease, home: Arc<Home>) -> Self {
        Lease { inner, home }
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        self.inner.resource()
    }

    /// The key set on the nodes (prefix + resource).
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The fencing token, when the client has fencing on. Fixed for the lease's life.
    pub fn fence(&self) -> Option<FenceToken> {
        self.inner.fence()
    }

    /// When the winning attempt started; validity is counted from here.
    pub fn acquired_at(&self) -> Instant {
        self.inner.acquired_at().into_std()
    }

    /// When the acquire returned; see [`crate::Lease::granted_at`].
    pub fn granted_at(&self) -> Instant {
        self.inner.granted_at().into_std()
    }

    /// The end of validity, moved on by each extend.
    pub fn valid_until(&self) -> Instant {
        self.inner.valid_until().into_std()
    }

    /// Validity left now (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.inner.remaining()
    }

    /// Whether validity is left now. Check it before each step of protected work.
    pub fn is_valid(&self) -> bool {
        self.inner.is_valid()
    }

    /// How long the winning attempt took.
    pub fn elapsed(&self) -> Duration {
        self.inner.elapsed()
    }

    /// Attempts made by the acquire that returned this lease.
    pub fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    /// What each node said to the winning attempt.
    pub fn nodes(&self) -> &[NodeReport] {
        self.inner.nodes()
    }

    /// The client's TTL.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl()
    }

    /// Resets the TTL through a majority; see [`crate::Lease::extend`]. Returns the new
    /// validity.
    ///
    /// # Errors
    /// As [`crate::Lease::extend`].
    pub fn extend(&mut self) -> Result<Duration, LockError> {
        self.home.block_on(self.inner.extend())
    }

    /// Extends with a TTL of your choosing for this extend only; see
    /// [`crate::Lease::extend_for`]. Returns the new validity.
    ///
    /// # Errors
    /// As [`crate::Lease::extend_for`].
    pub fn extend_for(&mut self, ttl: Duration) -> Result<Duration, LockError> {
        self.home.block_on(self.inner.extend_for(ttl))
    }

    /// Deletes our key on every node and wakes waiters, returning once a majority
    /// answered; see [`crate::Lease::release`].
    pub fn release(self) -> ReleaseReport {
        let Lease { inner, home } = self;
        home.block_on(inner.release())
    }

    /// Like [`release`](Self::release), waiting for every node; see
    /// [`crate::Lease::release_all`].
    pub fn release_all(self) -> ReleaseReport {
        let Lease { inner, home } = self;
        home.block_on(inner.release_all())
    }

    /// Hands the lease over for another process to adopt; see
    /// [`crate::Lease::into_handle`].
    pub fn into_handle(self) -> crate::handle::LeaseHandle {
        let Lease { inner, home: _home } = self;
        inner.into_handle()
    }

    /// Retires the resource's fence counter, then releases; see
    /// [`crate::Lease::retire_fence`].
    ///
    /// # Errors
    /// As [`crate::Lease::retire_fence`].
    pub fn retire_fence(self) -> Result<ReleaseReport, LockError> {
        let Lease { inner, home } = self;
        home.block_on(inner.retire_fence())
    }

    /// Hands the lease to a renewer on the client's thread; see
    /// [`crate::Lease::auto_renew`].
    pub fn auto_renew(self, options: RenewOptions) -> RenewingLease {
        let Lease { inner, home } = self;
        let inner = home.enter(|| inner.auto_renew(options));
        RenewingLease { inner, home }
    }
}

/// A lease kept alive by a renewer on the client's thread: the async
/// [`crate::RenewingLease`] with blocking calls. Poll [`is_held`](Self::is_held) between
/// steps of the work, or wait on [`lost`](Self::lost) in another thread. Dropping it stops
/// the renewer and releases in the background.
#[must_use = "dropping a renewing lease stops renewal and releases it"]
#[derive(Debug)]
pub struct RenewingLease {
    // Dropped before `home`, as in `Lease`.
    inner: crate::RenewingLease,
    home: Arc<Home>,
}

impl RenewingLease {
    /// The resource name.
    pub fn resource(&self) -> &str {
        self.inner.resource()
    }

    /// The fencing token, fixed across renewals.
    pub fn fence(&self) -> Option<FenceToken> {
        self.inner.fence()
    }

    /// The state now; see [`crate::RenewingLease::status`].
    pub fn status(&self) -> LeaseStatus {
        self.inner.status()
    }

    /// Whether the lease is still held now (renewed and within validity).
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// Blocks until the lease is lost, and says why — at the end of validity at the
    /// latest; see [`crate::RenewingLease::lost`].
    pub fn lost(&self) -> LossReason {
        self.home.block_on(self.inner.lost())
    }

    /// Like [`lost`](Self::lost), giving up after `timeout`: `None` if the lease is still
    /// held then.
    pub fn lost_within(&self, timeout: Duration) -> Option<LossReason> {
        // The timer is made inside, where the client's runtime is current.
        self.home
            .block_on(async { tokio::time::timeout(timeout, self.inner.lost()).await })
            .ok()
    }

    /// Stops the renewer and releases on every node; see
    /// [`crate::RenewingLease::release`].
    pub fn release(self) -> ReleaseReport {
        let RenewingLease { inner, home } = self;
        home.block_on(inner.release())
    }

    /// Stops the renewer and releases, waiting for every node; see
    /// [`crate::RenewingLease::release_all`].
    pub fn release_all(self) -> ReleaseReport {
        let RenewingLease { inner, home } = self;
        home.block_on(inner.release_all())
    }
}
