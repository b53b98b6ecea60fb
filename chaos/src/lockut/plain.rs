//! A small, plain Redlock inside the rig, with one switch per deliberate mistake.
//!
//! Unmutated it is the textbook algorithm with fencing tokens, like ours in substance: per
//! attempt a random token; on every node at once `SET key token NX PX ttl`, each within a
//! node deadline (ttl / 10); a quorum (N/2 + 1) of yes votes wins; the token is one more
//! than the largest fence counter the yes nodes returned, written back to them (a quorum
//! must acknowledge); validity is `ttl − elapsed − drift` (drift = ttl × 1 % + 2 ms);
//! release deletes the key only where it still holds our token (compare-and-delete). A lost
//! attempt cleans up after itself, then retries after a short jittered pause.
//!
//! Each [`Mutation`] changes exactly one of those steps, so a run of the mutant differs from
//! a run of the plain lock in that step only. The plain lock passes the stock scenarios;
//! the checker must catch each mutant (see `chaos/tests/mutants.rs`).

use std::time::Duration;

use futures::future::join_all;
use rand::Rng;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{AcquireFailure, Granted};

/// One deliberate mistake (or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum Mutation {
    /// The textbook algorithm, no mistake.
    None,
    /// One yes vote is enough (quorum of 1 node).
    QuorumOfOne,
    /// Validity is the whole TTL from the grant: elapsed time and drift not subtracted.
    FullValidity,
    /// Release deletes the key without comparing the token (it may delete another
    /// holder's key).
    UncheckedRelease,
    /// No per-node deadline: an attempt waits for every node, however slow.
    NoNodeDeadline,
}

impl Mutation {
    /// Every mutation that breaks the lock (all but [`Mutation::None`]).
    pub const BROKEN: [Mutation; 4] = [
        Mutation::QuorumOfOne,
        Mutation::FullValidity,
        Mutation::UncheckedRelease,
        Mutation::NoNodeDeadline,
    ];

    /// Kebab-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::None => "none",
            Mutation::QuorumOfOne => "quorum-of-one",
            Mutation::FullValidity => "full-validity",
            Mutation::UncheckedRelease => "unchecked-release",
            Mutation::NoNodeDeadline => "no-node-deadline",
        }
    }
}

/// Drift allowance: ttl × this + [`DRIFT_FLOOR`].
const DRIFT_FACTOR: f64 = 0.01;
const DRIFT_FLOOR: Duration = Duration::from_millis(2);
/// Pause between attempts: uniformly up to this.
pub(crate) const RETRY_JITTER: Duration = Duration::from_millis(10);

/// `SET NX PX`; on success the node's fence counter (0 if none), else -1.
const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
return -1";
/// Raise the fence counter to ARGV[1] if it is below.
const FENCE: &str = r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1]) end
return 1";
/// Compare-and-delete.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// How long making a connection may take (TCP connect and handshake).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A node's connection, once made, and the task making one, while it runs.
#[derive(Debug, Default)]
struct Slot {
    ready: Option<MultiplexedConnection>,
    connecting: Option<JoinHandle<redis::RedisResult<MultiplexedConnection>>>,
}

/// One node: its client and a cached connection (dropped on error, made again next time).
///
/// The connection is made by a spawned task that goes on when the call waiting for it
/// misses its node deadline, and the next call picks it up. Were it made inside the call, a
/// node whose handshake takes longer than the deadline (a loaded machine, a slow link)
/// would never get a connection: every call would start one and cancel it.
#[derive(Debug)]
struct Node {
    client: Client,
    conn: Mutex<Slot>,
}

