//! [`Fault::Forget`](super::Fault::Forget): a running node loses the lock keys it holds —
//! evicted under memory pressure (`maxmemory` with an `allkeys-*` policy), deleted by an
//! operator or a stray script — and keeps its fence counters and everything else.
//!
//! On the node's admin address, every key of the run's key space ([`key_space`]) is
//! deleted except fence counters (their names end in the suffix
//! [`fenced_redlock::fence::counter_key`] appends, which no lock key can). `SCAN`, not
//! `KEYS`: an attached deployment is never blocked for long. A key that lands between the
//! scan and the delete may survive: eviction is not atomic either.

use std::time::Duration;

use tokio::time::timeout;

/// Budget of the whole forget on one node (connect, scan, deletes).
const DEADLINE: Duration = Duration::from_secs(2);

/// Keys asked for per `SCAN` call.
const SCAN_COUNT: u32 = 1000;

/// The prefix of every key a run's workload writes (lock keys and fence counters):
/// `chaos:<run id>:`.
pub fn key_space(run_id: &str) -> String {
    format!("chaos:{run_id}:")
}

/// `SCAN MATCH` pattern of everything under `prefix` (glob characters in it escaped).
fn pattern(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('*');
    p
}

/// Whether `key` is a fence counter (kept: the node forgets its leases, not its counters).
fn is_counter(key: &[u8]) -> bool {
    key.ends_with(&fenced_redlock::fence::counter_key(""))
}

/// Deletes the lock keys of run `run_id` on the node at `url` (an admin address); returns
/// how many it deleted.
pub async fn forget(url: &str, run_id: &str) -> Result<u64, String> {
    timeout(DEADLINE, forget_all(url, &pattern(&key_space(run_id))))
        .await
        .map_err(|_| format!("{url}: not done within {DEADLINE:?}"))?
}

async fn forget_all(url: &str, pattern: &str) -> Result<u64, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    // The whole forget has DEADLINE; the client's own limits (500 ms a reply) failed a
    // forget on a busy machine that the deadline allowed: `DEL: timed out`, a harness
    // error that left `slow-client-race` unknown (2026-12-07, Docker, 1 of ~1,900 forgets).
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(DEADLINE))
        .set_response_timeout(Some(DEADLINE));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let (mut cursor, mut deleted) = (0u64, 0u64);
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("{url}: SCAN: {e}"))?;
        let locks: Vec<Vec<u8>> = keys.into_iter().filter(|k| !is_counter(k)).collect();
        if !locks.is_empty() {
            let n: u64 = redis::cmd("DEL")
                .arg(&locks)
                .query_async(&mut conn)
                .await
                .map_err(|e| format!("{url}: DEL: {e}"))?;
            deleted = deleted.saturating_add(n);
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_matches_the_run_and_escapes_globs() {
        assert_eq!(pattern(&key_space("run-1f")), "chaos:run-1f:*");
        assert_eq!(pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
    }

    #[test]
    fn counters_are_kept_lock_keys_are_not() {
        let lock = format!("{}kill-minority:none", key_space("r"));
        assert!(!is_counter(lock.as_bytes()));
        assert!(is_counter(&fenced_redlock::fence::counter_key(&lock)));
    }
}
