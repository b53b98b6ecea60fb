//! How late the lock's own path to a node delivers what is sent on it.
//!
//! The leak check assumes that a delete sent after a `SET` reaches the node soon after it.
//! That holds on a healthy path; it does not when the path stalls — the node's proxy, the
//! container's network, the server itself held off the CPU of a busy machine — and then a
//! correct lock's failed attempt leaves a key standing most of its TTL. The key watcher
//! reads past the proxies, so it cannot see such a stall by itself.
//!
//! So each tick a probe writes `SET` [`KEY`] `<nonce>:<seq>` through the address the lock
//! uses (its proxy, when there is one), without waiting for the reply (replies may be
//! muted by a fault while requests still flow), and the watcher reads the key on the
//! node's direct address in the same transaction as the lock keys. A probe sent more than
//! [`LAG_LIMIT`] before a read that does not find it (nor a later one) is late: the path
//! was stalled from its sending on. Nothing is concluded until a first probe has arrived
//! (a path that refuses the probe — authentication, ACL — says nothing of stalls).

use std::collections::VecDeque;
use std::time::Duration;

use redis::{ConnectionAddr, IntoConnectionInfo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::task::JoinHandle;

/// The probe's key on every node.
pub const KEY: &str = "chaos:path-probe";

/// A probe this much older than a read that does not find it means the path is stalled:
/// the lock's own node deadline in the rig's runs, the longest a healthy path may take.
pub const LAG_LIMIT: Duration = Duration::from_millis(20);

/// Budget of one connect (and `AUTH`) or one write.
const IO_BUDGET: Duration = Duration::from_millis(500);

/// Probes sent and not yet seen are remembered up to this many (a stalled path keeps its
/// oldest: that is when the stall began).
const REMEMBERED: usize = 4096;

/// One node's probe.
#[derive(Debug)]
pub struct PathProbe {
    addr: Option<(String, u16)>,
    auth: Vec<Vec<u8>>,
    nonce: String,
    seq: u64,
    /// Probes sent, not yet seen: (seq, sent at µs on the scenario clock).
    unseen: VecDeque<(u64, u64)>,
    arrived_once: bool,
    writer: Option<OwnedWriteHalf>,
    drain: Option<JoinHandle<()>>,
}

impl PathProbe {
    /// A probe through the lock's address `url` (no probe when it is not a TCP address).
    pub fn new(url: &str) -> Self {
        let info = url.into_connection_info().ok();
        let addr = info.as_ref().and_then(|i| match i.addr() {
            ConnectionAddr::Tcp(host, port) => Some((host.clone(), *port)),
            _ => None,
        });
        let auth = info
            .and_then(|i| {
                let r = i.redis_settings();
                let password = r.password()?.as_bytes().to_vec();
                Some(match r.username() {
                    Some(user) => vec![b"AUTH".to_vec(), user.as_bytes().to_vec(), password],
                    None => vec![b"AUTH".to_vec(), password],
                })
            })
            .unwrap_or_default();
        Self {
            addr,
            auth,
            nonce: format!("{:016x}", rand::random::<u64>()),
            seq: 0,
            unseen: VecDeque::new(),
            arrived_once: false,
            writer: None,
            drain: None,
        }
    }

    /// Sends the next probe, stamped `at_us`; a path that cannot take it now (connect or
    /// write failed or took too long) is connected again at the next.
    pub async fn send(&mut self, at_us: u64) {
        let Some((host, port)) = self.addr.clone() else {
            return;
        };
        if self.writer.is_none() {
            match tokio::time::timeout(IO_BUDGET, self.connect(&host, port)).await {
                Ok(Ok(())) => {}
                _ => {
                    self.close();
                    return;
                }
            }
        }
        self.seq = self.seq.saturating_add(1);
        let value = format!("{}:{}", self.nonce, self.seq);
        let command = resp(&[b"SET", KEY.as_bytes(), value.as_bytes()]);
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        match tokio::time::timeout(IO_BUDGET, w.write_all(&command)).await {
            Ok(Ok(())) => {
                if self.unseen.len() >= REMEMBERED {
                    // Keep the oldest (the stall's start); forget the newest.
                    return;
                }
                self.unseen.push_back((self.seq, at_us));
            }
            _ => self.close(),
        }
    }

    async fn connect(&mut self, host: &str, port: u16) -> std::io::Result<()> {
        let stream = TcpStream::connect((host, port)).await?;
        let _ = stream.set_nodelay(true);
        let (mut r, mut w) = stream.into_split();
        if !self.auth.is_empty() {
            let parts: Vec<&[u8]> = self.auth.iter().map(Vec::as_slice).collect();
            w.write_all(&resp(&parts)).await?;
        }
        // Replies are read and dropped, so the socket never fills; none is needed.
        self.drain = Some(tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while matches!(r.read(&mut buf).await, Ok(n) if n > 0) {}
        }));
        self.writer = Some(w);
        Ok(())
    }

    fn close(&mut self) {
        self.writer = None;
        if let Some(d) = self.drain.take() {
            d.abort();
        }
    }

    /// Given the probe value a read found on the node (`None`: no probe of ours there),
    /// when the read was sent: the sending time of the oldest probe still missing, if it
    /// is older than [`LAG_LIMIT`] (the path is stalled since then), else `None`.
    pub fn stalled_since(&mut self, found: Option<&str>, read_at_us: u64) -> Option<u64> {
        let seen = found
            .and_then(|v| v.split_once(':'))
            .filter(|(nonce, _)| *nonce == self.nonce)
            .and_then(|(_, seq)| seq.parse::<u64>().ok());
        if let Some(seen) = seen {
            self.arrived_once = true;
            while self.unseen.front().is_some_and(|(s, _)| *s <= seen) {
                self.unseen.pop_front();
            }
        }
        if !self.arrived_once {
            return None;
        }
        let limit = u64::try_from(LAG_LIMIT.as_micros()).unwrap_or(u64::MAX);
        self.unseen
            .front()
            .map(|(_, sent)| *sent)
            .filter(|sent| read_at_us.saturating_sub(*sent) > limit)
    }
}

