//! Extend without Lua where the server allows it: `SET … IFEQ` on Valkey ≥ 8.1 (and
//! Redis ≥ 8.4), the script elsewhere, with the same outcomes; and what works, and what
//! fails and how, when an ACL takes scripting away.
//!
//! The Valkey here is 8.1 (`SET … IFEQ`, no `DELIFEQ`), the Redis 7.0 (neither); a Redis 7
//! behind a proxy that reports it as Redis 9 plays a server whose version is wrong about
//! `IFEQ`.

use crate::support;

use std::time::Duration;

use fenced_redlock::{LockError, NodeError, NodeFailureReason, Redlock, ReleaseOutcome};
use redis::Commands;
use support::{Cluster, Flavour};
use tokio::task::block_in_place;

/// `SET` and script calls (`EVAL` + `EVALSHA`) on one server so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    set: u64,
    scripts: u64,
}

fn counts(cluster: &Cluster) -> Vec<Counts> {
    block_in_place(|| {
        cluster
            .servers
            .iter()
            .map(|s| Counts {
                set: support::command_calls(s, "set"),
                scripts: support::command_calls(s, "eval") + support::command_calls(s, "evalsha"),
            })
            .collect()
    })
}

/// What each server ran between `before` and `after`.
fn ran(before: &[Counts], after: &[Counts]) -> Vec<Counts> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| Counts {
            set: a.set - b.set,
            scripts: a.scripts - b.scripts,
        })
        .collect()
}

/// What an extend is expected to send each node on `flavour`.
fn one_extend(flavour: Flavour) -> Counts {
    match flavour {
        Flavour::Valkey => Counts { set: 1, scripts: 0 },
        Flavour::Redis => Counts { set: 0, scripts: 1 },
    }
}

/// An extend returns at its quorum; the last node's request may still be on its way.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn valkey_version(cluster: &Cluster) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut cluster.servers[0].admin())
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("valkey_version:"))
        .map(|v| v.trim().to_owned())
        .expect("a Valkey server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_is_set_ifeq_on_valkey_and_the_script_on_redis_7() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        if flavour == Flavour::Valkey {
            let v = block_in_place(|| valkey_version(&cluster));
            assert!(
                v.starts_with("8.1"),
                "this test expects Valkey 8.1, got {v}"
            );
        }
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(2))
            .build()
            .expect("valid");
        let mut lease = redlock.try_acquire("ifeq").await.expect("free");
        settle().await;
        let before = counts(&cluster);
        let validity = lease
            .extend_for(Duration::from_secs(30))
            .await
            .expect("extended");
        settle().await;
        let after = counts(&cluster);
        assert_eq!(
            ran(&before, &after),
            vec![one_extend(flavour); 3],
            "{flavour:?}: one command per node, {:?}",
            one_extend(flavour)
        );
        assert!(
            validity > Duration::from_secs(29),
            "{flavour:?}: {validity:?}"
        );
        assert!(lease.remaining() > Duration::from_secs(29));
        for s in &cluster.servers {
            let (pttl, value): (i64, Option<String>) = block_in_place(|| {
                let mut admin = s.admin();
                (
                    admin.pttl("ifeq").expect("PTTL"),
                    admin.get("ifeq").expect("GET"),
                )
            });
            assert!(
                pttl > 29_000 && pttl <= 30_000,
                "{flavour:?}: the node's key has the new TTL: {pttl} ms"
            );
            assert!(value.is_some_and(|v| v.len() == 32), "our token stays");
        }
        // And the next extend, with the client's TTL, goes back down the same way.
        let before = counts(&cluster);
        lease.extend().await.expect("extended");
        settle().await;
        assert_eq!(
            ran(&before, &counts(&cluster)),
            vec![one_extend(flavour); 3]
        );
        let pttl: i64 = block_in_place(|| cluster.servers[0].admin().pttl("ifeq").expect("PTTL"));
        assert!(pttl <= 2_000, "{flavour:?}: {pttl}");
        lease.release_all().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owners_key_is_not_ours_and_stays_as_it_was() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(5))
            .build()
            .expect("valid");
        let mut lease = redlock.try_acquire("taken").await.expect("free");
        settle().await;
        // Two of three nodes now hold another owner's key: no majority is ours.
        block_in_place(|| {
            for s in &cluster.servers[..2] {
                let _: () = s.admin().set_ex("taken", "other-owner", 60).expect("SET");
            }
        });
        let before = counts(&cluster);
        let err = lease.extend().await.expect_err("not ours");
        settle().await;
        assert_eq!(
            ran(&before, &counts(&cluster)),
            vec![one_extend(flavour); 3],
            "{flavour:?}"
        );
        assert!(
            // Node 2's yes counts only if it came before the two noes decided.
            matches!(err, LockError::QuorumNotReached { granted: 0 | 1, .. }),
            "{flavour:?}: {err}"
        );
        for i in 0..2 {
            assert_eq!(
                cluster.reason_of(&err, i),
                Some(NodeFailureReason::NotOurs),
                "{flavour:?}: node {i}: {err}"
            );
            let (value, ttl): (Option<String>, i64) = block_in_place(|| {
                let mut admin = cluster.servers[i].admin();
                (
                    admin.get("taken").expect("GET"),
                    admin.ttl("taken").expect("TTL"),
                )
            });
            assert_eq!(value.as_deref(), Some("other-owner"), "{flavour:?}");
            assert!(
                ttl > 55,
                "{flavour:?}: the other owner's expiry changed: {ttl}"
            );
        }
        assert!(err.is_contended(), "{flavour:?}: {err}");
        let report = lease.release_all().await;
        let outcomes: Vec<_> = report.nodes.iter().map(|n| n.outcome.clone()).collect();
        assert_eq!(
            outcomes,
            vec![
                ReleaseOutcome::NotOurs,
                ReleaseOutcome::NotOurs,
                ReleaseOutcome::Released
            ],
            "{flavour:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_gone_everywhere_fails_the_extend_and_is_not_made_again() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let redlock = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(5))
            .build()
            .expect("valid");
        let mut lease = redlock.try_acquire("gone").await.expect("free");
        settle().await;
        block_in_place(|| {
            for s in &cluster.servers {
                let _: () = s.admin().del("gone").expect("DEL");
            }
        });
        let before = counts(&cluster);
        let err = lease.extend().await.expect_err("gone");
        settle().await;
        assert_eq!(
            ran(&before, &counts(&cluster)),
            vec![one_extend(flavour); 3],
            "{flavour:?}"
        );
        let LockError::QuorumNotReached {
            granted, failures, ..
        } = &err
        else {
            panic!("{flavour:?}: {err}");
        };
        assert_eq!(*granted, 0, "{flavour:?}: {err}");
        assert!(
            failures
                .iter()
                .filter(|f| f.reason == NodeFailureReason::NotOurs)
                .count()
                >= 2,
            "{flavour:?}: {err}"
        );
        assert!(
            failures
                .iter()
                .all(|f| !matches!(f.reason, NodeFailureReason::Error(_))),
            "{flavour:?}: {err}"
        );
        assert!(
            block_in_place(|| cluster.holding("gone")).is_empty(),
            "{flavour:?}: an extend of a missing key must not create it"
        );
        let report = lease.release_all().await;
        assert!(
            report
                .nodes
                .iter()
                .all(|n| n.outcome == ReleaseOutcome::AlreadyGone),
            "{report:?}"
        );
    }
}

