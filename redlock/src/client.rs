//! The client: acquire by quorum, with or without waiting.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::{Builder, Settings};
use crate::error::{ConfigError, LockError};
use crate::fence::FenceToken;
use crate::lease::{Lease, NodeOutcome, NodeReport};
use crate::node::Node;
use crate::notify::Notifier;
use crate::quorum::{self, Tally, Until};
use crate::script;
use crate::token::Token;
use crate::validity;

/// Pause before looking again when an attempt made on a release notice failed.
const RECHECK_AFTER_NOTICE: Duration = Duration::from_millis(10);

/// `base` jittered by ±50 %, so waiters that failed together do not retry together.
fn jittered(base: Duration) -> Duration {
    base.mul_f64(rand::rng().random_range(0.5..1.5))
}

/// Connections and notification tasks, shared by clones and by leases.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Arc<Node>>,
    notifier: OnceLock<Arc<Notifier>>,
}

impl Shared {
    pub(crate) fn new(nodes: Vec<Node>) -> Self {
        Shared {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            notifier: OnceLock::new(),
        }
    }
}

/// A Redlock client over N independent primaries. Cheap to clone; clones share
/// connections.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fenced_redlock::Redlock;
///
/// let redlock = Redlock::builder([
///     "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
///     "redis://10.0.0.4:6379", "redis://10.0.0.5:6379",
/// ])
/// .ttl(Duration::from_secs(10))
/// .fencing(true)
/// .build()?;
///
/// let lease = redlock.acquire("invoice:42", Duration::from_secs(5)).await?;
/// let fence = lease.fence().expect("fencing is on");
/// // ... write to the resource, passing `fence` so it can reject stale writers ...
/// lease.release().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
    settings: Arc<Settings>,
}

impl Redlock {
    /// Starts a [`Builder`] for these node URLs (`redis://[user:pass@]host:port[/db]`, or
    /// `rediss://` with the `tls` feature).
    pub fn builder<I, S>(urls: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Builder::new(urls)
    }

    pub(crate) fn from_shared(shared: Shared, settings: Settings) -> Self {
        Redlock {
            shared: Arc::new(shared),
            settings: Arc::new(settings),
        }
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.shared.nodes.len()
    }

    /// Votes needed: `nodes / 2 + 1`.
    pub fn quorum(&self) -> usize {
        validity::quorum(self.nodes())
    }

    /// The `host:port` of each node, in configuration order.
    pub fn node_addrs(&self) -> Vec<String> {
        self.shared
            .nodes
            .iter()
            .map(|n| n.addr().to_owned())
            .collect()
    }

    /// Lease time to live.
    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// Per-node call deadline.
    pub fn node_timeout(&self) -> Duration {
        self.settings.node_timeout
    }

    /// Drift allowance subtracted from every validity.
    pub fn drift(&self) -> Duration {
        self.settings.drift
    }

    /// Whether leases carry fencing tokens.
    pub fn fencing_enabled(&self) -> bool {
        self.settings.fencing
    }

    /// The same client (same connections) with another TTL. A node timeout derived from
    /// the TTL is derived again.
    ///
    /// # Errors
    /// As [`Builder::build`] for the new TTL.
    pub fn with_ttl(&self, ttl: Duration) -> Result<Redlock, ConfigError> {
        Ok(Redlock {
            shared: Arc::clone(&self.shared),
            settings: Arc::new(self.settings.with_ttl(ttl)?),
        })
    }

    /// The same client with fencing switched on or off.
    pub fn with_fencing(&self, on: bool) -> Redlock {
        let mut settings = (*self.settings).clone();
        settings.fencing = on;
        Redlock {
            shared: Arc::clone(&self.shared),
            settings: Arc::new(settings),
        }
    }

    pub(crate) fn key(&self, resource: &str) -> String {
        format!("{}{resource}", self.settings.key_prefix)
    }

