//! Reading server truth for a worker: after each grant, the key's value and `PTTL` on every
//! node through the admin addresses (see [`crate::checker::truth`] for what is made of
//! them).
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
}

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
                })
                .collect(),
        }
    }

    /// What the nodes say of `key` held with `token`. The quorum is a majority of the
    /// nodes, whatever the lock under test counts (a mutant's smaller quorum is what the
    /// truth is there to catch).
    pub async fn read(&mut self, key: &[u8], token: &[u8], clock: ScenarioClock) -> GrantTruth {
        let reads =
            futures::future::join_all(self.nodes.iter_mut().map(|n| n.read(key, token, clock)))
                .await;
        GrantTruth::of(&reads, self.nodes.len() / 2 + 1)
    }
}

impl Node {
    async fn read(&mut self, key: &[u8], token: &[u8], clock: ScenarioClock) -> NodeRead {
        if self.quiet_until.is_some_and(|t| Instant::now() < t) {
            return NodeRead::Unknown;
        }
        let answer = tokio::time::timeout(READ_DEADLINE, async {
            let conn = match &mut self.conn {
                Some(c) => c,
                None => {
                    let client = redis::Client::open(self.url.as_str())?;
                    self.conn
                        .insert(client.get_multiplexed_async_connection().await?)
                }
            };
            redis::pipe()
                .atomic()
                .get(key)
                .pttl(key)
                .query_async::<(Option<Vec<u8>>, i64)>(conn)
                .await
        })
        .await;
        let complete = Instant::now();
        match answer {
            Ok(Ok((value, pttl))) => {
                NodeRead::from_answer(value.as_deref(), pttl, token, clock.us(complete))
            }
            Ok(Err(_)) | Err(_) => {
                self.conn = None;
                self.quiet_until = Some(complete + BACKOFF);
                NodeRead::Unknown
            }
        }
    }
}
