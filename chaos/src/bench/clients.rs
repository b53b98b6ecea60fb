//! One adapter per lock client behind [`LockClient`]: acquire(resource, ttl) / release.
//!
//! | adapter | what it is | how it waits |
//! |---|---|---|
//! | [`Ours`] | `fenced-redlock`, fencing off or on, fenced with the clock-jump guard, fenced with durable votes, or unfenced on the `redis` crate's RESP3 connection instead of the lean one | release notifications (PUBLISH) + jittered 50 ms poll |
//! | `Rslock` (feature `peers`) | `rslock` 0.10: parallel `join_all`, waits for **every** node | 3 tries, sleep U(0, 200 ms), forever |
//! | `Sequential` (feature `peers`) | `redlock` 2.0: one node after the other, a new TCP connection per command, blocking | 3 tries, sleep U(0, 200 ms) |
//! | [`Floor`] | one node, `SET NX PX` + Lua compare-and-delete, same `redis` 1.x stack | — (not in the waiting cases) |
//!
//! Blocking calls run on `spawn_blocking`. They cannot be cancelled: a caller that times
//! one out must keep the task (see `cases`) and let it finish once the node answers again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::{Durability, Lease, Redlock};
use redis::aio::MultiplexedConnection;

use super::BenchError;

/// A boxed, sendable future (the trait is used as `Arc<dyn LockClient>`).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A lock held through one of the adapters.
#[derive(Debug)]
#[non_exhaustive]
pub enum Held {
    /// Our lease.
    Ours(Lease),
    /// An rslock lock.
    #[cfg(feature = "peers")]
    Rslock(rslock::Lock),
    /// Key and value of a `redlock` 2.0 lock (its `Lock` borrows the manager, so it cannot
    /// cross into `spawn_blocking`; it is rebuilt for the release).
    Sequential {
        /// The key.
        resource: Vec<u8>,
        /// The owner value.
        val: Vec<u8>,
        /// Validity reported at grant, ms.
        validity_ms: usize,
    },
    /// The floor's key and token.
    Floor {
        /// The key.
        key: String,
        /// Our token.
        token: String,
    },
}

/// The operations every compared client offers.
pub trait LockClient: Send + Sync + std::fmt::Debug {
    /// Short name used in the table and the JSON.
    fn name(&self) -> &'static str;
    /// Whether it blocks a thread per call (and so cannot be cancelled).
    fn blocking(&self) -> bool {
        false
    }
    /// Whether it can take part in the waiting (hand-off) case.
    fn waits(&self) -> bool {
        true
    }
    /// One acquire as the client offers it (with whatever retries it does by default).
    /// `Err(NotAcquired)` when it gave up.
    fn acquire<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>>;
    /// Acquire, waiting with the client's own retry policy for up to about `wait`.
    fn acquire_waiting<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
        wait: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>>;
    /// Release what [`LockClient::acquire`] returned.
    fn release(&self, held: Held) -> BoxFut<'_, Result<(), BenchError>>;
}

fn not_acquired(client: &'static str, detail: impl std::fmt::Display) -> BenchError {
    BenchError::NotAcquired {
        client,
        detail: detail.to_string(),
    }
}

/// How long `ours-durable` lets a node take to fsync a yes. A node at `appendfsync
/// everysec` that waits for its once-a-second fsync makes a vote wait up to a second, then
/// for the `fdatasync` itself on a disk the five nodes share: 1.5 s covers both, where a
/// tighter wait would turn slow votes into `NotDurable` failures and the case would count
/// errors instead of timing them. (Valkey 8.1.8 does not wait: at `everysec` it reports a
/// write fsynced once it is in the file, at the next turn of its event loop — `strace`
/// shows the acknowledgements with no `fdatasync` before them — so its `durable/everysec`
/// row times the `WAITAOF`, not a fsync.)
pub const DURABLE_FSYNC_TIMEOUT: Duration = Duration::from_millis(1500);

/// `ours-durable`'s node deadline: the fsync wait must fit below it (`build()` refuses it
/// otherwise), with room for the request and reply around it. Below the bench's 10 s TTL,
/// which leaves most of it as validity after two rounds of a second each.
pub const DURABLE_NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// `fenced-redlock`.
#[derive(Debug, Clone)]
pub struct Ours {
    name: &'static str,
    lock: Redlock,
}

