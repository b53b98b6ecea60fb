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
//! `docs/measurements/transport-2026-12-01.txt`.
//!
//! # Order
//! A request's bytes are appended to the connection's buffer, and its place in the reply
//! line taken, under one lock, at the moment [`ConnectionLike::req_packed_command`] is
//! called — which the node's gate does in the first poll of the call (see `node`). So
//! requests reach the server in the order they were made, and nothing can wait for room:
//! the buffer is not bounded (the node's in-flight limit bounds it).
//!
//! # Failure
//! A read or write error, an end of stream or a reply that does not parse breaks the
//! connection: every request waiting for a reply, and every later one, fails with an I/O
//! error, which makes the node connect again on its next call. Replies are never matched
//! to the wrong request: after the first error nothing more is read. Dropping the last
//! handle stops both tasks and closes the socket.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, Pipeline, ProtocolVersion, RedisError,
    RedisFuture, RedisResult, Value,
};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, oneshot};
use tokio::task::AbortHandle;

/// A connection to one node.
#[derive(Clone)]
pub(crate) enum Conn {
    /// Plain TCP, RESP2: our own.
    Lean(Arc<Lean>),
    /// Anything else: the `redis` crate's.
    Multiplexed(MultiplexedConnection),
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
            ConnectionAddr::Tcp(host, port) if settings.protocol() == ProtocolVersion::RESP2 => {
                let mut lean = Lean::connect(host, *port, info.tcp_settings().nodelay()).await?;
                if let Some(password) = settings.password() {
                    let mut auth = redis::cmd("AUTH");
                    if let Some(user) = settings.username() {
                        auth.arg(user);
                    }
                    auth.arg(password);
                    lean.request(&auth).await?.extract_error()?;
                }
                if settings.db() != 0 {
                    lean.request(redis::cmd("SELECT").arg(settings.db()))
                        .await?
                        .extract_error()?;
                    lean.db = settings.db();
                }
                Ok(Conn::Lean(Arc::new(lean)))
            }
            _ => Ok(Conn::Multiplexed(
                client
                    .get_multiplexed_async_connection_with_config(config)
                    .await?,
            )),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            // Queued now, in the caller's poll (see "Order").
            Conn::Lean(lean) => Box::pin(lean.request(cmd)),
            Conn::Multiplexed(m) => m.req_packed_command(cmd),
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
            Conn::Multiplexed(m) => m.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Lean(lean) => lean.db,
            Conn::Multiplexed(m) => m.get_db(),
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
}

/// Requests on their way: bytes not yet written, and who waits for each reply, in order.
struct Line {
    out: Vec<u8>,
    waiting: VecDeque<oneshot::Sender<RedisResult<Value>>>,
    /// The writer task owns `out` until it is empty.
    flushing: bool,
    /// Why the connection broke, once it has.
    broken: Option<String>,
}

impl Shared {
    fn line(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Line {
    /// Fails every waiting request and every later one.
    fn break_with(&mut self, why: String) {
        for waiter in self.waiting.drain(..) {
            let _ = waiter.send(Err(broken(&why)));
        }
        self.out.clear();
        self.broken.get_or_insert(why);
    }
}

fn broken(why: &str) -> RedisError {
    RedisError::from(io::Error::new(
        io::ErrorKind::ConnectionAborted,
        format!("connection broken: {why}"),
    ))
}

impl Lean {
    async fn connect(host: &str, port: u16, nodelay: bool) -> RedisResult<Lean> {
        let stream = TcpStream::connect((host, port)).await?;
        stream.set_nodelay(nodelay)?;
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            write,
            line: Mutex::new(Line {
                out: Vec::with_capacity(1024),
                waiting: VecDeque::new(),
                flushing: false,
                broken: None,
            }),
            flush: Notify::new(),
        });
        let reader = tokio::spawn(read_replies(read, Arc::clone(&shared))).abort_handle();
        let writer = tokio::spawn(write_requests(Arc::clone(&shared))).abort_handle();
        Ok(Lean {
            shared,
            tasks: [reader, writer],
            db: 0,
        })
    }

    /// Queues `cmd` now and returns its reply (a server error is a `Value::ServerError`,
    /// as from the `redis` crate's connections).
    fn request(&self, cmd: &Cmd) -> impl Future<Output = RedisResult<Value>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let early = self.enqueue(cmd, tx);
        async move {
            early?;
            rx.await
                .unwrap_or_else(|_| Err(broken("the connection was dropped")))
        }
    }

    fn enqueue(&self, cmd: &Cmd, reply: oneshot::Sender<RedisResult<Value>>) -> RedisResult<()> {
        let mut line = self.shared.line();
        if let Some(why) = &line.broken {
            return Err(broken(why));
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
                line.break_with(format!("write: {e}"));
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

/// Sends `Line::out` whenever asked, until the connection breaks.
async fn write_requests(shared: Arc<Shared>) {
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
                        line.break_with(format!("write: {e}"));
                        return;
                    }
                }
            };
            if !written && let Err(e) = shared.write.writable().await {
                shared.line().break_with(format!("write: {e}"));
                return;
            }
        }
    }
}

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Reads replies and hands each to the request at the front of the line.
async fn read_replies(read: OwnedReadHalf, shared: Arc<Shared>) {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        if let Err(e) = read.readable().await {
            return shared.line().break_with(format!("read: {e}"));
        }
        match read.try_read(&mut chunk) {
            Ok(0) => return shared.line().break_with("closed by the server".into()),
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return shared.line().break_with(format!("read: {e}")),
        }
        let mut start = 0;
        loop {
            let end = match frame_end(&buf, start) {
                Ok(Some(end)) => end,
                Ok(None) => break,
                Err(why) => return shared.line().break_with(why),
            };
            let reply = redis::parse_redis_value(buf.get(start..end).unwrap_or_default());
            start = end;
            let mut line = shared.line();
            let Some(waiter) = line.waiting.pop_front() else {
                return line.break_with("a reply nobody asked for".into());
            };
            drop(line);
            // A caller that gave up (its deadline passed) dropped its receiver.
            let _ = waiter.send(reply);
        }
        buf.drain(..start);
    }
}

