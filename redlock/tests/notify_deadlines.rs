//! Release notifications when a node's pub/sub connection stops answering for good.

use crate::support;

use std::time::Duration;

use fenced_redlock::Redlock;
use redis::Commands;
use support::{Cluster, Flavour, StrandingProxy};
use tokio::time::Instant;

/// Node 0's connections are stranded (half-open: nothing comes back, ever) between two
/// waits. Its notifier must give up on the stranded subscription within a deadline and
/// subscribe again on a new connection, so that a release heard only on node 0 still
/// wakes the waiter at once rather than after a retry delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranded_subscription_is_replaced_within_its_deadline() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let proxy = StrandingProxy::start(cluster.servers[0].port).await;
    let urls = vec![
        proxy.url(),
        cluster.servers[1].url(),
        cluster.servers[2].url(),
    ];
    let redlock = Redlock::builder(urls)
        .ttl(Duration::from_secs(2))
        .retry_delay(Duration::from_secs(8))
        .build()
        .expect("valid");
    // A first wait opens the pub/sub connections (and the command connections).
    let lease = redlock
        .acquire("warm", Duration::from_secs(1))
        .await
        .expect("free");
    let warm_waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move { redlock.acquire("warm", Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    lease.release().await;
    warm_waiter
        .await
        .expect("join")
        .expect("woken")
        .release()
        .await;

    proxy.strand();
    for s in &cluster.servers {
        let _: () = s.admin().set_ex("stranded", "other", 60).expect("SET");
    }
    let waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            let lease = redlock
                .acquire("stranded", Duration::from_secs(30))
                .await
                .expect("acquired");
            let at = Instant::now();
            lease.release().await;
            at
        })
    };
    // The subscription misses its deadline (200 ms here) and is made again, on a new
    // connection: node 0 itself counts it (the stranded connection's SUBSCRIBE never
    // reached it). A retry delay would be 4–12 s; this took 230-250 ms here (the deadline
    // and a reconnect), and 3 s is over 10 times that.
    let stranded = Instant::now();
    let subscribers = || -> i64 {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("__redlock__:released:stranded")
            .query(&mut cluster.servers[0].admin())
            .expect("PUBSUB NUMSUB");
        n
    };
    while subscribers() == 0 && stranded.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resubscribed = stranded.elapsed();
    assert_eq!(subscribers(), 1, "node 0 after {resubscribed:?}");
    assert!(
        resubscribed < Duration::from_secs(3),
        "subscribed again only after {resubscribed:?}"
    );
    for s in &cluster.servers {
        let _: () = s.admin().del("stranded").expect("DEL");
    }
    let released = Instant::now();
    let _: i64 = cluster.servers[0]
        .admin()
        .publish("__redlock__:released:stranded", "00000000000000bb")
        .expect("PUBLISH");
    let acquired = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("acquired within the wait")
        .expect("waiter");
    let took = acquired.saturating_duration_since(released);
    // Polling would take 4–12 s here; a notice on a live subscription, milliseconds.
    assert!(
        took < Duration::from_millis(1500),
        "woken {took:?} after a release announced on node 0 only"
    );
}
