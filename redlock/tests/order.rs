//! Calls reach each node in the order they were made, under load: a release's deletes (and
//! a failed attempt's clean-up) land before the same client's next `SET NX`, so a client
//! never finds its own old key in its way.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fenced_redlock::Redlock;
use support::{Cluster, Flavour};

/// 128 tasks, each cycling try_acquire → release on a resource of its own: nobody else
/// ever holds these resources, so every acquire must be granted. Before the fixes this
/// failed thousands of times: the release returns at a majority, and its remaining
/// deletes could be overtaken by the next `SET` (a full request channel let later
/// requests in first; a failed attempt's clean-up was first polled after the next
/// attempt had sent its `SET`s). It reproduces with an optimized client (`scripts/test`
/// builds everything with the optimized `ci` profile; the lock crate itself is optimized in
/// the dev profile too); an unoptimized one is too slow to fill a connection's request
/// channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_never_finds_its_own_old_key() {
    let cluster = Cluster::start(Flavour::Valkey, 5);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid");
    let refused = Arc::new(AtomicU64::new(0));
    let first = Arc::new(std::sync::Mutex::new(None::<String>));
    // The same load whatever the profile: the test must not need a second build to bite.
    let cycles = 1000;
    let mut tasks = tokio::task::JoinSet::new();
    for j in 0..128 {
        let (redlock, refused, first) = (redlock.clone(), Arc::clone(&refused), Arc::clone(&first));
        tasks.spawn(async move {
            let resource = format!("order:{j}");
            for _ in 0..cycles {
                match redlock.try_acquire(&resource).await {
                    Ok(lease) => {
                        lease.release().await;
                    }
                    Err(e) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                        first
                            .lock()
                            .expect("not poisoned")
                            .get_or_insert(e.to_string());
                    }
                }
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.expect("no panic");
    }
    redlock.shutdown().await.expect("clean shutdown");
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "first: {:?}",
        first.lock().expect("not poisoned")
    );
    assert!(cluster.keys().is_empty(), "{:?}", cluster.keys());
}
