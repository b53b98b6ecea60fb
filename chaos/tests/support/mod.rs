//! Shared test setup: five local redis-server primaries (the cluster module's local backend)
//! and a private PostgreSQL server. Both clean up on drop, also when a test panics.

#![allow(dead_code, unreachable_pub)]

use redlock_chaos::cluster::{Cluster, ClusterSpec, Flavour, LocalCluster, NodeId};
use redlock_chaos::pg::PgServer;

/// Five primaries; killed and their dir removed when dropped.
pub async fn five_primaries() -> (LocalCluster, Vec<String>) {
    let cluster = LocalCluster::up(ClusterSpec::new(Flavour::Redis, 5))
        .await
        .expect("starting 5 local redis-server primaries");
    let urls = (0..cluster.nodes())
        .map(|i| cluster.worker_url(NodeId(i)).expect("url"))
        .collect();
    (cluster, urls)
}

/// A private PostgreSQL 15.
pub async fn postgres() -> PgServer {
    tokio::task::spawn_blocking(PgServer::start)
        .await
        .expect("join")
        .expect("starting postgres")
}