    /// One attempt: succeeds only if a majority grants and validity is left.
    ///
    /// # Errors
    /// [`LockError::QuorumNotReached`] (held elsewhere, or nodes failing),
    /// [`LockError::NoValidityLeft`], [`LockError::EmptyResource`],
    /// [`LockError::FenceExhausted`].
    pub async fn try_acquire(&self, resource: &str) -> Result<Lease, LockError> {
        let span = tracing::debug_span!("redlock.try_acquire", resource, nodes = self.nodes());
        self.attempt(resource).instrument(span).await
    }

    /// Retries until acquired or `wait` has passed. Between attempts it waits for a
    /// release to be announced, or a jittered `retry_delay`, whichever comes first.
    /// `wait` of zero makes one attempt.
    ///
    /// # Errors
    /// [`LockError::WaitTimeout`] carrying the last attempt's error, or a
    /// non-retryable error at once.
    pub async fn acquire(&self, resource: &str, wait: Duration) -> Result<Lease, LockError> {
        let span = tracing::debug_span!(
            "redlock.acquire",
            resource,
            wait_ms = wait.as_millis() as u64
        );
        self.acquire_waiting(resource, wait).instrument(span).await
    }

    async fn acquire_waiting(&self, resource: &str, wait: Duration) -> Result<Lease, LockError> {
        let started = Instant::now();
        let deadline = started + wait;
        let key = self.key(resource);
        let releases =
            (self.settings.notify && !wait.is_zero()).then(|| self.notifier().watch(&key));
        let mut attempts = 0u32;
        let mut woken = false;
        loop {
            attempts = attempts.saturating_add(1);
            let err = match self.attempt(resource).await {
                Ok(mut lease) => {
                    lease.attempts = attempts;
                    return Ok(lease);
                }
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => e,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(LockError::WaitTimeout {
                    resource: resource.to_owned(),
                    waited: now - started,
                    attempts,
                    last: Box::new(err),
                });
            }
            // An attempt made on a release notice can reach nodes whose delete has not
            // landed yet, and the notices that followed may have been spent on it; look
            // again shortly instead of waiting a whole retry delay.
            let base = if woken {
                self.settings.retry_delay.min(RECHECK_AFTER_NOTICE)
            } else {
                self.settings.retry_delay
            };
            let pause = jittered(base).min(deadline - now);
            woken = false;
            match &releases {
                Some(watcher) => {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = watcher.released() => woken = true,
                    }
                }
                None => tokio::time::sleep(pause).await,
            }
        }
    }

    fn notifier(&self) -> &Arc<Notifier> {
        self.shared.notifier.get_or_init(|| {
            let clients = self
                .shared
                .nodes
                .iter()
                .map(|n| n.client().clone())
                .collect();
            Arc::new(Notifier::start(clients, self.settings.node_timeout))
        })
    }

    async fn attempt(&self, resource: &str) -> Result<Lease, LockError> {
        if resource.is_empty() {
            return Err(LockError::EmptyResource);
        }
        let nodes = &self.shared.nodes;
        let required = self.quorum();
        let key: Arc<str> = Arc::from(self.key(resource));
        let fence_key: Arc<str> = Arc::from(format!("{key}:fence"));
        let token = Token::random();
        let ttl_ms = self.settings.ttl_ms();
        let fencing = self.settings.fencing;
        let started = Instant::now();

        let votes: Tally<i64> = quorum::fan_out(nodes, required, Until::Decided, |node| {
            let (key, fence_key, token) = (Arc::clone(&key), Arc::clone(&fence_key), token.clone());
            async move {
                node.call(|mut c| async move {
                    if fencing {
                        let fence: i64 = script::ACQUIRE_FENCED
                            .key(&*key)
                            .key(&*fence_key)
                            .arg(token.as_str())
                            .arg(ttl_ms)
                            .invoke_async(&mut c)
                            .await?;
                        Ok((fence >= 0).then_some(fence))
                    } else {
                        let ok: Option<String> = redis::cmd("SET")
                            .arg(&*key)
                            .arg(token.as_str())
                            .arg("NX")
                            .arg("PX")
                            .arg(ttl_ms)
                            .query_async(&mut c)
                            .await?;
                        Ok(ok.map(|_| 0))
                    }
                })
                .await
            }
        })
        .await;

        if !votes.reached() {
            self.cleanup(&key, &token, &votes);
            return Err(votes.quorum_error(resource, nodes));
        }

        let mut fence = None;
        let mut reports = reports(nodes, &votes);
        if fencing {
            let next = match FenceToken::next_after(votes.yes_values()) {
                Ok(t) => t,
                Err(value) => {
                    self.cleanup(&key, &token, &votes);
                    return Err(LockError::FenceExhausted {
                        resource: resource.to_owned(),
                        value,
                    });
                }
            };
            let written: Tally<()> = quorum::fan_out(nodes, required, Until::Decided, |node| {
                let (key, fence_key, token) =
                    (Arc::clone(&key), Arc::clone(&fence_key), token.clone());
                async move {
                    node.call(|mut c| async move {
                        let held: i64 = script::FENCE_WRITE
                            .key(&*key)
                            .key(&*fence_key)
                            .arg(token.as_str())
                            .arg(next.get())
                            .invoke_async(&mut c)
                            .await?;
                        Ok((held == 1).then_some(()))
                    })
                    .await
                }
            })
            .await;
            if !written.reached() {
                self.cleanup(&key, &token, &votes);
                return Err(written.quorum_error(resource, nodes));
            }
            for (report, answer) in reports.iter_mut().zip(&written.answers) {
                if let Some((_, latency)) = answer {
                    report.latency = Some(report.latency.unwrap_or_default() + *latency);
                }
            }
            fence = Some(next);
        }

        let elapsed = started.elapsed();
        let Some(validity) = validity::validity(self.settings.ttl, elapsed, self.settings.drift)
        else {
            self.cleanup(&key, &token, &votes);
            return Err(LockError::NoValidityLeft {
                resource: resource.to_owned(),
                elapsed,
                ttl: self.settings.ttl,
            });
        };
        Ok(Lease::new(
            self.clone(),
            resource.to_owned(),
            key,
            token,
            fence,
            started,
            started + elapsed + validity,
            elapsed,
            reports,
        ))
    }

    /// After a failed attempt: remove our key from every node, including those that did
    /// not answer — their SET may still land, and our delete queues behind it on the same
    /// connection. Runs in the background; the error is returned at once. It announces
    /// nothing: waking the other waiters of a split vote at once would have them collide
    /// again, while their jittered retries spread them out.
    ///
    /// Nodes that refused the `SET NX` hold no key of ours and are skipped: under
    /// contention most votes are refusals, and deleting there would double the cost of
    /// every failed attempt.
    fn cleanup(&self, key: &Arc<str>, token: &Token, votes: &Tally<i64>) {
        let nodes: Vec<Arc<Node>> = self
            .shared
            .nodes
            .iter()
            .zip(&votes.answers)
            .filter(|(_, answer)| !matches!(answer, Some((Ok(None), _))))
            .map(|(node, _)| Arc::clone(node))
            .collect();
        if nodes.is_empty() {
            return;
        }
        let (key, token) = (Arc::clone(key), token.clone());
        tokio::spawn(async move {
            crate::lease::delete_everywhere(&nodes, &key, &token, false).await;
        });
    }
}

fn reports(nodes: &[Arc<Node>], votes: &Tally<i64>) -> Vec<NodeReport> {
    nodes
        .iter()
        .zip(&votes.answers)
        .map(|(node, answer)| {
            let (outcome, latency) = match answer {
                None => (NodeOutcome::NoAnswer, None),
                Some((Ok(Some(_)), l)) => (NodeOutcome::Granted, Some(*l)),
                Some((Ok(None), l)) => (NodeOutcome::Held, Some(*l)),
                Some((Err(e), l)) => (NodeOutcome::Failed(e.clone()), Some(*l)),
            };
            NodeReport {
                addr: node.addr().to_owned(),
                outcome,
                latency,
            }
        })
        .collect()
}
