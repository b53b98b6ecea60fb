//! One primary: its address, its lazily made connection (see `conn`), and calls
//! bounded by a deadline (the client's, passed with every call: clients made by
//! `with_ttl` share the connections but not the deadline).
//!
//! # Calls reach the server in the order they were made
//! The clean-up of a failed or cancelled attempt, and every release, rely on this: a
//! delete we issue after a `SET` must reach the node after it. A connection (ours, or the
//! `redis` crate's multiplexed one) keeps that order once a request is in its pipeline,
//! but not while the connection is being made: requests waiting for it would be sent in
//! whatever order their tasks wake up (a reconnecting `redis::aio::ConnectionManager` has
//! that gap). So each node has a fair (first-come, first-served) gate: a call takes it,
//! connects if there is no connection (or the one it has is known to be broken, see
//! `conn`), and hands its request to the pipeline — one poll of the request future —
//! before letting the next call through. Replies are awaited outside
//! the gate, so calls still overlap on the wire. Two things would let a request wait
//! *without* a place in line, and both are ruled out: a full request channel inside the
//! `redis` crate's connection (at most [`MAX_IN_FLIGHT`] calls pass the gate, and the
//! channel has room for that many; ours has no channel, and refuses a request at once when
//! its line is full rather than letting it wait), and Tokio's cooperative
//! budget (the ordered part of a call runs unconstrained). Background
//! work (a clean-up, a dropped lease's release) is polled once where it starts, before it
//! is spawned, so it takes its place in line before the caller's next call.
//!
//! # Connecting outlives the call that started it
//! A connection is made by a task of its own (TCP connect, handshake, the `run_id`
//! question below), bounded by [`CONNECT_TIMEOUT`] or the node deadline, whichever is
//! longer — not by the deadline of the call that needed it. The call waits for it, in
//! the gate, until its own deadline; when that passes the task goes on, and the next call
//! finds the connection made (or still coming). Otherwise a node whose handshake takes
//! longer than one deadline (a busy machine, a proxy, TLS: tens of ms against a 20 ms
//! deadline) would never get a connection: every call would start one and cancel it.
//!
//! # One server, one vote
//! `build()` refuses two URLs that resolve to a common address. Two addresses can still
//! reach one server (a proxy, NAT, another interface of the same host); so each new
//! connection asks the server for its `run_id`. Each node claims the server its last
//! accepted connection reached ([`ServerIds`]); a new connection that reaches a server
//! another node claims is refused and closed, and the node fails every call with
//! [`NodeError::SameServer`] for [`SAME_SERVER_RECHECK`], then connects again to see where
//! its address leads now. So two nodes never both count one server, and a misroute that is
//! mended (the proxy pointed back) costs the node its vote only until the next re-check,
//! not for the client's life.
//!
//! A claim moves only when the node's connection is accepted at another server, which the
//! quarantine sees as a restart of that node (a new `run_id`): its epoch moves on, and
//! what it voted over the old connection is void. Until then the node keeps its old
//! server, also while it is refused elsewhere or cannot connect, because its votes there
//! still stand. The price: when node B's address moves to a server node A claims, B's old
//! server counts for no other node either, until B's address leads to a server of its own
//! again. With both guards off nothing is ever voided (see `quarantine`), and a vote given
//! over a connection just before its node moved can be counted beside the new claimant's
//! in one round, as can any vote of a node that restarted.
//!
//! The same `INFO server` reply gives the server's uptime, from which the restart
//! quarantine decides whether its votes count yet (see `quarantine`); a `run_id` other
//! than the last accepted connection's is a restart. It also tells which commands the
//! connection's server understands (see `dialect`), and a probe on the connection, started
//! by its first release, which native compare-and-delete it has: learnt per connection,
//! like everything the server says about itself, since the next connection may reach
//! another build.
//!
//! # What goes behind a vote
//! A vote's request can have company in the gate, on the same connection and in this
//! order: a `TIME` (the clock-jump guard, see `clockwatch`), then a `WAITAOF` (durable
//! votes, see `durable`). Each is polled once inside the gate, right behind the request,
//! and takes an in-flight permit of its own: no round trip is added, and nothing can come
//! between them.

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use redis::{AsyncConnectionConfig, Client, RedisError, RedisResult};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clockwatch::{Sample, Step};
use crate::config::Settings;
use crate::conn::Conn;
use crate::dialect::{Dialect, NativeDelete};
use crate::durable::Durability;
use crate::error::NodeError;
use crate::quarantine::{Guards, Incarnation, Lengths, Restarts, ServerInfo};
use crate::room::{Admit, Room, Writes};

/// Which node's connection reaches each server, by the server's `run_id`; shared by the
/// nodes of one client. A node claims the server its last accepted connection reached (the
/// one its `Incarnation` knows), and only that one.
#[derive(Debug, Default)]
pub(crate) struct ServerIds(std::sync::Mutex<HashMap<String, (usize, String)>>);

