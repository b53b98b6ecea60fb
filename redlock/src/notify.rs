//! Release notifications: waiters retry the moment a holder releases.
//!
//! The release script publishes the key on a channel. The first waiting acquire of a
//! client starts one subscriber task per node; each forwards the keys it hears to a
//! broadcast channel that every waiter of this client listens on. A waiter that hears
//! its key retries at once; with nothing heard (a subscriber still connecting, a lease
//! that expired instead of being released, a node down) it falls back to jittered
//! polling, so notifications only ever make waiting shorter.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{broadcast, watch};

/// Buffered notifications per waiter; a waiter that lags just retries.
const CHANNEL_CAPACITY: usize = 1024;
/// Pause before resubscribing after a failure, doubled up to the maximum.
const RESUBSCRIBE_MIN: Duration = Duration::from_millis(20);
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(1);

/// The channel name the release script publishes on, per key prefix.
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}__redlock__:released")
}

/// Subscriber tasks for one client; they stop when this is dropped.
#[derive(Debug)]
pub(crate) struct Notifier {
    tx: broadcast::Sender<Arc<str>>,
    _stop: watch::Sender<()>,
}

impl Notifier {
    pub(crate) fn start(
        clients: Vec<redis::Client>,
        channel: String,
        connect_timeout: Duration,
    ) -> Self {
        let (tx, _) = broadcast::channel(CHANNEL_CAPACITY);
        let (stop, stopped) = watch::channel(());
        for client in clients {
            tokio::spawn(subscribe_loop(
                client,
                channel.clone(),
                tx.clone(),
                stopped.clone(),
                connect_timeout,
            ));
        }
        Notifier { tx, _stop: stop }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.tx.subscribe()
    }
}

async fn subscribe_loop(
    client: redis::Client,
    channel: String,
    tx: broadcast::Sender<Arc<str>>,
    mut stopped: watch::Receiver<()>,
    connect_timeout: Duration,
) {
    let mut backoff = RESUBSCRIBE_MIN;
    loop {
        let session = async {
            let mut pubsub = tokio::time::timeout(
                connect_timeout.max(Duration::from_millis(100)),
                client.get_async_pubsub(),
            )
            .await
            .map_err(|_| ())?
            .map_err(|_| ())?;
            pubsub.subscribe(&channel).await.map_err(|_| ())?;
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                if let Ok(key) = msg.get_payload::<String>() {
                    // No receivers is fine: nobody is waiting right now.
                    let _ = tx.send(Arc::from(key));
                }
            }
            Ok::<(), ()>(())
        };
        tokio::select! {
            _ = stopped.changed() => return,
            _ = session => {}
        }
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RESUBSCRIBE_MAX);
    }
}

/// Waits until `key` is announced, the channel closes, or the receiver lags.
pub(crate) async fn released(rx: &mut broadcast::Receiver<Arc<str>>, key: &str) {
    loop {
        match rx.recv().await {
            Ok(k) if &*k == key => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
