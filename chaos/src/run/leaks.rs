//! Watching the lock keys for leaks: every [`EVERY`], each mode's key on every node through
//! the admin addresses (`GET` and `PTTL` in one transaction), from the scenario's zero to its
//! end. What is made of the samples is [`crate::checker::leak`]'s.
//!
//! One task per node, one connection each, opened on first use and dropped on any error;
//! a read has [`READ_DEADLINE`], and a node that missed it is left alone for [`BACKOFF`] —
//! shorter than the TTL, so keys that land when a frozen node thaws are still seen.
//!
//! # Stalls the watcher saw
//! A delete the lock sent in time still lands late when the path to the node stalls —
//! its proxy, the container's network, the server or the whole machine held off the CPU
//! (a busy 2-core machine: the suite's other tests, a CPU hog) — and a correct lock's
//! failed attempt then leaves a key standing most of its TTL. Measured with
//! `stress-ng --cpu 6` beside a Docker run: every failed attempt's three delete rounds
//! timed out and 1-8 keys per mode stood past 80 % of their TTL, in scenarios whose faults
//! were elsewhere or had not started. So each node's task also reports when it saw the
//! lock's path to that node stall, as [`super::path_probe`] measures it (a probe sent
//! through the lock's address that had not reached the node [`path_probe::LAG_LIMIT`]
//! later), or itself held off the CPU (a tick more than [`LATE`] after it was due). The
//! leak check excuses keys such a stall could explain and counts them apart
//! ([`crate::checker::leak`]). A stall on a node during a fault on that node is the
//! fault's doing, not the machine's (a frozen node stalls the probe too), and is dropped
//! ([`crate::checker::exemptions::outside_faults`]): faults are judged by their own rules. A read of the direct
//! address that fails is no stall either.
//!
//! A tick on time says nothing of the runner's other threads, and the lock's tasks may
//! be queued on one the kernel keeps waiting: so the watch also asks the kernel when a
//! thread of the runner or of a worker process was held off the CPU ([`cpu_stall`]), a
//! stall of every node, whatever faults ran on some of them.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use super::cpu_stall::{self, Pids};
use super::path_probe::{self, PathProbe};
use crate::checker::keys::{Exempt, KeySample};

/// Between two reads of a node.
pub const EVERY: Duration = Duration::from_millis(25);

/// Budget of one read.
pub const READ_DEADLINE: Duration = Duration::from_millis(20);

/// Budget of one connect to a node's direct address.
pub const CONNECT_BUDGET: Duration = Duration::from_secs(1);

/// How long a node that missed its deadline is left alone.
pub const BACKOFF: Duration = Duration::from_millis(50);

/// A tick this much later than due means the watcher was held off the CPU.
pub const LATE: Duration = Duration::from_millis(20);

/// What the watcher saw.
#[derive(Debug, Default)]
pub struct Watched {
    /// Per key, in the order given: the reads that found it.
    pub samples: Vec<Vec<KeySample>>,
    /// When a node, or the watcher itself, stalled (see the module docs).
    pub stalls: Vec<Exempt>,
}

