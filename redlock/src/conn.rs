//! A node's connection: a lean pipelined RESP2 connection over plain TCP, or the `redis`
//! crate's multiplexed connection for everything else (TLS, Unix sockets, RESP3).
//!
//! # Why a connection of our own
//! Every lock operation is one small command per node, so the client's cost per command is
//! most of its cost. A `MultiplexedConnection` hands each request to a driver task through
//! a channel and gets the reply back through another, so every command wakes a second task
//! before anything reaches the socket. [`Lean`] writes the request from the caller's task
//! when the connection is idle (no hop, one `write` syscall), queues it for one writer task
//! that sends a batch when requests are already in flight (so a busy connection still
//! coalesces writes), and has one reader task per connection that parses replies and hands
//! each to the request waiting at the front of the line. Measured in
//! `docs/measurements/transport-2026-12-01.txt`; measured again on 2026-12-05 beside the
//! multiplexed connection on RESP3 (`chaos bench --case transport`), the two are level on
//! latency and throughput and [`Lean`] costs the client ~6 % less CPU per op. It stays the
//! default for that and for its counted line, which lets `room` keep places for the
//! deletes that follow our writes (`docs/performance.md`, the transport case).
//!
//! # Order
//! A request's bytes are appended to the connection's buffer, and its place in the reply
//! line taken, under one lock, at the moment [`ConnectionLike::req_packed_command`] is
//! called — which the node's gate does in the first poll of the call (see `node`). So
//! requests reach the server in the order they were made, and nothing waits for room: a
//! request either takes its place at once or is refused at once.
//!
//! # A node that stops reading
//! A caller that gives up (its deadline passed) leaves its request in the line: its bytes
//! may already be on the wire, so its reply must still be read, and dropped, to keep the
//! replies that follow matched. A server that stops answering (stopped, swapping, stuck in
//! a slow script) would let such requests pile up without end — the node's in-flight
//! limit does not bound them, since a caller that gave up no longer counts. So at most
//! [`MAX_PENDING`] requests wait for replies on one connection, counting those nobody
//! waits for any more, and the bytes not yet written are at most theirs. A request that
//! finds the line full is refused at once, before anything is sent: that node's call fails
//! with [`NodeError::Backlog`](crate::NodeError::Backlog) (its vote is missing, the other
//! nodes decide). It cannot wait for room: waiting would lose its place in line. The line
//! drains when the server answers again, or empties when the connection breaks. The node
//! lets most requests take only the first half of the line, keeping the rest for the
//! deletes that follow our writes (see `room`).
//!
//! # Failure
//! A read or write error, an end of stream or a reply that does not parse breaks the
//! connection: every request waiting for a reply, and every later one, fails — with an I/O
//! error, or with a protocol error ([`NodeError::Protocol`](crate::NodeError::Protocol))
//! when the bytes were not RESP2 — and the node connects again before its next request
//! (it asks [`Conn::is_broken`] first: nothing was sent yet, so nothing is lost).
//! Replies are never matched to the wrong request: after the first error nothing more is
//! read. The reader and writer are tasks of the runtime current at connect; when they end
//! for any reason — including that runtime shutting down, which drops them without a word
//! — the connection is marked broken, so a caller on another runtime reconnects instead of
//! waiting for replies nobody reads. Dropping the last handle stops both tasks and closes
//! the socket.
//!
//! The `redis` crate's connection (RESP3) reports its end through its push channel (a
//! disconnection notice, or the channel dropped with its driver task), which sets the same
//! mark. Over RESP2 (TLS, Unix sockets) it has no way to say so: the first call after such
//! a connection died fails, and the node reconnects on the next.
//!
//! # Socket settings and authentication
//! [`Lean`] applies a client's `TcpSettings` as the `redis` crate does: `TCP_NODELAY`,
//! keepalive and (Linux) `TCP_USER_TIMEOUT` — the settings that let the kernel notice a
//! peer that vanished without a word. The linger time cannot be read back from
//! `TcpSettings` (it has no getter), so a client that sets one is connected by the `redis`
//! crate, which applies it. `AUTH user password` that a server before ACLs (Redis < 6)
//! refuses for its argument count is retried as `AUTH password`, as the `redis` crate does.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redis::aio::{AsyncPushSender, ConnectionLike, MultiplexedConnection, SendError};
use redis::io::tcp::{TcpSettings, socket2};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, Pipeline, ProtocolVersion, PushInfo,
    PushKind, RedisError, RedisFuture, RedisResult, Value,
};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, oneshot};
use tokio::task::AbortHandle;

