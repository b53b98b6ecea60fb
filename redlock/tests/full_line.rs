//! A frozen node's connection fills its line (`conn::MAX_PENDING` requests nobody will
//! answer until it thaws). Every attempt's `SET` that got a place in that line must have
//! its delete behind it: a `SET` admitted while its delete is refused runs when the node
//! thaws and stands for its whole TTL. The chaos rig saw that key in CI (pause-minority,
//! local backend, 2026-12-04: one key per mode on the node frozen 3.5 s, set after the thaw).

use crate::support;

use std::time::Duration;

use redis::Commands;
use support::{Cluster, Flavour, warm_client};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// Clients whose connections to a frozen node fill: no key of theirs may stand on it once
/// it thaws. Each client has its own connection, and so its own line. Before the line kept
/// room for deletes, 3 runs of 3 failed, with 3 to 6 of the 6 keys standing ~1.7 s of their
/// 2 s TTL.
const CLIENTS: usize = 4;

/// Attempts each client keeps in flight, each on a resource of its own. With one attempt
/// at a time the line fills between an attempt's `SET` and its delete only by chance (the
/// delete follows the `SET` within the same task): the mutant that lets the delete take a
/// shared place (`cleanup-shares-the-line`, mutants/redlock.toml) left keys in 8 runs of
/// 18 (2026-12-06). With many in flight, the line fills while some `SET`s wait for their
/// deletes: 8 runs of 8 failed, 62-64 of the 64 keys standing.
const IN_FLIGHT: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_that_fill_a_frozen_nodes_line_leave_no_key_when_it_thaws() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let ttl = Duration::from_secs(2);
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let keys: Vec<String> = (0..IN_FLIGHT).map(|t| format!("r{i}-{t}")).collect();
        clients.push((keys, warm_client(cluster.urls(), ttl).await));
    }
    assert!(block_in_place(|| cluster.wait_keys_gone(Duration::from_secs(1))).is_empty());
    // Another owner holds every resource on n1 and n2: every attempt fails at once, and
    // its clean-up asks the frozen n0 again and again.
    for s in &cluster.servers[1..] {
        for key in clients.iter().flat_map(|(keys, _)| keys) {
            let _: () = s
                .admin()
                .set_options(
                    key,
                    "someone-else",
                    redis::SetOptions::default().with_expiration(redis::SetExpiry::PX(60_000)),
                )
                .expect("SET");
        }
    }
    cluster.servers[0].freeze();
    // Far more requests than one line holds (MAX_PENDING, 1024), per client.
    let until = Instant::now() + Duration::from_millis(1500);
    let tasks: Vec<_> = clients
        .iter()
        .flat_map(|(keys, client)| keys.iter().map(move |key| (key.clone(), client.clone())))
        .map(|(key, client)| {
            tokio::spawn(async move {
                let mut attempts = 0u32;
                while Instant::now() < until && attempts < 1_000 {
                    let r = client.try_acquire(&key).await;
                    assert!(r.is_err(), "granted with one vote of three");
                    attempts += 1;
                }
                attempts
            })
        })
        .collect();
    let mut attempts = 0u32;
    for t in tasks {
        attempts += t.await.expect("no panic");
    }
    cluster.servers[0].thaw();
    // What the lines held runs now; a SET with its delete behind it leaves nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut admin = cluster.servers[0].admin();
    let mut left = Vec::new();
    for key in clients.iter().flat_map(|(keys, _)| keys) {
        let pttl: i64 = admin.pttl(key).expect("PTTL");
        if pttl > 0 {
            left.push(format!("{key}: {pttl} ms more"));
        }
    }
    assert!(
        left.is_empty(),
        "after {attempts} failed attempts ({CLIENTS} clients, {IN_FLIGHT} at a time each) \
         against a frozen node, {} keys of theirs stand on it (TTL {ttl:?}): {left:?}",
        left.len()
    );
    for (_, client) in clients {
        let _ = client.shutdown().await;
    }
}
