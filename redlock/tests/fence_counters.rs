//! Fence counters: a key space of their own, and an explicit way to retire them.

use crate::support;

use std::time::Duration;

use fenced_redlock::{Redlock, ReleaseOutcome};
use support::{Cluster, Flavour, StrandingProxy, taken_by};
use tokio::task::block_in_place;

fn fenced(cluster: &Cluster) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_never_collide_with_resource_names() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let redlock = fenced(&cluster);
        redlock
            .try_acquire("a")
            .await
            .expect("free")
            .release()
            .await;
        // A resource that happens to be named like the old counter key.
        let lease = redlock
            .try_acquire("a:fence")
            .await
            .expect("a:fence is a resource of its own");
        let report = lease.release_all().await;
        assert_eq!(report.released(), 3, "{flavour:?}: {report:?}");

        // A fenced grant of `b` must not touch the key of a lease on `b:fence`.
        let other = redlock.with_fencing(false);
        let held = other.try_acquire("b:fence").await.expect("free");
        let b = redlock.try_acquire("b").await.expect("free");
        assert_eq!(b.fence().map(|f| f.get()), Some(1));
        b.release().await;
        let report = held.release_all().await;
        assert!(
            report
                .nodes
                .iter()
                .all(|n| n.outcome == ReleaseOutcome::Released),
            "{flavour:?}: {report:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_counter_leaves_no_key_behind() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = fenced(&cluster);
    for _ in 0..3 {
        redlock
            .try_acquire("order:42")
            .await
            .expect("free")
            .release()
            .await;
    }
    assert_eq!(
        block_in_place(|| cluster.keys()).len(),
        3,
        "one counter per node"
    );
    let lease = redlock.try_acquire("order:42").await.expect("free");
    assert_eq!(lease.fence().map(|f| f.get()), Some(4));
    let report = lease.retire_fence().await.expect("held");
    assert_eq!(report.released(), 3, "{report:?}");
    assert!(block_in_place(|| cluster.keys()).is_empty());
}

/// A retirement whose deletes arrive late — after the lease's keys expired and the next
/// holder wrote its token — must not wipe the next holder's counter: the one after it
/// would get a smaller token. The retirement is sent while the lease is valid, through
/// links that then take 1.5 s, and the keys live 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_retirement_leaves_the_next_holders_counter() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let mut proxies = Vec::new();
    for server in &cluster.servers {
        proxies.push(StrandingProxy::start(server.port).await);
    }
    let fenced_on = |urls: Vec<String>| {
        Redlock::builder(urls)
            .ttl(Duration::from_secs(1))
            .fencing(true)
            .build()
            .expect("valid")
    };
    let slow = fenced_on(proxies.iter().map(StrandingProxy::url).collect());
    let direct = fenced_on(cluster.urls());
    let first = slow.try_acquire("retired-late").await.expect("free");
    assert_eq!(first.fence().map(|f| f.get()), Some(1));
    for proxy in &proxies {
        proxy.lag(Duration::from_millis(1500));
    }
    let report = first.retire_fence().await.expect("valid when sent");
    // Nobody answered in time, and the deletes may still land: say so, not "failed".
    assert!(
        report
            .nodes
            .iter()
            .all(|n| matches!(n.outcome, ReleaseOutcome::Unknown(_))),
        "{report:?}"
    );
    let second = taken_by(&direct, "retired-late", Duration::from_secs(3))
        .await
        .expect("the first lease's keys expired");
    let second_token = second.fence().expect("fenced");
    second.release().await;
    // Every late delete has landed by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let third = direct.try_acquire("retired-late").await.expect("free");
    let third_token = third.fence().expect("fenced");
    assert!(
        third_token > second_token,
        "token {third_token} granted after token {second_token}: the late retirement wiped the counter"
    );
    third.release().await;
}