use crate::resp;

/// Most requests waiting for replies on one [`Lean`] connection, those whose callers gave
/// up included (see "A node that stops reading"). The same as the node's in-flight limit
/// (each call has at most one request waiting at a time), so live calls alone never fill
/// it, and as the `redis` crate's request channel.
pub(crate) const MAX_PENDING: usize = crate::node::MAX_IN_FLIGHT;

/// The code of the error a request gets when the line is full (an extension error, like a
/// server's error reply with a code no server uses); `NodeError::from_redis` maps it to
/// `NodeError::Backlog`.
pub(crate) const BACKLOG_CODE: &str = "REDLOCK_BACKLOG";

/// A connection to one node.
#[derive(Clone)]
pub(crate) enum Conn {
    /// Plain TCP, RESP2: our own.
    Lean(Arc<Lean>),
    /// Anything else: the `redis` crate's, and the mark its push channel sets when it ends.
    Multiplexed(MultiplexedConnection, Arc<AtomicBool>),
}

impl Conn {
    /// Connects as `client`'s URL says: [`Lean`] for `redis://` (TCP, RESP2), otherwise a
    /// multiplexed connection made with `config`.
    pub(crate) async fn connect(
        client: &Client,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<Conn> {
        let info = client.get_connection_info();
        let settings = info.redis_settings();
        match info.addr() {
            ConnectionAddr::Tcp(host, port)
                if settings.protocol() == ProtocolVersion::RESP2
                    && !sets_linger(info.tcp_settings()) =>
            {
                let mut lean = Lean::connect(host, *port, info.tcp_settings()).await?;
                if let Some(password) = settings.password() {
                    lean.authenticate(settings.username(), password).await?;
                }
                if settings.db() != 0 {
                    lean.request(redis::cmd("SELECT").arg(settings.db()))
                        .await?
                        .extract_error()?;
                    lean.db = settings.db();
                }
                Ok(Conn::Lean(Arc::new(lean)))
            }
            _ => {
                let ended = Arc::new(AtomicBool::new(false));
                // Only a RESP3 connection takes a push channel.
                let config = if settings.protocol() == ProtocolVersion::RESP2 {
                    config.clone()
                } else {
                    config
                        .clone()
                        .set_push_sender(EndNotice(Arc::clone(&ended)))
                };
                let conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Ok(Conn::Multiplexed(conn, ended))
            }
        }
    }

    /// Whether the connection is known to be gone: a request would fail without being
    /// sent, so the node connects again first (see "Failure").
    pub(crate) fn is_broken(&self) -> bool {
        match self {
            Conn::Lean(lean) => lean.shared.broken.load(Ordering::Acquire),
            Conn::Multiplexed(_, ended) => ended.load(Ordering::Acquire),
        }
    }

    /// Where the line stands now; `None` for the `redis` crate's connection, which does
    /// not say.
    pub(crate) fn mark(&self) -> Option<Mark> {
        match self {
            Conn::Lean(lean) => {
                let line = lean.shared.line();
                Some(Mark {
                    answered: line.answered,
                    waiting: line.waiting.len(),
                })
            }
            Conn::Multiplexed(..) => None,
        }
    }
}

/// Where a connection's line stands: how many of its requests have left it, and how many
/// wait in it. Places are numbered from the connection's first request, and leave the line
/// in that order, so a request is still in line while `answered` has not passed its place
/// (see `room`, which counts on that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Requests answered, or failed when the connection broke.
    pub(crate) answered: u64,
    /// Requests waiting for replies, those nobody waits for any more included.
    pub(crate) waiting: usize,
}

impl Mark {
    /// The place the next request takes.
    pub(crate) fn next(self) -> u64 {
        self.answered
            .saturating_add(u64::try_from(self.waiting).unwrap_or(u64::MAX))
    }
}

/// Whether `settings` carry a linger time: `TcpSettings` has no getter for it, only its
/// `Debug` shows it (see "Socket settings and authentication").
fn sets_linger(settings: &TcpSettings) -> bool {
    format!("{settings:?}").contains("linger_time: Some(")
}

