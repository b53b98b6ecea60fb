//! An extend whose TTL ends before the lease's validity does shortens the keys on every
//! node it reaches, whether or not it succeeds. The holder must never believe it holds the
//! lock past the shortened keys: a second client can take the lock once they expire.
//! Each test makes the extend fail or drops it, waits until a second client holds the
//! lock, and checks that the first no longer believes it does.
//!
//! The renewer is the exception: it shares its validity with a holder that may be working
//! on it, so it never shortens what it announced (the last two tests).

use crate::support;

use std::time::Duration;

use fenced_redlock::{LeaseStatus, Redlock, RenewOptions};
use futures::FutureExt;
use support::{Cluster, Flavour, StrandingProxy, taken_by};
use tokio::time::Instant;

fn client(urls: Vec<String>, ttl: Duration) -> Redlock {
    Redlock::builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(50))
        .build()
        .expect("valid")
}

/// Two of three nodes frozen: the extend reaches one at once and the other two when they
/// wake, so it fails, and then every key lives only the extend's TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_extend_that_shortens_the_keys_ends_validity() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let long = client(cluster.urls(), Duration::from_secs(10));
        let short = client(cluster.urls(), Duration::from_millis(300));
        let other = client(cluster.urls(), Duration::from_secs(10));

        // A shorter TTL of the caller's choosing, and the client's own TTL after a longer
        // one: both shorten the keys.
        let mut shorter = long.try_acquire("shorter").await.expect("free");
        let mut back = short.try_acquire("back").await.expect("free");
        back.extend_for(Duration::from_secs(10))
            .await
            .expect("extended");
        cluster.servers[1].freeze();
        cluster.servers[2].freeze();
        let failed = shorter.extend_for(Duration::from_millis(300)).await;
        let failed_back = back.extend().await;
        cluster.servers[1].thaw();
        cluster.servers[2].thaw();
        assert!(failed.is_err(), "{flavour:?}: {failed:?}");
        assert!(failed_back.is_err(), "{flavour:?}: {failed_back:?}");

        for (name, lease) in [("shorter", &shorter), ("back", &back)] {
            let theirs = taken_by(&other, name, Duration::from_secs(3))
                .await
                .unwrap_or_else(|| panic!("{flavour:?} {name}: the shortened keys never expired"));
            assert!(
                !lease.is_valid(),
                "{flavour:?} {name}: another client holds the lock, yet the first has {:?} left",
                lease.remaining()
            );
            theirs.release().await;
        }
        drop((shorter, back));
        let _ = other.shutdown().await;
        let _ = long.shutdown().await;
        let _ = short.shutdown().await;
    }
}

/// An extend polled once (its requests are on their way) and then dropped. Two nodes are
/// frozen so that it cannot finish in that poll; they run its `PEXPIRE` when they wake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_extend_that_shortens_the_keys_ends_validity() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let mine = client(cluster.urls(), Duration::from_secs(10));
        let other = client(cluster.urls(), Duration::from_secs(10));
        let mut lease = mine.try_acquire("dropped").await.expect("free");
        cluster.servers[1].freeze();
        cluster.servers[2].freeze();
        let polled = lease.extend_for(Duration::from_millis(200)).now_or_never();
        cluster.servers[1].thaw();
        cluster.servers[2].thaw();
        assert!(
            polled.is_none(),
            "{flavour:?}: answered in its first poll: {polled:?}"
        );
        let theirs = taken_by(&other, "dropped", Duration::from_secs(3))
            .await
            .unwrap_or_else(|| panic!("{flavour:?}: the shortened keys never expired"));
        assert!(
            !lease.is_valid(),
            "{flavour:?}: another client holds the lock, yet the first has {:?} left",
            lease.remaining()
        );
        theirs.release().await;
        drop(lease);
        let _ = other.shutdown().await;
        let _ = mine.shutdown().await;
    }
}

/// A renewer never ends a lease before the validity it already announced: after
/// `extend_for(1.5 s)` on a 300 ms client, renewing every 50 ms with the client's TTL would
/// cut the keys (and `status`) to ~300 ms at the first renewal, while a holder that read
/// `status` a moment before still works to the 1.5 s end. Every `status` seen must keep
/// that end, and the lease must still be renewed past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewer_keeps_the_validity_an_extend_for_gave() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let mine = client(cluster.urls(), Duration::from_millis(300));
    let mut lease = mine.try_acquire("kept").await.expect("free");
    lease
        .extend_for(Duration::from_millis(1_500))
        .await
        .expect("extended");
    let announced = lease.valid_until();
    let held = lease.auto_renew(RenewOptions::default().interval(Duration::from_millis(50)));
    let watch_until = announced + Duration::from_millis(400);
    let mut latest = announced;
    while Instant::now() < watch_until {
        match held.status() {
            LeaseStatus::Held { valid_until } => {
                assert!(
                    valid_until >= announced,
                    "the renewer cut the announced validity by {:?}",
                    announced - valid_until
                );
                latest = latest.max(valid_until);
            }
            other => panic!("lost with every node up: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        latest > announced,
        "never renewed past the extend's validity"
    );
    held.release().await;
    let _ = mine.shutdown().await;
}

/// After `extend_for(3 s)` on a 1 s client, the renewer's first renewal comes ~2 s in,
/// when the client's TTL no longer ends the lease earlier. Its requests reach the servers
/// but the replies are black-holed, then the links break: the renewal fails and the keys
/// live 1 s from when it landed. Nobody else may take the lock before the validity the
/// extend gave, and by the time another client does, `is_held` and `lost` must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_fails_reports_the_loss_and_keeps_the_announced_end() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let mut proxies = Vec::new();
    for server in &cluster.servers {
        proxies.push(StrandingProxy::start(server.port).await);
    }
    let through: Vec<String> = proxies.iter().map(StrandingProxy::url).collect();
    let mine = Redlock::builder(through)
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid");
    let other = client(cluster.urls(), Duration::from_secs(1));
    let mut lease = mine.try_acquire("renewed").await.expect("free");
    lease
        .extend_for(Duration::from_secs(3))
        .await
        .expect("extended");
    let announced = lease.valid_until();
    let interval = Duration::from_millis(200);
    let held = lease.auto_renew(RenewOptions::default().interval(interval));
    for proxy in &proxies {
        proxy.mute_replies();
    }
    // The first renewal (~1 s before the announced end) lands and times out; then nothing
    // gets through.
    let first = announced - Duration::from_secs(1);
    tokio::time::sleep_until(first + Duration::from_millis(350)).await;
    for proxy in &proxies {
        proxy.strand();
    }
    let theirs = taken_by(&other, "renewed", Duration::from_secs(5))
        .await
        .expect("the keys never expired");
    let taken_at = Instant::now();
    assert!(
        taken_at >= announced,
        "another client took the lock {:?} before the end the extend announced",
        announced - taken_at
    );
    let held_now = held.is_held();
    let lost = held.lost().now_or_never();
    assert!(
        !held_now,
        "another client holds the lock, yet the renewing holder is held: {:?}",
        held.status()
    );
    assert!(lost.is_some(), "lost() still silent: {:?}", held.status());
    theirs.release().await;
    drop(held);
    let _ = other.shutdown().await;
}
