//! Release notifications: a waiter retries the moment the holder releases.
//!
//! A release publishes a random release id on the key's own channel,
//! `__redlock__:released:<key>`, on every node. A client subscribes to a key's channel only
//! while one of its acquires is waiting for that key (one pub/sub connection per node,
//! opened on first use, resubscribed after reconnects), so a busy system does not flood
//! every client with every release.
//!
//! A subscription takes a round trip to confirm, and a release in that gap would go
//! unheard; so each node's confirmation also wakes one waiter to try again at once.
//!
//! Each release is heard up to N times (once per node); the id makes it count once, and
//! it wakes **one** waiting acquire of this client, not all of them: the waiters of one
//! process do not stampede the nodes and split the votes among themselves. A release's
//! deletes can reach the nodes far apart, so a woken waiter whose attempt failed also
//! listens to the *repeats* (every node announces after its own delete) and looks again
//! at each, and 10 ms later in any case: it acquires as soon as a majority's deletes have
//! landed, however they are spread.
//!
//! Each node's task keeps its subscriptions in line with the keys being waited for now,
//! rather than working through a queue of requests: a node that stops answering holds up
//! nothing but itself, and what waits for it is one flag, not a growing queue. Every
//! subscribe and unsubscribe has a deadline; a node that misses it is reconnected. Waiters that
//! hear nothing (a subscription still being made, a lease that expired instead of being
//! released, a node down) fall back to jittered polling, so notifications only ever make
//! waiting shorter.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// Pause before reconnecting after a failure, doubled up to the maximum.
const RECONNECT_MIN: Duration = Duration::from_millis(20);
const RECONNECT_MAX: Duration = Duration::from_secs(1);
/// The shortest deadline of a pub/sub connect, subscribe or unsubscribe: a client with
/// a 2 ms node deadline still gives its notifier time to connect.
const MIN_PUBSUB_DEADLINE: Duration = Duration::from_millis(100);

/// The channel a release of `key` is announced on.
pub(crate) fn channel(key: &str) -> String {
    format!("__redlock__:released:{key}")
}

/// A random id for one release, the same on every node.
pub(crate) fn release_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[derive(Debug)]
struct Watch {
    waiters: usize,
    notify: Arc<Notify>,
    last_release: Option<String>,
    /// `(release, repeats)`: which release was heard last (counted up on each new one)
    /// and how many nodes have announced it since the first.
    heard: watch::Sender<(u64, u64)>,
}

#[derive(Debug, Default)]
struct Registry {
    watched: Mutex<HashMap<String, Watch>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Watch>> {
        // A poisoned map is still a correct map: every update is a single insert or remove.
        self.watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A node confirmed our subscription to `channels`. A release may have happened before
    /// that, unheard: wake one waiter to try again now rather than at its next poll.
    fn armed(&self, channels: &[String]) {
        let watched = self.lock();
        for c in channels {
            if let Some(w) = watched.get(c) {
                w.notify.notify_one();
            }
        }
    }

    /// Wakes one waiter of `channel` for a release not heard before, and tells a waiter
    /// whose attempt on an earlier notice failed that another node has deleted.
    fn announce(&self, channel: &str, release: String) {
        let mut watched = self.lock();
        if let Some(w) = watched.get_mut(channel) {
            if w.last_release.as_deref() == Some(release.as_str()) {
                w.heard
                    .send_modify(|(_, repeats)| *repeats = repeats.wrapping_add(1));
            } else {
                w.last_release = Some(release);
                w.heard
                    .send_modify(|(id, repeats)| (*id, *repeats) = (id.wrapping_add(1), 0));
                w.notify.notify_one();
                crate::metrics::handoff_wakeup();
            }
        }
    }

    fn wanted(&self) -> HashSet<String> {
        self.lock().keys().cloned().collect()
    }
}

/// The per-node subscriber tasks of one client; they stop when this is dropped, when
/// [`Notifier::stop`] is called or when the client shuts down.
#[derive(Debug)]
pub(crate) struct Notifier {
    registry: Arc<Registry>,
    /// One flag per node: "the wanted subscriptions changed".
    nodes: Vec<Arc<Notify>>,
    stop: CancellationToken,
}

impl Notifier {
    pub(crate) fn start(
        clients: Vec<redis::Client>,
        deadline: Duration,
        closing: CancellationToken,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        let stop = closing.child_token();
        let deadline = deadline.max(MIN_PUBSUB_DEADLINE);
        let nodes = clients
            .into_iter()
            .map(|client| {
                let changed = Arc::new(Notify::new());
                tokio::spawn(node_loop(
                    client,
                    Arc::clone(&registry),
                    Arc::clone(&changed),
                    stop.clone(),
                    deadline,
                ));
                changed
            })
            .collect();
        Notifier {
            registry,
            nodes,
            stop,
        }
    }

    /// Stops the subscriber tasks.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    fn changed(&self) {
        for node in &self.nodes {
            node.notify_one();
        }
    }