/// The push channel of a multiplexed connection: marks it ended on the disconnection
/// notice, and when the channel is dropped — with the connection's driver task, which is
/// how a runtime that shut down ends it.
struct EndNotice(Arc<AtomicBool>);

impl AsyncPushSender for EndNotice {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        if info.kind == PushKind::Disconnection {
            self.0.store(true, Ordering::Release);
        }
        Ok(())
    }
}

impl Drop for EndNotice {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            // Queued now, in the caller's poll (see "Order").
            Conn::Lean(lean) => Box::pin(lean.request(cmd)),
            Conn::Multiplexed(m, _) => m.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            // The lock sends one command per call and never pipelines.
            Conn::Lean(_) => Box::pin(async {
                Err(RedisError::from((
                    redis::ErrorKind::Client,
                    "pipelines are not supported on this connection",
                )))
            }),
            Conn::Multiplexed(m, _) => m.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Lean(lean) => lean.db,
            Conn::Multiplexed(m, _) => m.get_db(),
        }
    }
}

/// A pipelined RESP2 connection over TCP (see the module docs).
pub(crate) struct Lean {
    shared: Arc<Shared>,
    tasks: [AbortHandle; 2],
    /// The database selected at connect time.
    db: i64,
}

impl Drop for Lean {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

struct Shared {
    write: OwnedWriteHalf,
    line: Mutex<Line>,
    /// Wakes the writer task when `Line::out` has bytes it must send.
    flush: Notify,
    /// Set with `Line::broken`, readable without the lock (asked before every call).
    broken: AtomicBool,
}

/// Requests on their way: bytes not yet written, and who waits for each reply, in order.
struct Line {
    out: Vec<u8>,
    waiting: VecDeque<oneshot::Sender<RedisResult<Value>>>,
    /// Requests that have left `waiting`: answered, or failed when the connection broke.
    answered: u64,
    /// The writer task owns `out` until it is empty.
    flushing: bool,
    /// Why the connection broke, once it has.
    broken: Option<Break>,
}

/// Why a connection broke.
#[derive(Debug, Clone)]
enum Break {
    /// The socket failed or closed, or a task of the connection ended.
    Io(String),
    /// The server sent bytes that are not RESP2, or a reply nobody asked for.
    Protocol(String),
}

impl Break {
    /// The error every request on the broken connection gets.
    fn error(&self) -> RedisError {
        match self {
            Break::Io(why) => RedisError::from(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("connection broken: {why}"),
            )),
            // `Parse`: the node reports `NodeError::Protocol`, and reconnects.
            Break::Protocol(why) => RedisError::from((
                redis::ErrorKind::Parse,
                "connection broken by a reply that is not RESP2",
                why.clone(),
            )),
        }
    }
}

impl Shared {
    fn line(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails every waiting request and every later one.
    fn break_with(&self, why: Break) {
        let mut line = self.line();
        let why = line.broken.get_or_insert(why).clone();
        self.broken.store(true, Ordering::Release);
        let failed = u64::try_from(line.waiting.len()).unwrap_or(u64::MAX);
        line.answered = line.answered.saturating_add(failed);
        for waiter in line.waiting.drain(..) {
            let _ = waiter.send(Err(why.error()));
        }
        line.out.clear();
    }
}

/// Held by each task of a connection: breaks the connection when the task ends, whatever
/// ends it — an error, an abort, or its runtime shutting down, which drops the task where
/// it stands (see "Failure").
struct BreakOnExit(Arc<Shared>);

impl Drop for BreakOnExit {
    fn drop(&mut self) {
        self.0.break_with(Break::Io(
            "its reader or writer task stopped (the runtime it was made on shut down?)".into(),
        ));
    }
}

/// The error a request gets when `waiting` requests already wait ([`MAX_PENDING`], or
/// fewer when the request may not take the last places: see `room`). The detail starts
/// with the number, which `NodeError::from_redis` reads back.
pub(crate) fn backlog(waiting: usize) -> RedisError {
    redis::make_extension_error(
        BACKLOG_CODE.to_owned(),
        Some(format!(
            "{waiting} requests already wait for replies on this connection"
        )),
    )
}

/// Whether `e` is [`backlog`]'s: the request was refused, nothing was sent.
pub(crate) fn is_backlog(e: &RedisError) -> bool {
    e.code() == Some(BACKLOG_CODE)
}

/// Whether an `AUTH user password` reply is a server before ACLs refusing the username
/// (its `AUTH` takes one argument); the `redis` crate retries on the same words.
fn refuses_username(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(e)
        if e.details().is_some_and(|d| d.contains("wrong number of arguments for 'auth' command")))
}