impl Drop for PathProbe {
    fn drop(&mut self) {
        self.close();
    }
}

/// A RESP2 array of bulk strings.
fn resp(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for p in parts {
        out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> PathProbe {
        let mut p = PathProbe::new("redis://127.0.0.1:1");
        p.nonce = "n".into();
        p
    }

    #[test]
    fn a_probe_missing_longer_than_the_limit_marks_the_path_stalled_from_its_sending() {
        let mut p = probe();
        p.unseen.extend([(1, 1_000), (2, 26_000), (3, 51_000)]);
        // Nothing arrived yet: nothing concluded.
        assert_eq!(p.stalled_since(None, 60_000), None);
        // Probe 1 arrived; probe 2 is 34 ms old at the read: stalled since 26 ms.
        assert_eq!(p.stalled_since(Some("n:1"), 60_000), Some(26_000));
        // All arrived: not stalled; probe 3 missing only 10 ms is not late either.
        assert_eq!(p.stalled_since(Some("n:2"), 61_000), None);
        assert_eq!(p.stalled_since(Some("n:3"), 200_000), None);
        // Another run's probe says nothing.
        p.unseen.push_back((4, 210_000));
        assert_eq!(p.stalled_since(Some("other:99"), 240_000), Some(210_000));
    }

    #[test]
    fn commands_are_resp_arrays_and_auth_comes_from_the_url() {
        assert_eq!(
            resp(&[b"SET", b"k", b"v"]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
        );
        let p = PathProbe::new("redis://user:pw@127.0.0.1:7000");
        assert_eq!(
            p.auth,
            vec![b"AUTH".to_vec(), b"user".to_vec(), b"pw".to_vec()]
        );
        assert_eq!(p.addr, Some(("127.0.0.1".into(), 7000)));
        assert!(PathProbe::new("redis://127.0.0.1:7000").auth.is_empty());
    }
}
