//! # fenced-redlock
//!
//! A Redlock client for N independent Redis or Valkey primaries (5 is typical; any
//! N ≥ 1 works, quorum = N/2 + 1), with fencing tokens.
//!
//! ## The algorithm
//! To acquire `resource`, the client sends `SET resource <token> NX PX <ttl>` to **all**
//! nodes at once, each call with its own deadline. The token is 128 random bits. It
//! stops waiting the moment a majority has said yes — or so many have said no that a
//! majority is out of reach — and the lease is granted when a majority said yes and
//! validity is left: `ttl − elapsed − drift`, with `elapsed` measured on the monotonic
//! clock from the start of the attempt and `drift = ttl × 0.01 + 2 ms`. A failed attempt
//! deletes its key from every node, including those that never answered. Release is a
//! compare-and-delete on every node that also wakes waiters (PUBLISH); it returns once a
//! majority has answered and the rest finish in the background
//! ([`Lease::release_all`] waits for every node), extend is a
//! compare-and-PEXPIRE that needs a majority again, and [`Lease::auto_renew`] renews in
//! the background and tells the holder when the lease is lost. With fencing on, each
//! lease also carries a [`FenceToken`] that grows from grant to grant (see [`fence`]).
//!
//! **Lua** is used only where the server offers no single command: the unfenced acquire is
//! `SET NX` everywhere; extend is `SET … IFEQ` on Valkey ≥ 8.1 and Redis ≥ 8.4 (learnt per
//! connection from `INFO server`), a script elsewhere; release is `DELIFEQ` on Valkey ≥ 9
//! and `DELEX` on Redis ≥ 8.4 (once a background probe has found them, per connection too),
//! a script elsewhere; the fenced acquire, fence write and [`Lease::retire_fence`] are
//! always scripts. Where an ACL denies scripting, those calls fail on each node with
//! [`NodeError::Auth`] (`NOPERM …`), and the operation with [`LockError::QuorumNotReached`]
//! (a release: [`ReleaseOutcome::Failed`] per node).
//!
//! ```no_run
//! use std::time::Duration;
//! use fenced_redlock::{Redlock, RenewOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let redlock = Redlock::builder(["redis://a:6379", "redis://b:6379", "redis://c:6379"])
//!     .ttl(Duration::from_secs(10))
//!     .fencing(true)
//!     .build()?;
//! let lease = redlock.acquire("report:daily", Duration::from_secs(2)).await?;
//! let token = lease.fence().expect("fencing on");
//! let held = lease.auto_renew(RenewOptions::default());
//! tokio::select! {
//!     reason = held.lost() => eprintln!("lost the lease: {reason}; stop writing"),
//!     () = async { /* work, sending `token` with every write */ } => {}
//! }
//! held.release().await;
//! # Ok(()) }
//! ```
//!
//! ## Trade-offs
//! Read this before protecting data with any lock with a timeout.
//! - **A lease is not a mutex.** The lock ends when its TTL runs out, whether or not the
//!   holder is done. A holder paused by GC, swapping, a stopped VM or a slow disk wakes up
//!   past its validity believing it still holds the lock, while someone else does.
//!   Nothing in the lock service can stop that holder's next write. Only the resource
//!   can: send the [`FenceToken`] with each write and have the resource reject smaller
//!   ones — best by claiming the token *before* reading (see `pg`, feature `postgres`,
//!   and the `redlock-chaos` crate's fenced counter). Check [`Lease::is_valid`] between steps; it narrows the
//!   window, it does not close it.
//! - **Clocks.** Validity assumes the servers' clocks advance at nearly the rate of
//!   ours (the drift allowance is 1 % + 2 ms). A server clock that *jumps* (manual change,
//!   NTP step) expires keys early and two holders can overlap. Fencing tokens still
//!   grow (see [`fence`]), so a fenced resource refuses the older holder. Run servers with
//!   slewing time sync, not stepping. The **clock-jump guard**
//!   ([`Builder::clock_jump_guard`], off by default) reads each node's `TIME` behind every
//!   vote and keeps a node whose clock leapt forward out of the vote for a TTL + drift,
//!   voiding a held lease's votes from it; it cannot see a jump that came before this
//!   client first read that node, nor one within the drift allowance plus the round
//!   trips' uncertainty.
//! - **Restarts without persistence.** A primary that restarts empty forgets the keys
//!   it held; without a guard a second client can then gather a majority while the first
//!   still holds its lease, with the same fencing token (see [`fence`]). The **restart
//!   quarantine** ([`Builder::restart_quarantine`], off by default: switch it on with
//!   [`RestartQuarantine::Auto`]) keeps a node that
//!   started less than the TTL + drift ago out of the vote, and voids a held lease's votes
//!   from a node seen to restart since. It assumes that no client of these nodes uses a
//!   longer TTL than the quarantine, and that a node's `uptime_in_seconds` and `run_id` tell
//!   the truth about its start (the uptime is read from the server's wall clock: where it
//!   is unusable, or the restart is one this client saw, the start is taken as *now*; a
//!   forward clock step after a restart the client never saw the old server of cannot be
//!   told); it cannot see a node emptied without a restart (`FLUSHALL`,
//!   `DEBUG RELOAD`, eviction) or one whose `INFO` an ACL hides. It costs availability after
//!   restarts, also after those that kept the data, and for the first TTL of a freshly
//!   started cluster (a first start looks like a restart). Where every node runs
//!   `appendonly yes` with `appendfsync always`, it is not needed.
//! - **A crash inside the fsync window.** A node with `appendfsync everysec` that crashes
//!   can come back without the last second's keys. **Durable votes**
//!   ([`Builder::durability`] with [`Durability::Fsync`], off by default) count a yes
//!   only once the node reports it fsynced to its append-only file (`WAITAOF` behind the
//!   request, no extra round trip). They need `appendonly yes` and Redis or Valkey ≥ 7.2,
//!   and the fsync wait must fit the node deadline (about a second with `everysec`; use
//!   `appendfsync always` for short deadlines).
//! - **Eviction.** Run lock nodes with `maxmemory-policy noeviction` or a `volatile-*`
//!   policy: `allkeys-*` may evict fence counters, which is amnesia (see [`fence`]).
//! - **Majority loss.** With fewer than a quorum of nodes reachable, acquires fail
//!   (cleanly, with [`LockError::QuorumNotReached`]); nobody gets the lock.
//! - **Network delays.** A reply that arrives after its node's deadline is a lost vote; a
//!   key set by it belongs to the lease anyway and is released with it.
//! - **A late `PEXPIRE` from a dead connection.** An extend cuts validity to its own end
//!   before it is sent, and a later extend that succeeds sets validity from its own round.
//!   If the first one's request to a node was written on a connection that then broke, and
//!   TCP still delivers it after the later extend's request on the new connection, that
//!   node's key ends earlier than the later extend counted on. The model shows the trace
//!   (`docs/model.md`, finding 3: reordering). It needs a shortening extend that was given
//!   up, a reconnect and a retransmission in that order; avoid `extend_for` with less
//!   time than is left where that matters.
//! - **What the lock cannot promise:** mutual exclusion under unbounded pauses, clock
//!   jumps with the guard off or that the guard cannot see (above), amnesia the restart
//!   quarantine cannot see (above), or more than N − quorum amnesic nodes with the
//!   quarantine off. Use it to avoid duplicate work, and fence the writes where
//!   correctness matters.
//!
//! ## Cancellation
//! Acquires are cancel-safe. Dropping an `acquire` or `try_acquire` future before it
//! returns — a `tokio::select!` branch that lost, a `tokio::time::timeout`, a task being
//! aborted — cannot leave a key behind: the attempt holds a guard that, when dropped,
//! spawns the compare-and-delete of its key on every node (only a key holding the
//! attempt's own token is touched). The deletes travel on the same connections as the
//! attempt's `SET`s, behind them, so they land after them whatever state the attempt was
//! in. A connection can break with a `SET` still unread in a stalled server's socket; the
//! delete then goes out on a new connection, with no order against the old one, so a node
//! whose delete failed or missed its deadline is asked again, after pauses doubling up to
//! a second, until it answers or the attempt's TTL has passed (a server stalled longer
//! runs the `SET` after the last try, and that key expires with its TTL). A node that no
//! vote of the attempt reached (its connection's line was full:
//! [`NodeError::Backlog`]) gets no delete and is not asked again. The clean-up is
//! tracked like every other background task ([`Redlock::shutdown`] waits for its round in
//! flight and starts no other).
//!
//! Releases are cancel-safe too: a dropped [`Lease::release`] or
//! [`RenewingLease::release`] future has the outcome of a dropped lease (the deletes go
//! out in the background). A release's delete that a node refused or did not answer is
//! asked again in the same way, until the keys' TTL has passed. A dropped or failed extend leaves the lease valid only until
//! the earlier of its old end and the extend's own (`start + ttl − drift`): the extend may
//! have reached some nodes, and if its TTL was shorter than what was left (an
//! [`Lease::extend_for`] with less time, or the client's TTL after a longer one) it
//! shortened the keys there.
//!
//! The clean-up needs a Tokio runtime to run on: it is spawned on the runtime current at
//! the drop ([`tokio::runtime::Handle::try_current`]). A future dropped outside any runtime
//! (after the runtime itself has shut down, or from a plain thread) cannot clean up;
//! its keys then expire with the TTL, and until then nobody else can take the lock. The
//! same holds for a [`Lease`] or [`RenewingLease`] dropped without `release().await`.
//!
//! ## Shutdown
//! Several things run in the background: the clean-up of failed and cancelled attempts,
//! the release of dropped leases, the calls a quorum decision did not wait for, and
//! renewers. A short-lived process that returns from `main` right after its last call
//! would cut them off and leave keys for a whole TTL. Call [`Redlock::shutdown`] before
//! exiting: it waits for all of them (and stops renewers, releasing their leases), bounded
//! by twice the longest node deadline, then stops the notification tasks. After it, the
//! client refuses new acquires with [`LockError::ShutDown`].
//!
//! ```no_run
//! # async fn run(redlock: fenced_redlock::Redlock) {
//! match redlock.acquire("report:daily", std::time::Duration::from_secs(1)).await {
//!     Ok(lease) => { /* work */ lease.release().await; }
//!     Err(e) => eprintln!("{e}"),
//! }
//! // A failed attempt's clean-up may still be running: let it finish before exiting.
//! if let Err(e) = redlock.shutdown().await {
//!     eprintln!("{e}");
//! }
//! # }
//! ```
//!
//! ## Layout
//! - [`config`]: the [`Builder`], defaults and validation.
//! - `client`: [`Redlock`], the acquire (single attempt and waiting), adopting a handed-over
//!   lease.
//! - [`retry`]: the [`RetryPolicy`] of a waiting acquire (fixed delay, exponential backoff
//!   with full jitter, your own function; a cap on attempts).
//! - `quorum`: parallel fan-out that decides as early as possible.
//! - [`validity`]: the validity and quorum arithmetic.
//! - [`fence`]: fencing tokens and why they grow.
//! - `lease`: the held [`Lease`], extend (with the client's TTL or
//!   [one of your choosing](Lease::extend_for)) and release.
//! - [`handle`]: a [`LeaseHandle`](handle::LeaseHandle) to release or extend a lease from
//!   another process (`Serialize`/`Deserialize` with feature `serde`), and why an adopted
//!   lease has no validity until it extends.
//! - `renew`: [`RenewingLease`], the background renewer and its loss signal.
//! - `notify`: release notifications for waiters. `held`: what this client's own leases
//!   hold, and the queue its waiters for one resource take turns in.
//! - `quarantine`: the restart quarantine — a node's start from its uptime, epochs of
//!   `run_id`s, and why a restarted node's vote waits for a TTL.
//! - `durable`: durable votes — the `WAITAOF` behind every yes, and what its reply means.
//! - `clockwatch`: the clock-jump guard — each node's clock offset from `TIME` read
//!   behind every vote, and what counts as a jump.
//! - `extend`: one node's compare-and-expire, `SET … IFEQ` or the script. `dialect`: what a
//!   connection's server understands beyond the common commands, from its `INFO server`
//!   and a probe for a native compare-and-delete.
//! - `script`: the Lua scripts, and why they go as `EVAL`. `node`: one primary, its
//!   connection and calls with a deadline (made from a URL or from your `redis::Client`,
//!   see [`Redlock::builder_from_clients`]). `conn`: the connection itself — our own lean
//!   pipelined one over plain TCP, the `redis` crate's otherwise. `token`: owner tokens.
//! - `cleanup`: a failed or cancelled attempt's delete, and a release's, asked again where
//!   a node refused or did not answer. `room`: the places in a stalled node's line kept
//!   for the delete behind each write of ours, and the credits that hand them out.
//! - [`error`]: [`ConfigError`], [`LockError`], per-node failures.
//! - `metrics`: the metric names (public with feature `metrics`, which emits them
//!   through the `metrics` facade) and the outcome fields of the tracing spans.
//! - `blocking` (feature `blocking`): the same client for code not on Tokio, on a
//!   runtime thread of its own.
//! - `pg` (feature `postgres`): fenced writes to a PostgreSQL counter table — the
//!   resource side of fencing tokens.

