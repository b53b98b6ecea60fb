//! One primary: its address, its lazily connected multiplexed connection, and calls
//! bounded by a deadline (the client's, passed with every call: clients made by
//! `with_ttl` share the connections but not the deadline).

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionInfo, RedisResult};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::config::Settings;
use crate::error::NodeError;

/// Reconnect attempts the connection manager makes per failure before giving up until the
/// next call. Small on purpose: our own per-call deadline decides how long we wait.
const RECONNECT_RETRIES: usize = 2;

/// Whether a server has a native compare-and-delete, detected once per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeDelete {
    /// Neither command: use the Lua script.
    None,
    /// Valkey ≥ 9: `DELIFEQ key value`.
    DelIfEq,
    /// Redis ≥ 8.4: `DELEX key IFEQ value`.
    DelEx,
}

/// A Redis or Valkey primary taking part in the quorum.
pub(crate) struct Node {
    index: usize,
    addr: String,
    client: Client,
    manager_config: ConnectionManagerConfig,
    conn: OnceCell<ConnectionManager>,
    native_delete: OnceLock<NativeDelete>,
    probing: AtomicBool,
    resolved: Vec<SocketAddr>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}

impl Node {
    pub(crate) fn new(
        index: usize,
        info: ConnectionInfo,
        settings: &Settings,
    ) -> RedisResult<Self> {
        let addr = info.addr().to_string();
        let resolved = resolve(info.addr());
        let client = Client::open(info)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.node_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(RECONNECT_RETRIES)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(200));
        Ok(Node {
            index,
            addr,
            client,
            manager_config,
            conn: OnceCell::new(),
            native_delete: OnceLock::new(),
            probing: AtomicBool::new(false),
            resolved,
        })
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// `host:port`, safe to log (never the password).
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether `other` names the same server (the same failure domain): the same address
    /// as written, or a resolved address in common (`localhost:6379` and
    /// `127.0.0.1:6379`).
    pub(crate) fn same_server(&self, other: &Node) -> bool {
        self.addr == other.addr || self.resolved.iter().any(|a| other.resolved.contains(a))
    }

    /// A clone of the shared multiplexed connection, created on first use. Creation does
    /// not connect, so it cannot fail on a node that is down.
    fn connection(&self) -> RedisResult<ConnectionManager> {
        if let Some(c) = self.conn.get() {
            return Ok(c.clone());
        }
        let made = ConnectionManager::new_lazy_with_config(
            self.client.clone(),
            self.manager_config.clone(),
        )?;
        // A concurrent first call may have won; either connection is equivalent.
        let _ = self.conn.set(made);
        self.conn.get().cloned().ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Client, "connection cell empty"))
        })
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `f` against this node's connection within `timeout`.
    /// Returns the reply and how long it took.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        timeout: Duration,
        f: F,
    ) -> (Result<T, NodeError>, Duration)
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let started = Instant::now();
        let result = match self.connection() {
            Err(e) => Err(NodeError::from_redis(&e)),
            Ok(conn) => match tokio::time::timeout(timeout, f(conn)).await {
                Err(_) => Err(NodeError::Timeout(timeout)),
                Ok(Err(e)) => Err(NodeError::from_redis(&e)),
                Ok(Ok(v)) => Ok(v),
            },
        };
        (result, started.elapsed())
    }

    /// The native compare-and-delete this server is known to offer. Until a probe has
    /// answered, the Lua script is used (it works everywhere) and a probe is started in
    /// the background, so a release never waits on detection.
    pub(crate) fn native_delete(self: &Arc<Self>, timeout: Duration) -> NativeDelete {
        if let Some(n) = self.native_delete.get() {
            return *n;
        }
        if !self.probing.swap(true, Ordering::AcqRel) {
            let node = Arc::clone(self);
            tokio::spawn(async move {
                if let Some(found) = node.probe_native_delete(timeout).await {
                    let _ = node.native_delete.set(found);
                }
                node.probing.store(false, Ordering::Release);
            });
        }
        NativeDelete::None
    }

    async fn probe_native_delete(&self, timeout: Duration) -> Option<NativeDelete> {
        let (reply, _) = self
            .call(timeout, |mut c| async move {
                redis::cmd("COMMAND")
                    .arg("INFO")
                    .arg("DELIFEQ")
                    .arg("DELEX")
                    .query_async::<redis::Value>(&mut c)
                    .await
            })
            .await;
        let Ok(redis::Value::Array(items)) = reply else {
            return None;
        };
        let known = |i: usize| !matches!(items.get(i), None | Some(redis::Value::Nil));
        Some(if known(0) {
            NativeDelete::DelIfEq
        } else if known(1) {
            NativeDelete::DelEx
        } else {
            NativeDelete::None
        })
    }
}

/// The socket addresses a TCP node's host name resolves to now; none for a Unix socket or
/// a name that does not resolve (a node that is down at build time is not an error).
/// IP literals resolve without a lookup.
fn resolve(addr: &redis::ConnectionAddr) -> Vec<SocketAddr> {
    match addr {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => (host.as_str(), *port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}
