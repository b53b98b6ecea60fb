//! A stand-in for a server with `DELIFEQ` (Valkey ≥ 9), which no server the tests start has.
//!
//! A proxy in front of a real server that rewrites two requests while it "knows" the
//! command: `COMMAND INFO …` naming `DELIFEQ` becomes a script that answers as a server
//! with `DELIFEQ` (an entry for it, nil for the other names), and `DELIFEQ key value`
//! becomes the same compare-and-delete as a script (`1` deleted, `0` not). Only requests
//! are rewritten, one for one, so the replies come back from the real server in order and
//! untouched. After [`DelIfEqProxy::forget`] both reach the server as sent, and it answers
//! as it would: no entry, and `ERR unknown command 'DELIFEQ', with args beginning with: …`
//! — what a node answers after a rollback or a failover to an older replica.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `DELIFEQ`'s compare-and-delete, as a script.
const DELIFEQ_SCRIPT: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

#[derive(Debug)]
pub struct DelIfEqProxy {
    pub port: u16,
    knows: Arc<AtomicBool>,
    seen: Arc<AtomicU64>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl DelIfEqProxy {
    /// A proxy to the server on `target` that knows `DELIFEQ` until told to forget it.
    pub async fn start(target: u16) -> DelIfEqProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let knows = Arc::new(AtomicBool::new(true));
        let seen = Arc::new(AtomicU64::new(0));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (k, s, o) = (Arc::clone(&knows), Arc::clone(&seen), Arc::clone(&open));
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (knows, seen) = (Arc::clone(&k), Arc::clone(&s));
                let connection = tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let (mut ri, wi) = inbound.into_split();
                    let (mut ro, mut wo) = outbound.into_split();
                    let up = async move {
                        let mut pending = Vec::new();
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match ri.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            pending.extend_from_slice(&buf[..n]);
                            let mut out = Vec::new();
                            while let Some((args, used)) = parse_request(&pending) {
                                pending.drain(..used);
                                out.extend(rewrite(args, &knows, &seen));
                            }
                            if wo.write_all(&out).await.is_err() {
                                return;
                            }
                        }
                    };
                    let down = async move {
                        let mut wi = wi;
                        let _ = tokio::io::copy(&mut ro, &mut wi).await;
                    };
                    tokio::join!(up, down);
                });
                o.lock()
                    .expect("not poisoned")
                    .push(connection.abort_handle());
            }
        });
        DelIfEqProxy {
            port,
            knows,
            seen,
            open,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// From now on the server behind the proxy knows no `DELIFEQ`, on the connections open
    /// now as on new ones.
    pub fn forget(&self) {
        self.knows.store(false, Ordering::SeqCst);
    }

    /// Closes every connection open now (the old server went away): the client connects
    /// again.
    pub fn close_all(&self) {
        for connection in self.open.lock().expect("not poisoned").drain(..) {
            connection.abort();
        }
    }

    /// `DELIFEQ` requests received so far, rewritten or not.
    pub fn delifeq_seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }
}

/// The request at the start of `bytes` (an array of bulk strings, as every client sends)
/// and how many bytes it took; `None` until it has all arrived.
fn parse_request(bytes: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    fn line(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let end = bytes.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        Some((&bytes[at..at + end], at + end + 2))
    }
    let number = |text: &[u8]| -> usize {
        std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .expect("a RESP length")
    };
    let (head, mut at) = line(bytes, 0)?;
    assert_eq!(head.first(), Some(&b'*'), "clients send arrays");
    let count = number(&head[1..]);
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, next) = line(bytes, at)?;
        assert_eq!(len.first(), Some(&b'$'), "of bulk strings");
        let len = number(&len[1..]);
        let arg = bytes.get(next..next + len)?;
        if bytes.get(next + len..next + len + 2)? != b"\r\n" {
            panic!("a bulk string without its CRLF");
        }
        args.push(arg.to_vec());
        at = next + len + 2;
    }
    Some((args, at))
}

/// The bytes to send the server for the request `args`.
fn rewrite(args: Vec<Vec<u8>>, knows: &AtomicBool, seen: &AtomicU64) -> Vec<u8> {
    let name = args
        .first()
        .map(|a| a.to_ascii_uppercase())
        .unwrap_or_default();
    if name == b"DELIFEQ" {
        seen.fetch_add(1, Ordering::SeqCst);
    }
    if !knows.load(Ordering::SeqCst) {
        return encode(&args);
    }
    let is = |i: usize, word: &[u8]| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(word));
    if name == b"DELIFEQ" && args.len() == 3 {
        let mut eval = vec![
            b"EVAL".to_vec(),
            DELIFEQ_SCRIPT.as_bytes().to_vec(),
            b"1".to_vec(),
        ];
        eval.extend(args[1..].iter().cloned());
        return encode(&eval);
    }
    if is(0, b"COMMAND") && is(1, b"INFO") {
        // One entry per name asked, in order: DELIFEQ's, nil (Lua false) for the rest.
        let entries: Vec<&str> = args[2..]
            .iter()
            .map(|a| {
                if a.eq_ignore_ascii_case(b"DELIFEQ") {
                    "{'delifeq', 3, {'write'}, 1, 1, 1}"
                } else {
                    "false"
                }
            })
            .collect();
        let script = format!("return {{{}}}", entries.join(", "));
        return encode(&[b"EVAL".to_vec(), script.into_bytes(), b"0".to_vec()]);
    }
    encode(&args)
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