/// Deepest nesting of arrays accepted in a reply (the lock's replies have none but the
/// `COMMAND INFO` probe's; a deeper one breaks the connection instead of the stack).
const MAX_DEPTH: usize = 16;

/// Where the RESP2 value starting at `buf[start]` ends (exclusive), `None` if `buf` does
/// not hold all of it yet; an error for bytes that are not RESP2.
fn frame_end(buf: &[u8], start: usize) -> Result<Option<usize>, String> {
    frame_end_at(buf, start, 0)
}

fn frame_end_at(buf: &[u8], start: usize, depth: usize) -> Result<Option<usize>, String> {
    let Some(rest) = buf.get(start..) else {
        return Ok(None);
    };
    let Some(&kind) = rest.first() else {
        return Ok(None);
    };
    let Some(cr) = rest.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    // Within `buf`, so no overflow.
    let line_end = start.saturating_add(cr).saturating_add(2);
    let number = || -> Result<i64, String> {
        rest.get(1..cr)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| "a reply with a bad length".to_owned())
    };
    match kind {
        b'+' | b'-' | b':' => Ok(Some(line_end)),
        b'$' => {
            let Ok(len) = usize::try_from(number()?) else {
                return Ok(Some(line_end)); // $-1: nil
            };
            let end = line_end
                .checked_add(len)
                .and_then(|e| e.checked_add(2))
                .ok_or("a reply too long")?;
            Ok((end <= buf.len()).then_some(end))
        }
        b'*' => {
            if depth >= MAX_DEPTH {
                return Err("a reply nested too deep".into());
            }
            let mut end = line_end;
            for _ in 0..number()?.max(0) {
                match frame_end_at(buf, end, depth.saturating_add(1))? {
                    Some(e) => end = e,
                    None => return Ok(None),
                }
            }
            Ok(Some(end))
        }
        other => Err(format!("a reply of unknown type {other:#04x} (not RESP2)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Nil => out.extend_from_slice(b"$-1\r\n"),
            Value::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Value::Okay => out.extend_from_slice(b"+OK\r\n"),
            Value::BulkString(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Value::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    encode(i, out);
                }
            }
            _ => unreachable!("not generated"),
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Okay),
            any::<i64>().prop_map(Value::Int),
            // Bulk strings may hold CR LF and anything else.
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::BulkString),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            proptest::collection::vec(inner, 0..5).prop_map(Value::Array)
        })
    }

    proptest! {
        /// Replies split anywhere are framed exactly where they end, and only when whole.
        #[test]
        fn frames_end_where_values_end(values in proptest::collection::vec(value(), 1..6), cut in 0usize..400) {
            let mut bytes = Vec::new();
            let mut ends = Vec::new();
            for v in &values {
                encode(v, &mut bytes);
                ends.push(bytes.len());
            }
            let cut = cut.min(bytes.len());
            let seen = &bytes[..cut];
            let mut start = 0;
            let mut found = Vec::new();
            while let Some(end) = frame_end(seen, start).expect("valid RESP2") {
                prop_assert_eq!(
                    redis::parse_redis_value(&seen[start..end]).expect("parses"),
                    values[found.len()].clone()
                );
                found.push(end);
                start = end;
            }
            let whole: Vec<usize> = ends.iter().copied().filter(|e| *e <= cut).collect();
            prop_assert_eq!(found, whole);
        }
    }

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
        let lean = Lean::connect("127.0.0.1", port, true)
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
    }

    #[tokio::test]
    async fn a_reply_that_is_not_resp2_breaks_the_connection_for_good() {
        let port = fake_server(b"%1\r\n").await;
        let lean = Lean::connect("127.0.0.1", port, true)
            .await
            .expect("connect");
        let cmd = redis::cmd("PING");
        let first = soon(lean.request(&cmd)).await.expect_err("garbage");
        assert!(first.is_io_error(), "{first}");
        let later = soon(lean.request(&cmd)).await.expect_err("still broken");
        assert!(
            later.is_io_error() && later.to_string().contains("unknown type"),
            "{later}"
        );
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
        let lean = Lean::connect("127.0.0.1", port, true)
            .await
            .expect("connect");
        let err = soon(lean.request(&redis::cmd("PING")))
            .await
            .expect_err("closed");
        assert!(err.is_io_error(), "{err}");
    }

    #[test]
    fn errors_and_unknown_types() {
        assert_eq!(frame_end(b"-ERR no\r\n", 0), Ok(Some(9)));
        assert_eq!(frame_end(b"-ERR no\r", 0), Ok(None));
        assert!(frame_end(b"%2\r\n", 0).is_err());
        assert!(frame_end(b"$x\r\n", 0).is_err());
        assert_eq!(frame_end(b"*-1\r\n", 0), Ok(Some(5)));
        assert_eq!(frame_end(b"$-1\r\n", 0), Ok(Some(5)));
        assert!(frame_end(&b"*1\r\n".repeat(100), 0).is_err());
    }
}
