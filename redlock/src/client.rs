//! The client: acquire by quorum, with or without waiting, and its shutdown.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::{Builder, Settings};
use crate::error::{ConfigError, LockError, NodeError};
use crate::fence::FenceToken;
use crate::lease::{Lease, NodeOutcome, NodeReport};
use crate::node::Node;
use crate::notify::{Notifier, Watcher};
use crate::quarantine::{Guards, Lengths, Restarts};
use crate::quorum::{self, Tally, Until};
use crate::room::Writes;
use crate::script;
use crate::token::Token;
use crate::validity;
use std::future::Future;

/// Pause before looking again when an attempt made on a release notice failed.
const RECHECK_AFTER_NOTICE: Duration = Duration::from_millis(10);

/// Slack added to the shutdown bound for scheduling and connection set-up.
const SHUTDOWN_SLACK: Duration = Duration::from_millis(250);

/// Connections, notification tasks and background work, shared by clones and by leases.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Arc<Node>>,
    notifier: OnceLock<Arc<Notifier>>,
    /// Every background task that may still touch our keys: failed-attempt and cancelled
    /// clean-ups, releases of dropped leases, renewers, in-flight calls handed off by the
    /// quorum. `shutdown` waits for them.
    tasks: TaskTracker,
    /// Cancelled by `shutdown`: renewers release and stop, notifiers stop.
    closing: CancellationToken,
    /// The longest node deadline of any client sharing these connections (`with_ttl`
    /// clients have their own): bounds how long a background task can run.
    longest_deadline: Mutex<Duration>,
    /// The runtime of a blocking client: its background work runs there, wherever the
    /// drop that started it happened.
    home: OnceLock<tokio::runtime::Handle>,
    /// The restart quarantine and clock-jump guard of every client sharing these
    /// connections, merged to the strictest any of them needs (see `quarantine`); `None`
    /// when both are off.
    guards: Mutex<Option<Guards>>,
    /// Told of every restart a node sees.
    restarts: Arc<Restarts>,
    /// The TTL + drift of every TTL used, since when (the nodes read it for `Auto`).
    lengths: Arc<Lengths>,
    /// The keys this client's leases hold now: its waiters do not ask the nodes for them
    /// (see `held`).
    pub(crate) held: crate::held::Held,
}

impl Shared {
    pub(crate) fn new(
        nodes: Vec<Node>,
        deadline: Duration,
        restarts: Arc<Restarts>,
        lengths: Arc<Lengths>,
    ) -> Self {
        Shared {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            notifier: OnceLock::new(),
            tasks: TaskTracker::new(),
            closing: CancellationToken::new(),
            longest_deadline: Mutex::new(deadline),
            home: OnceLock::new(),
            guards: Mutex::new(None),
            restarts,
            lengths,
            held: crate::held::Held::default(),
        }
    }

    /// The guards now in force, `None` when both are off.
    pub(crate) fn guards(&self) -> Option<Guards> {
        *self
            .guards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Grows the guards to cover `settings`' TTL (see [`RestartQuarantine::Auto`](crate::config::RestartQuarantine::Auto)),
    /// in use from `since` (`None`: from the beginning, the builder's TTL). Called before
    /// anything is sent with that TTL.
    fn note_guards(&self, settings: &Settings, since: Option<Instant>) {
        if let Some(new) = settings.guards() {
            if new.auto {
                self.lengths.note(settings.auto_length(), since);
            }
            let mut g = self
                .guards
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *g = Some(g.map_or(new, |g| g.merge(new)));
        }
    }

    /// Restarts seen by any node, for renewers to re-check their votes.
    pub(crate) fn restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.restarts.watch()
    }

    /// Starts `work` here and runs the rest in the background on the client's own runtime
    /// (a blocking client's) or the current one, tracked for `shutdown`. Without a runtime
    /// (a drop outside Tokio) nothing can run: returns `false`, and the keys expire with
    /// their TTL.
    ///
    /// Starting here matters: the first poll puts `work`'s requests in line at each node
    /// (see `node`, "Calls reach the server in the order they were made"). A spawned task
    /// is first polled whenever the scheduler gets to it, and the caller's next attempt
    /// would overtake its clean-up — its `SET NX` then finds our own old key and fails.
    pub(crate) fn spawn<F>(&self, work: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let runtime = self
            .home
            .get()
            .cloned()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let Some(runtime) = runtime else {
            return false;
        };
        let mut work = Box::pin(work);
        {
            let _context = runtime.enter();
            // The spawned task polls again with its own waker straight away, so a wake-up
            // sent to this one is not needed.
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if work.as_mut().poll(&mut cx).is_ready() {
                return true;
            }
        }
        self.tasks.spawn_on(work, &runtime);
        true
    }

