//! A blocking client for code that is not on Tokio (feature `blocking`), in the manner of
//! `reqwest::blocking`: [`Redlock`], [`Lease`] and [`RenewingLease`] with the same
//! semantics as the async ones, every `.await` replaced by a blocking call.
//!
//! ```no_run
//! use std::time::Duration;
//! use fenced_redlock::blocking::Redlock;
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let redlock = Redlock::new(
//!     Redlock::builder(["redis://a:6379", "redis://b:6379", "redis://c:6379"])
//!         .ttl(Duration::from_secs(10))
//!         .fencing(true),
//! )?;
//! let lease = redlock.acquire("report:daily", Duration::from_secs(2))?;
//! let token = lease.fence().expect("fencing on");
//! // ... the work, sending `token` with every write ...
//! lease.release();
//! # Ok(()) }
//! ```
//!
//! # How it runs
//! Each client ([`Redlock::new`]) starts one thread running a current-thread Tokio
//! runtime, shared by its clones, its leases and the clients made from it by
//! [`with_ttl`](Redlock::with_ttl) and [`with_fencing`](Redlock::with_fencing). The
//! connections live there, and so does every background task: renewers, the release of a
//! dropped lease, the clean-up of failed attempts. A call blocks the calling thread until
//! it is done; the network work it waits for is driven by the client's thread, so calls
//! from many threads at once proceed together.
//!
//! When the last clone of the client and the last of its leases are gone, the client shuts
//! down as [`Redlock::shutdown`] does — it waits (bounded by twice the node deadline) for
//! the releases of dropped leases and the renewers' releases — and its thread ends. So
//! dropping everything leaves no key behind, as long as the nodes answer.
//!
//! # From async code
//! Calls block the calling thread. Made from a task on a Tokio runtime they do not
//! deadlock (the work runs on the client's own thread, not on the caller's runtime), but
//! they stall every other task of that worker thread for as long as they take — a whole
//! `wait` for [`Redlock::acquire`]. In async code use the async [`crate::Redlock`], or call
//! the blocking client from `tokio::task::spawn_blocking`.

mod client;
mod lease;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::error::ConfigError;

pub use client::Redlock;
pub use lease::{Lease, RenewingLease};

/// Why [`Redlock::new`] could not make a client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The builder refused its settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The client's thread or its runtime could not be started.
    #[error("cannot start the lock client's runtime thread: {0}")]
    Runtime(#[from] std::io::Error),
}

/// The client's thread and its runtime. The last one dropped shuts the client down.
#[derive(Debug)]
pub(crate) struct Home {
    handle: Handle,
    /// The first client: its shutdown covers every client sharing its connections.
    client: crate::Redlock,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Home {
    /// Starts the runtime thread and makes it the home of `client`'s background work.
    fn start(client: crate::Redlock) -> std::io::Result<Home> {
        let (ready, handle) = std::sync::mpsc::sync_channel(1);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("fenced-redlock".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(runtime.handle().clone()));
                // Drives the I/O and timers of every call and runs the background tasks.
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        let handle = match handle.recv() {
            Ok(made) => made?,
            Err(_) => return Err(std::io::Error::other("the runtime thread ended at start")),
        };
        client.shared().set_home(handle.clone());
        Ok(Home {
            handle,
            client,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `future` to completion on the calling thread, its I/O and timers driven by the
    /// client's thread, and anything it spawns running there.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _entered = self.handle.enter();
        park_until_done(future)
    }

    /// Makes the client's runtime current while `f` runs (for what spawns from a
    /// constructor, such as a renewer).
    pub(crate) fn enter<T>(&self, f: impl FnOnce() -> T) -> T {
        let _entered = self.handle.enter();
        f()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Never true for a user's drop; parking the runtime's own thread would hang it.
        let on_runtime_thread = self
            .thread
            .as_ref()
            .is_some_and(|t| t.thread().id() == thread::current().id());
        if on_runtime_thread {
            return;
        }
        // Waits for the releases of dropped leases and stops the renewers, as
        // `Redlock::shutdown` does, before the runtime that runs them stops.
        if let Err(e) = self.block_on(self.client.shutdown()) {
            tracing::warn!(error = %e, "blocking lock client dropped before its background work ended");
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Wakes the thread parked in [`park_until_done`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parking between polls. Unlike `Handle::block_on`, it
/// does not refuse to run inside another runtime: it only parks this thread, and what it
/// waits for is driven by the client's own thread.
fn park_until_done<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake before the park leaves a token: park returns at once.
        thread::park();
    }
}
