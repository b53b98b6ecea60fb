//! One proxied TCP connection: two directions, each pumped through its toxics.
//!
//! Each direction is a reader that stamps chunks with their arrival time and
//! a writer that applies the toxics and forwards. Stamping on arrival keeps
//! pipelined requests from stacking latency, as in Toxiproxy. The writer also
//! watches the proxy's toxic list so that changes reach open connections.
//!
//! A direction ends with an [`Outcome`]: end of stream is passed on as a
//! half-close (the other direction carries on); `Close` and `Reset` end the
//! whole connection, `Reset` with an RST to the client (`SO_LINGER` 0, and
//! the write half is dropped without `shutdown` so no FIN goes out first).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::toxics::{ActiveToxics, Dice, ToxicList};

/// Read buffer per direction; also the largest chunk a toxic sees.
const CHUNK: usize = 32 * 1024;
/// Chunks buffered between reader and writer before the reader waits.
const QUEUE: usize = 32;

/// What a connection needs from its proxy.
#[derive(Debug, Clone)]
pub(crate) struct LinkConfig {
    /// Upstream `host:port`, resolved for every connection.
    pub(crate) upstream: String,
    /// Toxics on client → upstream.
    pub(crate) upstream_toxics: watch::Receiver<ToxicList>,
    /// Toxics on upstream → client.
    pub(crate) downstream_toxics: watch::Receiver<ToxicList>,
    /// Fires when the proxy is disabled, changed or deleted.
    pub(crate) cancel: CancellationToken,
    /// The server's randomness (toxicity rolls, jitter, slice sizes).
    pub(crate) dice: Dice,
}

/// How one direction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The source closed; the close was passed on.
    Eof,
    /// Close the whole connection (toxic, I/O error, proxy stopped).
    Close,
    /// Reset the client connection.
    Reset,
}

enum Msg {
    Data(Vec<u8>, Instant),
    Eof,
    Failed,
}

/// Connects to the upstream and forwards until both directions end.
pub(crate) async fn run(client: TcpStream, cfg: LinkConfig) {
    let peer = client.peer_addr().ok();
    let connected = tokio::select! {
        r = TcpStream::connect(&cfg.upstream) => r,
        _ = cfg.cancel.cancelled() => return,
    };
    let server = match connected {
        Ok(s) => s,
        Err(e) => {
            // Dropping the client closes it, which is what Toxiproxy does too.
            tracing::warn!(upstream = %cfg.upstream, error = %e, "upstream connect failed");
            return;
        }
    };
    // Small request/response traffic (Redis): do not let Nagle add latency.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    tracing::debug!(?peer, upstream = %cfg.upstream, "link open");

    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let outcome = {
        let up = pump(
            &mut client_r,
            &mut server_w,
            cfg.upstream_toxics,
            ActiveToxics::new(cfg.dice.child()),
        );
        let down = pump(
            &mut server_r,
            &mut client_w,
            cfg.downstream_toxics,
            ActiveToxics::new(cfg.dice.child()),
        );
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                o = &mut up, if !up_done => match o {
                    Outcome::Eof => up_done = true,
                    other => break other,
                },
                o = &mut down, if !down_done => match o {
                    Outcome::Eof => down_done = true,
                    other => break other,
                },
                _ = cfg.cancel.cancelled() => break Outcome::Close,
            }
            if up_done && down_done {
                break Outcome::Eof;
            }
        }
    };
    if outcome == Outcome::Reset {
        // Linger 0 turns the close into an RST; forget() skips the FIN that
        // dropping a write half would send first.
        if let Err(e) = client_r.as_ref().set_zero_linger() {
            tracing::warn!(error = %e, "cannot set SO_LINGER 0; peer sees a close, not a reset");
        }
        client_w.forget();
    }
    tracing::debug!(?peer, ?outcome, "link closed");
}

