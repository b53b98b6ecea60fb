//! Reading server truth for a worker: after each grant, the key's value, `PTTL`, absolute
//! expiry (`PEXPIRETIME`) and the server's `TIME` on every node, in one transaction, through
//! the admin addresses (see [`crate::checker::truth`] for what is made of them). A server
//! that refuses the transaction (no `PEXPIRETIME` before Redis 7) is read with `GET` and
//! `PTTL` alone from then on.
//!
//! One connection per node, opened on first use and dropped on any error. Each read has
//! [`READ_DEADLINE`]; a node that missed it (down, frozen, cut off) is not asked again for
//! [`BACKOFF`], so a frozen node costs a worker one deadline per back-off, not one per
//! section. The reads of one grant run at once, beside the section's work.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::clock::ScenarioClock;
use crate::checker::truth::{GrantTruth, NodeRead};

/// Budget of one node's read (the run's node deadline is 20 ms).
pub const READ_DEADLINE: Duration = Duration::from_millis(20);

/// How long a node that missed its deadline is left alone.
pub const BACKOFF: Duration = Duration::from_millis(250);

/// One worker's reader; `urls` are the nodes' admin addresses, in node order.
#[derive(Debug)]
pub struct TruthReader {
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    url: String,
    conn: Option<MultiplexedConnection>,
    quiet_until: Option<Instant>,
    /// Whether to ask `PEXPIRETIME` and `TIME` (until the server refuses them).
    precise: bool,
}

/// A node's answer: value, `PTTL`, and where asked, expiry (ms) and `TIME` (µs).
type Answer = (Option<Vec<u8>>, i64, Option<(i64, u64)>);

impl TruthReader {
    /// A reader of `urls` (connects on first read).
    pub fn new(urls: &[String]) -> Self {
        TruthReader {
            nodes: urls
                .iter()
                .map(|url| Node {
                    url: url.clone(),
                    conn: None,
                    quiet_until: None,
                    precise: true,
                })
                .collect(),
        }
    }

    /// What the nodes say of `key` held with `token`, judged for a majority of the nodes.
    pub async fn read(&mut self, key: &[u8], token: &[u8], clock: ScenarioClock) -> GrantTruth {
        let reads =
            futures::future::join_all(self.nodes.iter_mut().map(|n| n.read(key, token, clock)))
                .await;
        GrantTruth::of(&reads)
    }
}

impl Node {
    async fn read(&mut self, key: &[u8], token: &[u8], clock: ScenarioClock) -> NodeRead {
        if self.quiet_until.is_some_and(|t| Instant::now() < t) {
            return NodeRead::Unknown;
        }
        let precise = self.precise;
        let answer = tokio::time::timeout(READ_DEADLINE, async {
            let conn = match &mut self.conn {
                Some(c) => c,
                None => {
                    let client = redis::Client::open(self.url.as_str())?;
                    self.conn
                        .insert(client.get_multiplexed_async_connection().await?)
                }
            };
            if precise {
                let (value, pttl, expiry, (secs, micros)) = redis::pipe()
                    .atomic()
                    .get(key)
                    .pttl(key)
                    .pexpire_time(key)
                    .cmd("TIME")
                    .query_async::<(Option<Vec<u8>>, i64, i64, (u64, u64))>(conn)
                    .await?;
                let now_us = secs.saturating_mul(1_000_000).saturating_add(micros);
                Ok::<Answer, redis::RedisError>((value, pttl, Some((expiry, now_us))))
            } else {
                let (value, pttl) = redis::pipe()
                    .atomic()
                    .get(key)
                    .pttl(key)
                    .query_async::<(Option<Vec<u8>>, i64)>(conn)
                    .await?;
                Ok((value, pttl, None))
            }
        })
        .await;
        let complete = Instant::now();
        let at_us = clock.us(complete);
        match answer {
            Ok(Ok((value, pttl, Some((expiry, now_us))))) => {
                NodeRead::from_precise_answer(value.as_deref(), pttl, expiry, now_us, token, at_us)
            }
            Ok(Ok((value, pttl, None))) => {
                NodeRead::from_answer(value.as_deref(), pttl, token, at_us)
            }
            Ok(Err(e)) => {
                // The server refused the transaction itself (a command it does not know):
                // ask what every server answers from now on.
                if precise && matches!(e.kind(), redis::ErrorKind::Server(_)) {
                    self.precise = false;
                }
                self.give_up(complete)
            }
            Err(_) => self.give_up(complete),
        }
    }

    /// No answer: dropped connection, left alone for [`BACKOFF`].
    fn give_up(&mut self, now: Instant) -> NodeRead {
        self.conn = None;
        self.quiet_until = Some(now + BACKOFF);
        NodeRead::Unknown
    }
}
