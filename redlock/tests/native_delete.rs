//! A native compare-and-delete (`DELIFEQ`) is what a connection's server has, not what a
//! node once had: a node whose server is replaced by one without it (a rollback, a
//! failover to an older replica), or whose server stops knowing it under an open connection
//! (a proxy in front that fails over), still releases at once, with the script.
//!
//! No server here has `DELIFEQ` (Valkey 9): a proxy in front of a real server stands in for
//! one that has it, and then forgets it (see `support::stand_in`).

use crate::support;

use std::time::Duration;

use fenced_redlock::{Redlock, ReleaseOutcome};
use support::{Cluster, DelIfEqProxy, Flavour};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// Three servers of `flavour`, each behind a `DELIFEQ` stand-in, and a client of the
/// stand-ins that has found `DELIFEQ` on every node (the probe runs in the background after
/// a first release; the releases after it use the command).
async fn learnt(flavour: Flavour) -> (Cluster, Vec<DelIfEqProxy>, Redlock) {
    let cluster = Cluster::start(flavour, 3);
    let mut proxies = Vec::new();
    for s in &cluster.servers {
        proxies.push(DelIfEqProxy::start(s.port).await);
    }
    let redlock = Redlock::builder(proxies.iter().map(DelIfEqProxy::url))
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lease = redlock.try_acquire("learn").await.expect("free");
        let report = lease.release_all().await;
        assert!(
            report
                .nodes
                .iter()
                .all(|n| n.outcome == ReleaseOutcome::Released),
            "{flavour:?}: {report:?}"
        );
        if proxies.iter().all(|p| p.delifeq_seen() > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{flavour:?}: no DELIFEQ sent within 5 s: the stand-in or the probe is broken"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (cluster, proxies, redlock)
}

/// Takes and releases `resource` `rounds` times: every node must delete its key at once
/// (`release_all` waits for every node), so no key stays behind to stand its TTL.
async fn releases_delete_at_once(
    redlock: &Redlock,
    cluster: &Cluster,
    resource: &str,
    rounds: usize,
    what: &str,
) {
    for round in 0..rounds {
        // A connection the swap closed may fail one call before the node notices.
        let lease = support::taken_by(redlock, resource, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{what}, round {round}: not acquired within 5 s"));
        let report = lease.release_all().await;
        let failed: Vec<String> = report
            .nodes
            .iter()
            .filter(|n| n.outcome != ReleaseOutcome::Released)
            .map(|n| format!("{}: {:?}", n.addr, n.outcome))
            .collect();
        assert!(failed.is_empty(), "{what}, round {round}: {failed:?}");
        let left = block_in_place(|| cluster.holding(resource));
        assert!(
            left.is_empty(),
            "{what}, round {round}: servers {left:?} still hold the key after the release"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_server_is_replaced_by_one_without_delifeq_releases_with_the_script() {
    for flavour in Flavour::ALL {
        let (cluster, proxies, redlock) = learnt(flavour).await;
        // The server at each address is replaced by one without DELIFEQ: its connections
        // close, and the new ones reach a server that does not know the command.
        for p in &proxies {
            p.forget();
            p.close_all();
        }
        let sent: Vec<u64> = proxies.iter().map(DelIfEqProxy::delifeq_seen).collect();
        releases_delete_at_once(
            &redlock,
            &cluster,
            "replaced",
            5,
            &format!("{flavour:?} after the swap"),
        )
        .await;
        let sent_after: Vec<u64> = proxies.iter().map(DelIfEqProxy::delifeq_seen).collect();
        assert_eq!(
            sent, sent_after,
            "{flavour:?}: a new connection is probed afresh, and a server without DELIFEQ is \
             never sent one"
        );
        redlock.shutdown().await.expect("shut down");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_knowing_delifeq_under_an_open_connection_gets_the_script() {
    for flavour in Flavour::ALL {
        let (cluster, proxies, redlock) = learnt(flavour).await;
        // The same connections now lead to a server without DELIFEQ (a proxy in front
        // failed over): the first release on each finds out from "unknown command".
        for p in &proxies {
            p.forget();
        }
        let sent: Vec<u64> = proxies.iter().map(DelIfEqProxy::delifeq_seen).collect();
        releases_delete_at_once(
            &redlock,
            &cluster,
            "forgotten",
            5,
            &format!("{flavour:?} after the server forgot DELIFEQ"),
        )
        .await;
        let sent_after: Vec<u64> = proxies.iter().map(DelIfEqProxy::delifeq_seen).collect();
        let more: Vec<u64> = sent_after.iter().zip(&sent).map(|(a, b)| a - b).collect();
        assert_eq!(
            more,
            vec![1, 1, 1],
            "{flavour:?}: one DELIFEQ per connection finds out; the script from then on"
        );
        redlock.shutdown().await.expect("shut down");
    }
}
