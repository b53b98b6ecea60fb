//! `Lease::extend_for`: a TTL of the caller's choosing for one extend, checked as the
//! builder checks a TTL before anything reaches the servers.

use crate::support;

use std::time::Duration;

use fenced_redlock::config::MAX_TTL;
use fenced_redlock::{ConfigError, LockError, Redlock};
use redis::Commands;
use support::{Cluster, Flavour, Server};
use tokio::task::block_in_place;

fn pttl(server: &Server, key: &str) -> i64 {
    server.admin().pttl(key).expect("PTTL")
}

/// `EVAL` commands the server has run (every extend is one per node).
fn eval_calls(server: &Server) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.admin())
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_eval:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_ttl_reaches_the_servers_and_the_next_extend_goes_back() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(2))
            .build()
            .expect("valid");
        let mut lease = redlock.try_acquire("long-step").await.expect("free");
        let validity = lease
            .extend_for(Duration::from_secs(60))
            .await
            .expect("extended");
        assert!(
            validity > Duration::from_secs(55),
            "{flavour:?}: {validity:?}"
        );
        assert!(validity <= Duration::from_secs(60));
        assert!(lease.remaining() > Duration::from_secs(55));
        // Every node that holds the key holds it for about a minute now.
        let pttls: Vec<i64> = block_in_place(|| {
            cluster
                .servers
                .iter()
                .map(|s| pttl(s, "long-step"))
                .collect()
        });
        assert!(
            pttls
                .iter()
                .filter(|p| **p > 55_000 && **p <= 60_000)
                .count()
                >= 2,
            "{flavour:?}: {pttls:?}"
        );
        // The lease keeps the client's TTL for everything else.
        assert_eq!(lease.ttl(), Duration::from_secs(2));
        lease.extend().await.expect("extended");
        assert!(lease.remaining() <= Duration::from_secs(2));
        let pttls: Vec<i64> = block_in_place(|| {
            cluster
                .servers
                .iter()
                .map(|s| pttl(s, "long-step"))
                .collect()
        });
        assert!(
            pttls.iter().filter(|p| (1..=2_000).contains(*p)).count() >= 2,
            "{flavour:?}: {pttls:?}"
        );
        // A shorter one works too.
        let validity = lease
            .extend_for(Duration::from_millis(500))
            .await
            .expect("extended");
        assert!(validity < Duration::from_millis(500));
        lease.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_the_builder_refuses_is_refused_without_touching_the_servers() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(100))
        .build()
        .expect("valid");
    let mut lease = redlock.try_acquire("bad-ttl").await.expect("free");
    let before = lease.valid_until();
    let evals_before: Vec<u64> =
        block_in_place(|| cluster.servers.iter().map(eval_calls).collect());
    for (ttl, expected) in [
        (Duration::ZERO, ConfigError::ZeroTtl),
        (
            MAX_TTL + Duration::from_secs(1),
            ConfigError::TtlTooLarge {
                ttl: MAX_TTL + Duration::from_secs(1),
            },
        ),
        (
            Duration::MAX,
            ConfigError::TtlTooLarge { ttl: Duration::MAX },
        ),
        (
            Duration::from_micros(500),
            ConfigError::TtlTooSmall {
                ttl: Duration::from_micros(500),
            },
        ),
        // Not above the explicit node timeout.
        (
            Duration::from_millis(100),
            ConfigError::NodeTimeoutTooLong {
                timeout: Duration::from_millis(100),
                ttl: Duration::from_millis(100),
            },
        ),
    ] {
        let err = lease.extend_for(ttl).await.expect_err("refused");
        match &err {
            LockError::InvalidTtl {
                resource,
                ttl: refused,
                reason,
            } => {
                assert_eq!(resource, "bad-ttl");
                assert_eq!(*refused, ttl);
                assert_eq!(*reason, expected, "{ttl:?}");
            }
            other => panic!("{ttl:?}: {other}"),
        }
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("cannot extend"), "{err}");
    }
    let evals_after: Vec<u64> = block_in_place(|| cluster.servers.iter().map(eval_calls).collect());
    assert_eq!(evals_before, evals_after, "no extend was sent");
    assert_eq!(lease.valid_until(), before, "the old validity stands");
    assert!(lease.is_valid());
    lease.release().await;
}