impl Node {
    async fn conn(&self) -> redis::RedisResult<MultiplexedConnection> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = &slot.ready {
            return Ok(c.clone());
        }
        let task = slot.connecting.get_or_insert_with(|| {
            let client = self.client.clone();
            let config = AsyncConnectionConfig::new().set_connection_timeout(Some(CONNECT_TIMEOUT));
            tokio::spawn(async move {
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
            })
        });
        // Cancel-safe: dropped here, the task goes on and its handle stays in the slot.
        let made = task.await;
        slot.connecting = None;
        match made {
            Ok(Ok(c)) => {
                slot.ready = Some(c.clone());
                Ok(c)
            }
            Ok(Err(e)) => Err(e),
            Err(join) => Err(std::io::Error::other(join.to_string()).into()),
        }
    }

    async fn forget(&self) {
        self.conn.lock().await.ready = None;
    }

    /// Runs `script` as `EVAL`: one request, whatever the server's script cache holds. As
    /// `EVALSHA` with the usual fallback (`NOSCRIPT`, `SCRIPT LOAD`, `EVALSHA` again), the
    /// first release on a node took three round trips, and one whose node deadline ran
    /// out before the last was sent never ran: a failed attempt's keys stood for their
    /// TTL (the clean-clone CI of 2026-12-04 failed the plain lock on such leaks, 0.2 s
    /// into a run). Ours goes as `EVAL` for the same reason (`fenced_redlock`, `script`).
    async fn run(&self, script: &str, keys: Vec<String>, args: Vec<String>) -> Option<i64> {
        let mut conn = self.conn().await.ok()?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
        match cmd.query_async::<i64>(&mut conn).await {
            Ok(v) => Some(v),
            Err(_) => {
                self.forget().await;
                None
            }
        }
    }
}

/// The plain Redlock (see the module docs).
#[derive(Debug)]
pub struct PlainRedlock {
    nodes: Vec<Node>,
    ttl: Duration,
    quorum: usize,
    node_deadline: Option<Duration>,
    mutation: Mutation,
    acquire: &'static str,
    fence: &'static str,
    release: &'static str,
}

/// A held plain lock.
#[derive(Debug)]
pub struct PlainLease {
    key: String,
    token: String,
    granted: Granted,
}

impl PlainLease {
    /// What the grant says.
    pub fn granted(&self) -> &Granted {
        &self.granted
    }

    /// The key and the owner token in it.
    pub fn owner(&self) -> (&[u8], &[u8]) {
        (self.key.as_bytes(), self.token.as_bytes())
    }
}

