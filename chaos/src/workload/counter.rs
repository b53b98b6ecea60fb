//! One run: W workers, one row, one lock, a fixed number of completed sections.
//!
//! Every worker loops: reserve one of the run's sections, then until that section is done:
//! acquire the lock (bounded wait), read or claim, work, maybe stall, write, release. A
//! write the database rejects (stale token) is counted and the section redone under a fresh
//! lease, so exactly `sections` increments are attempted to completion and
//! `lost = sections − final value`.
//!
//! Each grant is recorded on one clock — tokio's monotonic `Instant`, as offsets from the
//! run's start — so the checker can compare grants of different workers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fenced_redlock::pg::{CounterTable, PgError};
use fenced_redlock::{ConfigError, FenceToken, LockError, Redlock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_postgres::Client;

use super::mode::{Mode, Timing};
use super::section::{SectionError, SectionOutcome, SectionSpec, run_section};
use super::stall::Stall;
use crate::checker::{self, RunReport, Window};
use crate::pg::{self, PgHarnessError};

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct CounterConfig {
    /// Redis/Valkey node URLs.
    pub nodes: Vec<String>,
    /// PostgreSQL connection string.
    pub pg_dsn: String,
    /// Write mode.
    pub mode: Mode,
    /// Concurrent workers (one connection each).
    pub workers: usize,
    /// Sections to complete.
    pub sections: u64,
    /// Probability that a section stalls before writing, in `[0, 1]`.
    pub stall_rate: f64,
    /// TTL, work and stall lengths.
    pub timing: Timing,
    /// How a stall is done.
    pub stall: Stall,
    /// Seed of the run; worker `i` uses a generator derived from it and `i`.
    pub seed: u64,
    /// Counter row id (distinct for runs sharing a table).
    pub row: i32,
    /// Lock resource name (distinct for concurrent runs).
    pub resource: String,
    /// Budget of one waiting acquire.
    pub acquire_wait: Duration,
    /// The whole run must finish within this.
    pub run_timeout: Duration,
    /// The lock's per-node deadline; `None`: the library's default for the TTL.
    pub node_timeout: Option<Duration>,
    /// Where completed sections are counted as they complete (progress of a long table).
    pub done: Option<Arc<AtomicU64>>,
}

/// One grant of the lock, as offsets from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Worker index.
    pub worker: usize,
    /// Fencing token.
    pub fence: Option<FenceToken>,
    /// Start of the acquire attempt that won ([`fenced_redlock::Lease::acquired_at`]).
    pub acquired_at: Duration,
    /// When the holder learned it had the lock (`acquired_at` + attempt time).
    pub granted_at: Duration,
    /// End of validity ([`fenced_redlock::Lease::valid_until`]).
    pub valid_until: Duration,
    /// When the holder started releasing.
    pub released_at: Duration,
}