impl Ours {
    /// Builds our client over `urls`.
    pub fn new(urls: &[String], ttl: Duration, fencing: bool) -> Result<Self, BenchError> {
        Self::build(
            Redlock::builder(urls).ttl(ttl).fencing(fencing),
            if fencing { "ours-fenced" } else { "ours" },
        )
    }

    /// Ours with fencing and the clock-jump guard on (`ours-jump-guard`): what the `TIME`
    /// behind every vote costs. (The restart quarantine adds no request; on, it would
    /// refuse the bench's freshly started nodes for a TTL.)
    pub fn guarded(urls: &[String], ttl: Duration) -> Result<Self, BenchError> {
        Self::build(
            Redlock::builder(urls)
                .ttl(ttl)
                .fencing(true)
                .clock_jump_guard(true),
            "ours-jump-guard",
        )
    }

    /// Ours with fencing and durable votes (`ours-durable`): a `WAITAOF` behind the
    /// acquire and the fence write on every node, and a yes that counts only once fsynced.
    /// What that costs depends on the nodes' `appendfsync` (the `durable` case runs both).
    pub fn durable(urls: &[String], ttl: Duration) -> Result<Self, BenchError> {
        Self::build(
            Redlock::builder(urls)
                .ttl(ttl)
                .fencing(true)
                .node_timeout(DURABLE_NODE_TIMEOUT)
                .durability(Durability::Fsync {
                    timeout: DURABLE_FSYNC_TIMEOUT,
                }),
            "ours-durable",
        )
    }

    /// Ours unfenced on the `redis` crate's multiplexed connection (`ours-resp3`): the
    /// same `urls` with `protocol=resp3` added, which is what makes the lock pick that
    /// connection over its lean RESP2 one (`fenced_redlock`'s `conn`). Beside [`Ours::new`]
    /// unfenced, it measures what the lean connection wins (the `transport` case).
    pub fn resp3(urls: &[String], ttl: Duration) -> Result<Self, BenchError> {
        Self::build(
            Redlock::builder(urls.iter().map(|u| with_resp3(u))).ttl(ttl),
            "ours-resp3",
        )
    }

    fn build(builder: fenced_redlock::Builder, name: &'static str) -> Result<Self, BenchError> {
        let lock = builder
            .build()
            .map_err(|e| BenchError::Setup(format!("fenced-redlock: {e}")))?;
        Ok(Ours { name, lock })
    }

    /// Per-node deadline of this client.
    pub fn node_timeout(&self) -> Duration {
        self.lock.node_timeout()
    }

    fn with(&self, ttl: Duration) -> Result<std::borrow::Cow<'_, Redlock>, BenchError> {
        // Same TTL: no new settings (keeps the hot path free of a validation + allocation).
        if ttl == self.lock.ttl() {
            return Ok(std::borrow::Cow::Borrowed(&self.lock));
        }
        self.lock
            .with_ttl(ttl)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| BenchError::Setup(format!("fenced-redlock ttl: {e}")))
    }
}

/// `url` asking for RESP3 (`?protocol=resp3`, or `&protocol=resp3` after a query).
fn with_resp3(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}protocol=resp3")
}

impl LockClient for Ours {
    fn name(&self) -> &'static str {
        self.name
    }
    fn acquire<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>> {
        Box::pin(async move {
            let lock = self.with(ttl)?;
            lock.try_acquire(resource)
                .await
                .map(Held::Ours)
                .map_err(|e| not_acquired(self.name, e))
        })
    }
    fn acquire_waiting<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
        wait: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>> {
        Box::pin(async move {
            let lock = self.with(ttl)?;
            lock.acquire(resource, wait)
                .await
                .map(Held::Ours)
                .map_err(|e| not_acquired(self.name, e))
        })
    }
    fn release(&self, held: Held) -> BoxFut<'_, Result<(), BenchError>> {
        Box::pin(async move {
            match held {
                Held::Ours(lease) => {
                    lease.release().await;
                    Ok(())
                }
                other => Err(BenchError::WrongHeld(format!(
                    "{} got {other:?}",
                    self.name
                ))),
            }
        })
    }
}

/// The floor: one node, `SET NX PX` then compare-and-delete, one multiplexed connection.
#[derive(Debug, Clone)]
pub struct Floor {
    conn: MultiplexedConnection,
    script: Arc<redis::Script>,
}

