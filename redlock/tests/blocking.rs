//! Feature `blocking`: the blocking client against real servers, from plain threads.
#![cfg(feature = "blocking")]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use fenced_redlock::blocking::{BuildError, Redlock};
use fenced_redlock::{ConfigError, LockError, LossReason, RenewOptions};
use support::{Cluster, Flavour};

fn client(cluster: &Cluster, ttl: Duration) -> Redlock {
    Redlock::new(Redlock::builder(cluster.urls()).ttl(ttl).fencing(true)).expect("client")
}

/// Lock keys (not fence counters, which stay by design) left on any server.
fn lock_keys_left(cluster: &Cluster) -> Vec<(usize, String)> {
    cluster
        .keys()
        .into_iter()
        .filter(|(_, k)| !k.contains(&0xFF))
        .map(|(i, k)| (i, String::from_utf8_lossy(&k).into_owned()))
        .collect()
}

#[test]
fn acquire_release_and_growing_tokens() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_secs(5));
    assert_eq!((redlock.nodes(), redlock.quorum()), (3, 2));

    let lease = redlock
        .acquire("blocking:one", Duration::from_secs(1))
        .expect("free");
    assert!(lease.is_valid());
    assert!(lease.remaining() <= Duration::from_secs(5));
    assert!(lease.valid_until() > Instant::now());
    // The third node's SET may land after the quorum's answers (measured in CI: [1, 2]).
    assert_eq!(
        cluster.wait_held_everywhere("blocking:one", Duration::from_secs(1)),
        [0, 1, 2]
    );
    let first = lease.fence().expect("fencing");
    let refused = redlock.try_acquire("blocking:one").expect_err("held");
    assert!(refused.is_contended(), "{refused}");
    assert_eq!(lease.release_all().released(), 3);
    assert_eq!(cluster.holding("blocking:one"), Vec::<usize>::new());

    let mut lease = redlock.try_acquire("blocking:one").expect("free again");
    let second = lease.fence().expect("fencing");
    assert!(second > first, "{second:?} after {first:?}");
    let validity = lease.extend().expect("extends");
    assert!(validity > Duration::from_secs(4));
    lease.release();

    let bad = Redlock::new(Redlock::builder(cluster.urls()).ttl(Duration::ZERO));
    assert!(matches!(bad, Err(BuildError::Config(ConfigError::ZeroTtl))));
}

#[test]
fn two_blocking_clients_in_threads_take_turns_with_growing_tokens() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let clients = [
        client(&cluster, Duration::from_secs(5)),
        client(&cluster, Duration::from_secs(5)),
    ];
    let inside = AtomicUsize::new(0);
    let tokens = Mutex::new(Vec::new());
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        for redlock in &clients {
            let (inside, tokens, start) = (&inside, &tokens, &start);
            s.spawn(move || {
                start.wait();
                for _ in 0..10 {
                    let lease = redlock
                        .acquire("blocking:shared", Duration::from_secs(10))
                        .expect("granted");
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                    tokens
                        .lock()
                        .unwrap()
                        .push(lease.fence().expect("fencing").get());
                    std::thread::sleep(Duration::from_millis(5));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.release();
                }
            });
        }
    });
    let tokens = tokens.into_inner().unwrap();
    assert_eq!(tokens.len(), 20);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens grow in grant order: {tokens:?}"
    );
    assert_eq!(lock_keys_left(&cluster), []);
}

#[test]
fn auto_renew_outlives_the_ttl_and_signals_a_lost_lease() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_millis(500));
    let held = redlock
        .try_acquire("blocking:renewed")
        .expect("free")
        .auto_renew(RenewOptions::default().interval(Duration::from_millis(100)));
    assert_eq!(held.lost_within(Duration::from_millis(1200)), None);
    assert!(held.is_held(), "renewed past two TTLs");
    assert_eq!(
        cluster.wait_held_everywhere("blocking:renewed", Duration::from_secs(1)),
        [0, 1, 2]
    );

    // Keys deleted under it: the renewer finds them gone and says so.
    for s in &cluster.servers {
        let _: i64 = redis::cmd("DEL")
            .arg("blocking:renewed")
            .query(&mut s.admin())
            .expect("DEL");
    }
    assert_eq!(
        held.lost_within(Duration::from_secs(2)),
        Some(LossReason::Gone)
    );
    assert!(!held.is_held());
    assert_eq!(held.lost(), LossReason::Gone);
    held.release();

    // Another thread can wait on `lost` while this one works.
    let held = redlock
        .try_acquire("blocking:renewed")
        .expect("free")
        .auto_renew(RenewOptions::default().max_hold(Duration::from_millis(300)));
    let reason = std::thread::scope(|s| s.spawn(|| held.lost()).join().expect("no panic"));
    assert_eq!(reason, LossReason::MaxHoldReached);
    held.release();
}

