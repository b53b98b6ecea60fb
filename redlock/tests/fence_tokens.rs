//! Fencing tokens against real Redis and Valkey servers.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use fenced_redlock::{FenceToken, Redlock};
use support::{Cluster, Flavour};

fn client(servers: &Cluster) -> Redlock {
    Redlock::builder(servers.urls())
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_sequential_grants() {
    for flavour in Flavour::ALL {
        let servers = Cluster::start(flavour, 5);
        let lock = client(&servers);
        let mut last = FenceToken::new(0);
        for _ in 0..50 {
            let lease = lock
                .acquire("seq", Duration::from_secs(2))
                .await
                .expect("acquire");
            let fence = lease.fence().expect("fencing on");
            assert!(fence > last, "{flavour:?}: {fence} after {last}");
            last = fence;
            lease.release().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_still_increase_after_flushall_on_a_minority() {
    let servers = Cluster::start(Flavour::Valkey, 5);
    let lock = client(&servers);
    let mut last = FenceToken::new(0);
    for round in 0..10 {
        let lease = lock
            .acquire("amnesia", Duration::from_secs(2))
            .await
            .expect("acquire");
        let fence = lease.fence().expect("fencing on");
        assert!(fence > last, "round {round}: {fence} after {last}");
        last = fence;
        lease.release().await;
        // N − quorum = 2 nodes forget everything, a different pair each round.
        for i in [round % 5, (round + 2) % 5] {
            let _: () = redis::cmd("FLUSHALL")
                .query(&mut servers.servers[i].admin())
                .expect("FLUSHALL");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_leases_share_a_token_under_contention() {
    let servers = Cluster::start(Flavour::Redis, 5);
    let lock = client(&servers);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..10 {
                // A short, bounded wait: under contention some attempts time out, which is fine.
                if let Ok(lease) = lock.acquire("busy", Duration::from_secs(3)).await {
                    got.push(lease.fence().expect("fencing on"));
                    lease.release().await;
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    assert!(all.len() >= 80, "too few grants: {}", all.len());
    let distinct: HashSet<_> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a token was handed out twice");
}

/// The fence round's rule (the model's counterexample, `docs/model.md`): a node whose
/// counter is already at the token being written is no clean write, even where the lock
/// key is still ours — another grant took that token between our two rounds (a clock
/// jump or a node's lost keys let it in). Counted as clean, the same token would be
/// granted twice. Each node's fence write is held at a gate while "the other grant" writes
/// the counters, then let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_already_at_the_token_is_not_a_clean_write() {
    use fenced_redlock::{LockError, NodeError, NodeFailureReason};
    use support::gate::{self, GateProxy};
    use tokio::task::block_in_place;

    let cluster = Cluster::start(Flavour::Valkey, 3);
    let gates = gate::gates(
        cluster.servers.iter().map(|s| s.port),
        gate::FENCE_WRITE_TEXT,
    )
    .await;
    let redlock = Redlock::builder(gates.iter().map(GateProxy::url))
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid");
    let acquire = tokio::spawn({
        let redlock = redlock.clone();
        async move { redlock.try_acquire("ahead").await }
    });
    gate::all_held(&gates).await;
    // Our first round read counters of 0: the fence round writes token 1. Another grant
    // took token 1 meanwhile and wrote it on every node; our lock keys stay ours.
    let counter = fenced_redlock::fence::counter_key("ahead");
    block_in_place(|| {
        for s in &cluster.servers {
            let _: () = redis::cmd("SET")
                .arg(&counter)
                .arg(1)
                .query(&mut s.admin())
                .expect("SET counter");
        }
    });
    let holding = block_in_place(|| cluster.wait_held_everywhere("ahead", Duration::from_secs(2)));
    assert_eq!(holding, [0, 1, 2], "our keys stay ours");
    for gate in &gates {
        gate.open();
    }
    let err = acquire
        .await
        .expect("joined")
        .expect_err("token 1 was taken: no clean write anywhere, no grant");
    let LockError::QuorumNotReached { failures, .. } = &err else {
        panic!("not a quorum failure: {err}");
    };
    // Two refusals decide it (no quorum of three is left): the third may not have answered.
    let mut refused = 0;
    for f in failures {
        match &f.reason {
            NodeFailureReason::Error(NodeError::FenceAhead(1)) => refused += 1,
            NodeFailureReason::NoAnswerYet => {}
            other => panic!("{other:?} in {err}"),
        }
    }
    assert!(refused >= 2, "{err}");
    let left = block_in_place(|| cluster.wait_gone("ahead", Duration::from_secs(1)));
    assert!(left.is_empty(), "still held on {left:?}");
    redlock.shutdown().await.expect("shut down");
}