    /// Makes `runtime` the home of this client's background work.
    #[cfg(feature = "blocking")]
    pub(crate) fn set_home(&self, runtime: tokio::runtime::Handle) {
        let _ = self.home.set(runtime);
    }

    /// The tracker of background work, for the quorum's hand-offs.
    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// Cancelled once `shutdown` has begun.
    pub(crate) fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    fn note_deadline(&self, deadline: Duration) {
        let mut longest = self
            .longest_deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *longest = (*longest).max(deadline);
    }

    fn longest_deadline(&self) -> Duration {
        *self
            .longest_deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An acquire attempt in flight: until disarmed, dropping it (the attempt's future was
/// cancelled) spawns the removal of our key from every node its votes were sent to.
struct AttemptGuard {
    shared: Arc<Shared>,
    key: Arc<str>,
    token: Token,
    /// What the votes sent each node (see `room`), written by the votes themselves.
    writes: Writes,
    deadline: Duration,
    /// The attempt's start plus its TTL: the clean-up starts no round after it.
    give_up_at: Instant,
    armed: bool,
}

impl AttemptGuard {
    fn disarm(mut self) {
        self.armed = false;
    }

    /// Starts the compare-and-delete of the attempt's key on `nodes`, tried again where
    /// a node did not answer (see `cleanup` and [`Shared::spawn`]); `false` when no
    /// runtime can run it. A node that no vote of the attempt reached gets nothing.
    fn delete_on(&self, nodes: Vec<Arc<Node>>) -> bool {
        let cleanup = crate::cleanup::Cleanup {
            key: Arc::clone(&self.key),
            token: self.token,
            writes: self.writes.clone(),
            announce: false,
            deadline: self.deadline,
            give_up_at: self.give_up_at,
            closing: self.shared.closing.clone(),
        };
        self.shared.spawn(cleanup.run(nodes))
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Our deletes queue behind the attempt's SETs on each connection, so they land
        // after them whatever state the attempt was in; they are not sent where no SET
        // was (see `room`), so no clean-up asks such a node again.
        if !self.delete_on(self.shared.nodes.clone()) {
            tracing::warn!(key = %self.key, "acquire cancelled outside a Tokio runtime: its keys expire with the ttl");
        }
    }
}

/// A Redlock client over N independent primaries. Cheap to clone; clones share
/// connections.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fenced_redlock::Redlock;
///
/// let redlock = Redlock::builder([
///     "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
///     "redis://10.0.0.4:6379", "redis://10.0.0.5:6379",
/// ])
/// .ttl(Duration::from_secs(10))
/// .fencing(true)
/// .build()?;
///
/// let lease = redlock.acquire("invoice:42", Duration::from_secs(5)).await?;
/// let fence = lease.fence().expect("fencing is on");
/// // ... write to the resource, passing `fence` so it can reject stale writers ...
/// lease.release().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
    settings: Arc<Settings>,
}

impl Redlock {
    /// Starts a [`Builder`] for these node URLs (`redis://[user:pass@]host:port[/db]`, or
    /// `rediss://` with the `tls` feature).
    pub fn builder<I, S>(urls: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Builder::new(urls)
    }

    /// Starts a [`Builder`] for nodes reached through clients you made, one client per
    /// primary: for connection settings a URL cannot carry (TLS with your own root
    /// certificates or client certificate, RESP3, …). Everything else is as with
    /// [`builder`](Self::builder): the same validation at `build()` (duplicate servers are
    /// refused), and a node that cannot be reached fails its votes (per node, in
    /// [`LockError::QuorumNotReached`]) exactly as a URL's would.
    ///
    /// Each client is used as a recipe for connections, not as a connection: the client
    /// makes its connections lazily, one per node (a lean pipelined connection of this
    /// crate for `redis://` over TCP with RESP2; the `redis` crate's multiplexed connection
    /// for TLS, Unix sockets and RESP3), and makes a new one when it breaks. Both apply the
    /// client's `TcpSettings` (nodelay, keepalive, user timeout; a client that sets a
    /// linger time gets the `redis` crate's connection, as that setting cannot be read
    /// back from `TcpSettings`).
    ///
    /// # What is not supported, and why
    /// Connections you already made (a `MultiplexedConnection` or `ConnectionManager`)
    /// cannot be handed in. A node needs to make connections itself: to reconnect after
    /// one breaks (a `MultiplexedConnection` cannot), to send every call through its
    /// first-come-first-served gate while connecting (a `ConnectionManager` reconnects on
    /// its own, and calls queued during that reconnect may reach the server out of order,
    /// so a release could land before the `SET` it undoes), to ask each new connection
    /// for the server's `run_id` (one server, one vote), and to open the pub/sub
    /// connections that carry release notices. Neither connection type can do all four, nor
    /// tell us the address it is connected to.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::Redlock;
    ///
    /// let clients = ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"]
    ///     .map(|url| redis::Client::open(url).expect("valid URL"));
    /// let redlock = Redlock::builder_from_clients(clients)
    ///     .ttl(Duration::from_secs(5))
    ///     .build()
    ///     .expect("valid");
    /// assert_eq!(redlock.nodes(), 3);
    /// ```
    pub fn builder_from_clients(clients: impl IntoIterator<Item = redis::Client>) -> Builder {
        Builder::from_clients(clients)
    }

    pub(crate) fn from_shared(shared: Shared, settings: Settings) -> Self {
        shared.note_deadline(settings.node_timeout);
        shared.note_guards(&settings, None);
        Redlock {
            shared: Arc::new(shared),
            settings: Arc::new(settings),
        }
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.shared.nodes.len()
    }

    /// Votes needed: `nodes / 2 + 1`.
    pub fn quorum(&self) -> usize {
        validity::quorum(self.nodes())
    }

    /// The `host:port` of each node, in configuration order.
    pub fn node_addrs(&self) -> Vec<String> {
        self.shared
            .nodes
            .iter()
            .map(|n| n.addr().to_owned())
            .collect()
    }

    /// Lease time to live.
    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// Per-node call deadline.
    pub fn node_timeout(&self) -> Duration {
        self.settings.node_timeout
    }

    /// Drift allowance subtracted from every validity.
    pub fn drift(&self) -> Duration {
        self.settings.drift
    }

    /// How long a node that (re)starts now may not vote, `None` when the quarantine is off
    /// (see [`Builder::restart_quarantine`]). With [`RestartQuarantine::Auto`](crate::config::RestartQuarantine::Auto) it is the
    /// longest TTL + drift allowance of this client and of every client made from it by
    /// [`with_ttl`](Self::with_ttl) (or by [`Lease::extend_for`]) so far; a node that
    /// started before a longer TTL was first used is held out only for the lengths in
    /// use at its start (no lease of the longer TTL can have had its vote).
    pub fn restart_quarantine(&self) -> Option<Duration> {
        self.shared
            .guards()
            .filter(|g| g.young)
            .map(|g| g.length_at(None, &self.shared.lengths))
    }

    /// When a node's yes counts (see [`Builder::durability`]).
    pub fn durability(&self) -> crate::Durability {
        self.settings.durability
    }

    /// Whether the clock-jump guard is on (see [`Builder::clock_jump_guard`]).
    pub fn clock_jump_guard(&self) -> bool {
        self.shared.guards().is_some_and(|g| g.jumps.is_some())
    }

    /// Whether leases carry fencing tokens.
    pub fn fencing_enabled(&self) -> bool {
        self.settings.fencing
    }

    /// The same client (same connections, same background work) with another TTL. A node
    /// timeout derived from the TTL is derived again; an explicit one is checked against
    /// the new TTL. Every call of the new client uses its own deadline.
    ///
    /// # Errors
    /// As [`Builder::build`] for the new TTL.
    pub fn with_ttl(&self, ttl: Duration) -> Result<Redlock, ConfigError> {
        let settings = self.settings.with_ttl(ttl)?;
        self.shared.note_deadline(settings.node_timeout);
        self.shared.note_guards(&settings, Some(Instant::now()));
        Ok(Redlock {
            shared: Arc::clone(&self.shared),
            settings: Arc::new(settings),
        })
    }

    /// The same client with fencing switched on or off.
    pub fn with_fencing(&self, on: bool) -> Redlock {
        let mut settings = (*self.settings).clone();
        settings.fencing = on;
        Redlock {
            shared: Arc::clone(&self.shared),
            settings: Arc::new(settings),
        }
    }

    /// Takes over a lease that another process (or another client) handed over with
    /// [`Lease::into_handle`]: the returned [`Lease`] extends and releases the handle's
    /// keys through this client's nodes, TTL and node deadline. Nothing is sent yet.
    ///
    /// The lease has **no known validity** until it is extended: its
    /// [`remaining`](Lease::remaining) is zero and [`is_valid`](Lease::is_valid) false.
    /// Call [`extend`](Lease::extend) before doing protected work (it fails if the keys
    /// are gone), or [`release`](Lease::release) if you only came to release it. See
    /// [`handle`](crate::handle) for why.
    ///
    /// The client must use the same nodes as the one that acquired it (in any order); the
    /// handle's key is used as it is, whatever this client's key prefix.
    ///
    /// # Errors
    /// [`LockError::InvalidHandle`] when the handle cannot come from
    /// [`Lease::into_handle`] (empty resource or key, a token that is not 32 hex digits,
    /// fence 0); nothing is sent to the servers then.
    pub fn adopt(&self, handle: crate::handle::LeaseHandle) -> Result<Lease, LockError> {
        let (resource, key, token, fence) = handle.into_parts();
        let invalid = |reason: &str| LockError::InvalidHandle {
            reason: reason.to_owned(),
        };
        if resource.is_empty() {
            return Err(invalid("its resource is empty"));
        }
        if key.is_empty() {
            return Err(invalid("its key is empty"));
        }
        let token =
            Token::parse(&token).ok_or_else(|| invalid("its token is not 32 hex digits"))?;
        if fence == Some(0) {
            return Err(invalid("its fencing token is 0, which no grant hands out"));
        }
        Ok(Lease::adopted(
            self.clone(),
            resource,
            Arc::from(key),
            token,
            fence.map(FenceToken::new),
        ))
    }

    pub(crate) fn key(&self, resource: &str) -> String {
        format!("{}{resource}", self.settings.key_prefix)
    }

    /// Waits for this client's background work to finish, then stops its notification
    /// tasks; see "Shutdown" in the crate docs. Covers every clone of this client and
    /// every client made from it by [`with_ttl`](Self::with_ttl) or
    /// [`with_fencing`](Self::with_fencing) (they share connections and background work).
    ///
    /// What it waits for: clean-ups of failed and cancelled attempts, releases of dropped
    /// [`Lease`]s and [`RenewingLease`](crate::RenewingLease)s, and every renewer — a
    /// renewer still running is stopped, its lease released, and its holder told
    /// [`LossReason::Shutdown`](crate::LossReason::Shutdown). A [`Lease`] still in the
    /// caller's hands is not touched: release it before or after.
    ///
    /// The wait is bounded: every background task makes at most two rounds of node calls
    /// (a renewal, then a release), each bounded by its node deadline, so the wait is at
    /// most twice the longest node deadline plus a small slack. A clean-up asking a node
    /// again (its connection broke, see "Cancellation" in the crate docs) finishes the
    /// round in flight and starts no other.
    ///
    /// After shutdown, acquires fail with [`LockError::ShutDown`]. Calling it again is
    /// harmless.
    ///
    /// # Errors
    /// [`LockError::ShutdownTimedOut`] when work was still running at the bound (its keys
    /// expire with their TTL).
    pub async fn shutdown(&self) -> Result<(), LockError> {
        let span = tracing::debug_span!("redlock.shutdown", nodes = self.nodes());
        async {
            self.shared.closing.cancel();
            self.shared.tasks.close();
            let bound = self
                .shared
                .longest_deadline()
                .saturating_mul(2)
                .saturating_add(SHUTDOWN_SLACK);
            let finished = tokio::time::timeout(bound, self.shared.tasks.wait()).await;
            if let Some(notifier) = self.shared.notifier.get() {
                notifier.stop();
            }
            finished.map_err(|_| LockError::ShutdownTimedOut {
                waited: bound,
                pending: self.shared.tasks.len(),
            })
        }
        .instrument(span)
        .await
    }

    /// One attempt: succeeds only if a majority grants and validity is left.
    ///
    /// # Errors
    /// [`LockError::QuorumNotReached`] (held elsewhere, or nodes failing),
    /// [`LockError::NoValidityLeft`], [`LockError::EmptyResource`],
    /// [`LockError::FenceExhausted`].
    pub async fn try_acquire(&self, resource: &str) -> Result<Lease, LockError> {
        let span = tracing::debug_span!(
            "redlock.try_acquire",
            resource,
            nodes = self.nodes(),
            outcome = tracing::field::Empty,
            attempts = tracing::field::Empty
        );
        let started = Instant::now();
        let result = self.attempt(resource).instrument(span.clone()).await;
        crate::metrics::acquired(&span, started, &result, false);
        result
    }

    /// Retries until acquired, `wait` has passed, or the [`RetryPolicy`](crate::retry::RetryPolicy)
    /// says stop. Between attempts it waits for a release to be announced, or the
    /// policy's pause (by default a jittered `retry_delay`), whichever comes first.
    /// `wait` of zero makes one attempt; a `wait` too long for the clock (such as
    /// `Duration::MAX`) waits without a deadline.
    ///
    /// Waiting acquires of one client (its clones and `with_ttl` clients included) for
    /// the same resource queue, first come, first served: one at a time asks the nodes,
    /// and not while a lease of this client holds the resource with validity left — the
    /// nodes would refuse it — but at its release notice, its validity end or the
    /// policy's pause. A queued acquire whose `wait` ends before its turn makes one
    /// attempt then, for a real answer. So a lease whose keys the servers lost still holds
    /// back this client's other waiters (not other clients') until its validity ends.
    ///
    /// # Errors
    /// [`LockError::WaitTimeout`] carrying the last attempt's error,
    /// [`LockError::RetriesExhausted`] when the policy stopped first, or a non-retryable
    /// error at once.
    pub async fn acquire(&self, resource: &str, wait: Duration) -> Result<Lease, LockError> {
        let span = tracing::debug_span!(
            "redlock.acquire",
            resource,
            wait_ms = wait.as_millis() as u64,
            outcome = tracing::field::Empty,
            attempts = tracing::field::Empty
        );
        let started = Instant::now();
        let result = self
            .acquire_waiting(resource, wait)
            .instrument(span.clone())
            .await;
        crate::metrics::acquired(&span, started, &result, true);
        result
    }

    async fn acquire_waiting(&self, resource: &str, wait: Duration) -> Result<Lease, LockError> {
        let started = Instant::now();
        // No representable deadline (a wait of years): wait without one.
        let deadline = started.checked_add(wait);
        let key = self.key(resource);
        let mut releases =
            (self.settings.notify && !wait.is_zero()).then(|| self.notifier().watch(&key));
        let mut attempts = 0u32;
        // Woken by a notice: look again after a short pause, not a retry delay.
        let mut woken = false;
        // The releases of the key this client had heard when this waiter last looked, and
        // the lease of this client the record showed when it heard the last one: that
        // lease is being released (its drop, which clears the record, may not have run
        // yet, and its deletes may still be on their way), so this waiter asks the nodes
        // as any woken waiter does, rather than wait for it.
        let mut releasing = None;
        // One waiting acquire of this client asks the nodes for a key at a time; the
        // others queue here in arrival order (see `held`). Waiting for the turn counts
        // against the wait; at its end, one attempt gives the real answer.
        let _turn = match self.shared.held.turn(&key, deadline).await {
            Some(turn) => turn,
            None => {
                return match self.attempt(resource).await {
                    Ok(lease) => Ok(lease),
                    Err(e) if !e.is_retryable() => Err(e),
                    Err(e) => Err(LockError::WaitTimeout {
                        resource: resource.to_owned(),
                        waited: started.elapsed(),
                        attempts: 1,
                        last: Box::new(e),
                    }),
                };
            }
        };
        // From its turn on: releases heard while it queued were others'.
        let mut seen = releases.as_ref().map_or(0, Watcher::releases_heard);
        loop {
            if let Some(watcher) = &mut releases
                && watcher.releases_heard() != seen
            {
                seen = watcher.releases_heard();
                releasing = self.shared.held.holder(&key).map(|(t, _)| t);
                // The attempt below is made on a release: follow its repeats, as a woken
                // waiter does.
                woken = true;
                watcher.follow();
            }
            // A lease of this client holds the key: the nodes would refuse (they hold our
            // own key), so wait for its release instead of asking (see `held`). At the
            // deadline ask once, for a real answer.
            if let Some((holder, until)) = self.shared.held.holder(&key)
                && releasing != Some(holder)
                && let Some(quiet) = self.quiet_pause(attempts, until, deadline)
            {
                crate::metrics::attempt_held_back();
                match &mut releases {
                    Some(watcher) => {
                        // Any wake-up looks again: a release shows in the count of
                        // releases heard, a subscription's confirmation does not.
                        tokio::select! {
                            () = tokio::time::sleep(quiet) => {}
                            () = watcher.released() => {}
                        }
                    }
                    None => tokio::time::sleep(quiet).await,
                }
                continue;
            }
            attempts = attempts.saturating_add(1);
            // Notices heard from here on (also repeats of a release already heard) tell a
            // woken waiter that more of that release's deletes have landed.
            if let Some(watcher) = &mut releases {
                watcher.mark();
            }
            let err = match self.attempt(resource).await {
                Ok(mut lease) => {
                    lease.attempts = attempts;
                    return Ok(lease);
                }
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => e,
            };
            let now = Instant::now();
            let left = deadline.map(|d| d.saturating_duration_since(now));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(LockError::WaitTimeout {
                    resource: resource.to_owned(),
                    waited: now.saturating_duration_since(started),
                    attempts,
                    last: Box::new(err),
                });
            }
            // An attempt made on a release notice can reach nodes whose delete has not
            // landed yet; look again shortly, and again at once whenever another node
            // announces a delete (the same release heard again), instead of waiting a
            // whole retry delay.
            let recheck = woken.then_some(RECHECK_AFTER_NOTICE);
            let Some(pause) = self
                .settings
                .retry
                .pause(attempts, recheck, &mut rand::rng())
            else {
                return Err(LockError::RetriesExhausted {
                    resource: resource.to_owned(),
                    attempts,
                    waited: now.saturating_duration_since(started),
                    last: Box::new(err),
                });
            };
            let pause = left.map_or(pause, |l| pause.min(l));
            woken = false;
            match &mut releases {
                Some(watcher) => {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        // A release is taken up at the top of the loop (`seen`).
                        () = watcher.released() => {
                            woken = true;
                            watcher.follow();
                        }
                        () = watcher.heard_again() => woken = true,
                    }
                }
                None => tokio::time::sleep(pause).await,
            }
        }
    }