/// The compare-and-delete every peer uses (ours also publishes; see `fenced_redlock`).
pub const COMPARE_AND_DELETE: &str = "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";

impl Floor {
    /// Connects to `url` (the response timeout is the `redis` default, as for rslock).
    pub async fn connect(url: &str) -> Result<Self, BenchError> {
        let client =
            redis::Client::open(url).map_err(|e| BenchError::Setup(format!("floor: {e}")))?;
        let conn = tokio::time::timeout(
            Duration::from_secs(5),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| BenchError::Setup("floor: connect timed out".into()))?
        .map_err(|e| BenchError::Setup(format!("floor: {e}")))?;
        Ok(Floor {
            conn,
            script: Arc::new(redis::Script::new(COMPARE_AND_DELETE)),
        })
    }
}

impl LockClient for Floor {
    fn name(&self) -> &'static str {
        "floor-1-node"
    }
    fn waits(&self) -> bool {
        false
    }
    fn acquire<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>> {
        Box::pin(async move {
            let token = format!("{:032x}", rand::random::<u128>());
            let mut c = self.conn.clone();
            let ok: Option<String> = redis::cmd("SET")
                .arg(resource)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .query_async(&mut c)
                .await
                .map_err(|e| not_acquired(self.name(), e))?;
            match ok {
                Some(_) => Ok(Held::Floor {
                    key: resource.to_owned(),
                    token,
                }),
                None => Err(not_acquired(self.name(), "held")),
            }
        })
    }
    fn acquire_waiting<'a>(
        &'a self,
        resource: &'a str,
        ttl: Duration,
        _wait: Duration,
    ) -> BoxFut<'a, Result<Held, BenchError>> {
        // The floor has no retry policy of its own; it is left out of the waiting case.
        self.acquire(resource, ttl)
    }
    fn release(&self, held: Held) -> BoxFut<'_, Result<(), BenchError>> {
        Box::pin(async move {
            let Held::Floor { key, token } = held else {
                return Err(BenchError::WrongHeld(format!("floor got {held:?}")));
            };
            let mut c = self.conn.clone();
            let _: i64 = self
                .script
                .key(key)
                .arg(token)
                .invoke_async(&mut c)
                .await
                .map_err(|e| BenchError::Release(format!("floor: {e}")))?;
            Ok(())
        })
    }
}

#[cfg(feature = "peers")]
pub use peers::{Rslock, Sequential};

#[cfg(feature = "peers")]
mod peers {
    use super::*;

    /// `rslock` 0.10 (async, parallel, waits for all nodes; no per-node deadline beyond the
    /// `redis` crate's default 500 ms response timeout).
    #[derive(Debug, Clone)]
    pub struct Rslock {
        lm: rslock::LockManager,
    }

    impl Rslock {
        /// A lock manager over `urls` with its default retry policy.
        pub fn new(urls: &[String]) -> Result<Self, BenchError> {
            let clients = urls
                .iter()
                .map(|u| redis::Client::open(u.as_str()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| BenchError::Setup(format!("rslock: {e}")))?;
            Ok(Rslock {
                lm: rslock::LockManager::from_clients(clients),
            })
        }
    }

