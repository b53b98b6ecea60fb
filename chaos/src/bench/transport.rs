//! The `transport` case: the lock's two connections to a node, side by side.
//!
//! `fenced_redlock` talks to a `redis://` node over a lean pipelined RESP2 connection of its
//! own (`conn`), and to anything else — TLS, Unix sockets, RESP3 — over the `redis` crate's
//! multiplexed connection. Issue 23 keeps the lean one only while it passes the same
//! conformance tests (`redlock/tests/transport.rs`) and stays measurably ahead; this case
//! is that measurement. Two clients, both ours unfenced, one on each connection: `ours`
//! on the plain URLs, `ours-resp3` ([`Ours::resp3`]) on the same URLs with
//! `protocol=resp3`. Same nodes, same TTL, lanes taking turns as in every other case:
//!
//! - `transport/latency` — acquire+release on one resource, no contention (the healthy
//!   case's loop), each row with this process's CPU time per operation;
//! - `transport/throughput` — 64 tasks × 64 resources (the throughput case's loop), with
//!   ops/s, CPU time per operation and the CPU ceiling.
//!
//! # The RESP3 client really is on the other connection
//! The URL query is the only thing that picks the connection, and a row that measured the
//! lean connection twice would still look plausible. So after the latency rows, before
//! the throughput rows, [`check_resp3`] asks every node for `CLIENT LIST` and requires more
//! connections with `resp=3` than before `ours-resp3` made its first: the lean connection
//! never sends `HELLO 3`, the `redis` crate's does. If one node has none, the case fails
//! instead of reporting. A server whose `CLIENT LIST` has no `resp=` field (Redis before
//! 7) cannot say; the case runs and a note says it was not checked.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{Cluster, LocalCluster, NodeId};

use super::cases::{self, Client, Lane};
use super::ceiling::Servers;
use super::clients::Ours;
use super::{BenchError, NODES, Plan, Row};

/// The latency rows' case name.
pub const LATENCY: &str = "transport/latency";
/// The throughput rows' case name.
pub const THROUGHPUT: &str = "transport/throughput";
/// The lean connection's client (the same adapter as the other cases' `ours`).
pub const LEAN: &str = "ours";
/// The `redis` crate's RESP3 connection's client.
pub const RESP3: &str = "ours-resp3";

/// Both clients through the latency loop, the RESP3 check, then both through the
/// throughput loop; a note in `notes` says how the check went (once per run).
pub async fn run(
    cluster: &LocalCluster,
    urls: &[String],
    plan: &Plan,
    notes: &mut Vec<String>,
) -> Result<Vec<Row>, BenchError> {
    let admin: Vec<String> = (0..NODES)
        .map(|i| cluster.admin_url(NodeId(i)))
        .collect::<Result<_, _>>()?;
    let before = resp3_counts(&admin).await?;
    let clients: Vec<Client> = vec![
        Arc::new(Ours::new(urls, plan.ttl, false)?),
        Arc::new(Ours::resp3(urls, plan.ttl)?),
    ];
    let mut rows = Vec::new();
    let mut lanes: Vec<Lane> = clients
        .iter()
        .map(|c| Lane::new(LATENCY, c).with_cpu())
        .collect();
    cases::latency(&mut lanes, plan.healthy, plan.warmup, plan).await;
    rows.extend(lanes.iter().map(Lane::row));

    let checked = check_resp3(&before, &resp3_counts(&admin).await?)?;
    if !notes.iter().any(|n| n.starts_with("transport:")) {
        notes.push(match checked {
            Checked::Verified => format!(
                "transport: {RESP3} speaks RESP3 on every node (CLIENT LIST resp=3), so it is on the redis crate's connection; {LEAN} on the lean RESP2 one"
            ),
            Checked::Unknown => format!(
                "transport: not checked that {RESP3} is on the redis crate's connection (the server's CLIENT LIST has no resp= field)"
            ),
        });
    }

    let servers = Servers::from_pids(&cluster.pids());
    rows.extend(cases::throughput(THROUGHPUT, &clients, plan, &servers).await);
    Ok(rows)
}