/// Forwards one direction through its toxics until it ends.
async fn pump(
    src: &mut OwnedReadHalf,
    dst: &mut OwnedWriteHalf,
    mut toxics: watch::Receiver<ToxicList>,
    mut active: ActiveToxics,
) -> Outcome {
    let (tx, mut rx) = mpsc::channel::<Msg>(QUEUE);
    let reader = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let msg = match src.read(&mut buf).await {
                Ok(0) => Msg::Eof,
                Ok(n) => Msg::Data(buf[..n].to_vec(), Instant::now()),
                Err(_) => Msg::Failed,
            };
            let last = !matches!(msg, Msg::Data(..));
            if tx.send(msg).await.is_err() || last {
                break;
            }
        }
        // The writer decides how the direction ends; the reader just idles.
        std::future::pending::<Outcome>().await
    };
    let writer = async move {
        let first = toxics.borrow_and_update().clone();
        active.refresh(&first, Instant::now());
        loop {
            let deadline = active.close_deadline();
            tokio::select! {
                // A toxic added before a chunk arrived applies to it: the API answers
                // only after the list changed, so a client that adds a toxic and then
                // sends may rely on it (both branches can be ready when this task runs
                // late; unbiased, the chunk went first half the time).
                biased;
                changed = toxics.changed() => {
                    if changed.is_err() {
                        return Outcome::Close; // proxy gone
                    }
                    let list = toxics.borrow_and_update().clone();
                    if active.refresh(&list, Instant::now()) {
                        return Outcome::Close; // a held connection's timeout toxic went away
                    }
                }
                _ = sleep_until(deadline) => return Outcome::Close,
                msg = rx.recv() => match msg {
                    Some(Msg::Data(data, at)) => {
                        if let Some(o) = deliver(dst, &mut active, &mut toxics, data, at).await {
                            return o;
                        }
                    }
                    Some(Msg::Eof) | None => {
                        if active.black_hole() {
                            return Outcome::Close;
                        }
                        tokio::time::sleep(active.slow_close()).await;
                        let _ = dst.shutdown().await;
                        return Outcome::Eof;
                    }
                    Some(Msg::Failed) => return Outcome::Close,
                },
            }
        }
    };
    tokio::select! {
        o = writer => o,
        o = reader => o,
    }
}

/// Applies the toxics to one chunk and writes it; `Some` ends the direction.
async fn deliver(
    dst: &mut OwnedWriteHalf,
    active: &mut ActiveToxics,
    toxics: &mut watch::Receiver<ToxicList>,
    mut data: Vec<u8>,
    arrived: Instant,
) -> Option<Outcome> {
    if active.black_hole() {
        // timeout toxic: the data is dropped on the floor, and its timer restarts.
        active.swallowed(Instant::now());
        return None;
    }
    if let Some(wait) = active.reset_after() {
        // Like Toxiproxy: the chunk that triggers reset_peer is not delivered.
        tokio::time::sleep(wait).await;
        return Some(Outcome::Reset);
    }
    let latency = active.latency();
    if !latency.is_zero() {
        // Measured from arrival; sleep() (not sleep_until) saturates huge values.
        tokio::time::sleep(latency.saturating_sub(arrived.elapsed())).await;
    }
    let mut close_after = false;
    if let Some(left) = active.limit_remaining()
        && data.len() as u64 >= left
    {
        data.truncate(usize::try_from(left).unwrap_or(usize::MAX));
        close_after = true;
    }
    let (pieces, pause) = active.slices(data.len());
    let mut offset = 0;
    for (i, len) in pieces.iter().copied().enumerate() {
        let end = offset + len;
        while offset < end {
            // bandwidth: wait first, then send (in at most 100 ms slices).
            let (n, at) = active.next_piece(end - offset, Instant::now());
            if at > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    changed = toxics.changed() => {
                        // A new rate (or none) applies to the rest of the chunk at once.
                        if changed.is_err() {
                            return Some(Outcome::Close);
                        }
                        let list = toxics.borrow_and_update().clone();
                        if active.refresh(&list, Instant::now()) {
                            return Some(Outcome::Close);
                        }
                        continue;
                    }
                }
            }
            active.sent(at);
            if dst.write_all(&data[offset..offset + n]).await.is_err() {
                return Some(Outcome::Close);
            }
            offset += n;
            active.record_passed(n);
        }
        if i + 1 < pieces.len() && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    close_after.then_some(Outcome::Close)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Accept errors (e.g. out of file descriptors) are retried after this pause
/// instead of spinning.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