impl PlainRedlock {
    /// A plain lock on `urls` with `ttl`, carrying `mutation`.
    ///
    /// # Errors
    /// A message when a URL does not parse or the TTL is zero.
    pub fn new(urls: &[String], ttl: Duration, mutation: Mutation) -> Result<Self, String> {
        if urls.is_empty() {
            return Err("no lock nodes; pass redis:// URLs".into());
        }
        if ttl < Duration::from_millis(10) {
            return Err(format!("ttl {ttl:?} is too short; use at least 10ms"));
        }
        let nodes = urls
            .iter()
            .map(|u| {
                Client::open(u.as_str())
                    .map(|client| Node {
                        client,
                        conn: Mutex::new(Slot::default()),
                    })
                    .map_err(|e| format!("node URL {u}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let quorum = if mutation == Mutation::QuorumOfOne {
            1
        } else {
            nodes.len() / 2 + 1
        };
        Ok(PlainRedlock {
            quorum,
            node_deadline: (mutation != Mutation::NoNodeDeadline).then(|| ttl / 10),
            nodes,
            ttl,
            mutation,
            acquire: ACQUIRE,
            fence: FENCE,
            release: RELEASE,
        })
    }

    /// `f` on every node at once, each within the node deadline (if any); `None` for a
    /// node that failed or missed it.
    async fn on_nodes<'a, F, Fut>(&'a self, which: &[usize], f: F) -> Vec<Option<i64>>
    where
        F: Fn(&'a Node) -> Fut,
        Fut: std::future::Future<Output = Option<i64>> + 'a,
    {
        join_all(which.iter().map(|&i| {
            let fut = f(&self.nodes[i]);
            let deadline = self.node_deadline;
            async move {
                match deadline {
                    Some(d) => tokio::time::timeout(d, fut).await.ok().flatten(),
                    None => fut.await,
                }
            }
        }))
        .await
    }

    /// One attempt: `Ok` with the lease, or `Err(node_fault)`.
    async fn attempt(&self, key: &str, fence_key: &str) -> Result<PlainLease, bool> {
        let token = format!("{:032x}", rand::random::<u128>());
        let px = self.ttl.as_millis().to_string();
        let started = Instant::now();
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        let votes = self
            .on_nodes(&all, |n| {
                n.run(
                    self.acquire,
                    vec![key.to_owned(), fence_key.to_owned()],
                    vec![token.clone(), px.clone()],
                )
            })
            .await;
        let node_fault = votes.iter().any(Option::is_none);
        let yes: Vec<(usize, i64)> = votes
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.filter(|c| *c >= 0).map(|c| (i, c)))
            .collect();
        let mut lease = PlainLease {
            key: key.to_owned(),
            token: token.clone(),
            granted: Granted {
                fence: None,
                acquired_at: started,
                granted_at: started,
                valid_until: started,
                attempts: 1,
            },
        };
        if yes.len() < self.quorum {
            self.release_lease(&lease).await;
            return Err(node_fault);
        }
        let next = yes
            .iter()
            .map(|(_, c)| *c)
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        let yes_nodes: Vec<usize> = yes.iter().map(|(i, _)| *i).collect();
        let next_s = next.to_string();
        let acks = self
            .on_nodes(&yes_nodes, |n| {
                n.run(self.fence, vec![fence_key.to_owned()], vec![next_s.clone()])
            })
            .await
            .into_iter()
            .flatten()
            .count();
        let now = Instant::now();
        let elapsed = now - started;
        let drift = self.ttl.mul_f64(DRIFT_FACTOR) + DRIFT_FLOOR;
        let validity = if self.mutation == Mutation::FullValidity {
            Some(self.ttl)
        } else {
            self.ttl.checked_sub(elapsed + drift)
        };
        match validity {
            Some(v) if acks >= self.quorum && !v.is_zero() => {
                lease.granted = Granted {
                    fence: u64::try_from(next).ok(),
                    acquired_at: started,
                    granted_at: now,
                    valid_until: now + v,
                    attempts: 1,
                };
                Ok(lease)
            }
            _ => {
                self.release_lease(&lease).await;
                Err(node_fault)
            }
        }
    }

    /// Acquires `resource`, retrying until `wait` has passed.
    ///
    /// # Errors
    /// [`AcquireFailure`] with the rounds made.
    pub async fn acquire(
        &self,
        resource: &str,
        wait: Duration,
    ) -> Result<PlainLease, AcquireFailure> {
        let key = resource.to_owned();
        let fence_key = format!("{resource}:fence");
        let deadline = Instant::now() + wait;
        let mut rounds = 0u32;
        // Bounded by `deadline`.
        loop {
            rounds += 1;
            match self.attempt(&key, &fence_key).await {
                Ok(mut lease) => {
                    lease.granted.attempts = rounds;
                    return Ok(lease);
                }
                Err(node_fault) if Instant::now() >= deadline => {
                    return Err(AcquireFailure { rounds, node_fault });
                }
                Err(_) => {
                    let pause = rand::rng().random_range(Duration::ZERO..=RETRY_JITTER);
                    tokio::time::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    )
                    .await;
                }
            }
        }
    }

    /// Releases `lease` on every node (compare-and-delete; a plain `DEL` under
    /// [`Mutation::UncheckedRelease`]).
    pub async fn release(&self, lease: PlainLease) {
        self.release_lease(&lease).await;
    }

    async fn release_lease(&self, lease: &PlainLease) {
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        let unchecked = self.mutation == Mutation::UncheckedRelease;
        self.on_nodes(&all, |n| async move {
            if unchecked {
                let mut conn = n.conn().await.ok()?;
                redis::cmd("DEL")
                    .arg(&lease.key)
                    .query_async::<i64>(&mut conn)
                    .await
                    .ok()
            } else {
                n.run(
                    self.release,
                    vec![lease.key.clone()],
                    vec![lease.token.clone()],
                )
                .await
            }
        })
        .await;
    }
}
