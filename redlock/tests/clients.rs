//! Nodes from the caller's own `redis::Client`s instead of URLs.

use crate::support;

use std::time::Duration;

use fenced_redlock::{ConfigError, LockError, NodeError, NodeFailureReason, Redlock};
use support::{Cluster, Flavour};
use tokio::task::block_in_place;

fn clients(urls: &[String]) -> Vec<redis::Client> {
    urls.iter()
        .map(|u| redis::Client::open(u.as_str()).expect("valid URL"))
        .collect()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_and_release_through_clients() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let redlock = Redlock::builder_from_clients(clients(&cluster.urls()))
            .ttl(Duration::from_secs(5))
            .fencing(true)
            .build()
            .expect("valid");
        assert_eq!(redlock.nodes(), 3);
        assert_eq!(
            redlock.node_addrs(),
            cluster.servers.iter().map(|s| s.addr()).collect::<Vec<_>>()
        );
        let lease = redlock.try_acquire("byo").await.expect("free");
        assert!(lease.fence().is_some());
        assert!(!block_in_place(|| cluster.holding("byo")).is_empty());
        // A waiter on the same clients is woken by the release (notices use them too).
        let waiter = {
            let redlock = redlock.clone();
            tokio::spawn(async move { redlock.acquire("byo", Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let report = lease.release().await;
        assert!(report.released() >= 2, "{flavour:?}: {report:?}");
        let second = waiter
            .await
            .expect("no panic")
            .expect("acquired after the release");
        second.release().await;
        assert_eq!(
            block_in_place(|| cluster.wait_gone("byo", Duration::from_secs(2))),
            Vec::<usize>::new()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_bad_address_fails_its_node_as_a_url_would() {
    let cluster = Cluster::start(Flavour::Redis, 1);
    // One live server and two addresses nobody listens on: the quorum (two) is out of
    // reach only once both dead nodes have failed, so both failures are reported.
    let dead = [closed_port(), closed_port()].map(|p| format!("127.0.0.1:{p}"));
    let mut urls = cluster.urls();
    urls.extend(dead.iter().map(|a| format!("redis://{a}")));

    let by_url = Redlock::builder(&urls).build().expect("valid");
    let by_client = Redlock::builder_from_clients(clients(&urls))
        .build()
        .expect("valid");
    let mut seen = Vec::new();
    for (name, redlock) in [("url", by_url), ("client", by_client)] {
        let err = redlock
            .try_acquire("half-dead")
            .await
            .expect_err("one of three cannot grant");
        let LockError::QuorumNotReached { failures, .. } = &err else {
            panic!("{name}: {err}");
        };
        // The live node may not have answered when the refusals decided the attempt.
        let failed: Vec<(String, std::mem::Discriminant<NodeError>)> = failures
            .iter()
            .filter(|f| f.addr != cluster.servers[0].addr())
            .map(|f| match &f.reason {
                NodeFailureReason::Error(e) => (f.addr.clone(), std::mem::discriminant(e)),
                other => panic!("{name}: {}: {other:?}", f.addr),
            })
            .collect();
        assert_eq!(
            failed.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(),
            dead.iter().map(String::as_str).collect::<Vec<_>>(),
            "{name}"
        );
        assert!(
            !err.is_contended(),
            "{name}: nodes, not a holder, stand in the way"
        );
        seen.push(failed);
    }
    assert_eq!(seen[0], seen[1], "the same node errors either way");

    // And the same refusals at build: no nodes, the same server twice.
    assert_eq!(
        Redlock::builder_from_clients(Vec::new()).build().map(drop),
        Err(ConfigError::NoNodes)
    );
    let twice = clients(&[cluster.urls()[0].clone(), cluster.urls()[0].clone()]);
    assert!(matches!(
        Redlock::builder_from_clients(twice).build(),
        Err(ConfigError::DuplicateNode {
            first: 0,
            second: 1,
            ..
        })
    ));
}
