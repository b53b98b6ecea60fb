//! One server, one vote — judged per connection: a node whose address led to another
//! node's server (a proxy or NAT rule pointed at the wrong primary) votes again once its
//! address leads to a server of its own, and is refused again when it is misrouted again.

use crate::support;

use std::time::Duration;

use fenced_redlock::{LockError, Redlock};
use support::{Cluster, Flavour, StrandingProxy};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mended_misroute_counts_again_and_a_new_one_is_refused_again() {
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    // Node 1's address: a proxy that should lead to server 1 and leads to server 0.
    let proxy = StrandingProxy::start(cluster.servers[0].port).await;
    let redlock = Redlock::builder([
        cluster.servers[0].url(),
        proxy.url(),
        cluster.servers[2].url(),
    ])
    .ttl(Duration::from_secs(2))
    .build()
    .expect("distinct addresses");
    cluster.servers[2].kill();
    let err = redlock
        .try_acquire("misrouted")
        .await
        .expect_err("one server is not a majority of three");
    assert!(err.to_string().contains("same server as node"), "{err}");

    // Mended: the proxy now leads to server 1, and the connections through it close. Servers
    // 0 and 1 are a majority of three, and this client (not only a new one) must see it.
    proxy.retarget(cluster.servers[1].port);
    proxy.close_all();
    let lease = support::taken_by(&redlock, "mended", Duration::from_secs(5))
        .await
        .expect("servers 0 and 1 count once each, within 5 s of the mend");
    assert_eq!(lease.resource(), "mended");
    lease.release_all().await;

    // Misrouted again: node 1 reaches server 0, which node 0 reaches; one of them is out
    // on every attempt, through reconnects and re-checks (3 s).
    proxy.retarget(cluster.servers[0].port);
    proxy.close_all();
    let until = Instant::now() + Duration::from_secs(3);
    let mut refused = 0;
    while Instant::now() < until {
        match redlock.try_acquire("misrouted-again").await {
            Ok(lease) => panic!("granted by one server under two names: {lease:?}"),
            Err(err) => {
                assert!(
                    matches!(err, LockError::QuorumNotReached { granted: 0 | 1, .. }),
                    "{err}"
                );
                if err.to_string().contains("same server as node") {
                    refused += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused > 0, "the second misroute was never named");
    redlock.shutdown().await.expect("shut down");
}
