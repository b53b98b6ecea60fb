//! Connections: a handshake slower than the node deadline still ends in a connection
//! (made in the background), instead of every call starting one and cancelling it.

use crate::support;

use std::time::Duration;

use fenced_redlock::Redlock;
use support::{Cluster, Flavour, StrandingProxy};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_slower_than_the_node_deadline_still_connects() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let mut proxies = Vec::new();
    for server in &cluster.servers {
        // Each new connection waits 150 ms before a byte goes through: 7 node deadlines.
        proxies.push(StrandingProxy::start_slow(server.port, Duration::from_millis(150)).await);
    }
    let redlock = Redlock::builder(proxies.iter().map(StrandingProxy::url))
        .ttl(Duration::from_secs(1))
        .node_timeout(Duration::from_millis(20))
        .build()
        .expect("valid");
    let started = Instant::now();
    let mut tries = 0;
    let lease = loop {
        tries += 1;
        match redlock.try_acquire("slow-handshake").await {
            Ok(lease) => break lease,
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "no connection after {tries} tries in 5 s (each 20 ms deadline \
                     cancelled the 150 ms handshake?): {e}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    lease.release().await;
    // The calls that timed out waited for one connecting task, not one each.
    for (i, proxy) in proxies.iter().enumerate() {
        assert!(
            proxy.accepted() <= 2,
            "node {i}: {} connections for {tries} tries",
            proxy.accepted()
        );
    }
    // Connected: from now on a round needs no handshake and fits in the deadline.
    let again = redlock
        .try_acquire("slow-handshake")
        .await
        .expect("connected nodes answer within 20 ms");
    again.release().await;
}