/// Samples of `keys` on the nodes at `urls` (admin addresses, in node order) until `until`
/// on `clock` or `stop`, and the stalls seen on the way — the nodes' and those of the
/// processes `pids` names (the lock's: see [`cpu_stall`]).
pub async fn watch(
    urls: Vec<String>,
    path_urls: Vec<String>,
    keys: Vec<String>,
    pids: Pids,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> Watched {
    let nodes = futures::future::join_all(urls.iter().enumerate().map(|(node, url)| {
        let path = path_urls.get(node).map(String::as_str);
        watch_node(node, url, path, &keys, clock, until, &stop)
    }));
    let (per_node, cpu) =
        futures::future::join(nodes, cpu_stall::watch(pids, clock, until, stop.clone())).await;
    let mut watched = Watched {
        samples: vec![Vec::new(); keys.len()],
        stalls: cpu,
    };
    for (found, stalls) in per_node {
        for (k, s) in found {
            if let Some(v) = watched.samples.get_mut(k) {
                v.push(s);
            }
        }
        watched.stalls.extend(stalls);
    }
    watched
}

/// The stall windows of one node's reads, in µs on the scenario clock: from the start of
/// a read that failed or came late (or from a tick's due time, when the tick itself came
/// late) to the end of the next read that answered in time.
#[derive(Debug)]
struct Stalls {
    node: usize,
    open_from: Option<u64>,
    windows: Vec<Exempt>,
}

impl Stalls {
    fn new(node: usize) -> Self {
        Self {
            node,
            open_from: None,
            windows: Vec::new(),
        }
    }

    /// Something stalled from `from_us` on.
    fn stalled(&mut self, from_us: u64) {
        let from = self.open_from.map_or(from_us, |f| f.min(from_us));
        self.open_from = Some(from);
    }

    /// A read answered in time at `at_us`: a stall open until then ends there.
    fn answered(&mut self, at_us: u64) {
        if let Some(from_us) = self.open_from.take() {
            self.windows.push(Exempt {
                node: Some(self.node),
                from_us,
                to_us: at_us,
            });
        }
    }

    /// The windows; one still open at the end runs to the end.
    fn finish(mut self) -> Vec<Exempt> {
        self.answered(u64::MAX);
        self.windows
    }
}

async fn watch_node(
    node: usize,
    url: &str,
    path_url: Option<&str>,
    keys: &[String],
    clock: ScenarioClock,
    until: Duration,
    stop: &CancellationToken,
) -> (Vec<(usize, KeySample)>, Vec<Exempt>) {
    let mut out = Vec::new();
    let mut conn: Option<MultiplexedConnection> = None;
    let mut probe = path_url.map(PathProbe::new);
    let end = clock.instant_at(until);
    tokio::select! {
        () = tokio::time::sleep_until(clock.instant_at(Duration::ZERO)) => {}
        () = stop.cancelled() => return (out, Vec::new()),
    }
    let mut stalls = Stalls::new(node);
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Bounded by `end`.
    while Instant::now() < end && !stop.is_cancelled() {
        let due = tokio::select! {
            due = tick.tick() => due,
            () = stop.cancelled() => break,
        };
        if Instant::now().saturating_duration_since(due) > LATE {
            // Held off the CPU: so was everything else on this machine.
            stalls.stalled(clock.us(due));
        }
        if let Some(p) = probe.as_mut() {
            p.send(clock.us(Instant::now())).await;
        }
        // Connecting has a budget of its own: under load it may take longer than a read,
        // and a watcher that had to connect within the read's deadline would stay blind.
        if conn.is_none() {
            match tokio::time::timeout(CONNECT_BUDGET, connect(url)).await {
                Ok(Ok(c)) => conn = Some(c),
                Ok(Err(_)) | Err(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(BACKOFF) => {}
                        () = stop.cancelled() => break,
                    }
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let sent_us = clock.us(Instant::now());
        let answer = tokio::time::timeout(READ_DEADLINE, read(c, keys)).await;
        let at_us = clock.us(Instant::now());
        match answer {
            Ok(Ok((found, probed))) => {
                if let Some(p) = probe.as_mut() {
                    match p.stalled_since(probed.as_deref(), sent_us) {
                        Some(from_us) => stalls.stalled(from_us),
                        None => stalls.answered(at_us),
                    }
                } else {
                    stalls.answered(at_us);
                }
                for (k, (value, pttl_ms)) in found.into_iter().enumerate() {
                    if let Some(v) = value {
                        out.push((
                            k,
                            KeySample {
                                node,
                                at_us,
                                token: String::from_utf8_lossy(&v).into_owned(),
                                pttl_ms,
                            },
                        ));
                    }
                }
            }
            Ok(Err(_)) | Err(_) => {
                conn = None;
                tokio::select! {
                    () = tokio::time::sleep(BACKOFF) => {}
                    () = stop.cancelled() => break,
                }
            }
        }
    }
    (out, stalls.finish())
}

type Found = Vec<(Option<Vec<u8>>, i64)>;

async fn connect(url: &str) -> redis::RedisResult<MultiplexedConnection> {
    redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
}

/// The keys (value and `PTTL` each) and the path probe's value, in one transaction.
async fn read(
    c: &mut MultiplexedConnection,
    keys: &[String],
) -> redis::RedisResult<(Found, Option<String>)> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for k in keys {
        pipe.get(k).pttl(k);
    }
    pipe.get(path_probe::KEY);
    let mut flat: Vec<redis::Value> = pipe.query_async(c).await?;
    let probed: Option<String> = match flat.pop() {
        Some(v) => redis::from_redis_value(v)?,
        None => None,
    };
    let mut found = Vec::with_capacity(keys.len());
    let mut it = flat.into_iter();
    while let (Some(v), Some(t)) = (it.next(), it.next()) {
        let value: Option<Vec<u8>> = redis::from_redis_value(v)?;
        let pttl: i64 = redis::from_redis_value(t)?;
        found.push((value, pttl));
    }
    Ok((found, probed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_runs_from_its_first_sign_to_the_next_answer_in_time() {
        let mut s = Stalls::new(3);
        s.answered(1_000);
        s.stalled(2_000);
        s.stalled(1_500);
        s.stalled(3_000);
        s.answered(4_000);
        s.answered(5_000);
        s.stalled(6_000);
        let w = |from_us, to_us| Exempt {
            node: Some(3),
            from_us,
            to_us,
        };
        assert_eq!(s.finish(), vec![w(1_500, 4_000), w(6_000, u64::MAX)]);
    }
}