// Library code must not panic on input, time arithmetic or network faults.
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[cfg(feature = "blocking")]
pub mod blocking;
mod cleanup;
mod client;
mod clockwatch;
pub mod config;
mod conn;
mod dialect;
mod durable;
pub mod error;
mod extend;
pub mod fence;
pub mod handle;
mod held;
mod lease;
#[cfg(feature = "metrics")]
pub mod metrics;
// Without the feature the names are unused: the calls compile to nothing.
#[cfg(not(feature = "metrics"))]
#[allow(dead_code, unreachable_pub)]
mod metrics;
mod node;
mod notify;
#[cfg(feature = "postgres")]
pub mod pg;
mod quarantine;
mod quorum;
mod renew;
mod resp;
pub mod retry;
mod room;
mod script;
mod token;
pub mod validity;

pub(crate) use client::Shared;

pub use client::Redlock;
pub use config::{Builder, RestartQuarantine};
pub use durable::Durability;
pub use error::{ConfigError, LockError, NodeError, NodeFailure, NodeFailureReason};
pub use fence::FenceToken;
pub use lease::{Lease, NodeOutcome, NodeReport, ReleaseOutcome, ReleaseReport};
pub use renew::{LeaseStatus, LossReason, RenewOptions, RenewingLease};
pub use retry::RetryPolicy;
pub use validity::quorum;

/// The `redis` crate this one is built on: its `Client` is what
/// [`Redlock::builder_from_clients`] takes (with its `TcpSettings`, TLS and RESP3 options),
/// so use this re-export to make one of a version that fits.
pub use redis;

/// The crate README's example, compiled as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
