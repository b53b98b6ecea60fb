//! Fencing tokens against real Redis and Valkey servers.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use fenced_redlock::{FenceToken, Redlock};
use support::{Cluster, Flavour};

fn client(servers: &Cluster) -> Redlock {
    Redlock::builder(servers.urls())
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_sequential_grants() {
    for flavour in Flavour::ALL {
        let servers = Cluster::start(flavour, 5);
        let lock = client(&servers);
        let mut last = FenceToken::new(0);
        for _ in 0..50 {
            let lease = lock
                .acquire("seq", Duration::from_secs(2))
                .await
                .expect("acquire");
            let fence = lease.fence().expect("fencing on");
            assert!(fence > last, "{flavour:?}: {fence} after {last}");
            last = fence;
            lease.release().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_still_increase_after_flushall_on_a_minority() {
    let servers = Cluster::start(Flavour::Valkey, 5);
    let lock = client(&servers);
    let mut last = FenceToken::new(0);
    for round in 0..10 {
        let lease = lock
            .acquire("amnesia", Duration::from_secs(2))
            .await
            .expect("acquire");
        let fence = lease.fence().expect("fencing on");
        assert!(fence > last, "round {round}: {fence} after {last}");
        last = fence;
        lease.release().await;
        // N − quorum = 2 nodes forget everything, a different pair each round.
        for i in [round % 5, (round + 2) % 5] {
            let _: () = redis::cmd("FLUSHALL")
                .query(&mut servers.servers[i].admin())
                .expect("FLUSHALL");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_leases_share_a_token_under_contention() {
    let servers = Cluster::start(Flavour::Redis, 5);
    let lock = client(&servers);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..10 {
                // A short, bounded wait: under contention some attempts time out, which is fine.
                if let Ok(lease) = lock.acquire("busy", Duration::from_secs(3)).await {
                    got.push(lease.fence().expect("fencing on"));
                    lease.release().await;
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    assert!(all.len() >= 80, "too few grants: {}", all.len());
    let distinct: HashSet<_> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a token was handed out twice");
}
