//! Durable votes (`Durability::Fsync`): a `WAITAOF` behind every request that can be a
//! yes, and a yes that counts only once the node has it on disk; against real servers.
//!
//! The Valkey here is 8.1 (it has `WAITAOF`), the Redis 7.0 (it does not). The servers
//! start with `appendonly no` unless a test asks otherwise.

use crate::support;

use std::time::Duration;

use fenced_redlock::{ConfigError, Durability, LockError, NodeError, NodeFailureReason, Redlock};
use support::gate::{self, GateProxy};
use support::{Cluster, Flavour};
use tokio::task::block_in_place;

const FSYNC: Durability = Durability::Fsync {
    timeout: Duration::from_millis(100),
};

/// Every write on disk before the server answers it.
const ALWAYS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// `CONFIG SET appendfsync <policy>` on `server`.
fn set_appendfsync(server: &support::Server, policy: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg(policy)
        .query(&mut server.admin())
        .expect("CONFIG SET appendfsync");
}

/// Calls of `command` on each server so far.
fn calls(cluster: &Cluster, command: &str) -> Vec<u64> {
    block_in_place(|| {
        cluster
            .servers
            .iter()
            .map(|s| support::command_calls(s, command))
            .collect()
    })
}

/// `WAITAOF` calls on each server so far.
fn waitaofs(cluster: &Cluster) -> Vec<u64> {
    calls(cluster, "waitaof")
}

/// Waits (up to 2 s) until each server counted `grown` more `WAITAOF`s than `before`: a
/// blocked `WAITAOF` is counted when it answers.
async fn wait_waitaofs(cluster: &Cluster, before: &[u64], grown: [u64; 3]) {
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let now = grew(before, &waitaofs(cluster));
        if now == grown || tokio::time::Instant::now() >= until {
            assert_eq!(now, grown, "WAITAOFs per node");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A round returns at its quorum; the last node's requests may still be on their way.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(150)).await;
}

fn client(cluster: &Cluster, durability: Durability, fencing: bool) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(300))
        .fencing(fencing)
        .durability(durability)
        .build()
        .expect("valid")
}

/// The node errors in `err`, which must be a quorum failure, from at least enough nodes
/// to have decided it (two of three); the others may not have answered yet.
fn node_errors(err: &LockError) -> Vec<NodeError> {
    let LockError::QuorumNotReached { failures, .. } = err else {
        panic!("not a quorum failure: {err}");
    };
    let errors: Vec<NodeError> = failures
        .iter()
        .filter_map(|f| match &f.reason {
            NodeFailureReason::Error(e) => Some(e.clone()),
            NodeFailureReason::NoAnswerYet => None,
            other => panic!("a node that answered must have failed: {other:?} in {err}"),
        })
        .collect();
    assert!(errors.len() >= 2, "{err}");
    errors
}