impl ServerIds {
    /// Node `index` (at `addr`) has a new connection, to server `run_id`. When another node
    /// claims that server, its address: the connection is refused, and this node keeps
    /// whatever it claimed (its earlier votes there stand in its current epoch, so the
    /// server must not count for another node). Otherwise the server is now this node's
    /// claim, in place of any other: its connection moved, and its epoch moves with it when
    /// the server is another (see `quarantine`).
    fn claim(&self, run_id: &str, index: usize, addr: &str) -> Option<String> {
        let mut ids = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((holder, holder_addr)) = ids.get(run_id)
            && *holder != index
        {
            return Some(holder_addr.clone());
        }
        ids.retain(|_, (holder, _)| *holder != index);
        ids.insert(run_id.to_owned(), (index, addr.to_owned()));
        None
    }
}

/// Room in a connection's request channel, and the most calls one node has in flight.
///
/// redis-rs hands each request to its connection's writer through a bounded channel. A
/// request that finds the channel full waits for room, and the order in which waiting
/// requests get in is the order their tasks happen to run, not the order they started
/// waiting: a release's delete could land after the next attempt's `SET` (seen under load
/// with a 50-slot channel: the attempt found our own old key). So no more calls than
/// there is room are let through the gate: a request never waits for the channel.
pub(crate) const MAX_IN_FLIGHT: usize = 1024;

/// Least time a connection may take to be made (see the module docs); a node deadline
/// above it is used instead.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A new connection, what its server said in `INFO server` (`None` when it would not
/// say) and the commands it understands, learnt from the same reply.
type Connected = RedisResult<(Conn, Option<ServerInfo>, Dialect)>;

/// The connection a call runs on, as the call sees it: which one, and what its server
/// understands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    generation: u64,
    /// Learnt at connect, and for deletes from the probe; no longer `set_ifeq` once
    /// [`Node::script_only`] was told, nor a native delete once [`Node::delete_by_script`]
    /// was.
    pub(crate) dialect: Dialect,
}

/// In the generation fields of [`Node`]: no connection (known to take the command, or
/// probed).
const NO_CONNECTION: u64 = u64::MAX;

/// How long a node whose connection was refused as another node's server
/// ([`NodeError::SameServer`]) keeps that verdict before it connects again to see where
/// its address leads now. A misroute that is mended (a proxy or NAT rule pointed back, a
/// DNS name that resolves elsewhere) is noticed within this time; while it lasts, the node
/// costs its server one connection per period, and its calls fail at once in between.
pub(crate) const SAME_SERVER_RECHECK: Duration = Duration::from_secs(1);

/// The code of the error a call gets on a node refused as another node's server (an
/// extension error, like `conn`'s backlog); its detail is that node's address.
const SAME_SERVER_CODE: &str = "REDLOCK_SAME_SERVER";

/// Whether a yes reached the node's disk, when durable votes asked (see `durable`):
/// `Ok` when it did, or when nobody asked.
pub(crate) type Fsynced = Result<(), NodeError>;

/// A node's connection, behind the order gate.
#[derive(Default)]
enum Slot {
    /// None yet, or the last one broke.
    #[default]
    Empty,
    /// Being made by its own task.
    Connecting(JoinHandle<Connected>),
    /// Made; with its generation and the epoch of its server (see `quarantine`).
    Ready(u64, Conn, u64),
    /// The last connection, made `at`, reached the server of the node at address `other`
    /// (so it was closed); nothing is sent until [`SAME_SERVER_RECHECK`] has passed, then
    /// the node connects again.
    Refused { other: String, at: Instant },
}

/// A Redis or Valkey primary taking part in the quorum.
pub(crate) struct Node {
    index: usize,
    addr: String,
    client: Client,
    config: AsyncConnectionConfig,
    /// The connection, behind the order gate.
    conn: Mutex<Slot>,
    generation: AtomicU64,
    servers: Arc<ServerIds>,
    /// Whether a probe for a native compare-and-delete is running.
    probing: AtomicBool,
    /// How many connections had been made when the last probe got an answer, whatever it
    /// said (found, found nothing, ACL denies `COMMAND`), or could not connect: no new
    /// probe until another is made (see [`Node::learn_delete`]).
    probed: AtomicU64,
    /// The generation of the connection whose server takes `SET … IFEQ` (see `dialect`),
    /// or [`NO_CONNECTION`]. Written in the gate when a connection is made; read in the
    /// gate by each call, so a call sees what the connection it is sent on can do.
    set_ifeq: AtomicU64,
    /// The generation of the connection whose server has `DELIFEQ`, or [`NO_CONNECTION`];
    /// written when the probe answered on it, read like `set_ifeq`.
    delifeq: AtomicU64,
    /// The same for `DELEX`.
    delex: AtomicU64,
    resolved: Vec<SocketAddr>,
    /// How long making a connection may take.
    connect_budget: Duration,
    /// Which server answers at this address, since when (see `quarantine`).
    incarnation: Incarnation,
    /// Told of every restart this node sees.
    restarts: Arc<Restarts>,
    /// The quarantine lengths in use, and since when (shared by the client's nodes).
    lengths: Arc<Lengths>,
    /// One permit per call in flight (see [`MAX_IN_FLIGHT`]).
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}