    /// How long a waiter whose key a lease of this client holds until `until` stays
    /// quiet: its retry pause, cut to that lease's end and to the wait's `deadline`;
    /// `None` when it should ask the nodes now (the deadline has come, or the policy
    /// stops, which it does only after a real attempt).
    fn quiet_pause(
        &self,
        attempts: u32,
        until: Instant,
        deadline: Option<Instant>,
    ) -> Option<Duration> {
        let now = Instant::now();
        let left = deadline.map(|d| d.saturating_duration_since(now));
        if left.is_some_and(|l| l.is_zero()) {
            return None;
        }
        let pause = self
            .settings
            .retry
            .pause(attempts.max(1), None, &mut rand::rng())?;
        let quiet = pause.min(until.saturating_duration_since(now));
        Some(left.map_or(quiet, |l| quiet.min(l)))
    }

    fn notifier(&self) -> &Arc<Notifier> {
        self.shared.notifier.get_or_init(|| {
            let clients = self
                .shared
                .nodes
                .iter()
                .map(|n| n.client().clone())
                .collect();
            Arc::new(Notifier::start(
                clients,
                self.settings.node_timeout,
                self.shared.closing.clone(),
            ))
        })
    }

    async fn attempt(&self, resource: &str) -> Result<Lease, LockError> {
        if resource.is_empty() {
            return Err(LockError::EmptyResource);
        }
        if self.shared.closing.is_cancelled() {
            return Err(LockError::ShutDown);
        }
        let nodes = &self.shared.nodes;
        let required = self.quorum();
        let key: Arc<str> = Arc::from(self.key(resource));
        // Only a fencing client reads and writes the counter.
        let fence_key: Option<Arc<[u8]>> = self
            .settings
            .fencing
            .then(|| Arc::from(crate::fence::counter_key(&key)));
        let token = Token::random();
        let ttl_ms = self.settings.ttl_ms();
        let deadline = self.settings.node_timeout;
        let tasks = &self.shared.tasks;
        let started = Instant::now();
        let writes = Writes::none(nodes.len());
        let guard = AttemptGuard {
            shared: Arc::clone(&self.shared),
            key: Arc::clone(&key),
            token,
            writes: writes.clone(),
            deadline,
            give_up_at: started.checked_add(self.settings.ttl).unwrap_or(started),
            armed: true,
        };

        let guards = self.shared.guards();
        let durability = self.settings.durability;
        // One command for every node: the same bytes go to each.
        let fenced = fence_key.is_some();
        let request = Arc::new(match &fence_key {
            Some(fence_key) => {
                let mut cmd = script::ACQUIRE_FENCED.call(&[key.as_bytes(), fence_key]);
                cmd.arg(token.as_str()).arg(ttl_ms);
                cmd
            }
            None => {
                let mut cmd = script::command("SET", 5, key.len().saturating_add(64));
                cmd.arg(&*key)
                    .arg(token.as_str())
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms);
                cmd
            }
        });
        let votes: Tally<(i64, u64)> =
            quorum::fan_out(nodes, required, Until::Decided, deadline, tasks, |node| {
                let request = Arc::clone(&request);
                let writes = writes.clone();
                async move {
                    node.vote(&writes, guards, durability, |mut c| async move {
                        if fenced {
                            let fence: i64 = request.query_async(&mut c).await?;
                            Ok((fence >= 0).then_some(fence))
                        } else {
                            let ok: Option<String> = request.query_async(&mut c).await?;
                            Ok(ok.map(|_| 0))
                        }
                    })
                    .await
                }
            })
            .await;

