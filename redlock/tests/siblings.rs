//! Waiting acquires of one client for one resource: they queue in the client, in arrival
//! order, and do not ask the nodes while a lease of the same client holds it (`held`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::{LockError, Redlock};
use support::{Cluster, Flavour};
use tokio::sync::Mutex;
use tokio::time::Instant;

fn client(cluster: &Cluster, ttl: Duration) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(ttl)
        // Short polls: without the queue, every waiter would ask the nodes ~every 10 ms.
        .retry_delay(Duration::from_millis(10))
        .build()
        .expect("valid")
}

/// Five tasks wait while a sixth holds the lease for 500 ms: none of them asks the nodes
/// meanwhile, each gets the lock in one attempt, and they get it in the order they came.
/// Before the queue each waiter polled every ~10 ms: ~50 attempts each while the lease was
/// held, and the order was a lottery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_one_client_take_turns_without_asking_the_nodes() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_secs(10));
    let holder = redlock
        .acquire("turns", Duration::from_secs(5))
        .await
        .expect("first");
    let sets_before = support::command_calls(&cluster.servers[0], "set");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..5 {
        let (redlock, order) = (redlock.clone(), Arc::clone(&order));
        waiters.push(tokio::spawn(async move {
            let lease = redlock
                .acquire("turns", Duration::from_secs(60))
                .await
                .expect("acquired in turn");
            order.lock().await.push(i);
            let attempts = lease.attempts();
            tokio::time::sleep(Duration::from_millis(20)).await;
            lease.release().await;
            attempts
        }));
        // Arrival order is the order they start waiting in.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(350)).await;
    let sets_while_held = support::command_calls(&cluster.servers[0], "set") - sets_before;
    holder.release().await;
    let mut attempts = Vec::new();
    for w in waiters {
        attempts.push(w.await.expect("waiter"));
    }
    assert_eq!(
        sets_while_held, 0,
        "no waiter asked a node while its own client held the lease"
    );
    assert_eq!(
        *order.lock().await,
        [0, 1, 2, 3, 4],
        "first come, first served"
    );
    // Each asks only on its predecessor's release: once, and again when a node announces
    // that release's delete after a first try found the keys still there (3 nodes: at
    // most 1 + 3). Polling while held would be ~50.
    assert!(
        attempts.iter().all(|&a| a <= 4),
        "attempts per waiter {attempts:?}"
    );
}

/// A lease that is released, or dropped, stops holding its client's waiters back at once:
/// the same task (or a sibling) that asks again right after waits for nothing, whatever
/// the TTL and with release notices on or off. If the record outlived the lease, a task
/// that releases and acquires again would wait out the old lease's whole validity (here
/// 20 s) for a lock nobody holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_or_dropped_lease_holds_no_waiter_back() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let ttl = Duration::from_secs(20);
    for notify in [true, false] {
        let redlock = Redlock::builder(cluster.urls())
            .ttl(ttl)
            .notify_waiters(notify)
            .build()
            .expect("valid");
        let first = redlock
            .acquire("again", Duration::from_secs(5))
            .await
            .expect("first");
        first.release().await;
        let started = Instant::now();
        let second = redlock
            .acquire("again", Duration::from_secs(30))
            .await
            .expect("after a release");
        let after_release = started.elapsed();
        drop(second);
        let started = Instant::now();
        let third = redlock
            .acquire("again", Duration::from_secs(30))
            .await
            .expect("after a drop");
        let after_drop = started.elapsed();
        third.release().await;
        // Typically a few milliseconds (a drop's deletes are spawned: a first try may
        // meet them still on their way, and a retry pause follows). The bound is a tenth
        // of the TTL a stale record would make it wait.
        for (what, took) in [("release", after_release), ("drop", after_drop)] {
            assert!(
                took < ttl / 10,
                "notify {notify}: acquired {took:?} after the {what}"
            );
        }
    }
}

/// A sibling that never releases (its lease forgotten, not dropped) holds the others back
/// only until its validity ends: then the nodes decide again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sibling_that_never_releases_holds_waiters_back_until_its_validity_ends() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let ttl = Duration::from_millis(600);
    let redlock = client(&cluster, ttl);
    let holder = redlock
        .acquire("forgotten", Duration::from_secs(5))
        .await
        .expect("first");
    let valid_until = holder.valid_until();
    std::mem::forget(holder);
    let lease = redlock
        .acquire("forgotten", Duration::from_secs(30))
        .await
        .expect("acquired once the keys expired");
    let at = lease.acquired_at();
    assert!(
        lease.granted_at() >= valid_until,
        "granted before the sibling's validity ended"
    );
    // The keys expire a drift after validity; polls every ~10 ms see them gone. A
    // generous bound for a loaded machine: the TTL again.
    assert!(
        at.saturating_duration_since(valid_until) < ttl,
        "acquired {:?} after the sibling's validity",
        at.saturating_duration_since(valid_until)
    );
    lease.release().await;
}

/// A queued waiter whose wait runs out returns `WaitTimeout` with a real answer from the
/// nodes, and a waiter whose future is dropped passes its turn on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_waiter_times_out_cleanly_and_a_dropped_one_passes_its_turn() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_secs(10));
    let holder = redlock
        .acquire("queue", Duration::from_secs(5))
        .await
        .expect("first");
    // The first waiter takes the turn and is then dropped (its task aborted).
    let first = {
        let redlock = redlock.clone();
        tokio::spawn(async move { redlock.acquire("queue", Duration::from_secs(60)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = {
        let redlock = redlock.clone();
        tokio::spawn(async move { redlock.acquire("queue", Duration::from_secs(60)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A third, with a short wait, queued behind both.
    let started = Instant::now();
    let err = redlock
        .acquire("queue", Duration::from_millis(300))
        .await
        .expect_err("held by a sibling");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the wait bounds the queue: {:?}",
        started.elapsed()
    );
    match err {
        LockError::WaitTimeout { last, .. } => assert!(last.is_contended(), "{last}"),
        other => panic!("want WaitTimeout, got {other}"),
    }
    first.abort();
    let _ = first.await;
    holder.release().await;
    let lease = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the second gets its turn after the first is dropped")
        .expect("task")
        .expect("acquired");
    lease.release().await;
}
