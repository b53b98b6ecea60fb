//! The probe for a native compare-and-delete (`COMMAND INFO DELIFEQ DELEX`) under an ACL
//! that denies `COMMAND`: asked once per connection, not once per release.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use fenced_redlock::{Redlock, ReleaseOutcome};
use support::{Cluster, Flavour};
use tokio::task::block_in_place;

/// Denials of `COMMAND` (any subcommand) for `user` in the server's `ACL LOG` (which
/// folds repeats into one entry with a count).
fn denied_command_calls(server: &support::Server, user: &str) -> i64 {
    let entries: Vec<HashMap<String, redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .query(&mut server.admin())
        .expect("ACL LOG");
    let text = |v: Option<&redis::Value>| match v {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(redis::Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    entries
        .iter()
        .filter(|e| text(e.get("username")) == user && text(e.get("object")).starts_with("command"))
        .map(|e| match e.get("count") {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("ACL LOG entry without a count: {other:?}"),
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_probe_is_sent_once_per_connection() {
    for flavour in Flavour::ALL {
        for query in ["", "?protocol=resp3"] {
            let cluster = Cluster::start(flavour, 1);
            let server = &cluster.servers[0];
            block_in_place(|| {
                let _: () = redis::cmd("ACL")
                    .arg(
                        &[
                            "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-command",
                        ][..],
                    )
                    .query(&mut server.admin())
                    .expect("ACL SETUSER");
            });
            let redlock = Redlock::builder([format!("redis://locker:pw@{}{query}", server.addr())])
                .ttl(Duration::from_secs(10))
                .build()
                .expect("valid");
            for i in 0..20 {
                let lease = redlock.try_acquire("probed").await.expect("free");
                let report = lease.release().await;
                assert_eq!(
                    report.nodes[0].outcome,
                    ReleaseOutcome::Released,
                    "{flavour:?}{query}, release {i}"
                );
                // Let a probe started by this release be answered (denied) before the
                // next: well over the sub-millisecond it takes.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let denied = block_in_place(|| denied_command_calls(server, "locker"));
            // One connection, one probe: denied once (not zero, which would mean the
            // probe or this count is broken).
            assert_eq!(
                denied, 1,
                "{flavour:?}{query}: denied COMMAND calls for 20 releases on one connection"
            );
        }
    }
}
