//! Watching the lock keys for leaks: every [`EVERY`], each mode's key on every node through
//! the admin addresses (`GET` and `PTTL` in one transaction), from the scenario's zero to its
//! end. What is made of the samples is [`crate::checker::leak`]'s.
//!
//! One task per node, one connection each, opened on first use and dropped on any error;
//! a read has [`READ_DEADLINE`], and a node that missed it is left alone for [`BACKOFF`] —
//! shorter than the TTL, so keys that land when a frozen node thaws are still seen.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use crate::checker::leak::{self, Exempt, KeySample, exempt};
use crate::report::FaultWindow;

/// Between two reads of a node.
pub const EVERY: Duration = Duration::from_millis(25);

/// Budget of one read.
pub const READ_DEADLINE: Duration = Duration::from_millis(20);

/// How long a node that missed its deadline is left alone.
pub const BACKOFF: Duration = Duration::from_millis(50);

/// Samples of `keys` on the nodes at `urls` (admin addresses, in node order) until `until`
/// on `clock` or `stop`; per key, in the order given.
pub async fn watch(
    urls: Vec<String>,
    keys: Vec<String>,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> Vec<Vec<KeySample>> {
    let per_node = futures::future::join_all(
        urls.iter()
            .enumerate()
            .map(|(node, url)| watch_node(node, url, &keys, clock, until, &stop)),
    )
    .await;
    let mut by_key: Vec<Vec<KeySample>> = vec![Vec::new(); keys.len()];
    for node in per_node {
        for (k, s) in node {
            if let Some(v) = by_key.get_mut(k) {
                v.push(s);
            }
        }
    }
    by_key
}

async fn watch_node(
    node: usize,
    url: &str,
    keys: &[String],
    clock: ScenarioClock,
    until: Duration,
    stop: &CancellationToken,
) -> Vec<(usize, KeySample)> {
    let mut out = Vec::new();
    let mut conn: Option<MultiplexedConnection> = None;
    let end = clock.instant_at(until);
    tokio::select! {
        () = tokio::time::sleep_until(clock.instant_at(Duration::ZERO)) => {}
        () = stop.cancelled() => return out,
    }
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Bounded by `end`.
    while Instant::now() < end && !stop.is_cancelled() {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => break,
        }
        let answer = tokio::time::timeout(READ_DEADLINE, read(&mut conn, url, keys)).await;
        let at_us = clock.us(Instant::now());
        match answer {
            Ok(Ok(found)) => {
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
    out
}

type Found = Vec<(Option<Vec<u8>>, i64)>;

async fn read(
    conn: &mut Option<MultiplexedConnection>,
    url: &str,
    keys: &[String],
) -> redis::RedisResult<Found> {
    let c = match conn {
        Some(c) => c,
        None => {
            let client = redis::Client::open(url)?;
            conn.insert(client.get_multiplexed_async_connection().await?)
        }
    };
    let mut pipe = redis::pipe();
    pipe.atomic();
    for k in keys {
        pipe.get(k).pttl(k);
    }
    let flat: Vec<redis::Value> = pipe.query_async(c).await?;
    let mut found = Vec::with_capacity(keys.len());
    let mut it = flat.into_iter();
    while let (Some(v), Some(t)) = (it.next(), it.next()) {
        let value: Option<Vec<u8>> = redis::from_redis_value(v)?;
        let pttl: i64 = redis::from_redis_value(t)?;
        found.push((value, pttl));
    }
    Ok(found)
}

/// The windows of `faults` in which a delete could not be expected to reach a node (see
/// [`exempt`]), in µs; a worker-targeted one covers every node.
pub fn exemptions(faults: &[FaultWindow]) -> Vec<Exempt> {
    let mut out = Vec::new();
    for f in faults {
        let (from_us, to_us) = if exempt(&f.kind) {
            let to_us = f.end_ms.map_or(u64::MAX, |e| e.saturating_mul(1000));
            (f.start_ms.saturating_mul(1000), to_us)
        } else if let (true, Some(end)) = (leak::exempt_at_heal(&f.kind), f.end_ms) {
            let from_us = end.saturating_mul(1000);
            let close = u64::try_from(leak::HEAL_CLOSE.as_micros()).unwrap_or(u64::MAX);
            (from_us, from_us.saturating_add(close))
        } else {
            continue;
        };
        for t in &f.targets {
            let node = match t.strip_prefix('n').map(str::parse::<usize>) {
                Some(Ok(n)) => Some(n),
                // A worker (or anything else): every node.
                _ => None,
            };
            out.push(Exempt {
                node,
                from_us,
                to_us,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemptions_name_nodes_or_every_node() {
        let w = |kind: &str, targets: &[&str], end: Option<u64>| FaultWindow {
            kind: kind.into(),
            detail: String::new(),
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            start_ms: 1_000,
            end_ms: end,
        };
        let e = exemptions(&[
            w("kill", &["n1", "n3"], Some(2_000)),
            w("freeze", &["n0"], Some(2_000)),
            w("client-stall", &["w2"], None),
            w("mute-replies", &["n4"], Some(3_000)),
        ]);
        assert_eq!(
            e,
            vec![
                Exempt {
                    node: Some(1),
                    from_us: 1_000_000,
                    to_us: 2_000_000
                },
                Exempt {
                    node: Some(3),
                    from_us: 1_000_000,
                    to_us: 2_000_000
                },
                Exempt {
                    node: None,
                    from_us: 1_000_000,
                    to_us: u64::MAX
                },
                // Only its heal, which closes the connection.
                Exempt {
                    node: Some(4),
                    from_us: 3_000_000,
                    to_us: 3_100_000
                },
            ]
        );
    }
}
