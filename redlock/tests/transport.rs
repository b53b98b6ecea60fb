//! Transport conformance: the same connection faults against both of a node's
//! connections — the crate's lean RESP2 one (`redis://` URLs) and the `redis` crate's
//! multiplexed one (the same URL with `?protocol=resp3`). Each fault ends with the check
//! that matters to a lock: the next release, and the next acquire, reach every node.
//!
//! Every test runs once per transport (`<fault>::lean`, `<fault>::redis_crate`); a few at
//! the end concern the lean connection alone (AUTH before ACLs, bytes that are not RESP2).

use crate::support;

use std::time::Duration;

use fenced_redlock::{
    Lease, LockError, NodeError, NodeFailureReason, Redlock, ReleaseOutcome, ReleaseReport,
};
use redis::Commands;
use support::{Cluster, Flavour, StrandingProxy};
use tokio::task::block_in_place;

/// Which connection a node uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// The crate's own, for `redis://` over TCP with RESP2.
    Lean,
    /// The `redis` crate's multiplexed connection, chosen by RESP3.
    RedisCrate,
}

impl Transport {
    /// `url` (a `redis://` URL without a query) for this transport.
    fn url(self, url: &str) -> String {
        match self {
            Transport::Lean => url.to_owned(),
            Transport::RedisCrate => format!("{url}?protocol=resp3"),
        }
    }

    fn urls(self, urls: impl IntoIterator<Item = String>) -> Vec<String> {
        urls.into_iter().map(|u| self.url(&u)).collect()
    }
}

/// A test per transport for each `async fn name(Transport)` (`sync` for `fn`s that make
/// their own runtimes).
macro_rules! on_both_transports {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lean() {
                super::$name(super::Transport::Lean).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis_crate() {
                super::$name(super::Transport::RedisCrate).await;
            }
        }
    )*};
    (sync $($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn lean() {
                super::$name(super::Transport::Lean);
            }
            #[test]
            fn redis_crate() {
                super::$name(super::Transport::RedisCrate);
            }
        }
    )*};
}

on_both_transports!(
    server_restart,
    idle_close,
    client_kill,
    node_stops_reading,
    split_replies,
    reply_after_deadline,
    auth,
);
on_both_transports!(sync runtime_dropped);

/// A lock whose node deadline (derived from the 10 s TTL: 500 ms) no healthy loopback
/// call comes near, even on a loaded machine: a failure here is the fault's, not the
/// machine's. Derived, so that `with_ttl` derives shorter ones.
fn lock(urls: &[String]) -> Redlock {
    Redlock::builder(urls)
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid")
}

/// Asserts that every node took part in `report`, none failed.
fn every_node(report: &ReleaseReport, allowed: ReleaseOutcome, what: &str) {
    for node in &report.nodes {
        assert_eq!(
            node.outcome, allowed,
            "{what}: node {}: {report:?}",
            node.addr
        );
    }
}

/// One acquire and a release waiting for every node: both must reach every node (a
/// node whose `SET` failed would answer the release with `AlreadyGone`).
async fn every_node_works(redlock: &Redlock, key: &str, what: &str) {
    let lease = redlock
        .try_acquire(key)
        .await
        .unwrap_or_else(|e| panic!("{what}: acquire: {e}"));
    every_node(&lease.release_all().await, ReleaseOutcome::Released, what);
}

/// A lease whose key every node holds: the acquire returns once a majority granted, so
/// wait for the others' `SET`s to land before a fault hits their connections.
async fn held_everywhere(redlock: &Redlock, cluster: &Cluster, key: &str) -> Lease {
    every_node_works(redlock, key, "before the fault").await;
    let lease = redlock.try_acquire(key).await.expect("free");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while block_in_place(|| cluster.holding(key)).len() < cluster.servers.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "a node did not take the key within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    lease
}

/// The time a connection's reader needs to see a close the server made: it is woken at
/// once and reads a few bytes, well under a millisecond; 500 ms leaves room for a loaded
/// machine.
const SEE_THE_CLOSE: Duration = Duration::from_millis(500);