        if !votes.reached() {
            self.cleanup(guard, &votes);
            return Err(votes.quorum_error(resource, nodes));
        }

        let mut fence = None;
        let mut reports = reports(nodes, &votes);
        let mut voters = epochs(&votes);
        if let Some(fence_key) = &fence_key {
            let next = match FenceToken::next_after(votes.yes_values().map(|(fence, _)| fence)) {
                Ok(t) => t,
                Err(value) => {
                    self.cleanup(guard, &votes);
                    return Err(LockError::FenceExhausted {
                        resource: resource.to_owned(),
                        value,
                    });
                }
            };
            let mut request = script::FENCE_WRITE.call(&[key.as_bytes(), fence_key]);
            request.arg(token.as_str()).arg(next.get());
            let request = Arc::new(request);
            let written: Tally<((), u64)> =
                quorum::fan_out(nodes, required, Until::Decided, deadline, tasks, |node| {
                    let request = Arc::clone(&request);
                    async move {
                        let (reply, took) = node
                            .call_sampled(guards, durability, |mut c| async move {
                                let held: i64 = request.query_async(&mut c).await?;
                                Ok(held)
                            })
                            .await;
                        // A counter already at the token is not a "yes": the quorum of
                        // clean writes is what makes the token larger than every earlier
                        // grant's (see `fence.rs`).
                        let answer = match reply {
                            Ok((1, epoch, fsynced)) => {
                                node.fsynced(fsynced).map(|()| Some(((), epoch)))
                            }
                            Ok((2, _, _)) => Err(NodeError::FenceAhead(next.get())),
                            Ok(_) => Ok(None),
                            Err(e) => Err(e),
                        };
                        (node.counted(answer, guards), took)
                    }
                })
                .await;
            if !written.reached() {
                self.cleanup(guard, &votes);
                return Err(written.quorum_error(resource, nodes));
            }
            for (report, answer) in reports.iter_mut().zip(&written.answers) {
                if let Some((_, latency)) = answer {
                    report.latency =
                        Some(report.latency.unwrap_or_default().saturating_add(*latency));
                }
            }
            fence = Some(next);
            confirm_voters(&mut voters, &written);
        }