impl Node {
    /// A node making its connections with `client`.
    pub(crate) fn new(
        index: usize,
        client: Client,
        settings: &Settings,
        servers: Arc<ServerIds>,
        restarts: Arc<Restarts>,
        lengths: Arc<Lengths>,
    ) -> Self {
        let info = client.get_connection_info();
        let addr = info.addr().to_string();
        let resolved = resolve(info.addr());
        let connect_budget = settings.node_timeout.max(CONNECT_TIMEOUT);
        // Our own per-call deadline decides how long a reply may take.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_budget))
            .set_response_timeout(None)
            .set_pipeline_buffer_size(MAX_IN_FLIGHT);
        Node {
            index,
            addr,
            client,
            config,
            conn: Mutex::new(Slot::Empty),
            generation: AtomicU64::new(0),
            servers,
            probing: AtomicBool::new(false),
            probed: AtomicU64::new(NO_CONNECTION),
            set_ifeq: AtomicU64::new(NO_CONNECTION),
            delifeq: AtomicU64::new(NO_CONNECTION),
            delex: AtomicU64::new(NO_CONNECTION),
            resolved,
            connect_budget,
            incarnation: Incarnation::default(),
            restarts,
            lengths,
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
        }
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

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `f` against this node's connection within `timeout`, telling it the [`Link`]
    /// it is sent on. Returns the reply and how long it took.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        timeout: Duration,
        f: F,
    ) -> (Result<T, NodeError>, Duration)
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let started = Instant::now();
        match tokio::time::timeout(timeout, self.call_unbounded_in(Room::Shared, f)).await {
            Ok(answer) => answer,
            Err(_) => {
                let e = NodeError::Timeout(timeout);
                crate::metrics::node_error(&self.addr, &e);
                (Err(e), started.elapsed())
            }
        }
    }

    /// Runs `f` against this node's connection with no deadline of its own: the caller
    /// bounds it (a fan-out has one timer for all its nodes, see `quorum`).
    /// Returns the reply and how long it took.
    pub(crate) async fn call_unbounded<T, F, Fut>(&self, f: F) -> (Result<T, NodeError>, Duration)
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.call_unbounded_in(Room::Shared, |c, _| f(c)).await
    }

    /// Like [`call_unbounded`](Self::call_unbounded), taking places in the connection's
    /// line as `room` allows (see `room`); `f` is told the [`Link`] it is sent on.
    pub(crate) async fn call_unbounded_in<T, F, Fut>(
        &self,
        room: Room<'_>,
        f: F,
    ) -> (Result<T, NodeError>, Duration)
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (result, took) = self.call_with(f, room, false, None).await;
        (result.map(|(v, _, _, _)| v), took)
    }

    /// Runs `f`, a delete of the key `writes` traces, with no deadline of its own (as
    /// [`call_unbounded`](Self::call_unbounded)): in a place kept for it while a write of
    /// ours waits ahead of it in the line, in a shared place otherwise, and not at all
    /// (`Ok(None)`: nothing of ours there) where no write of `writes` was ever sent here
    /// (see `room`). Decided in the order gate, after every earlier call was sent or
    /// refused; `f` is told the [`Link`] it is sent on.
    pub(crate) async fn delete_after<T, F, Fut>(
        &self,
        writes: &Writes,
        f: F,
    ) -> (Result<Option<T>, NodeError>, Duration)
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let started = Instant::now();
        let room = Room::Delete(writes);
        // Unconstrained: see `call_with`.
        let result = match tokio::task::unconstrained(self.in_order(f, room, false, None)).await {
            Ok((v, _, _, _)) => Ok(Some(v)),
            Err(e) if crate::room::is_unsent(&e) => Ok(None),
            Err(e) => Err(self.failed(&e)),
        };
        (result, started.elapsed())
    }

    /// A vote: like [`call_unbounded`](Self::call_unbounded), and a yes counts only if
    /// `guards` let it (see [`counted`](Self::counted)) and, with durable votes, once the
    /// node fsynced it (see [`fsynced`](Self::fsynced)); with the clock-jump guard on, a
    /// `TIME` goes behind the request, and with durable votes a `WAITAOF` (see
    /// [`call_sampled`](Self::call_sampled)). A yes carries the epoch of the server that
    /// gave it, for the lease to notice a later restart or jump.
    ///
    /// A vote writes the lock key (a `SET`, an extend): once it is in line, `writes` keeps
    /// its credit for the delete that may follow (see `room`).
    pub(crate) async fn vote<T, F, Fut>(
        &self,
        writes: &Writes,
        guards: Option<Guards>,
        durability: Durability,
        f: F,
    ) -> (Result<Option<(T, u64)>, NodeError>, Duration)
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<Option<T>>>,
    {
        self.vote_on(writes, guards, durability, |c, _| f(c)).await
    }

    /// Like [`vote`](Self::vote), for a request that depends on what the connection's
    /// server understands: `f` is told in the [`Link`] it gets.
    pub(crate) async fn vote_on<T, F, Fut>(
        &self,
        writes: &Writes,
        guards: Option<Guards>,
        durability: Durability,
        f: F,
    ) -> (Result<Option<(T, u64)>, NodeError>, Duration)
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<Option<T>>>,
    {
        let (result, took) = self
            .sampled(Room::Write(writes), guards, durability, f)
            .await;
        let answer = result.and_then(|(v, epoch, fsynced)| match v {
            Some(v) => self.fsynced(fsynced).map(|()| Some((v, epoch))),
            None => Ok(None),
        });
        (self.counted(answer, guards), took)
    }

    /// A yes's `fsynced` verdict, counted in the metrics when it takes the yes away.
    /// Only a yes is judged: a no left nothing that needs to be on disk.
    pub(crate) fn fsynced(&self, fsynced: Fsynced) -> Result<(), NodeError> {
        if let Err(e) = &fsynced {
            tracing::debug!(node = %self.addr, error = %e, "node's yes is not durable: it does not count");
            crate::metrics::not_durable_vote(&self.addr);
            crate::metrics::node_error(&self.addr, e);
        }
        fsynced
    }

    /// A yes (with the epoch of the server that gave it) becomes
    /// [`NodeError::Quarantined`] or [`NodeError::ClockJumped`] when `guards` (`None`:
    /// off) keep that server out of the vote now, or it restarted or jumped since.
    pub(crate) fn counted<T>(
        &self,
        answer: Result<Option<(T, u64)>, NodeError>,
        guards: Option<Guards>,
    ) -> Result<Option<(T, u64)>, NodeError> {
        match (answer, guards) {
            (Ok(Some((v, epoch))), Some(guards)) => {
                match self
                    .incarnation
                    .vote_counts(epoch, Instant::now(), guards, &self.lengths)
                {
                    Ok(()) => Ok(Some((v, epoch))),
                    Err(e) => {
                        crate::metrics::quarantined_vote(&self.addr);
                        Err(e)
                    }
                }
            }
            (answer, _) => answer,
        }
    }

    /// Like [`call_in_epoch`](Self::call_in_epoch); with the clock-jump guard on in
    /// `guards`, a `TIME` is pipelined behind the request and the node's clock checked
    /// (see `clockwatch`). A `TIME` that fails or makes no sense fails the call: a yes
    /// whose clock could not be read does not count. With [`Durability::Fsync`], a
    /// `WAITAOF` goes behind them, and its verdict is returned for the caller to judge
    /// a yes by (see [`fsynced`](Self::fsynced)): only the caller knows what is a yes.
    pub(crate) async fn call_sampled<T, F, Fut>(
        &self,
        guards: Option<Guards>,
        durability: Durability,
        f: F,
    ) -> (Result<(T, u64, Fsynced), NodeError>, Duration)
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.sampled(Room::Shared, guards, durability, |c, _| f(c))
            .await
    }

    /// [`call_sampled`](Self::call_sampled) in the places `room` allows, telling `f` its
    /// [`Link`].
    async fn sampled<T, F, Fut>(
        &self,
        room: Room<'_>,
        guards: Option<Guards>,
        durability: Durability,
        f: F,
    ) -> (Result<(T, u64, Fsynced), NodeError>, Duration)
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let wait = durability.wait();
        let Some(allowance) = guards.and_then(|g| g.jumps) else {
            let (result, took) = self.call_with(f, room, false, wait).await;
            return (
                result.map(|(v, epoch, _, fsynced)| (v, epoch, fsynced)),
                took,
            );
        };
        let (result, took) = self.call_with(f, room, true, wait).await;
        let result = result.map(|(v, epoch, sample, fsynced)| {
            if let Some(sample) = sample {
                match self
                    .incarnation
                    .sample_clock(&sample, allowance, Instant::now())
                {
                    Step::Forward(ahead) => {
                        tracing::warn!(node = %self.addr, ?ahead, "node's clock jumped forward: its votes are void for a quarantine");
                        crate::metrics::clock_jumped(&self.addr, "forward");
                        self.restarts.seen();
                    }
                    Step::Backward(behind) => {
                        tracing::info!(node = %self.addr, ?behind, "node's clock jumped backward (keys there live longer)");
                        crate::metrics::clock_jumped(&self.addr, "backward");
                    }
                    Step::First | Step::Steady => {}
                }
            }
            (v, epoch, fsynced)
        });
        (result, took)
    }

    /// Whether a clock jump voided this node's votes of `epoch` (see `quarantine`).
    pub(crate) fn jumped_since(&self, epoch: u64) -> bool {
        self.incarnation.jumped_since(epoch)
    }

    /// The epoch of the server this node reaches now (see `quarantine`).
    pub(crate) fn epoch(&self) -> u64 {
        self.incarnation.epoch()
    }

    /// Runs `f` in order, with a `TIME` behind it when `timed` (its sample returned), and
    /// a `WAITAOF` behind both when `wait` is set (its verdict returned); in the places of
    /// the line `room` allows.
    async fn call_with<T, F, Fut>(
        &self,
        f: F,
        room: Room<'_>,
        timed: bool,
        wait: Option<Duration>,
    ) -> (
        Result<(T, u64, Option<Sample>, Fsynced), NodeError>,
        Duration,
    )
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let started = Instant::now();
        // Unconstrained: under Tokio's cooperative budget a resource may answer "not now"
        // without taking a place in line — the gate, or the pipeline's channel — and a
        // later call would overtake this one (see "Calls reach the server in the order
        // they were made").
        let result = tokio::task::unconstrained(self.in_order(f, room, timed, wait))
            .await
            .map_err(|e| self.failed(&e));
        (result, started.elapsed())
    }

    /// The error of a call that failed with `e`, counted in the metrics.
    fn failed(&self, e: &RedisError) -> NodeError {
        let e = if e.code() == Some(SAME_SERVER_CODE) {
            NodeError::SameServer(e.detail().unwrap_or_default().to_owned())
        } else {
            NodeError::from_redis(e)
        };
        crate::metrics::node_error(&self.addr, &e);
        e
    }

    /// Makes a connection and asks its server for its `run_id` and uptime (one `INFO
    /// server`), all within `budget`. A server that does not say (an `INFO` restricted by
    /// ACL) is taken as distinct — `build()` has already refused duplicate addresses — and
    /// as not restarted (see `quarantine`).
    async fn connect(client: Client, config: AsyncConnectionConfig, budget: Duration) -> Connected {
        let attempt = async {
            let mut conn = Conn::connect(&client, &config).await?;
            let text = redis::cmd("INFO")
                .arg("server")
                .query_async::<String>(&mut conn)
                .await
                .ok();
            let info = text
                .as_deref()
                .map(|info| ServerInfo::parse(info, Instant::now()));
            let dialect = text.as_deref().map(Dialect::of).unwrap_or_default();
            Ok((conn, info, dialect))
        };
        tokio::time::timeout(budget, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(RedisError::from((
                    redis::ErrorKind::Io,
                    "connecting took too long",
                )))
            })
    }

    /// The address of another node whose connection reaches the server `run_id` (this
    /// node's new connection is then refused), or `None`: the server is this node's (see
    /// [`ServerIds::claim`]).
    fn check_distinct(&self, run_id: Option<&str>) -> Option<String> {
        self.servers.claim(run_id?, self.index, &self.addr)
    }

    /// The connection, made now if there is none: waits (holding the gate) for the
    /// connecting task, which goes on if this call is dropped.
    ///
    /// A connection known to be broken counts as none (the server closed it while idle,
    /// restarted, killed it; or the runtime its tasks ran on shut down): nothing has been
    /// sent for this call yet, and the gate is held, so connecting again here keeps the
    /// order of calls and spares the call a certain failure. So does a connecting task
    /// cancelled with its runtime.
    ///
    /// A node refused as another node's server fails at once until its re-check is due,
    /// and then connects again: the verdict is the last connection's, not the node's.
    async fn connection(&self, slot: &mut Slot) -> RedisResult<(u64, Conn, u64)> {
        let mut was_refused = false;
        match slot {
            Slot::Ready(_, c, _) if c.is_broken() => *slot = Slot::Empty,
            Slot::Refused { other, at } if at.elapsed() < SAME_SERVER_RECHECK => {
                return Err(same_server(other));
            }
            Slot::Refused { .. } => {
                was_refused = true;
                *slot = Slot::Empty;
            }
            _ => {}
        }
        let mut tries = 0u8;
        let made = loop {
            if let Slot::Empty = slot {
                *slot = Slot::Connecting(tokio::spawn(Self::connect(
                    self.client.clone(),
                    self.config.clone(),
                    self.connect_budget,
                )));
            }
            let made = match slot {
                Slot::Ready(g, c, e) => return Ok((*g, c.clone(), *e)),
                Slot::Connecting(task) => task.await,
                Slot::Empty | Slot::Refused { .. } => Ok(Err(RedisError::from((
                    redis::ErrorKind::Io,
                    "no connection",
                )))),
            };
            *slot = Slot::Empty;
            tries = tries.saturating_add(1);
            match made {
                // Started on a runtime that has shut down since: start one on ours.
                Err(join) if join.is_cancelled() && tries < 2 => continue,
                made => break made,
            }
        };
        let (conn, info, dialect) = made.map_err(|join| {
            RedisError::from((
                redis::ErrorKind::Io,
                "connecting task ended",
                join.to_string(),
            ))
        })??;
        if let Some(other) = self.check_distinct(info.as_ref().and_then(|i| i.run_id.as_deref())) {
            if !was_refused {
                tracing::warn!(node = %self.addr, same_as = %other, "node reaches the same server as another node: its votes do not count while it does");
            }
            let refusal = same_server(&other);
            *slot = Slot::Refused {
                other,
                at: Instant::now(),
            };
            return Err(refusal);
        }
        if was_refused {
            tracing::info!(node = %self.addr, "node reaches a server of its own again: its votes count");
        }
        let epoch = match &info {
            Some(info) => {
                let (epoch, restarted) = self.incarnation.learn(info);
                if restarted {
                    tracing::info!(node = %self.addr, "node restarted (new run_id): its earlier votes are void");
                    crate::metrics::node_restarted(&self.addr);
                    self.restarts.seen();
                }
                epoch
            }
            None => self.incarnation.epoch(),
        };
        let g = self.generation.fetch_add(1, Ordering::Relaxed);
        self.set_ifeq.store(
            if dialect.set_ifeq { g } else { NO_CONNECTION },
            Ordering::Release,
        );
        *slot = Slot::Ready(g, conn.clone(), epoch);
        Ok((g, conn, epoch))
    }

    /// Runs `f`, its first request handed to the connection before any later call's (see
    /// the module docs); when `timed`, a `TIME` right behind it on the same connection,
    /// read as a [`Sample`] of the server's clock taken after `f`'s command ran; when
    /// `wait` is set, a `WAITAOF` behind that (see `durable`), judged as [`Fsynced`]. It
    /// takes the places of the line `room` allows, and a write or delete tells `room` it
    /// got in; a delete `room` keeps from being sent fails with [`crate::room::unsent`]'s
    /// error.
    ///
    /// The `WAITAOF` goes last: the server holds back what follows it on the connection
    /// until the fsync, and the `TIME` must not wait for that (it would widen the clock
    /// sample by the fsync). It still covers `f`'s write: `WAITAOF` waits for the last
    /// write this connection made before it.
    async fn in_order<T, F, Fut>(
        &self,
        f: F,
        room: Room<'_>,
        timed: bool,
        wait: Option<Duration>,
    ) -> RedisResult<(T, u64, Option<Sample>, Fsynced)>
    where
        F: FnOnce(Conn, Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let mut gate = self.conn.lock().await;
        let (generation, conn, epoch) = self.connection(&mut gate).await?;
        // Read in the gate: a jump seen later leaves this call in the old epoch.
        let epoch = self.incarnation.sending(epoch);
        // Waited for in the gate, so calls keep their order when the limit is reached;
        // held until the reply, so the channel always has room for this request (and its
        // `TIME` and `WAITAOF`).
        let permits = match (timed, wait.is_some()) {
            (false, false) => 1,
            (true, false) | (false, true) => 2,
            (true, true) => 3,
        };
        // Refused before anything is sent, companions counted: a request that got in has
        // room for all of them, so a `Backlog` always means "not sent" (the clean-up
        // relies on it, see `room`). A delete that follows nothing of ours is not sent
        // either.
        let mark = conn.mark();
        let places = usize::try_from(permits).unwrap_or(usize::MAX);
        match room.admit(self.index, generation, mark, places) {
            Admit::Send => {}
            Admit::Refuse => {
                return Err(crate::conn::backlog(mark.map_or(0, |m| m.waiting)));
            }
            Admit::Unsent => return Err(crate::room::unsent()),
        }
        let _in_flight = Arc::clone(&self.in_flight)
            .acquire_many_owned(permits)
            .await
            .map_err(|_| RedisError::from((redis::ErrorKind::Client, "node closed")))?;
        let sent = Instant::now();
        let mut clock = timed.then(|| {
            let mut c = conn.clone();
            Box::pin(async move { redis::cmd("TIME").query_async::<(u64, u64)>(&mut c).await })
        });
        let mut fsync = wait.map(|timeout| {
            let mut c = conn.clone();
            let cmd = crate::durable::waitaof(timeout);
            Box::pin(async move { cmd.query_async::<redis::Value>(&mut c).await })
        });
        let on = |known: &AtomicU64| known.load(Ordering::Acquire) == generation;
        let link = Link {
            generation,
            dialect: Dialect {
                set_ifeq: on(&self.set_ifeq),
                delete: if on(&self.delifeq) {
                    NativeDelete::DelIfEq
                } else if on(&self.delex) {
                    NativeDelete::DelEx
                } else {
                    NativeDelete::None
                },
            },
        };
        // The place the request is about to take, read in the gate, with nothing between
        // here and the poll that takes it: a write's credit names it (see `room`).
        let place = match room {
            Room::Write(_) => conn.mark(),
            Room::Shared | Room::Delete(_) => None,
        };
        let mut request = std::pin::pin!(f(conn, link));
        // One poll puts the request in the pipeline's queue (or in line for a place in it).
        let first = std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx))).await;
        // Refused by the connection itself: nothing went out.
        let refused = matches!(&first, Poll::Ready(Err(e)) if crate::conn::is_backlog(e));
        if !refused {
            room.sent(self.index, generation, place);
        }
        // And one puts the `TIME` behind it, still inside the gate.
        let clock_first = match clock.as_mut() {
            Some(c) => Some(std::future::poll_fn(|cx| Poll::Ready(c.as_mut().poll(cx))).await),
            None => None,
        };
        // And one the `WAITAOF` behind both.
        let fsync_first = match fsync.as_mut() {
            Some(w) => Some(std::future::poll_fn(|cx| Poll::Ready(w.as_mut().poll(cx))).await),
            None => None,
        };
        drop(gate);
        let result = match first {
            Poll::Ready(r) => r,
            Poll::Pending => request.await,
        };
        let result = match (result, clock, clock_first) {
            (Ok(v), Some(c), Some(first)) => {
                let time = match first {
                    Poll::Ready(t) => t,
                    Poll::Pending => c.await,
                };
                let received = Instant::now();
                time.and_then(|t| {
                    Sample::new(sent, t, received).ok_or_else(|| {
                        RedisError::from((redis::ErrorKind::Parse, "TIME reply out of range"))
                    })
                })
                .map(|sample| (v, Some(sample)))
            }
            (r, _, _) => r.map(|v| (v, None)),
        };
        // Read only after a reply: a failed request has no yes to judge.
        let mut fsync_broke = false;
        let result = match (result, fsync, fsync_first) {
            (Ok((v, sample)), Some(w), Some(first)) => {
                let reply = match first {
                    Poll::Ready(r) => r,
                    Poll::Pending => w.await,
                };
                fsync_broke = reply.as_ref().is_err_and(broken);
                let timeout = wait.unwrap_or_default();
                Ok((v, sample, crate::durable::judge(reply, timeout)))
            }
            (r, _, _) => r.map(|(v, sample)| (v, sample, Ok(()))),
        };
        if fsync_broke || matches!(&result, Err(e) if broken(e)) {
            // Connect again on the next call, unless another call already has.
            let mut gate = self.conn.lock().await;
            if matches!(&*gate, Slot::Ready(g, _, _) if *g == generation) {
                *gate = Slot::Empty;
            }
        }
        result.map(|(v, sample, fsynced)| (v, epoch, sample, fsynced))
    }

    /// Stops sending `SET … IFEQ` on `link`'s connection: its server refused the syntax
    /// (the version said yes, the server says no: a fork, a build without it). The next
    /// connection learns afresh.
    pub(crate) fn script_only(&self, link: Link) {
        if forget(&self.set_ifeq, link) {
            tracing::info!(node = %self.addr, "node refused SET IFEQ: extending with the script on this connection");
        }
    }

    /// Stops sending a native compare-and-delete on `link`'s connection: its server
    /// answered it as an unknown command (it said it had one; a proxy in front has failed
    /// over to an older server since). The next connection is probed afresh.
    pub(crate) fn delete_by_script(&self, link: Link) {
        let known = match link.dialect.delete {
            NativeDelete::None => return,
            NativeDelete::DelIfEq => &self.delifeq,
            NativeDelete::DelEx => &self.delex,
        };
        if forget(known, link) {
            tracing::info!(node = %self.addr, command = ?link.dialect.delete, "node no longer knows its compare-and-delete: releasing with the script on this connection");
        }
    }

    /// Starts a probe, in the background, for a native compare-and-delete on this node's
    /// current connection (or the next one, when there is none), unless one has answered
    /// on it already or one is running: a release never waits on detection, and uses the
    /// script until the probe has found a command on the connection it is sent on (see
    /// `dialect`).
    ///
    /// A probe that got an answer on a connection — the commands it found, none, or a
    /// refusal (ACL denies `COMMAND`, a renamed command) — is not repeated on it: every
    /// release would otherwise send it again, and each denial lands in the server's
    /// `ACL LOG` and in the auth-error metrics. A new connection (a restart may have brought
    /// an upgrade, a downgrade or other rules) is probed once more, and so is one whose
    /// probe timed out.
    pub(crate) fn learn_delete(self: &Arc<Self>, timeout: Duration) {
        if self.probed.load(Ordering::Acquire) == self.generation.load(Ordering::Acquire) {
            return;
        }
        if !self.probing.swap(true, Ordering::AcqRel) {
            let node = Arc::clone(self);
            tokio::spawn(async move {
                // Also when the task is dropped unfinished (its runtime shut down).
                let _probing = ClearOnDrop(&node.probing);
                node.probe_delete(timeout).await;
            });
        }
    }

    /// Asks the server `COMMAND INFO DELIFEQ DELEX` and records, for the connection that
    /// answered, which of them it has.
    async fn probe_delete(&self, timeout: Duration) {
        let made = self.generation.load(Ordering::Acquire);
        let answered_on = AtomicU64::new(NO_CONNECTION);
        let (reply, _) = self
            .call(timeout, |mut c, link| {
                answered_on.store(link.generation, Ordering::Release);
                async move {
                    redis::cmd("COMMAND")
                        .arg("INFO")
                        .arg("DELIFEQ")
                        .arg("DELEX")
                        .query_async::<redis::Value>(&mut c)
                        .await
                }
            })
            .await;
        if reply.as_ref().is_err_and(NodeError::is_timeout) {
            // Sent or not, no answer in time: the next release asks again.
            return;
        }
        let generation = answered_on.load(Ordering::Acquire);
        if generation == NO_CONNECTION {
            // Not sent: no connection could be made. Asked again once one is.
            self.probed.store(made, Ordering::Release);
            return;
        }
        if let Ok(redis::Value::Array(items)) = &reply {
            let known = |i: usize| !matches!(items.get(i), None | Some(redis::Value::Nil));
            if known(0) {
                self.delifeq.store(generation, Ordering::Release);
            } else if known(1) {
                self.delex.store(generation, Ordering::Release);
            }
        }
        self.probed
            .store(generation.saturating_add(1), Ordering::Release);
    }
}

