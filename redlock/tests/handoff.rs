//! Hand-off to a waiter when a release's deletes reach the nodes far apart.

use crate::support;

use std::time::Duration;

use fenced_redlock::Redlock;
use redis::Commands;
use support::{Cluster, Flavour};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_acquires_soon_after_a_majority_of_spread_deletes() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .retry_delay(Duration::from_secs(20))
        .build()
        .expect("valid");
    for s in &cluster.servers {
        let _: () = s.admin().set_ex("spread", "other", 60).expect("SET");
    }
    let waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            let lease = redlock
                .acquire("spread", Duration::from_secs(120))
                .await
                .expect("acquired");
            let at = Instant::now();
            lease.release().await;
            at
        })
    };
    // Let the waiter subscribe and spend its wake-up on confirmation.
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The other owner's release reaches the nodes 40 ms apart, each announcing it the way
    // a release does (same release id on every node).
    let mut majority_free = Instant::now();
    for (i, s) in cluster.servers.iter().enumerate() {
        let mut admin = s.admin();
        let _: () = admin.del("spread").expect("DEL");
        let _: i64 = admin
            .publish("__redlock__:released:spread", "00000000000000aa")
            .expect("PUBLISH");
        if i == 2 {
            majority_free = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let acquired = tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("acquired within the wait")
        .expect("waiter");
    let handoff = acquired.saturating_duration_since(majority_free);
    // A retry delay would be 10–30 s here; a hand-off on the notices takes milliseconds.
    // Half the shortest retry tells them apart on any machine.
    assert!(
        handoff < Duration::from_secs(5),
        "hand-off {handoff:?} after the majority's deletes"
    );
}
