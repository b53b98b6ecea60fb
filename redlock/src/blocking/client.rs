//! The blocking client: acquire and shutdown.

use std::sync::Arc;
use std::time::Duration;

use super::{BuildError, Home, Lease};
use crate::config::Builder;
use crate::error::{ConfigError, LockError};

/// A Redlock client for code that is not on Tokio: the async [`crate::Redlock`] with
/// blocking calls (see [the module docs](crate::blocking) for how it runs). Cheap to
/// clone; clones share connections and the runtime thread.
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fenced_redlock::blocking::Redlock;
///
/// let redlock = Redlock::new(Redlock::builder([
///     "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
/// ]))?;
/// match redlock.try_acquire("invoice:42") {
///     Ok(lease) => { /* work */ lease.release(); }
///     Err(e) if e.is_contended() => println!("busy, try later"),
///     Err(e) => return Err(e.into()),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Redlock {
    inner: crate::Redlock,
    home: Arc<Home>,
}

impl Redlock {
    /// Starts a [`Builder`] for these node URLs; pass it to [`Redlock::new`].
    pub fn builder<I, S>(urls: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Builder::new(urls)
    }

    /// Builds the client from `builder` and starts its runtime thread. Connections are
    /// made on first use, as with the async client.
    ///
    /// # Errors
    /// [`BuildError::Config`] as [`Builder::build`]; [`BuildError::Runtime`] when the
    /// thread or its runtime cannot be started.
    pub fn new(builder: Builder) -> Result<Redlock, BuildError> {
        let inner = builder.build()?;
        let home = Arc::new(Home::start(inner.clone())?);
        Ok(Redlock { inner, home })
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.inner.nodes()
    }

    /// Votes needed: `nodes / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// The `host:port` of each node, in configuration order.
    pub fn node_addrs(&self) -> Vec<String> {
        self.inner.node_addrs()
    }

    /// Lease time to live.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl()
    }

    /// Per-node call deadline.
    pub fn node_timeout(&self) -> Duration {
        self.inner.node_timeout()
    }

    /// Drift allowance subtracted from every validity.
    pub fn drift(&self) -> Duration {
        self.inner.drift()
    }

    /// Whether leases carry fencing tokens.
    pub fn fencing_enabled(&self) -> bool {
        self.inner.fencing_enabled()
    }

    /// When a node's yes counts; see [`crate::Builder::durability`].
    pub fn durability(&self) -> crate::Durability {
        self.inner.durability()
    }

    /// The same client (connections, thread, background work) with another TTL; see
    /// [`crate::Redlock::with_ttl`].
    ///
    /// # Errors
    /// As [`Builder::build`] for the new TTL.
    pub fn with_ttl(&self, ttl: Duration) -> Result<Redlock, ConfigError> {
        Ok(Redlock {
            inner: self.inner.with_ttl(ttl)?,
            home: Arc::clone(&self.home),
        })
    }

    /// The same client with fencing switched on or off.
    pub fn with_fencing(&self, on: bool) -> Redlock {
        Redlock {
            inner: self.inner.with_fencing(on),
            home: Arc::clone(&self.home),
        }
    }

    /// One attempt; see [`crate::Redlock::try_acquire`].
    ///
    /// # Errors
    /// As [`crate::Redlock::try_acquire`].
    pub fn try_acquire(&self, resource: &str) -> Result<Lease, LockError> {
        let lease = self.home.block_on(self.inner.try_acquire(resource))?;
        Ok(Lease::new(lease, Arc::clone(&self.home)))
    }

    /// Retries until acquired or `wait` has passed, woken early by releases; see
    /// [`crate::Redlock::acquire`]. Blocks the calling thread meanwhile.
    ///
    /// # Errors
    /// As [`crate::Redlock::acquire`].
    pub fn acquire(&self, resource: &str, wait: Duration) -> Result<Lease, LockError> {
        let lease = self.home.block_on(self.inner.acquire(resource, wait))?;
        Ok(Lease::new(lease, Arc::clone(&self.home)))
    }

    /// Takes over a lease handed over by [`crate::Lease::into_handle`] (or
    /// [`Lease::into_handle`]); see [`crate::Redlock::adopt`]: no validity is known until
    /// [`Lease::extend`] succeeds.
    ///
    /// # Errors
    /// As [`crate::Redlock::adopt`].
    pub fn adopt(&self, handle: crate::handle::LeaseHandle) -> Result<Lease, LockError> {
        let lease = self.inner.adopt(handle)?;
        Ok(Lease::new(lease, Arc::clone(&self.home)))
    }

    /// Waits (bounded) for background work — releases of dropped leases, clean-ups,
    /// renewers, which it stops and releases — then refuses new acquires; see
    /// [`crate::Redlock::shutdown`]. Dropping the last clone and lease does the same;
    /// call it to learn whether everything finished.
    ///
    /// # Errors
    /// [`LockError::ShutdownTimedOut`] when work was still running at the bound.
    pub fn shutdown(&self) -> Result<(), LockError> {
        self.home.block_on(self.inner.shutdown())
    }
}