        let elapsed = started.elapsed();
        let valid_until = validity::validity(self.settings.ttl, elapsed, self.settings.drift)
            .and_then(|v| started.checked_add(elapsed)?.checked_add(v));
        let Some(valid_until) = valid_until else {
            self.cleanup(guard, &votes);
            return Err(LockError::NoValidityLeft {
                resource: resource.to_owned(),
                elapsed,
                ttl: self.settings.ttl,
            });
        };
        // From here the lease owns the keys (its release, or its drop, removes them).
        let keys_end = guard.give_up_at;
        guard.disarm();
        Ok(Lease::new(
            self.clone(),
            resource.to_owned(),
            key,
            token,
            fence,
            started,
            valid_until,
            elapsed,
            reports,
            voters,
            writes,
            keys_end,
        ))
    }

    /// After a failed attempt: remove our key from every node, including those that did
    /// not answer — their SET may still land, and our delete queues behind it on the same
    /// connection. Runs in the background; the error is returned at once. It announces
    /// nothing: waking the other waiters of a split vote at once would have them collide
    /// again, while their jittered retries spread them out.
    ///
    /// Nodes that refused the `SET NX` hold no key of ours and are skipped: under
    /// contention most votes are refusals, and deleting there would double the cost of
    /// every failed attempt. A node to which the vote was never sent (its line was full:
    /// [`NodeError::Backlog`]) gets no delete either, and no second try: that is decided
    /// by the delete itself, in the node's order gate, where every vote of the attempt —
    /// also one that had not answered by the decision — has been sent or refused (see
    /// `room`).
    ///
    /// The clean-up is tracked: [`shutdown`](Self::shutdown) waits for it.
    fn cleanup<T>(&self, mut guard: AttemptGuard, votes: &Tally<T>) {
        guard.armed = false;
        let nodes: Vec<Arc<Node>> = self
            .shared
            .nodes
            .iter()
            .zip(&votes.answers)
            .filter(|(_, answer)| !matches!(answer, Some((Ok(None), _))))
            .map(|(node, _)| Arc::clone(node))
            .collect();
        if nodes.is_empty() {
            return;
        }
        guard.delete_on(nodes);
    }
}

