//! A failed attempt's clean-up must follow its `SET` to the server even when the
//! connection the `SET` went out on is gone. The chaos rig saw the opposite once
//! (`renewal-majority`, 2026-12-03): right after a proxy closed its connections, a node
//! that had stalled ran an attempt's buffered `SET` after the clean-up's delete had given
//! up waiting for a new connection, and the key stood for its whole TTL. The clean-up
//! now asks such a node again until it answers (within the TTL).

use crate::support;

use std::time::Duration;

use fenced_redlock::Redlock;
use support::{Cluster, Flavour, StrandingProxy, warm_client};

/// One node behind a proxy, frozen, with a client whose attempt's `SET` sits unread in the
/// frozen server's socket when the proxy closes every connection (the attempt fails at
/// once). The clean-up's delete then waits for a new connection the frozen server cannot
/// answer. Returns with the server still frozen.
async fn strand_an_attempt(ttl: Duration) -> (Cluster, StrandingProxy, Redlock) {
    let cluster = Cluster::start(Flavour::Valkey, 1);
    let proxy = StrandingProxy::start(cluster.servers[0].port).await;
    let client = warm_client(vec![proxy.url()], ttl).await;
    assert!(cluster.wait_keys_gone(Duration::from_secs(1)).is_empty());

    cluster.servers[0].freeze();
    let attempt = tokio::spawn({
        let client = client.clone();
        async move { client.try_acquire("stranded").await }
    });
    // The SET is in the frozen server's socket by now.
    tokio::time::sleep(Duration::from_millis(5)).await;
    proxy.close_all();
    let failed = attempt.await.expect("no panic");
    assert!(failed.is_err(), "granted by a frozen node: {failed:?}");
    (cluster, proxy, client)
}

/// The server is thawed 100 ms after the attempt failed and runs its `SET`. The delete must
/// still reach it: the key may not stand for its 5 s TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_outlives_the_connection_its_set_went_out_on() {
    let (cluster, _proxy, client) = strand_an_attempt(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    cluster.servers[0].thaw();

    let left = cluster.wait_keys_gone(Duration::from_secs(1));
    assert!(
        left.is_empty(),
        "a failed attempt's key still stands 1 s after the node ran its SET (TTL 5 s): {left:?}"
    );
    let _ = client.shutdown().await;
}

/// A clean-up that keeps asking a node that never comes back does not hold up
/// `shutdown`: it finishes the round in flight and starts no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_a_cleanup_that_asks_again() {
    let (cluster, _proxy, client) = strand_an_attempt(Duration::from_secs(30)).await;
    // The clean-up is now asking again, every round timing out against the frozen node.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = client.shutdown().await;
    cluster.servers[0].thaw();
    assert!(
        stopped.is_ok(),
        "shutdown waited for a clean-up that could go on for the 30 s TTL: {stopped:?}"
    );
}