    /// Starts listening for releases of `key`; stops when the returned guard is dropped.
    pub(crate) fn watch(self: &Arc<Self>, key: &str) -> Watcher {
        let channel = channel(key);
        let mut watched = self.registry.lock();
        let w = watched.entry(channel.clone()).or_insert_with(|| Watch {
            waiters: 0,
            notify: Arc::new(Notify::new()),
            last_release: None,
            heard: watch::Sender::new((0, 0)),
        });
        w.waiters = w.waiters.saturating_add(1);
        let notify = Arc::clone(&w.notify);
        let heard = w.heard.subscribe();
        let first = w.waiters == 1;
        drop(watched);
        if first {
            self.changed();
        }
        Watcher {
            notifier: Arc::clone(self),
            channel,
            notify,
            heard,
            following: None,
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// One waiting acquire's interest in a key.
#[derive(Debug)]
pub(crate) struct Watcher {
    notifier: Arc<Notifier>,
    channel: String,
    notify: Arc<Notify>,
    heard: watch::Receiver<(u64, u64)>,
    /// The release this waiter was woken for, and the repeats of it counted at `mark`.
    following: Option<(u64, u64)>,
}

impl Watcher {
    /// Resolves when a release of the key wakes this waiter. Holds no borrow of `self`,
    /// so it can be raced against [`heard_again`](Self::heard_again).
    pub(crate) fn released(&self) -> impl std::future::Future<Output = ()> + use<> {
        let notify = Arc::clone(&self.notify);
        async move { notify.notified().await }
    }

    /// How many releases of the key this client has heard (not counting repeats): a
    /// wake-up after which it has not grown was a subscription's confirmation, not a
    /// release.
    pub(crate) fn releases_heard(&self) -> u64 {
        self.heard.borrow().0
    }

    /// This waiter was woken for the release heard last: from now on it also hears that
    /// release's repeats (see [`heard_again`](Self::heard_again)). Only the one woken
    /// waiter follows a release, so repeats wake no one else.
    pub(crate) fn follow(&mut self) {
        self.following = Some(*self.heard.borrow_and_update());
    }

    /// Forgets the repeats heard so far; a later release than the one followed ends the
    /// following (that one woke another waiter).
    pub(crate) fn mark(&mut self) {
        if let Some((release, _)) = self.following {
            let (now, repeats) = *self.heard.borrow_and_update();
            self.following = (now == release).then_some((release, repeats));
        }
    }

    /// Resolves when another node announces the release this waiter follows, at once if
    /// one did since [`mark`](Self::mark); never when it follows none.
    pub(crate) async fn heard_again(&mut self) {
        if let Some((release, seen)) = self.following {
            loop {
                let (now, repeats) = *self.heard.borrow_and_update();
                if now != release {
                    break;
                }
                if repeats > seen {
                    return;
                }
                if self.heard.changed().await.is_err() {
                    break;
                }
            }
            self.following = None;
        }
        std::future::pending::<()>().await;
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let mut watched = self.notifier.registry.lock();
        let last = match watched.get_mut(&self.channel) {
            Some(w) => {
                w.waiters = w.waiters.saturating_sub(1);
                w.waiters == 0
            }
            None => false,
        };
        if last {
            watched.remove(&self.channel);
        }
        drop(watched);
        if last {
            self.notifier.changed();
        }
    }
}

/// Why a pub/sub session ended: always "reconnect" (the details are in the next attempt).
#[derive(Debug)]
struct SessionLost;

async fn node_loop(
    client: redis::Client,
    registry: Arc<Registry>,
    changed: Arc<Notify>,
    stop: CancellationToken,
    deadline: Duration,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = session(&client, &registry, &changed, deadline, &mut backoff) => {}
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = backoff.saturating_mul(2).min(RECONNECT_MAX);
    }
}

/// One pub/sub connection: keeps its subscriptions in line with the wanted keys and hands
/// every release notice to the registry, until a step fails or misses its deadline.
async fn session(
    client: &redis::Client,
    registry: &Registry,
    changed: &Notify,
    deadline: Duration,
    backoff: &mut Duration,
) -> Result<std::convert::Infallible, SessionLost> {
    let pubsub = tokio::time::timeout(deadline, client.get_async_pubsub())
        .await
        .map_err(|_| SessionLost)?
        .map_err(|_| SessionLost)?;
    let (mut sink, mut messages) = pubsub.split();
    let mut subscribed: HashSet<String> = HashSet::new();
    loop {
        let wanted = registry.wanted();
        let add: Vec<String> = wanted.difference(&subscribed).cloned().collect();
        let remove: Vec<String> = subscribed.difference(&wanted).cloned().collect();
        if !add.is_empty() {
            tokio::time::timeout(deadline, sink.subscribe(&add))
                .await
                .map_err(|_| SessionLost)?
                .map_err(|_| SessionLost)?;
            registry.armed(&add);
            subscribed.extend(add);
        }
        if !remove.is_empty() {
            tokio::time::timeout(deadline, sink.unsubscribe(&remove))
                .await
                .map_err(|_| SessionLost)?
                .map_err(|_| SessionLost)?;
            for c in &remove {
                subscribed.remove(c);
            }
        }
        *backoff = RECONNECT_MIN;
        tokio::select! {
            msg = messages.next() => {
                let Some(msg) = msg else { return Err(SessionLost) };
                if let Ok(release) = msg.get_payload::<String>() {
                    registry.announce(msg.get_channel_name(), release);
                }
            }
            () = changed.notified() => {}
        }
    }
}
