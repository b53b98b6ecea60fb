//! The lock against real Redis 7 and Valkey 8 servers.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::{
    LeaseStatus, LockError, LossReason, NodeError, NodeFailureReason, NodeOutcome, Redlock,
    ReleaseOutcome, RenewOptions,
};
use redis::Commands;
use support::{Cluster, Flavour};
use tokio::time::Instant;

fn client(cluster: &Cluster, ttl: Duration) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(ttl)
        .build()
        .expect("valid config")
}

fn get(cluster: &Cluster, i: usize, key: &str) -> Option<String> {
    cluster.servers[i].admin().get(key).expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_extend_release() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        let redlock = client(&cluster, Duration::from_secs(2));
        let mut lease = redlock.try_acquire("orders:1").await.expect("free lock");
        assert!(lease.is_valid());
        assert!(lease.remaining() <= Duration::from_secs(2) - redlock.drift());
        assert!(
            lease
                .nodes()
                .iter()
                .filter(|n| n.outcome == NodeOutcome::Granted)
                .count()
                >= 3
        );

        for i in 0..5 {
            let pttl: i64 = cluster.servers[i].admin().pttl("orders:1").expect("PTTL");
            // Late grants may still be landing on the nodes the decision did not wait for.
            assert!(
                pttl <= 2000,
                "{flavour:?} node {i}: PTTL {pttl} above the ttl"
            );
        }
        // Held: a second attempt fails with a contention error.
        let err = redlock.try_acquire("orders:1").await.expect_err("held");
        assert!(err.is_contended(), "{err}");

        let before = lease.valid_until();
        tokio::time::sleep(Duration::from_millis(50)).await;
        lease.extend().await.expect("extend");
        assert!(lease.valid_until() > before);

        let report = lease.release_all().await;
        assert_eq!(report.released(), 5, "{flavour:?}: {report:?}");
        for i in 0..5 {
            assert_eq!(get(&cluster, i, "orders:1"), None);
        }
        redlock
            .try_acquire("orders:1")
            .await
            .expect("free again")
            .release()
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_down_still_locks_three_down_fails_with_quorum_error() {
    for flavour in Flavour::ALL {
        let mut cluster = Cluster::start(flavour, 5);
        let redlock = client(&cluster, Duration::from_secs(1));
        cluster.servers[0].kill();
        cluster.servers[3].kill();
        let lease = redlock
            .try_acquire("two-down")
            .await
            .expect("3 of 5 is a majority");
        lease.release().await;

        cluster.servers[4].kill();
        let started = Instant::now();
        let wait = Duration::from_millis(300);
        let err = redlock
            .acquire("three-down", wait)
            .await
            .expect_err("2 of 5 is not");
        assert!(
            started.elapsed() < wait + Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let LockError::WaitTimeout { last, .. } = &err else {
            panic!("{err}")
        };
        let LockError::QuorumNotReached {
            granted,
            required,
            nodes,
            failures,
            ..
        } = &**last
        else {
            panic!("{last}")
        };
        // The attempt gives up as soon as three refusals make a majority impossible, which
        // may be before the two live nodes have said yes.
        assert!(*granted <= 2, "{last}");
        assert_eq!((*required, *nodes), (3, 5));
        assert_eq!(failures.len(), 5 - granted);
        let text = last.to_string();
        assert!(
            text.contains(&format!("granted {granted} of 5, needed 3")),
            "{text}"
        );
        for dead in [0, 3, 4] {
            let addr = cluster.servers[dead].addr();
            assert!(text.contains(&format!("node {addr}: ")), "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_down_at_build_time_is_just_a_failed_vote() {
    let mut cluster = Cluster::start(Flavour::Valkey, 5);
    cluster.servers[1].kill();
    let redlock = client(&cluster, Duration::from_secs(1));
    let lease = redlock.try_acquire("late-node").await.expect("4 of 5 up");
    assert!(matches!(
        lease.nodes()[1].outcome,
        NodeOutcome::Failed(_) | NodeOutcome::NoAnswer
    ));
    lease.release().await;
    cluster.servers[1].restart();
    // Reconnects by itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lease = redlock.try_acquire("late-node").await.expect("lock");
        let granted = lease.nodes()[1].outcome == NodeOutcome::Granted;
        lease.release().await;
        if granted {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 never rejoined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_nodes_cost_at_most_their_deadline() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        // Every bound below is the frozen node's deadline (or a multiple): waiting for it
        // at all would cost the whole deadline. 1 s is hundreds of times what four live
        // loopback nodes take (about a millisecond), so a loaded machine does not cross it.
        let node_timeout = Duration::from_secs(1);
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(10))
            .node_timeout(node_timeout)
            .build()
            .expect("valid");
        // Warm the connections so the measurement is about the frozen node alone.
        redlock
            .try_acquire("warm")
            .await
            .expect("warm")
            .release()
            .await;

        cluster.servers[2].freeze();
        let started = Instant::now();
        let lease = redlock
            .try_acquire("frozen-one")
            .await
            .expect("4 of 5 answer");
        assert!(
            started.elapsed() < node_timeout,
            "one frozen node delayed acquire: {:?}",
            started.elapsed()
        );
        // The default release returns when a majority answered: the frozen node does not
        // delay it, and its delete is still pending.
        let started = Instant::now();
        let report = lease.release().await;
        assert!(
            started.elapsed() < node_timeout / 2,
            "one frozen node delayed release: {:?}",
            started.elapsed()
        );
        assert_eq!(
            report.nodes[2].outcome,
            ReleaseOutcome::Pending,
            "{report:?}"
        );
        assert!(report.released() >= 3, "{report:?}");
        // release_all waits for each node at most its deadline, and says what it got.
        let lease = redlock.try_acquire("frozen-one").await.expect("free again");
        let started = Instant::now();
        let report = lease.release_all().await;
        let took = started.elapsed();
        // At least the deadline (it waited for the frozen node), and not a second one.
        assert!(took >= node_timeout && took < node_timeout * 2, "{took:?}");
        assert!(
            matches!(
                report.nodes[2].outcome,
                ReleaseOutcome::Failed(NodeError::Timeout(_))
            ),
            "{report:?}"
        );
        assert_eq!(report.released(), 4, "{report:?}");

        cluster.servers[0].freeze();
        cluster.servers[4].freeze();
        let started = Instant::now();
        let err = redlock
            .try_acquire("frozen-three")
            .await
            .expect_err("only 2 answer");
        // One deadline for the three frozen nodes together, not one after another.
        assert!(
            started.elapsed() < node_timeout * 2,
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(err, LockError::QuorumNotReached { granted: 2, .. }),
            "{err}"
        );
        for i in [0, 2, 4] {
            cluster.servers[i].thaw();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_tasks_never_hold_overlapping_validity() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        let redlock = client(&cluster, Duration::from_millis(500));
        let origin = Instant::now();
        let windows = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (redlock, windows) = (redlock.clone(), Arc::clone(&windows));
            tasks.push(tokio::spawn(async move {
                for _ in 0..15 {
                    let lease = redlock
                        .acquire("shared", Duration::from_secs(10))
                        .await
                        .expect("acquire");
                    let start = lease.granted_at() - origin;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    // The holder stops using the lock when it releases or when validity ends,
                    // whichever is first.
                    let end = Instant::now().min(lease.valid_until()) - origin;
                    windows.lock().expect("lock").push((start, end));
                    lease.release().await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let mut w = windows.lock().expect("lock").clone();
        assert_eq!(w.len(), 120);
        w.sort();
        for pair in w.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "{flavour:?}: overlapping holders {pair:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_and_extend_never_touch_another_owners_key() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        let redlock = client(&cluster, Duration::from_secs(2));
        let mut lease = redlock.try_acquire("stolen").await.expect("lock");
        // Wait for late grants, then let "someone else" own the key everywhere.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for s in &cluster.servers {
            let _: () = s.admin().set_ex("stolen", "other-owner", 60).expect("SET");
        }
        let err = lease.extend().await.expect_err("not ours");
        assert!(
            matches!(err, LockError::QuorumNotReached { granted: 0, .. }),
            "{err}"
        );
        for i in 0..5 {
            let ttl: i64 = cluster.servers[i].admin().ttl("stolen").expect("TTL");
            assert!(ttl > 50, "extend changed another owner's expiry: {ttl}");
        }
        let report = lease.release_all().await;
        assert!(
            report
                .nodes
                .iter()
                .all(|n| n.outcome == ReleaseOutcome::NotOurs),
            "{report:?}"
        );
        for i in 0..5 {
            assert_eq!(get(&cluster, i, "stolen").as_deref(), Some("other-owner"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempt_removes_its_keys_everywhere() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    let redlock = client(&cluster, Duration::from_secs(5));
    for i in 0..3 {
        let _: () = cluster.servers[i]
            .admin()
            .set_ex("split", "other", 60)
            .expect("SET");
    }
    let err = redlock
        .try_acquire("split")
        .await
        .expect_err("3 held elsewhere");
    assert!(matches!(err, LockError::QuorumNotReached { .. }), "{err}");
    let deadline = Instant::now() + Duration::from_secs(2);
    while get(&cluster, 3, "split").is_some() || get(&cluster, 4, "split").is_some() {
        assert!(
            Instant::now() < deadline,
            "keys of a failed attempt were left behind"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in 0..3 {
        assert_eq!(get(&cluster, i, "split").as_deref(), Some("other"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewer_keeps_the_lease_and_signals_loss() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 5);
        let redlock = client(&cluster, Duration::from_millis(300));
        let lease = redlock.try_acquire("renewed").await.expect("lock");
        let held = lease.auto_renew(RenewOptions::default());
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(held.is_held(), "{:?}", held.status());
        let others = redlock.try_acquire("renewed").await;
        assert!(others.is_err(), "renewed lease was taken");

        for s in &cluster.servers {
            let _: () = s.admin().del("renewed").expect("DEL");
        }
        let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
            .await
            .expect("loss signalled");
        assert_eq!(reason, LossReason::Gone);
        assert!(matches!(held.status(), LeaseStatus::Lost(LossReason::Gone)));
        held.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewer_signals_expiry_when_nodes_stop_answering_and_respects_max_hold() {
    let cluster = Cluster::start(Flavour::Valkey, 5);
    let redlock = client(&cluster, Duration::from_millis(300));
    let lease = redlock.try_acquire("frozen-holder").await.expect("lock");
    let held = lease.auto_renew(RenewOptions::default());
    for i in 0..3 {
        cluster.servers[i].freeze();
    }
    let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("signalled");
    assert_eq!(reason, LossReason::Expired);
    for i in 0..3 {
        cluster.servers[i].thaw();
    }
    held.release().await;

    let lease = redlock.try_acquire("capped").await.expect("lock");
    let started = Instant::now();
    let held = lease.auto_renew(RenewOptions::default().max_hold(Duration::from_millis(400)));
    let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("signalled");
    assert_eq!(reason, LossReason::MaxHoldReached);
    assert!(started.elapsed() >= Duration::from_millis(350));
    held.release().await;
}

/// An interval no renewal could land within (not shorter than the validity a renewal
/// gives) is replaced by the default: the lease outlives its first validity. It was once
/// taken as given, and the lease was lost as expired after one TTL with no extend sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_interval_too_long_to_ever_renew_is_replaced_by_the_default() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let ttl = Duration::from_secs(1);
    let redlock = client(&cluster, ttl);
    for interval in [ttl - redlock.drift(), ttl, Duration::MAX] {
        let lease = redlock.try_acquire("rarely").await.expect("lock");
        let first_end = lease.valid_until();
        let held = lease.auto_renew(RenewOptions::default().interval(interval));
        tokio::time::sleep_until(first_end + ttl / 2).await;
        assert!(
            matches!(held.status(), LeaseStatus::Held { valid_until } if valid_until > first_end),
            "{interval:?}: {:?} at {:?} past the first validity",
            held.status(),
            first_end.elapsed()
        );
        held.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_release_not_by_polling() {
    let cluster = Cluster::start(Flavour::Redis, 5);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .retry_delay(Duration::from_secs(10))
        .build()
        .expect("valid");
    let holder = redlock.try_acquire("handoff").await.expect("lock");
    let waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            let lease = redlock
                .acquire("handoff", Duration::from_secs(60))
                .await
                .expect("eventually");
            let at = Instant::now();
            lease.release().await;
            at
        })
    };
    // Let the waiter fail once and subscribe.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    holder.release().await;
    let acquired = waiter.await.expect("waiter");
    // Polling alone would take 5–15 s here (the retry delay ± half); a woken waiter takes
    // a few milliseconds. Half the shortest poll tells them apart on any machine.
    assert!(
        acquired - released < Duration::from_millis(2500),
        "hand-off took {:?}",
        acquired - released
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_failures_are_reported_per_node() {
    let cluster = Cluster::start_with(Flavour::Redis, 3, Some("s3cret"));
    let good = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid");
    good.try_acquire("auth")
        .await
        .expect("right password")
        .release()
        .await;

    let wrong: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://:nope@127.0.0.1:{}", s.port))
        .collect();
    let bad = Redlock::builder(wrong)
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid");
    let err = bad.try_acquire("auth").await.expect_err("wrong password");
    let LockError::QuorumNotReached { failures, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        failures
            .iter()
            .any(|f| matches!(&f.reason, NodeFailureReason::Error(NodeError::Auth(_)))),
        "{err}"
    );
    assert!(!err.to_string().contains("nope"), "password leaked: {err}");
}

/// The URL's ACL user, password and database reach every node (the connection makes its
/// own handshake: `AUTH user pass`, `SELECT db`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_user_and_database_from_the_url_are_used() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    for server in &cluster.servers {
        redis::cmd("ACL")
            .arg(&["SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all"][..])
            .exec(&mut server.admin())
            .expect("ACL SETUSER");
    }
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}/3", s.port))
        .collect();
    let redlock = Redlock::builder(urls.clone())
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    let lease = redlock.try_acquire("acl-db").await.expect("acquired");
    // A quorum holds the key in database 3 (the last node's SET may still be on its way);
    // none in database 0.
    let mut in_db3 = 0;
    for server in &cluster.servers {
        let mut admin = server.admin();
        let in_db0: bool = redis::cmd("EXISTS")
            .arg("acl-db")
            .query(&mut admin)
            .expect("EXISTS");
        assert!(!in_db0, "node {}: the key is in database 0", server.port);
        redis::cmd("SELECT")
            .arg(3)
            .exec(&mut admin)
            .expect("SELECT");
        let here: bool = redis::cmd("EXISTS")
            .arg("acl-db")
            .query(&mut admin)
            .expect("EXISTS");
        in_db3 += usize::from(here);
    }
    assert!(
        in_db3 >= 2,
        "{in_db3} of 3 nodes hold the key in database 3"
    );
    lease.release().await;

    let wrong: Vec<String> = urls.iter().map(|u| u.replace(":pw@", ":nope@")).collect();
    let bad = Redlock::builder(wrong)
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid");
    let err = bad.try_acquire("acl-db").await.expect_err("wrong password");
    let LockError::QuorumNotReached { failures, .. } = &err else {
        panic!("{err}")
    };
    // The decision comes as soon as a quorum is out of reach: the last node may not have
    // answered yet.
    let auth = |f: &&fenced_redlock::NodeFailure| {
        matches!(&f.reason, NodeFailureReason::Error(NodeError::Auth(_)))
    };
    assert!(failures.iter().filter(auth).count() >= 2, "{err}");
    assert!(!err.to_string().contains("nope"), "password leaked: {err}");
}

/// A URL our own connection does not speak (RESP3 here; TLS and Unix sockets alike) goes
/// through the `redis` crate's multiplexed connection, with the same behaviour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_urls_lock_through_the_redis_crates_connection() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| format!("{u}?protocol=resp3"))
        .collect();
    let redlock = Redlock::builder(urls)
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid");
    let mut first = redlock.try_acquire("resp3").await.expect("acquired");
    // A quorum at least (the last node's SET may still be on its way).
    assert!(cluster.holding("resp3").len() >= 2);
    assert!(redlock.try_acquire("resp3").await.is_err(), "held");
    first.extend().await.expect("extended");
    let token = first.fence().expect("fenced");
    first.release().await;
    assert!(
        cluster
            .wait_gone("resp3", Duration::from_secs(2))
            .is_empty()
    );
    let second = redlock.try_acquire("resp3").await.expect("free again");
    assert!(second.fence().expect("fenced") > token);
    second.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_resource_is_refused() {
    let cluster = Cluster::start(Flavour::Redis, 1);
    let redlock = client(&cluster, Duration::from_secs(1));
    assert!(matches!(
        redlock.try_acquire("").await,
        Err(LockError::EmptyResource)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_release_wakes_one_waiter_and_subscriptions_end_with_the_wait() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .retry_delay(Duration::from_secs(20))
        .build()
        .expect("valid");
    let holder = redlock.try_acquire("queue").await.expect("lock");
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let redlock = redlock.clone();
            tokio::spawn(async move {
                let lease = redlock
                    .acquire("queue", Duration::from_secs(30))
                    .await
                    .expect("acquired in turn");
                let attempts = lease.attempts();
                tokio::time::sleep(Duration::from_millis(20)).await;
                lease.release().await;
                attempts
            })
        })
        .collect();
    let numsub = |i: usize| -> i64 {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("__redlock__:released:queue")
            .query(&mut cluster.servers[i].admin())
            .expect("PUBSUB NUMSUB");
        n
    };
    // The subscriptions as soon as they are all made (a loaded machine may take a while),
    // then a moment for any extra one to show.
    let subscribed = |want: i64| async move {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now: Vec<i64> = (0..3).map(numsub).collect();
            if now.iter().all(|n| *n == want) || Instant::now() > deadline {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let now = subscribed(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(now, vec![1, 1, 1], "one subscription per node");
    assert_eq!(
        (0..3).map(numsub).collect::<Vec<_>>(),
        vec![1, 1, 1],
        "still one subscription per node"
    );

    let started = Instant::now();
    holder.release().await;
    let mut attempts = Vec::new();
    for w in waiters {
        attempts.push(w.await.expect("waiter"));
    }
    // Polling alone would need 10–30 s per waiter here; eight hand-offs of a 20 ms hold
    // take about 0.2 s, so 5 s is 25 times that and half the shortest poll.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Each waiter failed once, then was woken when its turn came: each release, and each
    // node's subscription confirmation, wakes one waiter, whose failed try is followed by
    // at most one quick second look. A stampede (every waiter retrying on every release)
    // would take 8 + 3 + (8 + 7 + … + 1) = 47 attempts.
    let total: u32 = attempts.iter().sum();
    assert!(total <= 8 + 2 * 3 + 2 * 8, "{attempts:?}");
    assert_eq!(
        subscribed(0).await,
        vec![0, 0, 0],
        "unsubscribed after the wait"
    );
}