#[test]
fn dropping_everything_leaves_no_key() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_secs(30));
    // A lease dropped while the client lives is released in the background.
    let dropped = redlock.try_acquire("blocking:a").expect("free");
    drop(dropped);
    assert_eq!(
        cluster.wait_gone("blocking:a", Duration::from_secs(2)),
        Vec::<usize>::new()
    );

    // Leases, a renewing lease and clones dropped last: the drop waits for the releases.
    let lease = redlock.try_acquire("blocking:b").expect("free");
    let renewing = redlock
        .with_ttl(Duration::from_secs(20))
        .expect("ttl")
        .try_acquire("blocking:c")
        .expect("free")
        .auto_renew(RenewOptions::default());
    let clone = redlock.clone();
    assert_eq!(lock_keys_left(&cluster).len(), 6);
    drop(redlock);
    drop(clone);
    drop(renewing);
    drop(lease);
    assert_eq!(
        lock_keys_left(&cluster),
        [],
        "30 s TTLs: released, not expired"
    );
}

#[test]
fn shutdown_refuses_new_acquires() {
    let cluster = Cluster::start(Flavour::Redis, 1);
    let redlock = client(&cluster, Duration::from_secs(5));
    let lease = redlock.try_acquire("blocking:s").expect("free");
    drop(lease);
    redlock.shutdown().expect("finishes");
    assert_eq!(lock_keys_left(&cluster), []);
    assert!(matches!(
        redlock.try_acquire("blocking:s"),
        Err(LockError::ShutDown)
    ));
}

/// Called from async code it blocks the caller, but does not deadlock: on a
/// current-thread runtime (the worst case: one thread for everything) it completes, and so
/// does dropping the client there.
#[tokio::test]
async fn usable_from_inside_a_runtime_without_deadlock() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, Duration::from_secs(5));
    let held = redlock.try_acquire("blocking:async").expect("free");
    let waiter = {
        let redlock = redlock.clone();
        // A thread waiting for the lock, woken by the release made from this task.
        std::thread::spawn(move || redlock.acquire("blocking:async", Duration::from_secs(5)))
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    held.release();
    let granted = waiter.join().expect("no panic").expect("granted");
    // The acquire returned on a quorum: wait for the third SET, or a release could miss it
    // (CI: 2 released of 3). The third node may also have said no: the release notice that
    // woke the waiter can outrun the release's delete on that node (CI: held on [0, 1]).
    let holding = cluster.wait_held_everywhere("blocking:async", Duration::from_secs(1));
    assert!(
        holding.len() >= 2,
        "a quorum of 3 holds the grant: {holding:?}"
    );
    assert_eq!(granted.release_all().released(), holding.len());
    let renewing = redlock
        .try_acquire("blocking:async")
        .expect("free")
        .auto_renew(RenewOptions::default());
    drop(renewing);
    drop(redlock);
    assert_eq!(lock_keys_left(&cluster), []);
    let redlock = Arc::new(client(&cluster, Duration::from_secs(5)));
    let from_worker = tokio::task::spawn_blocking({
        let redlock = Arc::clone(&redlock);
        move || {
            redlock
                .try_acquire("blocking:async")
                .map(|l| l.release_all().released())
        }
    });
    assert_eq!(from_worker.await.expect("no panic").expect("free"), 3);
}

#[test]
fn a_handed_over_lease_is_extended_for_longer_and_released_by_another_client() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let a = client(&cluster, Duration::from_secs(2));
    let b = client(&cluster, Duration::from_secs(2));
    let lease = a
        .acquire("blocking:handed", Duration::from_secs(1))
        .expect("free");
    // The acquire returned on a quorum; a third SET landing after the release below would
    // leave a key for its TTL (failed once on a loaded machine).
    assert_eq!(
        cluster.wait_held_everywhere("blocking:handed", Duration::from_secs(1)),
        [0, 1, 2]
    );
    let fence = lease.fence();
    let mut adopted = b.adopt(lease.into_handle()).expect("a good handle");
    assert_eq!(adopted.remaining(), Duration::ZERO, "no validity known yet");
    assert_eq!(adopted.fence(), fence);
    let validity = adopted
        .extend_for(Duration::from_secs(30))
        .expect("the keys are ours");
    assert!(validity > Duration::from_secs(25), "{validity:?}");
    assert!(matches!(
        adopted.extend_for(Duration::ZERO),
        Err(LockError::InvalidTtl { .. })
    ));
    assert!(adopted.release_all().released() >= 2);
    assert_eq!(lock_keys_left(&cluster), []);
}
