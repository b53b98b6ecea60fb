//! Did a clock fault take? After every clock jump, skew and heal, the node's own `TIME` is
//! read against ours: a clock file libfaketime does not read (a wrong path, no
//! `LD_PRELOAD`, an attached stack's typo) would otherwise play a scenario with no fault in
//! it and call it a pass. A clock that did not move as asked is a harness error: the
//! scenario is unknown, never passed.
//!
//! A reading brackets `TIME` between two reads of our wall clock and takes the middle; its
//! error is at most half the round trip, which every tolerance below adds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::{Instant, timeout};

/// How far a node's clock may read from the offset asked for, beyond half the round trip:
/// libfaketime applies a new line on the server's next clock call, exactly; jumps are whole
/// seconds and the skew's start is placed from a 10 ms-resolution process start.
pub const OFFSET_TOLERANCE: Duration = Duration::from_millis(100);

/// How long the rate of a skewed clock is watched (two readings this far apart).
pub const RATE_SPAN: Duration = Duration::from_millis(500);

/// Deadline of one reading (connect and `TIME`).
const READ_DEADLINE: Duration = Duration::from_secs(2);

/// Readings tried before a clock is declared not moved (a busy machine may delay one).
const ATTEMPTS: usize = 3;

/// One bracketed reading of a node's clock.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// Node clock minus ours, seconds.
    pub offset_s: f64,
    /// Round trip of the `TIME` call.
    pub rtt: Duration,
    /// When, on our monotonic clock (the middle of the bracket).
    pub at: Instant,
}

fn wall_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Reads the clock of the node at `url` (an admin address, past any proxy).
pub async fn read(url: &str) -> Result<Reading, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    let mut conn = timeout(READ_DEADLINE, client.get_multiplexed_async_connection())
        .await
        .map_err(|_| format!("{url}: no connection within {READ_DEADLINE:?}"))?
        .map_err(|e| format!("{url}: {e}"))?;
    let (t0, w0) = (Instant::now(), wall_s());
    let (secs, micros): (u64, u64) =
        timeout(READ_DEADLINE, redis::cmd("TIME").query_async(&mut conn))
            .await
            .map_err(|_| format!("{url}: no TIME reply within {READ_DEADLINE:?}"))?
            .map_err(|e| format!("{url}: TIME: {e}"))?;
    let (rtt, w1) = (t0.elapsed(), wall_s());
    let node = secs as f64 + micros as f64 / 1e6;
    Ok(Reading {
        offset_s: node - (w0 + w1) / 2.0,
        rtt,
        at: t0 + rtt / 2,
    })
}

/// The node's `uptime_in_seconds` (`INFO server`), signed: Redis and Valkey count it on
/// the wall clock (`now − start`, both `time()`), so after a step back it reads negative.
pub async fn uptime(url: &str) -> Result<i64, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    let mut conn = timeout(READ_DEADLINE, client.get_multiplexed_async_connection())
        .await
        .map_err(|_| format!("{url}: no connection within {READ_DEADLINE:?}"))?
        .map_err(|e| format!("{url}: {e}"))?;
    let info: String = timeout(
        READ_DEADLINE,
        redis::cmd("INFO").arg("server").query_async(&mut conn),
    )
    .await
    .map_err(|_| format!("{url}: no INFO reply within {READ_DEADLINE:?}"))?
    .map_err(|e| format!("{url}: INFO server: {e}"))?;
    parse_uptime(&info).ok_or_else(|| format!("{url}: INFO server has no uptime_in_seconds"))
}

/// `uptime_in_seconds` of an `INFO server` reply, negative ones included.
fn parse_uptime(info: &str) -> Option<i64> {
    info.lines()
        .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until the node's clock reads `want_s` seconds from ours (± [`OFFSET_TOLERANCE`] and
/// half the round trip), trying three readings; else says what it read.
pub async fn expect_offset(url: &str, want_s: f64) -> Result<Reading, String> {
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        match read(url).await {
            Ok(r) => {
                let slack = OFFSET_TOLERANCE.as_secs_f64() + r.rtt.as_secs_f64() / 2.0;
                if (r.offset_s - want_s).abs() <= slack {
                    return Ok(r);
                }
                last = format!(
                    "its TIME reads {:+.3} s from ours, want {want_s:+.3} s ± {slack:.3} s",
                    r.offset_s
                );
            }
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(last)
}

/// After a skew of `rate_ppm` was applied at `first`: watches the clock for [`RATE_SPAN`]
/// and checks it gains `rate_ppm` (± a fifth of it, and what the two round trips can hide).
pub async fn expect_rate(url: &str, first: Reading, rate_ppm: i64) -> Result<(), String> {
    let want = rate_ppm as f64 / 1e6;
    let mut last = String::new();
    let mut from = first;
    for _ in 0..ATTEMPTS {
        tokio::time::sleep(RATE_SPAN).await;
        let to = match read(url).await {
            Ok(r) => r,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let span = to.at.duration_since(from.at).as_secs_f64();
        let seen = (to.offset_s - from.offset_s) / span;
        let slack = want.abs() / 5.0 + (from.rtt + to.rtt).as_secs_f64() / 2.0 / span;
        if (seen - want).abs() <= slack {
            return Ok(());
        }
        last = format!(
            "its clock gained {:+.0} ppm over {span:.3} s, want {rate_ppm:+} ppm ± {:.0}",
            seen * 1e6,
            slack * 1e6
        );
        from = to;
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uptime_after_a_step_back_reads_negative() {
        let info = "# Server\r\nrun_id:ab12\r\nuptime_in_seconds:-29\r\nuptime_in_days:-1\r\n";
        assert_eq!(parse_uptime(info), Some(-29));
        assert_eq!(parse_uptime("uptime_in_seconds:42\r\n"), Some(42));
        assert_eq!(parse_uptime("# Server\r\n"), None);
    }
}
