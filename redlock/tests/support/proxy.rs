//! A TCP proxy in front of one test server, with the faults the tests need.

use std::time::{Duration, Instant};

/// What a [`StrandingProxy`] does to the bytes it forwards, besides stranding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Forwards them as they come.
    Plain,
    /// Writes the server's bytes to the client one at a time, each its own segment, so
    /// that replies arrive split across reads anywhere.
    Split,
    /// Answers a first command `AUTH user password` as a server before ACLs (Redis < 6)
    /// does — "wrong number of arguments" — and forwards everything else.
    PreAcl,
}

/// A TCP proxy in front of one server that can strand its existing connections: after
/// [`StrandingProxy::strand`], connections made before stop forwarding for good (their
/// sockets stay open, like a half-open connection after a path broke), while new
/// connections go through. With a delay ([`StrandingProxy::start_slow`]), every new
/// connection forwards nothing for that long (a slow handshake);
/// [`StrandingProxy::start_split`] splits replies byte by byte and
/// [`StrandingProxy::start_pre_acl`] plays a server that predates ACLs. After
/// [`StrandingProxy::mute_replies`], requests still reach the server but its replies are
/// dropped (a one-way black hole); [`StrandingProxy::lag`] delays every byte read from then
/// on, both ways, in order. [`StrandingProxy::retarget`] sends new connections to another
/// server (a proxy re-pointed, a NAT rule changed). Runs on the test's Tokio runtime.
#[derive(Debug)]
pub struct StrandingProxy {
    pub port: u16,
    target: std::sync::Arc<std::sync::atomic::AtomicU16>,
    epoch: std::sync::Arc<std::sync::atomic::AtomicU64>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicU64>,
    refused_auths: std::sync::Arc<std::sync::atomic::AtomicU64>,
    muted: std::sync::Arc<std::sync::atomic::AtomicBool>,
    lag_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl StrandingProxy {
    pub async fn start(target: u16) -> StrandingProxy {
        Self::start_with(target, Duration::ZERO, Mode::Plain).await
    }

    /// Like [`StrandingProxy::start`], each new connection held `delay` before it
    /// forwards anything.
    pub async fn start_slow(target: u16, delay: Duration) -> StrandingProxy {
        Self::start_with(target, delay, Mode::Plain).await
    }

    /// Like [`StrandingProxy::start`], the server's bytes reaching the client one by one.
    pub async fn start_split(target: u16) -> StrandingProxy {
        Self::start_with(target, Duration::ZERO, Mode::Split).await
    }

    /// Like [`StrandingProxy::start`], `AUTH` with a username refused as by Redis 5.
    pub async fn start_pre_acl(target: u16) -> StrandingProxy {
        Self::start_with(target, Duration::ZERO, Mode::PreAcl).await
    }

    async fn start_with(target: u16, delay: Duration, mode: Mode) -> StrandingProxy {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let target = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(target));
        let aim = std::sync::Arc::clone(&target);
        let epoch = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let refused_auths = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let shared = std::sync::Arc::clone(&epoch);
        let counted = std::sync::Arc::clone(&accepted);
        let refused = std::sync::Arc::clone(&refused_auths);
        let muted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let silence = std::sync::Arc::clone(&muted);
        let lag_ms = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let lagging = std::sync::Arc::clone(&lag_ms);
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tracked = std::sync::Arc::clone(&open);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let born = shared.load(Ordering::SeqCst);
                let epoch = std::sync::Arc::clone(&shared);
                let refused = std::sync::Arc::clone(&refused);
                let silence = std::sync::Arc::clone(&silence);
                let lag = std::sync::Arc::clone(&lagging);
                let target = aim.load(Ordering::SeqCst);
                let connection = tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let (mut ri, mut wi) = inbound.into_split();
                    let (mut ro, mut wo) = outbound.into_split();
                    if mode == Mode::PreAcl {
                        // The client's first write is its whole first command.
                        let mut first = vec![0u8; 16 * 1024];
                        let n = match ri.read(&mut first).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let first = &first[..n];
                        if first
                            .to_ascii_uppercase()
                            .starts_with(b"*3\r\n$4\r\nAUTH\r\n")
                        {
                            refused.fetch_add(1, Ordering::SeqCst);
                            let refusal = b"-ERR wrong number of arguments for 'auth' command\r\n";
                            if wi.write_all(refusal).await.is_err() {
                                return;
                            }
                        } else if wo.write_all(first).await.is_err() {
                            return;
                        }
                    }
                    let live = || epoch.load(Ordering::SeqCst) == born;
                    let replies = || live() && !silence.load(Ordering::SeqCst);
                    let up = pump(&mut ri, wo, &live, &lag, false);
                    let down = pump(&mut ro, wi, &replies, &lag, mode == Mode::Split);
                    let _held = tokio::join!(up, down);
                    // Stranded: hold the sockets open, forward nothing.
                    if !live() {
                        std::future::pending::<()>().await;
                    }
                });
                tracked
                    .lock()
                    .expect("not poisoned")
                    .push(connection.abort_handle());
            }
        });
        StrandingProxy {
            port,
            target,
            epoch,
            accepted,
            refused_auths,
            muted,
            lag_ms,
            open,
        }
    }

    /// Closes every connection open now, both sides, as Toxiproxy does when a `timeout`
    /// toxic is removed: bytes already forwarded stay in the server's socket, to be read
    /// (and run) whenever the server next reads it.
    pub fn close_all(&self) {
        for connection in self.open.lock().expect("not poisoned").drain(..) {
            connection.abort();
        }
    }

    /// Connections accepted from now on go to the server at `port`; those open now stay
    /// with the server they reach (see [`StrandingProxy::close_all`]).
    pub fn retarget(&self, port: u16) {
        self.target.store(port, std::sync::atomic::Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `AUTH user password` commands refused so far ([`StrandingProxy::start_pre_acl`]).
    pub fn refused_auths(&self) -> u64 {
        self.refused_auths.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// From now on requests still reach the server, and its replies are dropped.
    pub fn mute_replies(&self) {
        self.muted.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every byte read from now on, either way, is forwarded `lag` later (in order).
    pub fn lag(&self, lag: Duration) {
        let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.lag_ms.store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Connections open now forward nothing from here on.
    pub fn strand(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Forwards `from` to `to` while `live()`, each chunk `lag` after it was read (in order),
/// with `split` one byte per write; swallows everything once not `live()`. Hands back the
/// write half (a stranded connection keeps it open).
async fn pump(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    live: &impl Fn() -> bool,
    lag: &std::sync::atomic::AtomicU64,
    split: bool,
) -> Option<tokio::net::tcp::OwnedWriteHalf> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due.into()).await;
            let chunks: Vec<&[u8]> = if split {
                bytes.chunks(1).collect()
            } else {
                vec![&bytes[..]]
            };
            for chunk in chunks {
                if to.write_all(chunk).await.is_err() {
                    return to;
                }
                if split {
                    // Let the client read this byte before the next is written.
                    tokio::task::yield_now().await;
                }
            }
        }
        to
    });
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !live() {
            // Swallow everything from now on.
            continue;
        }
        let due =
            Instant::now() + Duration::from_millis(lag.load(std::sync::atomic::Ordering::SeqCst));
        if tx.send((due, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(tx);
    writer.await.ok()
}
