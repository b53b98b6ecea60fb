//! A release future dropped before it finishes — a `select!` branch that lost, a timeout,
//! an aborted task — must leave the same outcome as dropping the lease: the keys are
//! deleted in the background, and `shutdown` waits for it. The runtime has one thread, so
//! nothing else runs while the future is polled once: it is dropped mid-way for sure.

use crate::support;

use std::time::Duration;

use fenced_redlock::{Redlock, RenewOptions};
use futures::FutureExt;
use support::{Cluster, Flavour};

fn client(urls: Vec<String>) -> Redlock {
    Redlock::builder(urls)
        .ttl(Duration::from_secs(30))
        .build()
        .expect("valid")
}

/// A lease adopted by a client that has no connection yet: the release's first poll only
/// starts connecting, so nothing has been sent when it is dropped.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_release_still_deletes_the_keys() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let first = client(cluster.urls());
    let handle = first
        .try_acquire("dropped-release")
        .await
        .expect("free")
        .into_handle();
    let _ = first.shutdown().await;
    let adopter = client(cluster.urls());
    let lease = adopter.adopt(handle).expect("a valid handle");
    assert!(
        lease.release().now_or_never().is_none(),
        "released in its first poll, before connecting"
    );
    adopter.shutdown().await.expect("shut down");
    let left = cluster.holding("dropped-release");
    assert!(
        left.is_empty(),
        "keys left on nodes {left:?} for a whole TTL"
    );
}

/// `RenewingLease::release` dropped while it waits for the renewer to stop.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_renewing_release_still_deletes_the_keys() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let redlock = client(cluster.urls());
    let held = redlock
        .try_acquire("dropped-renewing-release")
        .await
        .expect("free")
        .auto_renew(RenewOptions::default());
    assert!(
        held.release().now_or_never().is_none(),
        "released in its first poll, before the renewer stopped"
    );
    // Let the renewer see the stop before `shutdown` would stop it another way.
    tokio::time::sleep(Duration::from_millis(50)).await;
    redlock.shutdown().await.expect("shut down");
    let left = cluster.holding("dropped-renewing-release");
    assert!(
        left.is_empty(),
        "keys left on nodes {left:?} for a whole TTL"
    );
}