/// What [`check_resp3`] could establish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Every node has more RESP3 connections than before the RESP3 client started.
    Verified,
    /// Some node does not report connections' protocols.
    Unknown,
}

/// `Ok` when every node gained a RESP3 connection (`after[i] > before[i]`), or when a node
/// cannot say (`None`); an error naming the first node that could say and has none.
pub fn check_resp3(
    before: &[Option<usize>],
    after: &[Option<usize>],
) -> Result<Checked, BenchError> {
    let mut checked = Checked::Verified;
    for (node, (b, a)) in before.iter().zip(after).enumerate() {
        match (b, a) {
            (Some(b), Some(a)) if a > b => {}
            (Some(b), Some(a)) => {
                return Err(BenchError::Setup(format!(
                    "transport: {RESP3} made no RESP3 connection to node {node} ({b} before, {a} after): it would measure the lean connection twice"
                )));
            }
            _ => checked = Checked::Unknown,
        }
    }
    Ok(checked)
}

/// Connections speaking RESP3 in a `CLIENT LIST` reply; `None` when no line has a `resp=`
/// field (the server does not say).
pub fn resp3_connections(client_list: &str) -> Option<usize> {
    let mut said = false;
    let mut resp3 = 0;
    for line in client_list.lines() {
        if let Some(resp) = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("resp="))
        {
            said = true;
            if resp == "3" {
                resp3 += 1;
            }
        }
    }
    said.then_some(resp3)
}

/// [`resp3_connections`] on each node, over a connection of its own (RESP2: not counted).
async fn resp3_counts(admin: &[String]) -> Result<Vec<Option<usize>>, BenchError> {
    let mut counts = Vec::with_capacity(admin.len());
    for url in admin {
        counts.push(resp3_connections(&client_list(url).await?));
    }
    Ok(counts)
}

async fn client_list(url: &str) -> Result<String, BenchError> {
    let list = async {
        let client = redis::Client::open(url)?;
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async::<String>(&mut c)
            .await
    };
    match tokio::time::timeout(Duration::from_secs(5), list).await {
        Ok(Ok(list)) => Ok(list),
        Ok(Err(e)) => Err(BenchError::Setup(format!("CLIENT LIST on {url}: {e}"))),
        Err(_) => Err(BenchError::Setup(format!(
            "CLIENT LIST on {url}: timed out"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "\
id=3 addr=127.0.0.1:50000 laddr=127.0.0.1:7001 fd=8 name= age=1 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=eval user=default redir=-1 resp=2 lib-name= lib-ver=
id=4 addr=127.0.0.1:50001 laddr=127.0.0.1:7001 fd=9 name= age=1 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=eval user=default redir=-1 resp=3 lib-name=redis-rs lib-ver=1.0.0
id=5 addr=127.0.0.1:50002 laddr=127.0.0.1:7001 fd=10 name= age=0 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=26 qbuf-free=0 argv-mem=10 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=client|list user=default redir=-1 resp=2 lib-name= lib-ver=
";

    #[test]
    fn counts_resp3_lines_or_says_it_cannot() {
        assert_eq!(resp3_connections(LIST), Some(1));
        assert_eq!(
            resp3_connections("id=3 addr=127.0.0.1:50000 cmd=get\n"),
            None
        );
        assert_eq!(resp3_connections(""), None);
    }

    #[test]
    fn every_node_must_gain_a_resp3_connection() {
        assert_eq!(
            check_resp3(&[Some(0), Some(1)], &[Some(1), Some(2)]).ok(),
            Some(Checked::Verified)
        );
        assert!(matches!(
            check_resp3(&[Some(0), Some(0)], &[Some(1), Some(0)]),
            Err(BenchError::Setup(e)) if e.contains("node 1")
        ));
        assert_eq!(
            check_resp3(&[None, Some(0)], &[None, Some(1)]).ok(),
            Some(Checked::Unknown)
        );
    }
}