/// What each server counted between `before` and `after`.
fn grew(before: &[u64], after: &[u64]) -> Vec<u64> {
    before.iter().zip(after).map(|(b, a)| a - b).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_appendfsync_always_every_vote_waits_for_the_disk_and_counts() {
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let redlock = client(&cluster, FSYNC, false);
    assert_eq!(redlock.durability(), FSYNC);

    let before = waitaofs(&cluster);
    let mut lease = redlock.try_acquire("durable").await.expect("granted");
    settle().await;
    let acquired = waitaofs(&cluster);
    assert_eq!(grew(&before, &acquired), [1, 1, 1], "one WAITAOF per node");

    lease.extend().await.expect("extended");
    settle().await;
    let extended = waitaofs(&cluster);
    assert_eq!(
        grew(&acquired, &extended),
        [1, 1, 1],
        "one WAITAOF per node"
    );

    // Releases are not waited for.
    lease.release_all().await;
    assert_eq!(waitaofs(&cluster), extended);
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_acquire_waits_for_the_disk_in_both_rounds() {
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let redlock = client(&cluster, FSYNC, true);

    let before = waitaofs(&cluster);
    let lease = redlock
        .try_acquire("durable-fenced")
        .await
        .expect("granted");
    assert!(lease.fence().is_some());
    settle().await;
    let after = waitaofs(&cluster);
    // The acquire script's round, then the fence write's.
    assert_eq!(grew(&before, &after), [2, 2, 2]);
    lease.release_all().await;
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_on_nodes_that_stopped_persisting_fails() {
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let redlock = client(&cluster, FSYNC, false);
    let mut lease = redlock
        .try_acquire("durable-extend")
        .await
        .expect("granted");
    block_in_place(|| {
        for s in &cluster.servers {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("appendonly")
                .arg("no")
                .query(&mut s.admin())
                .expect("CONFIG SET");
        }
    });
    let err = lease.extend().await.expect_err("no extend is durable now");
    for e in node_errors(&err) {
        assert_eq!(e, NodeError::AofDisabled, "{err}");
    }
    lease.release_all().await;
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_clock_jump_guard_both_time_and_waitaof_go_behind_the_vote() {
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(300))
        .clock_jump_guard(true)
        .durability(FSYNC)
        .build()
        .expect("valid");
    let times = || calls(&cluster, "time");
    let (time_before, aof_before) = (times(), waitaofs(&cluster));
    let mut lease = redlock.try_acquire("durable-timed").await.expect("granted");
    lease.extend().await.expect("extended");
    settle().await;
    assert_eq!(grew(&time_before, &times()), [2, 2, 2]);
    assert_eq!(grew(&aof_before, &waitaofs(&cluster)), [2, 2, 2]);
    lease.release_all().await;
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_appendonly_no_never_counts_and_says_what_to_change() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let redlock = client(&cluster, FSYNC, false);

    let sets_before = calls(&cluster, "set");
    let err = redlock
        .try_acquire("durable-no-aof")
        .await
        .expect_err("no node can vote durably");
    let errors = node_errors(&err);
    for e in &errors {
        assert_eq!(e, &NodeError::AofDisabled, "{err}");
        let text = e.to_string();
        for words in [
            "appendonly no",
            "CONFIG SET appendonly yes",
            "appendfsync always",
            "Durability::Memory",
        ] {
            assert!(text.contains(words), "{text:?} lacks {words:?}");
        }
    }
    // Every node ran the SET (its key is there until the clean-up) …
    settle().await;
    let sets_after = calls(&cluster, "set");
    assert_eq!(grew(&sets_before, &sets_after), [1, 1, 1]);
    // … and the clean-up deleted them.
    let left = block_in_place(|| cluster.wait_keys_gone(Duration::from_secs(1)));
    assert!(left.is_empty(), "keys left behind: {left:?}");
    redlock.shutdown().await.expect("shut down");
}

/// What the tests below rest on: with `appendfsync no` Valkey never fsyncs the AOF itself
/// (it leaves that to the kernel), so the offset `WAITAOF` compares against never moves
/// past a write made after the switch, and `WAITAOF 1 0 <ms>` always runs out with
/// `[0, 0]`. (With `everysec` it fsyncs within a second, often at once: a timing, not a
/// lever.) Checked here on a connection of our own, so that a Valkey that changes this
/// fails loudly instead of turning the tests below into ones about something else.
fn assert_never_fsyncs(server: &support::Server) {
    let mut c = server.admin();
    let (_, fsynced): ((), Vec<i64>) = redis::pipe()
        .cmd("SET")
        .arg("premise")
        .arg("x")
        .cmd("WAITAOF")
        .arg(1)
        .arg(0)
        .arg(50)
        .query(&mut c)
        .expect("SET, WAITAOF");
    assert_eq!(
        fsynced,
        [0, 0],
        "the premise broke: this Valkey fsyncs with appendfsync no"
    );
    let _: () = redis::cmd("DEL").arg("premise").query(&mut c).expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_a_majority_cannot_fsync_is_not_durable_and_its_key_is_cleaned_up() {
    // Node 0 fsyncs every write; nodes 1 and 2 never do.
    let cluster = Cluster::start_args(
        Flavour::Valkey,
        3,
        &["--appendonly", "yes", "--appendfsync", "no"],
    );
    block_in_place(|| {
        set_appendfsync(&cluster.servers[0], "always");
        for s in &cluster.servers[1..] {
            assert_never_fsyncs(s);
        }
    });
    let redlock = client(&cluster, FSYNC, false);
    let sets_before = calls(&cluster, "set");

    let err = redlock
        .try_acquire("durable-unsynced")
        .await
        .expect_err("two of three yeses are not on disk: no quorum");
    for i in [1, 2] {
        assert_eq!(
            cluster.reason_of(&err, i),
            Some(NodeFailureReason::Error(NodeError::NotDurable {
                timeout: Duration::from_millis(100)
            })),
            "node {i}: {err}"
        );
    }
    // Node 0's yes was durable: not a failure (if it was in before the decision).
    assert!(
        !matches!(
            cluster.reason_of(&err, 0),
            Some(NodeFailureReason::Error(_))
        ),
        "{err}"
    );

    // Every node set the key: the votes were yeses, only not on disk …
    settle().await;
    let sets_after = calls(&cluster, "set");
    assert_eq!(grew(&sets_before, &sets_after), [1, 1, 1]);
    // … and the clean-up deleted them all, the durable one too.
    let left = block_in_place(|| cluster.wait_gone("durable-unsynced", Duration::from_secs(1)));
    assert!(left.is_empty(), "still held on {left:?}");
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_write_that_is_not_on_disk_fails_the_acquire_though_the_first_round_was() {
    // Every node fsyncs the first round's SET (`always`); then, with the fence writes held
    // back in front of the nodes, every node stops fsyncing (`no`) before they arrive.
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let gates = gate::gates(
        cluster.servers.iter().map(|s| s.port),
        gate::FENCE_WRITE_TEXT,
    )
    .await;
    // A deadline far above the hold, so a slow machine fails the fence writes with
    // `NotDurable` after the 100 ms wait, never with a timeout.
    let redlock = Redlock::builder(gates.iter().map(GateProxy::url))
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_secs(5))
        .fencing(true)
        .durability(FSYNC)
        .build()
        .expect("valid");
    let aof_before = waitaofs(&cluster);

    let acquire = tokio::spawn({
        let redlock = redlock.clone();
        async move { redlock.try_acquire("durable-fence").await }
    });
    gate::all_held(&gates).await;
    // The first round is over on every node: its SET is on disk, and counted.
    wait_waitaofs(&cluster, &aof_before, [1, 1, 1]).await;
    block_in_place(|| {
        for s in &cluster.servers {
            set_appendfsync(s, "no");
            assert_never_fsyncs(s);
        }
    });
    // The premise's own `WAITAOF`s are counted too.
    let aof_switched = waitaofs(&cluster);
    for gate in &gates {
        gate.open();
    }

    let err = acquire
        .await
        .expect("joined")
        .expect_err("no fence write is on disk: no quorum");
    let errors = node_errors(&err);
    for e in &errors {
        assert_eq!(
            e,
            &NodeError::NotDurable {
                timeout: Duration::from_millis(100)
            },
            "{err}"
        );
    }
    // Each fence write had its WAITAOF behind it.
    wait_waitaofs(&cluster, &aof_switched, [1, 1, 1]).await;
    let left = block_in_place(|| cluster.wait_gone("durable-fence", Duration::from_secs(1)));
    assert!(left.is_empty(), "still held on {left:?}");
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_7_0_has_no_waitaof_and_the_error_names_the_version_needed() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = client(&cluster, FSYNC, false);
    let err = redlock
        .try_acquire("durable-old")
        .await
        .expect_err("Redis 7.0 cannot vote durably");
    let errors = node_errors(&err);
    for e in &errors {
        assert!(matches!(e, NodeError::NoWaitAof(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("7.2 or newer"), "{text}");
        assert!(text.contains("Durability::Memory"), "{text}");
    }
    let left = block_in_place(|| cluster.wait_keys_gone(Duration::from_secs(1)));
    assert!(left.is_empty(), "keys left behind: {left:?}");
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_no_waitaof_is_sent() {
    let cluster = Cluster::start_args(Flavour::Valkey, 3, &ALWAYS);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid");
    assert_eq!(redlock.durability(), Durability::Memory);
    let mut lease = redlock.try_acquire("memory").await.expect("granted");
    lease.extend().await.expect("extended");
    lease.release_all().await;
    settle().await;
    assert_eq!(waitaofs(&cluster), [0, 0, 0]);
    // The same servers answer it when asked: the count would show one.
    let durable = client(&cluster, FSYNC, false);
    let lease = durable.try_acquire("memory").await.expect("granted");
    settle().await;
    assert_eq!(waitaofs(&cluster), [1, 1, 1]);
    lease.release_all().await;
    redlock.shutdown().await.expect("shut down");
    durable.shutdown().await.expect("shut down");
}

#[test]
fn a_wait_that_cannot_fit_the_node_deadline_is_refused_at_build() {
    let urls = [
        "redis://127.0.0.1:1",
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
    ];
    let build = |node_timeout: Option<Duration>, durability| {
        let b = Redlock::builder(urls).ttl(Duration::from_secs(1));
        let b = match node_timeout {
            Some(t) => b.node_timeout(t),
            None => b,
        };
        b.durability(durability).build()
    };
    let fsync = |ms| Durability::Fsync {
        timeout: Duration::from_millis(ms),
    };

    let zero = build(None, fsync(0)).expect_err("zero wait");
    assert_eq!(zero, ConfigError::ZeroDurabilityTimeout);
    let sub_ms = build(
        None,
        Durability::Fsync {
            timeout: Duration::from_micros(500),
        },
    )
    .expect_err("WAITAOF takes whole milliseconds");
    assert_eq!(sub_ms, ConfigError::ZeroDurabilityTimeout);

    let equal = build(Some(Duration::from_millis(50)), fsync(50)).expect_err("no room");
    assert_eq!(
        equal,
        ConfigError::DurabilityTimeoutTooLong {
            timeout: Duration::from_millis(50),
            node_timeout: Duration::from_millis(50),
        }
    );
    let text = equal.to_string();
    assert!(text.contains("raise node_timeout"), "{text}");
    assert!(text.contains("lower the durability timeout"), "{text}");
    // The derived deadline (ttl / 10 = 100 ms) counts too.
    assert!(matches!(
        build(None, fsync(100)),
        Err(ConfigError::DurabilityTimeoutTooLong { .. })
    ));

    let ok = build(Some(Duration::from_millis(50)), fsync(20)).expect("fits");
    assert_eq!(ok.durability(), fsync(20));
    // A TTL whose derived deadline no longer fits the wait is refused as well.
    let derived = build(None, fsync(50)).expect("fits 100 ms");
    assert!(matches!(
        derived.with_ttl(Duration::from_millis(200)),
        Err(ConfigError::DurabilityTimeoutTooLong { .. })
    ));
}