impl Grant {
    /// When this holder could act under the lock: from the grant to the earlier of its
    /// release and the end of validity. The attempt's start is not used: the lock may still
    /// belong to the previous holder while the winning attempt's commands travel, so the
    /// span from attempt start to grant is not a holding time.
    pub fn window(&self) -> Window {
        Window::new(self.granted_at, self.valid_until.min(self.released_at))
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The numbers.
    pub report: RunReport,
    /// Counter value at the end.
    pub final_value: i64,
    /// Every grant, in no particular order.
    pub grants: Vec<Grant>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Why a run could not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The settings cannot work.
    #[error("invalid run settings: {0}")]
    Invalid(String),
    /// The lock client could not be built.
    #[error("lock settings: {0}")]
    Config(#[from] ConfigError),
    /// The lock could not be taken within its retries.
    #[error("worker {worker}: {source}; are the nodes up and the wait ({wait:?}) long enough?")]
    Lock {
        /// Worker index.
        worker: usize,
        /// Budget of each wait.
        wait: Duration,
        /// The last error.
        #[source]
        source: LockError,
    },
    /// A fenced statement failed.
    #[error("worker {worker}: {source}")]
    Pg {
        /// Worker index.
        worker: usize,
        /// Underlying error.
        #[source]
        source: PgError,
    },
    /// Reaching PostgreSQL failed.
    #[error(transparent)]
    Harness(#[from] PgHarnessError),
    /// The counter row vanished mid-run.
    #[error("counter row {row} is missing; is another run using the same table and row?")]
    NoRow {
        /// The row id.
        row: i32,
    },
    /// The run's time budget ran out.
    #[error("run did not finish within {0:?}; lower --sections or raise the timeout")]
    Timeout(Duration),
    /// A worker task failed to complete.
    #[error("worker task failed: {0}")]
    Join(String),
}

#[derive(Debug)]
struct Ctx {
    cfg: CounterConfig,
    lock: Redlock,
    spec: SectionSpec,
    t0: Instant,
    deadline: Instant,
    reserved: AtomicU64,
    /// Waiting acquires that ended without the lock (contention, slow or unreachable
    /// nodes): counted and retried.
    acquire_failures: AtomicU64,
}

#[derive(Debug, Default)]
struct WorkerStats {
    stalls: u64,
    rejected: u64,
    grants: Vec<Grant>,
}

/// Runs the workload once: resets the row to 0, runs the workers, reads the final value and
/// computes the report.
///
/// # Errors
/// [`RunError`] when settings are invalid or the lock, database or time budget fail.
pub async fn run_counter(cfg: CounterConfig) -> Result<RunOutcome, RunError> {
    validate(&cfg)?;
    let mut builder = Redlock::builder(&cfg.nodes)
        .ttl(cfg.timing.ttl)
        // Own channel for release notifications: concurrent runs do not wake each other.
        .key_prefix(format!("{}:", cfg.resource))
        .fencing(true);
    if let Some(t) = cfg.node_timeout {
        builder = builder.node_timeout(t);
    }
    let lock = builder.build()?;
    let table = CounterTable::default();
    let admin = pg::connect(&cfg.pg_dsn).await?;
    table
        .create_if_missing(&admin)
        .await
        .map_err(|source| RunError::Pg { worker: 0, source })?;
    table
        .insert(&admin, cfg.row, 0)
        .await
        .map_err(|source| RunError::Pg { worker: 0, source })?;
    let mut clients = Vec::with_capacity(cfg.workers);
    for _ in 0..cfg.workers {
        clients.push(pg::connect(&cfg.pg_dsn).await?);
    }

    let t0 = Instant::now();
    let ctx = Arc::new(Ctx {
        deadline: t0 + cfg.run_timeout,
        spec: SectionSpec::new(table, cfg.mode, cfg.row, cfg.timing.work),
        cfg,
        lock,
        t0,
        reserved: AtomicU64::new(0),
        acquire_failures: AtomicU64::new(0),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, client) in clients.into_iter().enumerate() {
        let rng = StdRng::seed_from_u64(worker_seed(ctx.cfg.seed, i));
        tasks.spawn(worker(Arc::clone(&ctx), i, client, rng));
    }
    let mut stats = WorkerStats::default();
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(s)) => {
                stats.stalls += s.stalls;
                stats.rejected += s.rejected;
                stats.grants.extend(s.grants);
            }
            Ok(Err(e)) => {
                // One worker failing dooms the run: stop the others rather than wait for them.
                first_error.get_or_insert(e);
                tasks.abort_all();
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                first_error.get_or_insert(RunError::Join(e.to_string()));
                tasks.abort_all();
            }
        }
    }
    let elapsed = t0.elapsed();
    // Background clean-ups of this run's lock finish before the run ends (bounded).
    let _ = ctx.lock.shutdown().await;
    if let Some(e) = first_error {
        return Err(e);
    }
    let final_value = ctx
        .spec
        .table
        .read(&admin, ctx.cfg.row)
        .await
        .map_err(|source| RunError::Pg { worker: 0, source })?
        .ok_or(RunError::NoRow { row: ctx.cfg.row })?;
    let windows: Vec<Window> = stats.grants.iter().map(Grant::window).collect();
    let report = RunReport {
        sections: ctx.cfg.sections,
        stalls: stats.stalls,
        lost: checker::lost(ctx.cfg.sections, final_value),
        rejected: stats.rejected,
        exclusion_violations: checker::exclusion_violations(&windows),
        acquire_failures: ctx.acquire_failures.load(Ordering::Relaxed),
    };
    Ok(RunOutcome {
        report,
        final_value,
        grants: stats.grants,
        elapsed,
    })
}

fn validate(cfg: &CounterConfig) -> Result<(), RunError> {
    if !(0.0..=1.0).contains(&cfg.stall_rate) {
        return Err(RunError::Invalid(format!(
            "stall rate {} is not a probability; use a number in [0, 1], e.g. 0.05",
            cfg.stall_rate
        )));
    }
    if cfg.workers == 0 {
        return Err(RunError::Invalid("workers = 0; use at least 1".into()));
    }
    if cfg.nodes.is_empty() {
        return Err(RunError::Invalid(
            "no lock nodes; pass redis:// URLs".into(),
        ));
    }
    Ok(())
}

/// Decorrelated per-worker seeds (SplitMix64 of seed and index).
fn worker_seed(seed: u64, worker: usize) -> u64 {
    let mut z = seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn worker(
    ctx: Arc<Ctx>,
    id: usize,
    client: Client,
    mut rng: StdRng,
) -> Result<WorkerStats, RunError> {
    let mut stats = WorkerStats::default();
    // Reserving before working keeps the total at exactly `sections`, however the workers
    // race for the last few.
    while ctx.reserved.fetch_add(1, Ordering::Relaxed) < ctx.cfg.sections {
        loop {
            if Instant::now() >= ctx.deadline {
                return Err(RunError::Timeout(ctx.cfg.run_timeout));
            }
            let lease = acquire(&ctx, id).await?;
            let stall = rng
                .random_bool(ctx.cfg.stall_rate)
                .then(|| ctx.cfg.timing.stall.sample(&mut rng));
            let fence = lease.fence();
            // Set when the stall step runs: a claim refused before it never stalls.
            let stalled = std::sync::atomic::AtomicBool::new(false);
            let valid_until = lease.valid_until();
            let stall_step = async {
                if let Some(length) = stall {
                    stalled.store(true, Ordering::Relaxed);
                    ctx.cfg.stall.stall(length).await;
                }
                // Only `checked` looks at the lease; the table's other modes measure what
                // the resource alone makes of a stale write.
                ctx.cfg.mode != Mode::Checked || Instant::now() < valid_until
            };
            let outcome = run_section(&ctx.spec, &client, fence, stall_step)
                .await
                .map_err(section_err(id));
            let released_at = ctx.offset(Instant::now());
            stats.grants.push(Grant {
                worker: id,
                fence,
                acquired_at: ctx.offset(lease.acquired_at()),
                granted_at: ctx.offset(lease.granted_at()),
                valid_until: ctx.offset(lease.valid_until()),
                released_at,
            });
            // The report is not needed: a key we could not delete expires with the TTL.
            let _ = lease.release().await;
            let outcome = outcome?;
            stats.stalls += u64::from(stalled.load(Ordering::Relaxed));
            match outcome {
                SectionOutcome::Accepted => {
                    if let Some(done) = &ctx.cfg.done {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    break;
                }
                SectionOutcome::Rejected => stats.rejected += 1,
                // Nothing written; the section is redone under a fresh lease.
                SectionOutcome::Abandoned => {}
            }
        }
    }
    Ok(stats)
}

impl Ctx {
    fn offset(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.t0)
    }
}

/// Acquires the run's lock, retrying (and counting) every failure that slow, frozen or
/// unreachable nodes or contention can cause, until the run's deadline. Only a failure no
/// retry can fix (settings, an exhausted fencing counter) ends the run early.
async fn acquire(ctx: &Ctx, worker: usize) -> Result<fenced_redlock::Lease, RunError> {
    let wait = ctx.cfg.acquire_wait;
    loop {
        match ctx.lock.acquire(&ctx.cfg.resource, wait).await {
            Ok(lease) => return Ok(lease),
            Err(
                e @ (LockError::QuorumNotReached { .. }
                | LockError::WaitTimeout { .. }
                | LockError::NoValidityLeft { .. }),
            ) => {
                ctx.acquire_failures.fetch_add(1, Ordering::Relaxed);
                if Instant::now() >= ctx.deadline {
                    return Err(RunError::Lock {
                        worker,
                        wait,
                        source: e,
                    });
                }
                tracing::debug!(worker, error = %e, "acquire failed; retrying");
            }
            Err(source) => {
                return Err(RunError::Lock {
                    worker,
                    wait,
                    source,
                });
            }
        }
    }
}

/// Maps a section failure to the run's error, naming the worker.
fn section_err(worker: usize) -> impl Fn(SectionError) -> RunError {
    move |e| match e {
        SectionError::Pg(source) => RunError::Pg { worker, source },
        SectionError::NoRow { row } => RunError::NoRow { row },
        other => RunError::Invalid(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_node_timeout_given_reaches_the_lock() {
        // Longer than the TTL: the lock's builder refuses it before anything connects.
        let cfg = CounterConfig {
            nodes: vec!["redis://127.0.0.1:1".into()],
            pg_dsn: "host=127.0.0.1 port=1".into(),
            mode: Mode::ClaimFirst,
            workers: 1,
            sections: 1,
            stall_rate: 0.0,
            timing: crate::workload::Preset::Default.timing(),
            stall: Stall::Sleep,
            seed: 1,
            row: 1,
            resource: "node-timeout".into(),
            acquire_wait: Duration::from_millis(10),
            run_timeout: Duration::from_secs(1),
            node_timeout: Some(Duration::from_secs(1)),
            done: None,
        };
        let err = run_counter(cfg)
            .await
            .expect_err("a node timeout above the TTL");
        assert!(matches!(err, RunError::Config(_)), "{err}");
    }

    #[test]
    fn worker_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..64).map(|i| worker_seed(42, i)).collect();
        assert_eq!(seeds.len(), 64);
        assert_ne!(worker_seed(1, 0), worker_seed(2, 0));
    }

    #[test]
    fn window_ends_at_release_or_validity() {
        let ms = Duration::from_millis;
        let g = Grant {
            worker: 0,
            fence: None,
            acquired_at: ms(10),
            granted_at: ms(12),
            valid_until: ms(200),
            released_at: ms(20),
        };
        assert_eq!(g.window(), Window::new(ms(12), ms(20)));
        let stalled = Grant {
            released_at: ms(400),
            ..g
        };
        assert_eq!(stalled.window(), Window::new(ms(12), ms(200)));
    }
}