impl Lean {
    async fn connect(host: &str, port: u16, settings: &TcpSettings) -> RedisResult<Lean> {
        let stream = TcpStream::connect((host, port)).await?;
        apply(&stream, settings)?;
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            write,
            line: Mutex::new(Line {
                out: Vec::with_capacity(1024),
                waiting: VecDeque::new(),
                answered: 0,
                flushing: false,
                broken: None,
            }),
            flush: Notify::new(),
            broken: AtomicBool::new(false),
        });
        let reader = tokio::spawn(read_replies(read, BreakOnExit(Arc::clone(&shared))));
        let writer = tokio::spawn(write_requests(BreakOnExit(Arc::clone(&shared))));
        Ok(Lean {
            shared,
            tasks: [reader.abort_handle(), writer.abort_handle()],
            db: 0,
        })
    }

    /// `AUTH [user] password`; without the user if the server predates ACLs.
    async fn authenticate(&self, user: Option<&str>, password: &str) -> RedisResult<()> {
        if let Some(user) = user {
            let reply = self
                .request(redis::cmd("AUTH").arg(user).arg(password))
                .await?;
            if !refuses_username(&reply) {
                return reply.extract_error().map(drop);
            }
        }
        let reply = self.request(redis::cmd("AUTH").arg(password)).await?;
        reply.extract_error().map(drop)
    }

    /// Queues `cmd` now and returns its reply (a server error is a `Value::ServerError`,
    /// as from the `redis` crate's connections).
    fn request(&self, cmd: &Cmd) -> impl Future<Output = RedisResult<Value>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let early = self.enqueue(cmd, tx);
        async move {
            early?;
            rx.await
                .unwrap_or_else(|_| Err(Break::Io("the connection was dropped".into()).error()))
        }
    }

    fn enqueue(&self, cmd: &Cmd, reply: oneshot::Sender<RedisResult<Value>>) -> RedisResult<()> {
        let mut line = self.shared.line();
        if let Some(why) = &line.broken {
            return Err(why.error());
        }
        if line.waiting.len() >= MAX_PENDING {
            return Err(backlog(MAX_PENDING));
        }
        cmd.write_packed_command(&mut line.out);
        line.waiting.push_back(reply);
        if line.flushing {
            return Ok(());
        }
        if line.waiting.len() > 1 {
            // Replies are pending: let the writer send whatever gathers meanwhile at once.
            line.flushing = true;
            self.shared.flush.notify_one();
            return Ok(());
        }
        // An idle connection: write from here, no task hop.
        match self.shared.write.try_write(&line.out) {
            Ok(n) => {
                line.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                drop(line);
                self.shared.break_with(Break::Io(format!("write: {e}")));
                return Ok(()); // the reply channel carries the error
            }
        }
        if !line.out.is_empty() {
            line.flushing = true;
            self.shared.flush.notify_one();
        }
        Ok(())
    }
}

