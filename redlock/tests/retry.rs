//! Retry policies against real servers: the attempt cap, backoff, a user's function, and
//! release notices ending any pause early.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_redlock::{ConfigError, LockError, Redlock, RetryPolicy};
use support::{Cluster, Flavour, Server};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// `SET` commands the server has run since its statistics were last reset: one per
/// acquire round (fencing is off in these tests, and refused rounds clean up nothing).
fn set_calls(server: &Server) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.admin())
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

/// Resets the statistics once every server holds `key`: the holder's late `SET`s (on nodes
/// its decision did not wait for) are not the waiter's.
fn reset_stats_once_held(cluster: &Cluster, key: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while cluster.holding(key).len() < cluster.servers.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "{key} never on every server"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for server in &cluster.servers {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut server.admin())
            .expect("CONFIG RESETSTAT");
    }
}

fn client(cluster: &Cluster, policy: RetryPolicy) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(10))
        .retry(policy)
        .build()
        .expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_cap_is_honoured_round_by_round() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let holder = Redlock::builder(cluster.urls()).build().expect("valid");
        let lease = holder.try_acquire("capped").await.expect("free");
        let waiter = client(
            &cluster,
            RetryPolicy::fixed(Duration::from_millis(5)).max_attempts(4),
        );
        block_in_place(|| reset_stats_once_held(&cluster, "capped"));

        let started = Instant::now();
        let err = waiter
            .acquire("capped", Duration::from_secs(30))
            .await
            .expect_err("held throughout");
        let LockError::RetriesExhausted {
            attempts,
            waited,
            ref last,
            ..
        } = err
        else {
            panic!("{flavour:?}: expected RetriesExhausted, got {err}");
        };
        assert_eq!(attempts, 4, "{flavour:?}");
        assert!(err.is_contended(), "{flavour:?}: {err}");
        assert!(last.is_contended(), "{flavour:?}: {last}");
        assert!(!err.is_retryable());
        // Stopped by the cap, long before the 30 s wait: four rounds 5 ms apart take tens of
        // milliseconds, 10 s is hundreds of times that and a third of the wait.
        assert!(waited < Duration::from_secs(10), "{flavour:?}: {waited:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // Four rounds reached every server: four SETs each, no more.
        let calls: Vec<u64> = block_in_place(|| cluster.servers.iter().map(set_calls).collect());
        assert_eq!(calls, [4, 4, 4], "{flavour:?}");
        assert!(err.to_string().contains("max attempts"), "{err}");

        // A cap of one is a single attempt.
        let once = client(&cluster, RetryPolicy::default().max_attempts(1));
        match once.acquire("capped", Duration::from_secs(30)).await {
            Err(LockError::RetriesExhausted { attempts: 1, .. }) => {}
            other => panic!("{flavour:?}: {other:?}"),
        }
        lease.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_still_bounds_a_capped_policy() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let holder = Redlock::builder(cluster.urls()).build().expect("valid");
    let lease = holder.try_acquire("bounded").await.expect("free");
    let waiter = client(
        &cluster,
        RetryPolicy::fixed(Duration::from_millis(20)).max_attempts(1_000),
    );
    let err = waiter
        .acquire("bounded", Duration::from_millis(150))
        .await
        .expect_err("held");
    assert!(
        matches!(err, LockError::WaitTimeout { attempts, .. } if attempts < 1_000),
        "{err}"
    );
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_function_is_asked_after_every_attempt_and_stops_the_acquire() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let holder = Redlock::builder(cluster.urls()).build().expect("valid");
    let lease = holder.try_acquire("custom").await.expect("free");
    let asked = Arc::new(Mutex::new(Vec::new()));
    let policy = {
        let asked = Arc::clone(&asked);
        RetryPolicy::custom(move |attempts| {
            asked.lock().expect("not poisoned").push(attempts);
            (attempts < 3).then_some(Duration::from_millis(60))
        })
    };
    // Without release notices: the confirmation of a new subscription wakes a waiter (a
    // release may have gone unheard before it), which would cut the first pauses short.
    let waiter = Redlock::builder(cluster.urls())
        .retry(policy)
        .notify_waiters(false)
        .build()
        .expect("valid");
    let started = Instant::now();
    let err = waiter
        .acquire("custom", Duration::from_secs(30))
        .await
        .expect_err("held");
    assert!(
        matches!(err, LockError::RetriesExhausted { attempts: 3, .. }),
        "{err}"
    );
    assert_eq!(*asked.lock().expect("not poisoned"), [1, 2, 3]);
    // Two pauses of 60 ms, exactly as the function said (no jitter added): at least their
    // sum. The upper bound, about 15 times the ~125 ms this takes, leaves room for a loaded
    // machine.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(120), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_spaces_the_rounds_further_and_further_apart() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let holder = Redlock::builder(cluster.urls()).build().expect("valid");
    let lease = holder.try_acquire("backoff").await.expect("free");
    // Pauses up to 40, 80, 160, 320 ms: 600 ms at most in all (about half that with full
    // jitter), where one pause at the 10 s cap would take up to 10 s.
    let waiter = client(
        &cluster,
        RetryPolicy::exponential(Duration::from_millis(40), Duration::from_secs(10))
            .max_attempts(5),
    );
    block_in_place(|| reset_stats_once_held(&cluster, "backoff"));
    let started = Instant::now();
    let err = waiter
        .acquire("backoff", Duration::from_secs(30))
        .await
        .expect_err("held");
    let took = started.elapsed();
    assert!(
        matches!(err, LockError::RetriesExhausted { attempts: 5, .. }),
        "{err}"
    );
    let calls: Vec<u64> = block_in_place(|| cluster.servers.iter().map(set_calls).collect());
    assert_eq!(calls, [5, 5, 5]);
    // 10 times the longest run seen here (100-260 ms): a loaded machine stays under it, a
    // schedule that reached the cap does not.
    assert!(took < Duration::from_secs(3), "{took:?}");
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_notice_ends_a_long_backoff_early() {
    for policy in [
        RetryPolicy::exponential(Duration::from_secs(30), Duration::from_secs(60)),
        RetryPolicy::custom(|_| Some(Duration::from_secs(60))).max_attempts(10),
    ] {
        let cluster = Cluster::start(Flavour::Redis, 3);
        let holder = Redlock::builder(cluster.urls()).build().expect("valid");
        let lease = holder.try_acquire("notice").await.expect("free");
        // Whatever the draws, the waiter is in a pause of seconds when the release comes.
        let waiter = client(&cluster, policy.clone());
        let task = tokio::spawn(async move { waiter.acquire("notice", Duration::MAX).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released_at = Instant::now();
        lease.release().await;
        let second = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap_or_else(|_| panic!("{policy:?}: not woken by the release"))
            .expect("no panic")
            .expect("acquired");
        // Woken: the pauses drawn here are seconds to a minute; a notice takes milliseconds.
        assert!(released_at.elapsed() < Duration::from_secs(5));
        assert!(second.attempts() >= 2, "{policy:?}");
        second.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_wait_with_a_policy_does_not_panic() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let holder = Redlock::builder(cluster.urls()).build().expect("valid");
    let lease = holder.try_acquire("endless").await.expect("free");
    for policy in [
        RetryPolicy::exponential(Duration::from_millis(1), Duration::MAX).max_attempts(3),
        RetryPolicy::custom(|n| (n < 3).then_some(Duration::from_millis(1))),
        RetryPolicy::fixed(Duration::from_millis(1)).max_attempts(3),
    ] {
        let waiter = client(&cluster, policy.clone());
        match waiter.acquire("endless", Duration::MAX).await {
            Err(LockError::RetriesExhausted { attempts: 3, .. }) => {}
            other => panic!("{policy:?}: {other:?}"),
        }
    }
    lease.release().await;
}

#[test]
fn policies_are_checked_at_build() {
    let build = |p: RetryPolicy| {
        Redlock::builder(["redis://127.0.0.1:1"])
            .retry(p)
            .build()
            .map(drop)
    };
    assert_eq!(
        build(RetryPolicy::default().max_attempts(0)),
        Err(ConfigError::ZeroMaxAttempts)
    );
    assert_eq!(
        build(RetryPolicy::fixed(Duration::ZERO)),
        Err(ConfigError::ZeroRetryDelay)
    );
    let (base, cap) = (Duration::from_secs(2), Duration::from_secs(1));
    let err = build(RetryPolicy::exponential(base, cap)).expect_err("base above cap");
    assert_eq!(err, ConfigError::InvalidBackoff { base, cap });
    assert!(err.to_string().contains("base <= cap"), "{err}");
    assert_eq!(
        build(RetryPolicy::exponential(Duration::ZERO, cap)),
        Err(ConfigError::InvalidBackoff {
            base: Duration::ZERO,
            cap
        })
    );
    // `retry_delay` is the fixed policy; the later call wins.
    assert_eq!(
        Redlock::builder(["redis://127.0.0.1:1"])
            .retry(RetryPolicy::default().max_attempts(0))
            .retry_delay(Duration::from_millis(5))
            .build()
            .map(drop),
        Ok(())
    );
}