async fn server_restart(t: Transport) {
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    // About connections coming back: whether restarted servers may vote at once is the
    // restart quarantine's business (tests/quarantine.rs), and here all three restart.
    let redlock = Redlock::builder(t.urls(cluster.urls()))
        .ttl(Duration::from_secs(10))
        .restart_quarantine(fenced_redlock::RestartQuarantine::Off)
        .build()
        .expect("valid");
    let lease = held_everywhere(&redlock, &cluster, "restart").await;
    block_in_place(|| {
        cluster
            .servers
            .iter_mut()
            .for_each(support::Server::restart)
    });
    tokio::time::sleep(SEE_THE_CLOSE).await;
    // The servers forgot the keys (no persistence): gone, but every node answered.
    every_node(
        &lease.release_all().await,
        ReleaseOutcome::AlreadyGone,
        "release after a restart",
    );
    every_node_works(&redlock, "restart", "acquire after a restart").await;
}

async fn idle_close(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = lock(&t.urls(cluster.urls()));
    let lease = held_everywhere(&redlock, &cluster, "idle").await;
    block_in_place(|| {
        for server in &cluster.servers {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("timeout")
                .arg(1)
                .query(&mut server.admin())
                .expect("CONFIG SET timeout");
        }
        // The server closes connections idle for a second (checked every 100 ms or so);
        // wait until ours are gone: only the admin connection asking is left.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        for server in &cluster.servers {
            loop {
                let clients: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("normal")
                    .query(&mut server.admin())
                    .expect("CLIENT LIST");
                if clients.lines().count() <= 1 {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the server kept idle connections for 20 s: {clients}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    tokio::time::sleep(SEE_THE_CLOSE).await;
    every_node(
        &lease.release_all().await,
        ReleaseOutcome::Released,
        "release after an idle close",
    );
    every_node_works(&redlock, "idle", "acquire after an idle close").await;
}

async fn client_kill(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = lock(&t.urls(cluster.urls()));
    let lease = held_everywhere(&redlock, &cluster, "killed").await;
    block_in_place(|| {
        for server in &cluster.servers {
            let killed: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .arg("SKIPME")
                .arg("yes")
                .query(&mut server.admin())
                .expect("CLIENT KILL");
            assert!(killed >= 1, "no connection of the lock to kill");
        }
    });
    tokio::time::sleep(SEE_THE_CLOSE).await;
    every_node(
        &lease.release_all().await,
        ReleaseOutcome::Released,
        "release after CLIENT KILL",
    );
    every_node_works(&redlock, "killed", "acquire after CLIENT KILL").await;
}

/// The connections are made on one runtime, which is then shut down (a test with a
/// client shared between tests, a service with a runtime per job); the next calls come
/// from another runtime.
fn runtime_dropped(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = lock(&t.urls(cluster.urls()));
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let first = runtime();
    first.block_on(every_node_works(
        &redlock,
        "runtimes",
        "on the first runtime",
    ));
    drop(first);
    runtime().block_on(every_node_works(
        &redlock,
        "runtimes",
        "on a second runtime, after the first shut down",
    ));
}

async fn node_stops_reading(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = lock(&t.urls(cluster.urls()));
    every_node_works(&redlock, "warm", "before the freeze").await;
    // 10 ms deadlines: many calls that give up quickly.
    let quick = redlock.with_ttl(Duration::from_millis(100)).expect("valid");
    assert!(quick.node_timeout() <= Duration::from_millis(10));
    cluster.servers[0].freeze();
    cluster.servers[1].freeze();
    // Each failed attempt leaves its `SET` and its clean-up's delete on each frozen node:
    // 1,200 attempts leave 2,400, and their `SET`s alone are more than the lean
    // connection's 1,024.
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let started = std::time::Instant::now();
    for round in 0..24 {
        let keys: Vec<String> = (0..50).map(|i| format!("frozen-{round}-{i}")).collect();
        let attempts = keys.iter().map(|k| quick.try_acquire(k));
        for result in futures::future::join_all(attempts).await {
            let Err(LockError::QuorumNotReached { failures, .. }) = result else {
                panic!("two of three nodes are frozen: {result:?}");
            };
            for f in failures
                .iter()
                .filter(|f| f.addr != cluster.servers[2].addr())
            {
                let kind = match &f.reason {
                    NodeFailureReason::Error(NodeError::Timeout(_)) => "timeout",
                    NodeFailureReason::Error(NodeError::Backlog(_)) => "backlog",
                    NodeFailureReason::NoAnswerYet => "no answer yet",
                    other => panic!("a frozen node failed with {other:?}"),
                };
                *kinds.entry(kind.to_owned()).or_default() += 1;
            }
        }
    }
    // 1,200 attempts of at most one 10 ms deadline each, in rounds of 50: a quarter of a
    // second of deadlines; a minute means calls waited for the frozen nodes.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "1,200 attempts took {:?}",
        started.elapsed()
    );
    if t == Transport::Lean {
        // The line is bounded: once 1,024 requests wait, later ones are refused at once.
        assert!(
            kinds.get("backlog").is_some_and(|n| *n > 0),
            "no request was refused for a full line: {kinds:?}"
        );
    }
    cluster.servers[0].thaw();
    cluster.servers[1].thaw();
    // The servers answer what waited, in order, and then the next calls. Until the
    // answers to what waited are in, a full line still refuses (within milliseconds of
    // the thaw; 10 s is for a loaded machine).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        // Refused (a full line) or granted without every node: not drained yet.
        let outcome = match redlock.try_acquire("thawed").await {
            Ok(lease) => {
                let report = lease.release_all().await;
                if report
                    .nodes
                    .iter()
                    .all(|n| n.outcome == ReleaseOutcome::Released)
                {
                    break;
                }
                format!("{report:?}")
            }
            Err(e) => e.to_string(),
        };
        assert!(
            std::time::Instant::now() < deadline,
            "10 s after the thaw a node still missed an acquire: {outcome}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn split_replies(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let mut proxies = Vec::new();
    for server in &cluster.servers {
        proxies.push(StrandingProxy::start_split(server.port).await);
    }
    let redlock = Redlock::builder(t.urls(proxies.iter().map(StrandingProxy::url)))
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_secs(2))
        .fencing(true)
        .build()
        .expect("valid");
    let mut last = None;
    for i in 0..10 {
        let mut lease = redlock.try_acquire("split").await.expect("free");
        let token = lease.fence().expect("fencing on");
        assert!(
            last < Some(token),
            "round {i}: token {token:?} after {last:?}"
        );
        last = Some(token);
        lease.extend().await.expect("extend");
        every_node(
            &lease.release_all().await,
            ReleaseOutcome::Released,
            "split replies",
        );
    }
    // Many calls in flight at once: replies split across reads and several per read.
    let keys: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
    let leases = futures::future::join_all(keys.iter().map(|k| redlock.try_acquire(k))).await;
    for lease in leases {
        every_node(
            &lease.expect("free").release_all().await,
            ReleaseOutcome::Released,
            "split replies, concurrent",
        );
    }
}

async fn reply_after_deadline(t: Transport) {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = lock(&t.urls(cluster.urls()));
    every_node_works(&redlock, "warm", "before the freeze").await;
    // Another owner holds "taken" on nodes 0 and 1.
    block_in_place(|| {
        for server in &cluster.servers[..2] {
            let _: () = server.admin().set_ex("taken", "other", 60).expect("SET");
        }
    });
    cluster.servers[0].freeze();
    let lease = redlock.try_acquire("late").await.expect("two of three");
    // The call to node 0 goes on after the grant, until its deadline: let it pass.
    tokio::time::sleep(redlock.node_timeout() * 3).await;
    cluster.servers[0].thaw();
    // Node 0 now answers the `SET` its caller gave up on. Had that late "OK" been handed
    // to the next request, node 0 would grant "taken" and, with node 2, the lock.
    let err = redlock
        .try_acquire("taken")
        .await
        .expect_err("held on two of three");
    assert!(err.is_contended(), "{err}");
    let LockError::QuorumNotReached { failures, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        failures
            .iter()
            .any(|f| f.addr == cluster.servers[0].addr() && f.reason == NodeFailureReason::NotOurs),
        "node 0 did not answer for itself: {err}"
    );
    // The late `SET` landed: the key is the lease's, and its release deletes it.
    every_node(
        &lease.release_all().await,
        ReleaseOutcome::Released,
        "release of a lease with a late grant",
    );
    every_node_works(&redlock, "after", "after the late reply").await;
}

async fn auth(t: Transport) {
    let cluster = Cluster::start_with(Flavour::Redis, 3, Some("s3cret"));
    // Without a user: `AUTH password` (the default user).
    every_node_works(&lock(&t.urls(cluster.urls())), "auth", "password only").await;
    // With a user: `AUTH user password` (RESP2) or `HELLO 3 AUTH user password`.
    block_in_place(|| {
        for server in &cluster.servers {
            let _: () = redis::cmd("ACL")
                .arg(&["SETUSER", "locker", "on", ">lockpw", "~*", "&*", "+@all"][..])
                .query(&mut server.admin())
                .expect("ACL SETUSER");
        }
    });
    let as_user = |password: &str| {
        cluster
            .servers
            .iter()
            .map(|s| t.url(&format!("redis://locker:{password}@{}", s.addr())))
            .collect::<Vec<_>>()
    };
    every_node_works(&lock(&as_user("lockpw")), "auth", "user and password").await;
    // A wrong password fails every node as an authentication error.
    let err = lock(&as_user("wrong"))
        .try_acquire("auth")
        .await
        .expect_err("wrong password");
    let LockError::QuorumNotReached { failures, .. } = &err else {
        panic!("{err}");
    };
    // (A node the decision did not wait for has no answer yet.)
    assert!(
        failures.iter().all(|f| matches!(
            &f.reason,
            NodeFailureReason::Error(NodeError::Auth(_)) | NodeFailureReason::NoAnswerYet
        )),
        "{err}"
    );
    assert!(failures.len() >= 2, "{err}");
}

/// A server before ACLs takes `AUTH password` only; a URL with a user still works, as
/// with the `redis` crate's connection, which retries without the user. (RESP3 needs
/// `HELLO`, which such a server does not know: only the lean connection is tested.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_falls_back_to_the_password_alone_before_acls() {
    let cluster = Cluster::start_with(Flavour::Redis, 3, Some("s3cret"));
    let mut proxies = Vec::new();
    for server in &cluster.servers {
        proxies.push(StrandingProxy::start_pre_acl(server.port).await);
    }
    let urls: Vec<String> = proxies
        .iter()
        .map(|p| format!("redis://anyone:s3cret@127.0.0.1:{}", p.port))
        .collect();
    every_node_works(&lock(&urls), "pre-acl", "AUTH before ACLs").await;
    for (i, proxy) in proxies.iter().enumerate() {
        assert!(
            proxy.refused_auths() >= 1,
            "node {i}: the client never sent AUTH with its user"
        );
    }
}

/// Bytes that are not RESP2 are a protocol error, not a broken pipe; the connection is
/// replaced. (A fake server: no real one sends them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_resp2_are_a_protocol_error() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = tokio::spawn(async move {
        let mut connections = 0;
        while let Ok((mut sock, _)) = listener.accept().await {
            connections += 1;
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = sock.read(&mut buf).await
                    && n > 0
                {
                    // A RESP3 map header: not RESP2.
                    if sock.write_all(b"%1\r\n").await.is_err() {
                        return;
                    }
                }
            });
            if connections == 100 {
                return;
            }
        }
    });
    let redlock = Redlock::builder([format!("redis://127.0.0.1:{port}")])
        .build()
        .expect("valid");
    for _ in 0..2 {
        let err = redlock.try_acquire("garbage").await.expect_err("no server");
        let LockError::QuorumNotReached { failures, .. } = &err else {
            panic!("{err}");
        };
        assert!(
            matches!(
                &failures[0].reason,
                NodeFailureReason::Error(NodeError::Protocol(_))
            ),
            "{err}"
        );
    }
    server.abort();
}
