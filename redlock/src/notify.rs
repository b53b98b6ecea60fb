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
//! it wakes **one** waiting acquire of this client (which looks again 10 ms later if its
//! attempt raced the release's deletes), not all of them: the waiters of one
//! process do not stampede the nodes and split the votes among themselves. Waiters that
//! hear nothing (a subscription still being made, a lease that expired instead of being
//! released, a node down) fall back to jittered polling, so notifications only ever make
//! waiting shorter.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, mpsc, watch};

/// Pause before reconnecting after a failure, doubled up to the maximum.
const RECONNECT_MIN: Duration = Duration::from_millis(20);
const RECONNECT_MAX: Duration = Duration::from_secs(1);

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
}

#[derive(Debug)]
enum Control {
    Subscribe(String),
    Unsubscribe(String),
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

    /// A node confirmed our subscription to `channel`. A release may have happened before
    /// that, unheard: wake one waiter to try again now rather than at its next poll.
    fn armed(&self, channels: &[String]) {
        let watched = self.lock();
        for c in channels {
            if let Some(w) = watched.get(c) {
                w.notify.notify_one();
            }
        }
    }

    /// Wakes one waiter of `channel` for a release not heard before. (Its attempt may reach
    /// nodes whose delete has not landed yet; the waiter then looks again shortly.)
    fn announce(&self, channel: &str, release: String) {
        let mut watched = self.lock();
        if let Some(w) = watched.get_mut(channel)
            && w.last_release.as_deref() != Some(release.as_str())
        {
            w.last_release = Some(release);
            w.notify.notify_one();
        }
    }
}

/// The per-node subscriber tasks of one client; they stop when this is dropped.
#[derive(Debug)]
pub(crate) struct Notifier {
    registry: Arc<Registry>,
    nodes: Vec<mpsc::UnboundedSender<Control>>,
    _stop: watch::Sender<()>,
}

impl Notifier {
    pub(crate) fn start(clients: Vec<redis::Client>, connect_timeout: Duration) -> Self {
        let registry = Arc::new(Registry::default());
        let (stop, stopped) = watch::channel(());
        let nodes = clients
            .into_iter()
            .map(|client| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(node_loop(
                    client,
                    Arc::clone(&registry),
                    rx,
                    stopped.clone(),
                    connect_timeout.max(Duration::from_millis(100)),
                ));
                tx
            })
            .collect();
        Notifier {
            registry,
            nodes,
            _stop: stop,
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
        });
        w.waiters += 1;
        let notify = Arc::clone(&w.notify);
        if w.waiters == 1 {
            for node in &self.nodes {
                let _ = node.send(Control::Subscribe(channel.clone()));
            }
        }
        Watcher {
            notifier: Arc::clone(self),
            channel,
            notify,
        }
    }
}

/// One waiting acquire's interest in a key.
#[derive(Debug)]
pub(crate) struct Watcher {
    notifier: Arc<Notifier>,
    channel: String,
    notify: Arc<Notify>,
}

impl Watcher {
    /// Resolves when a release of the key wakes this waiter.
    pub(crate) async fn released(&self) {
        self.notify.notified().await;
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
            for node in &self.notifier.nodes {
                let _ = node.send(Control::Unsubscribe(self.channel.clone()));
            }
        }
    }
}

async fn node_loop(
    client: redis::Client,
    registry: Arc<Registry>,
    mut control: mpsc::UnboundedReceiver<Control>,
    mut stopped: watch::Receiver<()>,
    connect_timeout: Duration,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        let session = async {
            let pubsub = tokio::time::timeout(connect_timeout, client.get_async_pubsub())
                .await
                .map_err(|_| ())?
                .map_err(|_| ())?;
            let (mut sink, mut messages) = pubsub.split();
            let current: Vec<String> = registry.lock().keys().cloned().collect();
            if !current.is_empty() {
                sink.subscribe(&current).await.map_err(|_| ())?;
                registry.armed(&current);
            }
            // Requests queued while we were connecting repeat part of the snapshot.
            let mut subscribed: HashSet<String> = current.into_iter().collect();
            backoff = RECONNECT_MIN;
            loop {
                tokio::select! {
                    msg = messages.next() => {
                        let Some(msg) = msg else { return Err(()) };
                        if let Ok(release) = msg.get_payload::<String>() {
                            registry.announce(msg.get_channel_name(), release);
                        }
                    }
                    ctl = control.recv() => {
                        match ctl {
                            Some(Control::Subscribe(c)) => {
                                if subscribed.insert(c.clone()) {
                                    sink.subscribe(&c).await.map_err(|_| ())?;
                                    registry.armed(std::slice::from_ref(&c));
                                }
                            }
                            Some(Control::Unsubscribe(c)) => {
                                if subscribed.remove(&c) {
                                    sink.unsubscribe(&c).await.map_err(|_| ())?;
                                }
                            }
                            None => return Ok(()),
                        }
                    }
                }
            }
        };
        tokio::select! {
            _ = stopped.changed() => return,
            ended = session => if ended.is_ok() { return },
        }
        tokio::select! {
            _ = stopped.changed() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}
