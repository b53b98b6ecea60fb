//! The peer client `rslock` 0.10 under the same scenarios (`chaos run --lock rslock`,
//! `peers` feature).
//!
//! rslock hands out no fencing token, so only the unfenced modes (`none`, `checked`) run
//! on it; the fenced modes are reported as not applicable. Each acquire is one rslock
//! `lock()` with its own retries turned off (one quorum round), so the round's start
//! is known: the grant's `valid_until` is that start plus the validity rslock reports
//! (rslock measures from a moment at or after it, so ours is never later than its own).
//! Waiting is our loop around it, with the same random pause between rounds as the
//! plain lock. rslock counts a node error as a "no" vote, so a failed round is a node
//! fault only when it said its TTL ran out (a slow round).

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::plain::RETRY_JITTER;
use super::{AcquireFailure, Granted};

/// rslock's lock manager and the TTL it grants.
#[derive(Debug, Clone)]
pub struct RslockUnderTest {
    lm: rslock::LockManager,
    ttl: Duration,
}

/// A held rslock lock and what the grant says.
#[derive(Debug)]
pub struct RslockLease {
    lock: rslock::Lock,
    granted: Granted,
}

impl RslockLease {
    /// What the grant says.
    pub fn granted(&self) -> &Granted {
        &self.granted
    }

    /// The key and the owner token in it.
    pub fn owner(&self) -> (&[u8], &[u8]) {
        (&self.lock.resource, &self.lock.val)
    }
}

impl RslockUnderTest {
    /// rslock on `urls`, granting `ttl`, one quorum round per `lock()`.
    ///
    /// # Errors
    /// A message naming the URL that does not parse, or a TTL rslock cannot take.
    pub fn new(urls: &[String], ttl: Duration) -> Result<Self, String> {
        if urls.is_empty() {
            return Err("no lock nodes; pass redis:// URLs".into());
        }
        if ttl < Duration::from_millis(10) {
            return Err(format!(
                "rslock works in whole milliseconds with 2 ms of drift: a TTL of {ttl:?} is too short; use 10ms or more"
            ));
        }
        let clients = urls
            .iter()
            .map(|u| redis::Client::open(u.as_str()).map_err(|e| format!("{u}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut lm = rslock::LockManager::from_clients(clients);
        // One round per call; the pause between rounds is ours.
        lm.set_retry(1, Duration::from_millis(1));
        Ok(RslockUnderTest { lm, ttl })
    }

    /// Acquires `resource`, retrying until `wait` has passed.
    ///
    /// # Errors
    /// [`AcquireFailure`] with the rounds made.
    pub async fn acquire(
        &self,
        resource: &str,
        wait: Duration,
    ) -> Result<RslockLease, AcquireFailure> {
        let deadline = Instant::now() + wait;
        let mut rounds = 0u32;
        // Bounded by `deadline`: every round ends (rslock's calls are bounded by the
        // `redis` crate's response timeout), then we stop or pause.
        loop {
            rounds += 1;
            let started = Instant::now();
            let node_fault = match self.lm.lock(resource.as_bytes(), self.ttl).await {
                Ok(lock) => {
                    let granted_at = Instant::now();
                    let validity = Duration::from_millis(lock.validity_time as u64);
                    return Ok(RslockLease {
                        lock,
                        granted: Granted {
                            fence: None,
                            acquired_at: started,
                            granted_at,
                            valid_until: started + validity,
                            attempts: rounds,
                        },
                    });
                }
                Err(rslock::LockError::Unavailable) => false,
                Err(_) => true,
            };
            if Instant::now() >= deadline {
                return Err(AcquireFailure { rounds, node_fault });
            }
            let pause = rand::rng().random_range(Duration::ZERO..=RETRY_JITTER);
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }

    /// Releases `lease` on every node (rslock's compare-and-delete).
    pub async fn release(&self, lease: RslockLease) {
        self.lm.unlock(&lease.lock).await;
    }
}