/// Three servers whose user `locker` may run everything but scripts, and its URLs.
fn without_lua(flavour: Flavour) -> (Cluster, Vec<String>) {
    let cluster = Cluster::start(flavour, 3);
    block_in_place(|| {
        for s in &cluster.servers {
            let _: () = redis::cmd("ACL")
                .arg(&[
                    "SETUSER",
                    "locker",
                    "on",
                    ">pw",
                    "~*",
                    "&*",
                    "+@all",
                    "-@scripting",
                ])
                .query(&mut s.admin())
                .expect("ACL SETUSER");
        }
    });
    let urls = cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@{}", s.addr()))
        .collect();
    (cluster, urls)
}

/// Whether `text` is the server's refusal to run `EVAL` for want of permission (the
/// `redis` crate words `NOPERM` as `NoPerm:`).
fn denies_eval(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("noperm") && text.contains("permissions to run the 'eval' command")
}

/// The node errors in `err`, which must be a quorum failure.
fn node_errors(err: &LockError) -> Vec<NodeError> {
    let LockError::QuorumNotReached { failures, .. } = err else {
        panic!("not a quorum failure: {err}");
    };
    failures
        .iter()
        .filter_map(|f| match &f.reason {
            NodeFailureReason::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lua_denied_valkey_8_1_acquires_and_extends_but_cannot_release() {
    let (cluster, urls) = without_lua(Flavour::Valkey);
    let redlock = Redlock::builder(urls)
        .ttl(Duration::from_secs(3))
        .build()
        .expect("valid");
    let mut lease = redlock
        .try_acquire("no-lua")
        .await
        .expect("SET NX needs no Lua");
    let validity = lease
        .extend_for(Duration::from_secs(20))
        .await
        .expect("SET IFEQ needs no Lua");
    assert!(validity > Duration::from_secs(19), "{validity:?}");
    settle().await;
    for s in &cluster.servers {
        let pttl: i64 = block_in_place(|| s.admin().pttl("no-lua").expect("PTTL"));
        assert!(pttl > 19_000 && pttl <= 20_000, "{pttl}");
    }
    // Valkey 8.1 has no DELIFEQ: a release needs the script, which the ACL denies. Every
    // node says so, and the key stays until its TTL.
    let report = lease.release_all().await;
    for node in &report.nodes {
        match &node.outcome {
            ReleaseOutcome::Failed(NodeError::Auth(text)) => {
                assert!(denies_eval(text), "{text}");
            }
            other => panic!("{}: {other:?}", node.addr),
        }
    }
    assert_eq!(
        block_in_place(|| cluster.holding("no-lua")),
        vec![0, 1, 2],
        "a release that failed everywhere deleted nothing"
    );
    redlock.shutdown().await.expect("shut down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lua_denied_redis_7_acquires_but_an_extend_names_the_denied_script() {
    let (cluster, urls) = without_lua(Flavour::Redis);
    let redlock = Redlock::builder(urls)
        .ttl(Duration::from_secs(3))
        .build()
        .expect("valid");
    let mut lease = redlock
        .try_acquire("no-lua")
        .await
        .expect("SET NX needs no Lua");
    let before = lease.valid_until();
    let err = lease.extend().await.expect_err("the script is denied");
    let errors = node_errors(&err);
    assert!(errors.len() >= 2, "{err}");
    for e in &errors {
        let NodeError::Auth(text) = e else {
            panic!("not a permission error: {e:?}");
        };
        assert!(denies_eval(text), "{text}");
    }
    let message = err.to_string();
    assert!(message.contains("no-lua"), "{message}");
    assert!(denies_eval(&message), "{message}");
    assert!(message.contains("permission refused"), "{message}");
    assert!(!err.is_contended(), "{message}");
    assert!(
        lease.valid_until() <= before,
        "a failed extend adds nothing"
    );
    // The keys keep the TTL of the acquire: nothing was extended.
    settle().await;
    for s in &cluster.servers {
        let pttl: i64 = block_in_place(|| s.admin().pttl("no-lua").expect("PTTL"));
        assert!(pttl <= 3_000, "{pttl}");
    }
    let _ = lease.release_all().await;
    redlock.shutdown().await.expect("shut down");
}

/// A proxy in front of `target` that passes everything through but makes a Redis 7 claim
/// to be Redis 9 in its `INFO` (`redis_version:7.` becomes `redis_version:9.`, the same
/// length, so the reply's framing holds): a server whose version says `IFEQ` and whose
/// parser says no. Returns its port.
async fn claiming_redis_9(target: u16) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind proxy");
    let port = listener.local_addr().expect("proxy addr").port();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                else {
                    return;
                };
                let (mut ri, mut wi) = inbound.into_split();
                let (mut ro, mut wo) = outbound.into_split();
                let up = async move {
                    let _ = tokio::io::copy(&mut ri, &mut wo).await;
                };
                let down = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match ro.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let chunk = &mut buf[..n];
                        let needle = b"redis_version:7.";
                        if let Some(at) = chunk.windows(needle.len()).position(|w| w == needle) {
                            chunk[at + needle.len() - 2] = b'9';
                        }
                        if wi.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                };
                tokio::join!(up, down);
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_claims_ifeq_but_refuses_it_fails_one_extend_then_gets_the_script() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let mut urls = Vec::new();
    for s in &cluster.servers {
        urls.push(format!(
            "redis://127.0.0.1:{}",
            claiming_redis_9(s.port).await
        ));
    }
    let redlock = Redlock::builder(urls)
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    let mut lease = redlock.try_acquire("liar").await.expect("free");
    settle().await;
    let before = counts(&cluster);
    let err = lease
        .extend_for(Duration::from_secs(30))
        .await
        .expect_err("SET IFEQ refused");
    settle().await;
    assert!(
        ran(&before, &counts(&cluster))
            .iter()
            .all(|c| c.scripts == 0),
        "the version said IFEQ, so no script went out: {err}"
    );
    let errors = node_errors(&err);
    assert!(errors.len() >= 2, "{err}");
    for e in &errors {
        assert!(
            matches!(e, NodeError::Redis(text) if text.to_ascii_lowercase().contains("syntax error")),
            "{e:?}"
        );
    }
    for s in &cluster.servers {
        let pttl: i64 = block_in_place(|| s.admin().pttl("liar").expect("PTTL"));
        assert!(
            pttl > 0 && pttl <= 5_000,
            "the refused SET changed nothing: {pttl}"
        );
    }
    // Those connections now use the script, and the extend works.
    for _ in 0..2 {
        let before = counts(&cluster);
        let validity = lease
            .extend_for(Duration::from_secs(30))
            .await
            .expect("extended by the script");
        assert!(validity > Duration::from_secs(29), "{validity:?}");
        settle().await;
        assert!(
            ran(&before, &counts(&cluster))
                .iter()
                .all(|c| c.scripts == 1),
            "one script per node"
        );
    }
    for s in &cluster.servers {
        let pttl: i64 = block_in_place(|| s.admin().pttl("liar").expect("PTTL"));
        assert!(pttl > 29_000, "{pttl}");
    }
    let report = lease.release_all().await;
    assert!(
        report
            .nodes
            .iter()
            .all(|n| n.outcome == ReleaseOutcome::Released),
        "{report:?}"
    );
}