    impl LockClient for Rslock {
        fn name(&self) -> &'static str {
            "rslock-0.10"
        }
        fn acquire<'a>(
            &'a self,
            resource: &'a str,
            ttl: Duration,
        ) -> BoxFut<'a, Result<Held, BenchError>> {
            Box::pin(async move {
                self.lm
                    .lock(resource.as_bytes(), ttl)
                    .await
                    .map(Held::Rslock)
                    .map_err(|e| not_acquired(self.name(), e))
            })
        }
        fn acquire_waiting<'a>(
            &'a self,
            resource: &'a str,
            ttl: Duration,
            wait: Duration,
        ) -> BoxFut<'a, Result<Held, BenchError>> {
            Box::pin(async move {
                // Its own "loop until acquired", cut at `wait` (cancelling an async call is
                // safe: a key it set on the way expires with the TTL).
                match tokio::time::timeout(wait, self.lm.acquire_no_guard(resource.as_bytes(), ttl))
                    .await
                {
                    Ok(r) => r
                        .map(Held::Rslock)
                        .map_err(|e| not_acquired(self.name(), e)),
                    Err(_) => Err(BenchError::TimedOut(wait)),
                }
            })
        }
        fn release(&self, held: Held) -> BoxFut<'_, Result<(), BenchError>> {
            Box::pin(async move {
                match held {
                    Held::Rslock(lock) => {
                        self.lm.unlock(&lock).await;
                        Ok(())
                    }
                    other => Err(BenchError::WrongHeld(format!("rslock got {other:?}"))),
                }
            })
        }
    }

    /// `redlock` 2.0: blocking, one node after the other, no timeouts at all.
    #[derive(Debug, Clone)]
    pub struct Sequential {
        rl: Arc<redlock::RedLock>,
    }

    impl Sequential {
        /// A lock manager over `urls`. Its constructor unwraps `Client::open` (redis 0.23),
        /// so the URLs are parsed first with our `redis` (same `redis://host:port` syntax).
        pub fn new(urls: &[String]) -> Result<Self, BenchError> {
            for u in urls {
                redis::IntoConnectionInfo::into_connection_info(u.as_str())
                    .map_err(|e| BenchError::Setup(format!("redlock: {u}: {e}")))?;
            }
            // Belt and braces: redis 0.23 might still refuse a URL redis 1.x took.
            let urls = urls.to_vec();
            let rl = std::panic::catch_unwind(move || redlock::RedLock::new(urls))
                .map_err(|_| BenchError::Setup("redlock: a node URL was refused".into()))?;
            Ok(Sequential { rl: Arc::new(rl) })
        }
    }

    impl LockClient for Sequential {
        fn name(&self) -> &'static str {
            "redlock-2.0-seq"
        }
        fn blocking(&self) -> bool {
            true
        }
        fn acquire<'a>(
            &'a self,
            resource: &'a str,
            ttl: Duration,
        ) -> BoxFut<'a, Result<Held, BenchError>> {
            let rl = Arc::clone(&self.rl);
            let resource = resource.as_bytes().to_vec();
            let ttl_ms = ttl.as_millis() as usize;
            Box::pin(async move {
                let r = tokio::task::spawn_blocking(move || {
                    rl.lock(&resource, ttl_ms).map(|l| {
                        l.map(|l| Held::Sequential {
                            resource: l.resource,
                            val: l.val,
                            validity_ms: l.validity_time,
                        })
                    })
                })
                .await
                .map_err(|e| BenchError::Task(e.to_string()))?;
                match r {
                    Ok(Some(h)) => Ok(h),
                    Ok(None) => Err(not_acquired("redlock-2.0-seq", "gave up after its retries")),
                    Err(e) => Err(not_acquired("redlock-2.0-seq", e)),
                }
            })
        }
        fn acquire_waiting<'a>(
            &'a self,
            resource: &'a str,
            ttl: Duration,
            wait: Duration,
        ) -> BoxFut<'a, Result<Held, BenchError>> {
            Box::pin(async move {
                // Its `lock()` is already 3 tries with U(0, 200 ms) pauses; call it again until
                // `wait` is over (checked between calls: a call itself cannot be cut short).
                let deadline = tokio::time::Instant::now() + wait;
                loop {
                    match self.acquire(resource, ttl).await {
                        Ok(h) => return Ok(h),
                        Err(BenchError::NotAcquired { .. })
                            if tokio::time::Instant::now() < deadline => {}
                        Err(e) => return Err(e),
                    }
                }
            })
        }
        fn release(&self, held: Held) -> BoxFut<'_, Result<(), BenchError>> {
            let rl = Arc::clone(&self.rl);
            Box::pin(async move {
                let Held::Sequential {
                    resource,
                    val,
                    validity_ms,
                } = held
                else {
                    return Err(BenchError::WrongHeld(format!("redlock got {held:?}")));
                };
                tokio::task::spawn_blocking(move || {
                    let lock = redlock::Lock {
                        resource,
                        val,
                        validity_time: validity_ms,
                        lock_manager: &rl,
                    };
                    rl.unlock(&lock);
                })
                .await
                .map_err(|e| BenchError::Task(e.to_string()))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_resp3;

    #[test]
    fn resp3_is_added_as_a_query_parameter() {
        assert_eq!(
            with_resp3("redis://127.0.0.1:7001"),
            "redis://127.0.0.1:7001?protocol=resp3"
        );
        assert_eq!(
            with_resp3("redis://127.0.0.1:7001/2?x=1"),
            "redis://127.0.0.1:7001/2?x=1&protocol=resp3"
        );
    }
}
