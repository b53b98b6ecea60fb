//! A TCP proxy that holds a client's requests back from a chosen one on, until the test
//! opens it: a way to change a server between two requests of one lock operation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// The fence write's source, as `EVAL` carries it on the wire (see `script.rs`): the
/// needle that holds a fenced acquire between its two rounds.
pub const FENCE_WRITE_TEXT: &[u8] = b"local ahead = tonumber(ARGV[2]) <= current";

/// A gate in front of each of `ports`' servers, holding from `needle` on.
pub async fn gates(ports: impl IntoIterator<Item = u16>, needle: &'static [u8]) -> Vec<GateProxy> {
    let mut gates = Vec::new();
    for port in ports {
        gates.push(GateProxy::start(port, needle).await);
    }
    gates
}

/// Waits (4 s at most, else panics) until every gate holds a request carrying its needle.
pub async fn all_held(gates: &[GateProxy]) {
    let held = async {
        for gate in gates {
            gate.held().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(4), held)
        .await
        .expect("every node's request reaches its gate (has the script's text changed?)");
}

/// A proxy in front of one server. Replies pass freely; requests pass until one carries
/// `needle`, and from that request on (it included) nothing more reaches the server until
/// [`GateProxy::open`]. The needle must be in an `EVAL`'s script. Requests before that
/// `EVAL` in the same read go through; one held in part cannot run (the server waits for
/// the rest of it), so what runs before the gate opens is exactly what came before it.
#[derive(Debug)]
pub struct GateProxy {
    pub port: u16,
    gate: Arc<Gate>,
}

#[derive(Debug, Default)]
struct Gate {
    holding: AtomicBool,
    open: AtomicBool,
    held: Notify,
    opened: Notify,
}

impl GateProxy {
    pub async fn start(target: u16, needle: &'static [u8]) -> GateProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let gate = Arc::new(Gate::default());
        let shared = Arc::clone(&gate);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let gate = Arc::clone(&shared);
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (mut ri, mut wi) = inbound.into_split();
                    let (mut ro, mut wo) = outbound.into_split();
                    let up = async {
                        // The bytes forwarded last, so that a needle split across reads is
                        // found.
                        let mut carry: Vec<u8> = Vec::new();
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match ri.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            let chunk = &buf[..n];
                            let mut seen = std::mem::take(&mut carry);
                            seen.extend_from_slice(chunk);
                            // The requests before the needle's own pass: one read can hold
                            // several, a node's earlier request among them.
                            let split = find(&seen, needle).map(|at| {
                                command_start(&seen[..at]).saturating_sub(seen.len() - n)
                            });
                            if let Some(split) = split {
                                if wo.write_all(&chunk[..split]).await.is_err() {
                                    return;
                                }
                                gate.hold().await;
                            }
                            if wo.write_all(&chunk[split.unwrap_or(0)..]).await.is_err() {
                                return;
                            }
                            let keep = seen.len().saturating_sub(needle.len());
                            seen.drain(..keep);
                            carry = seen;
                        }
                    };
                    let down = tokio::io::copy(&mut ro, &mut wi);
                    let _ = tokio::join!(up, down);
                });
            }
        });
        GateProxy { port, gate }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Waits until a request carrying the needle is held.
    pub async fn held(&self) {
        loop {
            let notified = self.gate.held.notified();
            if self.gate.holding.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    /// Lets the held requests, and every later one, through.
    pub fn open(&self) {
        self.gate.open.store(true, Ordering::SeqCst);
        self.gate.opened.notify_waiters();
    }
}

impl Gate {
    /// Until opened: tells the test, then waits.
    async fn hold(&self) {
        loop {
            let opened = self.opened.notified();
            if self.open.load(Ordering::SeqCst) {
                return;
            }
            self.holding.store(true, Ordering::SeqCst);
            self.held.notify_waiters();
            opened.await;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where the `EVAL` command whose script runs to the end of `before` starts (its `*<n>`
/// array header); 0 when it started in an earlier read.
fn command_start(before: &[u8]) -> usize {
    let Some(eval) = before
        .windows(b"$4\r\nEVAL\r\n".len())
        .rposition(|w| w.eq_ignore_ascii_case(b"$4\r\nEVAL\r\n"))
    else {
        return 0;
    };
    before[..eval].iter().rposition(|b| *b == b'*').unwrap_or(0)
}
