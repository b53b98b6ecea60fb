//! The safety-relevant edges: the loss signal is never late, no key of ours outlives a
//! release, a cancelled acquire or a shut-down client.

use crate::support;

use std::time::Duration;

use fenced_redlock::{LeaseStatus, LossReason, Redlock, RenewOptions};
use redis::Commands;
use support::{Cluster, Flavour};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// Margin for scheduling on a shared, busy test machine: a loss told on time (a timer at
/// the end of validity) was seen 7-23 ms late here on two loaded cores (the test's own
/// 5 ms included), and the failure guarded against (below) is about 900 ms late.
const SCHEDULING: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_is_signalled_by_valid_until_while_a_renewal_waits_on_frozen_nodes() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(2))
        .node_timeout(Duration::from_millis(1900))
        .build()
        .expect("valid");
    let lease = redlock.try_acquire("late-loss").await.expect("free");
    let valid_until = lease.valid_until();
    let held = lease.auto_renew(RenewOptions::default().interval(Duration::from_secs(1)));
    // The renewal at +1 s gets two votes at once and waits up to 1.9 s for the rest: a loss
    // told when the renewal gives up would come about 900 ms after validity ended.
    for i in 0..3 {
        cluster.servers[i].freeze();
    }
    tokio::time::sleep_until(valid_until + Duration::from_millis(5)).await;
    let status = held.status();
    let reason = tokio::time::timeout(SCHEDULING, held.lost()).await;
    let late = Instant::now().saturating_duration_since(valid_until);
    for i in 0..3 {
        cluster.servers[i].thaw();
    }
    assert!(
        matches!(status, LeaseStatus::Lost(LossReason::Expired)),
        "status() past valid_until: {status:?}"
    );
    assert_eq!(
        reason.ok(),
        Some(LossReason::Expired),
        "lost() still silent {late:?} after validity ended"
    );
    held.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_outlives_a_release_on_nodes_whose_script_cache_was_flushed() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(10))
            .node_timeout(Duration::from_secs(1))
            .fencing(true)
            .build()
            .expect("valid");
        // Warm the connections, then empty every script cache and run one unfenced
        // acquire/release, so the release script is known again but the acquire's is not.
        let warm = redlock.try_acquire("warm").await.expect("free");
        warm.release().await;
        for s in &cluster.servers {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query(&mut s.admin())
                .expect("SCRIPT FLUSH");
        }
        let unfenced = redlock.with_fencing(false);
        unfenced
            .try_acquire("warm")
            .await
            .expect("free")
            .release()
            .await;

        // Two nodes answer late: the quorum is decided without them, and the release
        // reaches them right behind the acquire.
        cluster.servers[3].freeze();
        cluster.servers[4].freeze();
        let lease = redlock.try_acquire("flushed").await.expect("3 of 5 answer");
        let release = tokio::spawn(async move { lease.release().await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster.servers[3].thaw();
        cluster.servers[4].thaw();
        let report = release.await.expect("release");
        // Anything the late nodes still do (reload, resend) happens within their deadline.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let left = block_in_place(|| cluster.holding("flushed"));
        assert!(
            left.is_empty(),
            "{flavour:?}: our key is still on nodes {left:?} after the release {report:?}"
        );
        for s in &cluster.servers {
            let pttl: i64 = s.admin().pttl("flushed").expect("PTTL");
            assert_eq!(pttl, -2, "{flavour:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_removes_what_it_set() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    // The attempts are given up after 150 ms while the frozen nodes' 3 s deadline keeps
    // them open: 20 times the wait, so a slow timer cannot let them finish first.
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(3))
        .build()
        .expect("valid");
    redlock
        .try_acquire("warm")
        .await
        .expect("free")
        .release()
        .await;
    // Three frozen nodes keep the vote open; two have set our key when we give up.
    for i in 0..3 {
        cluster.servers[i].freeze();
    }
    let cancelled =
        tokio::time::timeout(Duration::from_millis(150), redlock.try_acquire("cancelled")).await;
    assert!(cancelled.is_err(), "the attempt should still be waiting");
    let waiting = tokio::select! {
        r = redlock.acquire("cancelled-wait", Duration::from_secs(5)) => Some(r),
        () = tokio::time::sleep(Duration::from_millis(150)) => None,
    };
    assert!(
        waiting.is_none(),
        "the waiting acquire should still be waiting"
    );
    for i in 0..3 {
        cluster.servers[i].thaw();
    }
    for key in ["cancelled", "cancelled-wait"] {
        let left = block_in_place(|| cluster.wait_gone(key, Duration::from_secs(3)));
        assert!(left.is_empty(), "{key} still on nodes {left:?}");
    }
    // And the resource is free at once for another client.
    let other = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid");
    other
        .try_acquire("cancelled")
        .await
        .expect("free again")
        .release()
        .await;
}

/// A short-lived process: a failed attempt, a dropped lease, a dropped renewing lease and
/// one still held, then `shutdown()` and the runtime goes away. On a current-thread
/// runtime background tasks run only while the caller awaits, so without a shutdown that
/// waits for them they would never run at all. Nothing of ours may stay behind.
#[test]
fn shutdown_waits_for_every_background_clean_up() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    for i in 0..3 {
        let _: () = cluster.servers[i]
            .admin()
            .set_ex("contended", "other", 30)
            .expect("SET");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(10))
            .build()
            .expect("valid");
        let held = redlock
            .try_acquire("held")
            .await
            .expect("free")
            .auto_renew(RenewOptions::default());
        let dropped_renewing = redlock
            .try_acquire("renewing")
            .await
            .expect("free")
            .auto_renew(RenewOptions::default());
        let dropped = redlock.try_acquire("dropped").await.expect("free");
        let err = redlock
            .try_acquire("contended")
            .await
            .expect_err("held on 3 of 5");
        assert!(err.is_contended(), "{err}");
        drop(dropped);
        drop(dropped_renewing);
        redlock
            .shutdown()
            .await
            .expect("finishes within the deadlines");
        // The renewer of a lease still in hand stopped and released it.
        assert_eq!(held.lost().await, LossReason::Shutdown);
        assert!(!held.is_held());
        drop(held);
        assert!(matches!(
            redlock.try_acquire("after").await,
            Err(fenced_redlock::LockError::ShutDown)
        ));
    });
    drop(runtime);
    for key in ["held", "renewing", "dropped", "after"] {
        let left = cluster.holding(key);
        assert!(left.is_empty(), "{key} left on nodes {left:?}");
    }
    let left = cluster.holding("contended");
    assert_eq!(left, vec![0, 1, 2], "the failed attempt's keys are gone");
}

/// The same, before any connection exists: the attempt's `SET`s and the clean-up's deletes
/// both wait for connections to nodes that are frozen mid-handshake. When the nodes come
/// back, the deletes must still reach each node after the `SET`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_on_connecting_nodes_removes_what_it_set() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid");
    for i in 0..5 {
        cluster.servers[i].freeze();
    }
    for round in 0..4 {
        let key = format!("connecting-{round}");
        let cancelled =
            tokio::time::timeout(Duration::from_millis(20), redlock.try_acquire(&key)).await;
        assert!(cancelled.is_err(), "the attempt should still be waiting");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..5 {
        cluster.servers[i].thaw();
    }
    for round in 0..4 {
        let key = format!("connecting-{round}");
        let left = block_in_place(|| cluster.wait_gone(&key, Duration::from_secs(3)));
        assert!(left.is_empty(), "{key} still on nodes {left:?}");
    }
}