/// Applies `settings` to a new socket, as the `redis` crate does to its own.
fn apply(stream: &TcpStream, settings: &TcpSettings) -> io::Result<()> {
    stream.set_nodelay(settings.nodelay())?;
    let socket = socket2::SockRef::from(stream);
    if let Some(keepalive) = settings.keepalive() {
        socket.set_tcp_keepalive(keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    socket.set_tcp_user_timeout(settings.user_timeout())?;
    Ok(())
}

/// Sends `Line::out` whenever asked, until the connection breaks.
async fn write_requests(guard: BreakOnExit) {
    let shared = &guard.0;
    loop {
        shared.flush.notified().await;
        loop {
            let written = {
                let mut line = shared.line();
                if line.broken.is_some() {
                    return;
                }
                if line.out.is_empty() {
                    line.flushing = false;
                    break;
                }
                match shared.write.try_write(&line.out) {
                    Ok(n) => {
                        line.out.drain(..n);
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) => {
                        drop(line);
                        return shared.break_with(Break::Io(format!("write: {e}")));
                    }
                }
            };
            if !written && let Err(e) = shared.write.writable().await {
                return shared.break_with(Break::Io(format!("write: {e}")));
            }
        }
    }
}

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Reads replies and hands each to the request at the front of the line.
async fn read_replies(mut read: OwnedReadHalf, guard: BreakOnExit) {
    use tokio::io::AsyncReadExt;
    let shared = &guard.0;
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        // Straight into the unparsed rest, with room for a chunk (`read_buf` reads 0 bytes
        // only at the end of the stream, then). `AsyncRead`, not `readable()` +
        // `try_read`: a read that fills less than the room has emptied the socket, and
        // tokio then waits for the next readiness event instead of trying a read that can
        // only find nothing (one `recvfrom` per reply saved: 18 against 10 per lock op
        // with one task, docs/performance.md).
        buf.reserve(READ_CHUNK);
        match read.read_buf(&mut buf).await {
            Ok(0) => return shared.break_with(Break::Io("closed by the server".into())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return shared.break_with(Break::Io(format!("read: {e}"))),
        }
        let mut start = 0;
        loop {
            let end = match resp::frame_end(&buf, start) {
                Ok(Some(end)) => end,
                Ok(None) => break,
                Err(why) => return shared.break_with(Break::Protocol(why)),
            };
            let reply = resp::decode(buf.get(start..end).unwrap_or_default());
            start = end;
            let next = {
                let mut line = shared.line();
                let next = line.waiting.pop_front();
                if next.is_some() {
                    line.answered = line.answered.saturating_add(1);
                }
                next
            };
            let Some(waiter) = next else {
                return shared.break_with(Break::Protocol("a reply nobody asked for".into()));
            };
            // A caller that gave up (its deadline passed) dropped its receiver.
            let _ = waiter.send(reply);
        }
        buf.drain(..start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers each `PING` it reads with `reply`.
    async fn fake_server(reply: &'static [u8]) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 1024];
            while let Ok(n) = sock.read(&mut buf).await
                && n > 0
            {
                let pings = buf[..n].windows(4).filter(|w| w == b"PING").count();
                if sock.write_all(&reply.repeat(pings)).await.is_err() {
                    return;
                }
            }
        });
        port
    }

    /// Every check here is over in milliseconds; a hang is a failure.
    async fn soon<T>(f: impl Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(10), f)
            .await
            .expect("no answer within 10 s")
    }

    #[tokio::test]
    async fn replies_reach_their_requests_in_order() {
        let port = fake_server(b":7\r\n").await;
        let lean = Lean::connect("127.0.0.1", port, &TcpSettings::default().set_nodelay(true))
            .await
            .expect("connect");
        let cmd = redis::cmd("PING");
        assert_eq!(
            soon(lean.request(&cmd)).await.expect("reply"),
            Value::Int(7)
        );
        let a = lean.request(&cmd);
        let b = lean.request(&cmd);
        assert_eq!(soon(b).await.expect("reply"), Value::Int(7));
        assert_eq!(soon(a).await.expect("reply"), Value::Int(7));
        // Three have left the line: the next request takes place 3.
        let mark = Conn::Lean(Arc::new(lean)).mark().expect("counted");
        assert_eq!((mark.answered, mark.waiting, mark.next()), (3, 0, 3));
    }

    #[tokio::test]
    async fn a_reply_that_is_not_resp2_breaks_the_connection_for_good() {
        let port = fake_server(b"%1\r\n").await;
        let lean = Lean::connect("127.0.0.1", port, &TcpSettings::default().set_nodelay(true))
            .await
            .expect("connect");
        let cmd = redis::cmd("PING");
        let first = soon(lean.request(&cmd)).await.expect_err("garbage");
        assert_eq!(first.kind(), redis::ErrorKind::Parse, "{first}");
        assert!(matches!(
            crate::NodeError::from_redis(&first),
            crate::NodeError::Protocol(_)
        ));
        let later = soon(lean.request(&cmd)).await.expect_err("still broken");
        assert!(
            later.kind() == redis::ErrorKind::Parse && later.to_string().contains("unknown type"),
            "{later}"
        );
        assert!(Conn::Lean(Arc::new(lean)).is_broken());
    }

    /// A listener that accepts connections and never reads from them (a stopped server:
    /// the kernel takes bytes until its buffers fill). Stops with the test's runtime.
    async fn deaf_server() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                held.push(sock);
            }
        });
        port
    }

    #[tokio::test]
    async fn a_full_line_refuses_at_once_and_stays_bounded() {
        let port = deaf_server().await;
        let lean = Lean::connect("127.0.0.1", port, &TcpSettings::default())
            .await
            .expect("connect");
        let cmd = redis::cmd("PING");
        // Callers that give up at once: their requests stay in line.
        for _ in 0..MAX_PENDING {
            drop(lean.request(&cmd));
        }
        let conn = Conn::Lean(Arc::new(lean));
        let Conn::Lean(lean) = &conn else {
            unreachable!()
        };
        for _ in 0..3 {
            let refused = soon(lean.request(&cmd)).await.expect_err("full");
            assert_eq!(refused.code(), Some(BACKLOG_CODE), "{refused}");
            assert_eq!(
                crate::NodeError::from_redis(&refused),
                crate::NodeError::Backlog(MAX_PENDING)
            );
        }
        assert_eq!(conn.mark().map(|m| m.waiting), Some(MAX_PENDING));
        // Full is not broken: the node keeps the connection, it drains when answered.
        assert!(!conn.is_broken());
    }

    #[test]
    fn a_runtime_that_shuts_down_breaks_its_connections() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || listener.accept().map(|(sock, _)| sock));
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let lean = first
            .block_on(Lean::connect("127.0.0.1", port, &TcpSettings::default()))
            .expect("connect");
        let _accepted = server.join().expect("no panic").expect("accept");
        let conn = Conn::Lean(Arc::new(lean));
        assert!(!conn.is_broken());
        drop(first);
        assert!(conn.is_broken(), "its tasks died with their runtime");
        let Conn::Lean(lean) = &conn else {
            unreachable!()
        };
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let err = second
            .block_on(soon(lean.request(&redis::cmd("PING"))))
            .expect_err("broken");
        assert!(
            err.is_io_error() && err.to_string().contains("runtime"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn tcp_settings_reach_the_socket() {
        let port = deaf_server().await;
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(std::time::Duration::from_secs(7))
            .with_interval(std::time::Duration::from_secs(3))
            .with_retries(4);
        let settings = TcpSettings::default()
            .set_nodelay(true)
            .set_keepalive(keepalive)
            .set_user_timeout(std::time::Duration::from_millis(4321));
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("redis://127.0.0.1:{port}"))
                .expect("url")
                .set_tcp_settings(settings);
        let client = Client::open(info).expect("client");
        let conn = soon(Conn::connect(&client, &AsyncConnectionConfig::new()))
            .await
            .expect("connect");
        let Conn::Lean(lean) = &conn else {
            panic!("redis:// over TCP is lean")
        };
        let socket = socket2::SockRef::from(lean.shared.write.as_ref());
        assert!(socket.tcp_nodelay().expect("nodelay"));
        assert!(socket.keepalive().expect("keepalive"));
        assert_eq!(
            socket.tcp_keepalive_time().expect("time"),
            std::time::Duration::from_secs(7)
        );
        assert_eq!(
            socket.tcp_keepalive_interval().expect("interval"),
            std::time::Duration::from_secs(3)
        );
        assert_eq!(socket.tcp_keepalive_retries().expect("retries"), 4);
        assert_eq!(
            socket.tcp_user_timeout().expect("user timeout"),
            Some(std::time::Duration::from_millis(4321))
        );
    }

    #[test]
    fn a_linger_time_is_seen() {
        assert!(!sets_linger(&TcpSettings::default()));
        assert!(!sets_linger(&TcpSettings::default().set_nodelay(true)));
        assert!(sets_linger(
            &TcpSettings::default().set_linger_time(std::time::Duration::ZERO)
        ));
    }

    #[test]
    fn only_a_username_refused_for_its_argument_count_is_retried() {
        let reply = |text: &str| match redis::parse_redis_value(text.as_bytes()) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert!(refuses_username(&reply(
            "-ERR wrong number of arguments for 'auth' command\r\n"
        )));
        assert!(!refuses_username(&reply(
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        )));
        assert!(!refuses_username(&reply("+OK\r\n")));
    }

    #[tokio::test]
    async fn a_closed_connection_fails_what_waits() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let (sock, _) = listener.accept().await.expect("accept");
            drop(sock);
        });
        let lean = Lean::connect("127.0.0.1", port, &TcpSettings::default().set_nodelay(true))
            .await
            .expect("connect");
        let err = soon(lean.request(&redis::cmd("PING")))
            .await
            .expect_err("closed");
        assert!(err.is_io_error(), "{err}");
    }
}