/// The epoch of each node's yes (see `quarantine`), `None` where it did not say yes.
/// The votes a fenced lease counts on, after its fence write: where the write answered
/// before the decision, its answer (a clean write, in the epoch it was given; anything
/// else, no vote); where it had not answered yet, the first round's yes stands (that key
/// is ours until it expires or its server forgets it). Counting only the nodes that said
/// yes in both rounds left a lease whose two quorums differed with fewer votes than a
/// quorum: void from birth under the restart quarantine or the clock-jump guard.
fn confirm_voters(voters: &mut [Option<u64>], written: &Tally<((), u64)>) {
    for (epoch, answer) in voters.iter_mut().zip(&written.answers) {
        match answer {
            Some((Ok(Some(((), e))), _)) => *epoch = Some(*e),
            Some(_) => *epoch = None,
            None => {}
        }
    }
}

pub(crate) fn epochs<T>(votes: &Tally<(T, u64)>) -> Vec<Option<u64>> {
    votes
        .answers
        .iter()
        .map(|a| match a {
            Some((Ok(Some((_, epoch))), _)) => Some(*epoch),
            _ => None,
        })
        .collect()
}

fn reports<T>(nodes: &[Arc<Node>], votes: &Tally<T>) -> Vec<NodeReport> {
    nodes
        .iter()
        .zip(&votes.answers)
        .map(|(node, answer)| {
            let (outcome, latency) = match answer {
                None => (NodeOutcome::NoAnswer, None),
                Some((Ok(Some(_)), l)) => (NodeOutcome::Granted, Some(*l)),
                Some((Ok(None), l)) => (NodeOutcome::Held, Some(*l)),
                Some((Err(e), l)) => (NodeOutcome::Failed(e.clone()), Some(*l)),
            };
            NodeReport {
                addr: node.addr().to_owned(),
                outcome,
                latency,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_lease_counts_every_node_whose_key_is_ours_when_its_two_quorums_differ() {
        // Round one decided on nodes 0 and 1 (node 2's grant came later); round two on
        // nodes 0 and 2 (node 1's clean write came later). Three keys are ours.
        let mut voters = vec![Some(4), Some(7), None];
        let yes = |e: u64| Some((Ok(Some(((), e))), Duration::ZERO));
        let written = Tally {
            answers: vec![yes(4), None, yes(9)],
            yes: 2,
            required: 2,
        };
        confirm_voters(&mut voters, &written);
        assert_eq!(voters, [Some(4), Some(7), Some(9)]);
        // A write that found the key gone, or failed, takes the node's vote away.
        let mut voters = vec![Some(1), Some(1), Some(1)];
        let written = Tally {
            answers: vec![
                yes(1),
                Some((Ok(None), Duration::ZERO)),
                Some((Err(NodeError::FenceAhead(3)), Duration::ZERO)),
            ],
            yes: 1,
            required: 2,
        };
        confirm_voters(&mut voters, &written);
        assert_eq!(voters, [Some(1), None, None]);
    }
}