/// Clears `flag` (the generation of the connection that has a command) if it still names
/// `link`'s connection; whether it did (a newer connection has learnt afresh otherwise).
fn forget(flag: &AtomicU64, link: Link) -> bool {
    flag.compare_exchange(
        link.generation,
        NO_CONNECTION,
        Ordering::AcqRel,
        Ordering::Acquire,
    )
    .is_ok()
}

/// Clears a flag when dropped.
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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

/// The error of a call on a node refused as the server of the node at `other`; the call
/// reports it as [`NodeError::SameServer`].
fn same_server(other: &str) -> RedisError {
    redis::make_extension_error(SAME_SERVER_CODE.to_owned(), Some(other.to_owned()))
}

/// Whether `e` means the connection itself is gone (and the next call must reconnect).
fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a:6379";
    const B: &str = "b:6379";
    const C: &str = "c:6379";

    #[test]
    fn a_server_counts_for_the_first_node_that_reaches_it() {
        let ids = ServerIds::default();
        assert_eq!(ids.claim("r", 0, A), None);
        assert_eq!(ids.claim("r", 1, B), Some(A.to_owned()));
        // Its own connections again, and again: still its own.
        assert_eq!(ids.claim("r", 0, A), None);
        assert_eq!(ids.claim("r", 1, B), Some(A.to_owned()));
    }

    #[test]
    fn a_node_that_moves_to_a_server_of_its_own_frees_the_old_one() {
        let ids = ServerIds::default();
        assert_eq!(ids.claim("r", 1, B), None);
        assert_eq!(ids.claim("r", 0, A), Some(B.to_owned()));
        // Node 1's address is mended: it reaches server t now, and r is free for node 0.
        assert_eq!(ids.claim("t", 1, B), None);
        assert_eq!(ids.claim("r", 0, A), None);
        assert_eq!(
            ids.claim("r", 1, B),
            Some(A.to_owned()),
            "and stays node 0's"
        );
    }

    #[test]
    fn a_refused_node_keeps_the_server_it_had() {
        let ids = ServerIds::default();
        assert_eq!(ids.claim("r", 0, A), None);
        assert_eq!(ids.claim("t", 1, B), None);
        // Node 1 now reaches node 0's server: refused, and t stays node 1's (its votes
        // there stand), so node 2 reaching t is refused too.
        assert_eq!(ids.claim("r", 1, B), Some(A.to_owned()));
        assert_eq!(ids.claim("t", 2, C), Some(B.to_owned()));
        // Back on t, node 1 votes again.
        assert_eq!(ids.claim("t", 1, B), None);
    }
}
