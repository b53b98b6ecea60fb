//! The measured cases. Each returns table rows; none asserts a speed.
//!
//! - [`Lane`]: one (case, client) row; lanes of a case take turns ([`ROUNDS`]) and stop at
//!   `max_timeouts` or their time budget.
//! - [`latency`]: acquire+release in a loop on one resource, no contention (healthy, slow
//!   node, durable, transport); a lane can also take the process's CPU per operation.
//! - [`acquire_only`]: acquire only (healthy, slow node, frozen node). Each sample runs in its
//!   own task that reports the acquire time at once and then releases, so a release that
//!   waits for the faulty node does not slow or idle the next sample; a sample still
//!   unanswered at the cap is a timeout, and after `max_timeouts` the client's case stops.
//!   Tasks (including blocking threads that cannot be cancelled) are kept and joined by
//!   the caller (after the thaw).
//! - [`handoff`]: a holder releases at `t`, a waiter that was already waiting acquires at
//!   `t′`; the row is the distribution of `t′ − t`.
//! - [`throughput`]: 64 tasks on 64 resources, acquire+release for a fixed time, the
//!   clients taking turns in [`ROUNDS`] slices.
//! - [`fencing_table_end_to_end`]: `chaos fencing-table` on the bench's nodes, timed.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ceiling::{self, Account, NoBound, Servers};
use super::clients::LockClient;
use super::stats::Samples;
use super::{AppendFsync, BenchError, Plan, Row};

/// Shared handle to an adapter.
pub type Client = Arc<dyn LockClient>;

async fn cycle(
    c: &dyn LockClient,
    resource: &str,
    ttl: Duration,
) -> Result<(Duration, Duration), BenchError> {
    let t0 = Instant::now();
    let held = c.acquire(resource, ttl).await?;
    let acquired = t0.elapsed();
    c.release(held).await?;
    Ok((acquired, t0.elapsed()))
}

/// Blocks per lane in [`latency`] and [`acquire_only`]: lanes take turns, so drift in the
/// load of this shared machine hits every lane alike instead of whichever ran last.
pub const ROUNDS: usize = 10;

/// One (case, client) row being measured, in several blocks.
#[derive(Debug)]
pub struct Lane {
    case: String,
    client: Client,
    samples: Samples,
    note: Option<String>,
    spent: Duration,
    stopped: bool,
    next: usize,
    cpu: bool,
}

enum Outcome {
    Done(Duration),
    Failed(String),
    TimedOut,
}

impl Lane {
    /// A lane for `client` in `case`.
    pub fn new(case: &str, client: &Client) -> Lane {
        Lane {
            case: case.to_owned(),
            client: Arc::clone(client),
            samples: Samples::default(),
            note: None,
            spent: Duration::ZERO,
            stopped: false,
            next: 0,
            cpu: false,
        }
    }

    /// Also take this process's CPU time per operation in [`latency`]. Only where nothing
    /// else in the process works while the lane runs — not in the slow-node case, whose
    /// proxy runs in this process and would be billed to the client.
    pub fn with_cpu(mut self) -> Lane {
        self.cpu = true;
        self
    }

    /// The finished row.
    pub fn row(&self) -> Row {
        Row::from_samples(
            &self.case,
            self.client.name(),
            &self.samples,
            self.note.clone(),
        )
    }

    fn resource(&mut self, fresh: bool) -> String {
        self.next += 1;
        if fresh {
            format!("bench:{}:{}:{}", self.case, self.client.name(), self.next)
        } else {
            format!("bench:{}:{}", self.case, self.client.name())
        }
    }

    fn record(&mut self, outcome: Outcome, took: Duration, plan: &Plan) {
        self.spent += took;
        match outcome {
            Outcome::Done(d) => self.samples.push(d),
            Outcome::Failed(e) => {
                self.samples.errors += 1;
                self.note.get_or_insert_with(|| format!("first error: {e}"));
            }
            Outcome::TimedOut => {
                self.samples.timeouts += 1;
                self.note = Some(format!(
                    "{} timed out at the {:?} cap (no per-node deadline)",
                    self.samples.timeouts, plan.cap
                ));
                if self.samples.timeouts >= plan.max_timeouts {
                    self.stopped = true;
                }
            }
        }
        if self.spent >= plan.lane_budget && !self.stopped {
            self.stopped = true;
            let budget = format!("stopped at the {:?} lane budget", plan.lane_budget);
            self.note = Some(match self.note.take() {
                Some(n) => format!("{n}; {budget}"),
                None => budget,
            });
        }
    }
}

/// Acquire+release on one resource per lane, no contention: `warmup` unmeasured cycles per
/// lane, then up to `samples` measured ones in [`ROUNDS`] turns, each capped at
/// `plan.cap`. A blocking client cut at the cap keeps its thread until the server answers
/// (nothing is frozen in the cases that use this). A lane made [`Lane::with_cpu`] adds
/// this process's CPU time over each of its turns (one `getrusage` before and after a
/// turn, not per sample), so its row has a CPU time per operation as throughput rows do.
pub async fn latency(lanes: &mut [Lane], samples: usize, warmup: usize, plan: &Plan) {
    for lane in lanes.iter_mut() {
        let resource = lane.resource(false);
        for _ in 0..warmup {
            let _ =
                tokio::time::timeout(plan.cap, cycle(lane.client.as_ref(), &resource, plan.ttl))
                    .await;
        }
    }
    let per_round = samples.div_ceil(ROUNDS);
    for _ in 0..ROUNDS {
        for lane in lanes.iter_mut() {
            let cpu_before = if lane.cpu {
                super::stats::process_cpu()
            } else {
                None
            };
            for _ in 0..per_round {
                if lane.stopped || lane.samples.len() >= samples {
                    break;
                }
                let resource = format!("bench:{}:{}", lane.case, lane.client.name());
                let t0 = Instant::now();
                let outcome = match tokio::time::timeout(
                    plan.cap,
                    cycle(lane.client.as_ref(), &resource, plan.ttl),
                )
                .await
                {
                    Ok(Ok((_, total))) => Outcome::Done(total),
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(_) => Outcome::TimedOut,
                };
                lane.record(outcome, t0.elapsed(), plan);
            }
            if let (Some(before), Some(after)) = (cpu_before, super::stats::process_cpu()) {
                *lane.samples.cpu.get_or_insert(Duration::ZERO) += after.saturating_sub(before);
            }
        }
    }
}

/// Acquire latency only, releases detached: each sample's task (acquire, report, release)
/// goes to `pending`, which the caller joins (after the thaw, for a frozen node). The
/// next sample starts as soon as this one is acquired, so the loop keeps the rhythm of
/// the healthy case — a release that waits 50 ms for a slow node would otherwise leave
/// every process idle long enough to double the next acquire on this 2-core host (cold
/// wake-ups, measured), which is not what a slow node costs. Up to `samples` per lane in
/// [`ROUNDS`] turns.
pub async fn acquire_only(
    lanes: &mut [Lane],
    samples: usize,
    plan: &Plan,
    pending: &mut JoinSet<()>,
) {
    let per_round = samples.div_ceil(ROUNDS);
    for _ in 0..ROUNDS {
        for lane in lanes.iter_mut() {
            for _ in 0..per_round {
                if lane.stopped || lane.samples.len() >= samples {
                    break;
                }
                // A fresh resource per sample: releases still waiting on a slow or frozen
                // node must not hold the next sample's key.
                let resource = lane.resource(true);
                let (tx, rx) = tokio::sync::oneshot::channel();
                let task_client = Arc::clone(&lane.client);
                let ttl = plan.ttl;
                let t0 = Instant::now();
                pending.spawn(async move {
                    let t0 = Instant::now();
                    match task_client.acquire(&resource, ttl).await {
                        Ok(held) => {
                            let _ = tx.send(Ok(t0.elapsed()));
                            let _ = task_client.release(held).await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
                let outcome = match tokio::time::timeout(plan.cap, rx).await {
                    Ok(Ok(Ok(d))) => Outcome::Done(d),
                    Ok(Ok(Err(e))) => Outcome::Failed(e.to_string()),
                    Ok(Err(_)) => Outcome::Failed("sample task ended without an answer".into()),
                    Err(_) => Outcome::TimedOut,
                };
                lane.record(outcome, t0.elapsed(), plan);
            }
        }
    }
}

/// Hand-off: `holders[i]` and `waiters[i]` are two instances of the same client kind (two
/// processes, in effect). `t` is taken just before the holder's release is called, `t′`
/// when the waiter's acquire returns; the waiter has been waiting for 20–40 ms by then.
/// The row's CPU per operation is this process's CPU time per measured hand-off: the
/// holder's acquire and release and the waiter's wait, acquire and release, together.
pub async fn handoff(holders: &[Client], waiters: &[Client], plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for (holder, waiter) in holders.iter().zip(waiters) {
        if !waiter.waits() {
            continue;
        }
        let resource: Arc<str> = Arc::from(format!("bench:handoff:{}", waiter.name()));
        let mut s = Samples::default();
        let mut note = None;
        for i in 0..plan.handoff_warmup + plan.handoff {
            // Only the measured hand-offs, each whole: holder and waiter run in this
            // process and nothing else does meanwhile.
            let cpu_before = if i >= plan.handoff_warmup {
                super::stats::process_cpu()
            } else {
                None
            };
            let held =
                match tokio::time::timeout(plan.cap, holder.acquire(&resource, plan.ttl)).await {
                    Ok(Ok(h)) => h,
                    Ok(Err(e)) => {
                        s.errors += 1;
                        note.get_or_insert_with(|| format!("holder: {e}"));
                        continue;
                    }
                    Err(_) => {
                        s.timeouts += 1;
                        continue;
                    }
                };
            let (w, res, ttl, cap) = (
                Arc::clone(waiter),
                Arc::clone(&resource),
                plan.ttl,
                plan.cap,
            );
            let waiting = tokio::spawn(async move {
                let r = w.acquire_waiting(&res, ttl, cap).await;
                (r, Instant::now())
            });
            let pause = Duration::from_millis(rand::rng().random_range(20..40));
            tokio::time::sleep(pause).await;
            let t = Instant::now();
            let released = holder.release(held).await;
            // The waiter's own bound is `cap` plus at most one call in flight.
            let outcome = tokio::time::timeout(plan.cap * 2, waiting).await;
            if let Err(e) = released {
                note.get_or_insert_with(|| format!("holder release: {e}"));
            }
            match outcome {
                Ok(Ok((Ok(h), t2))) => {
                    if i >= plan.handoff_warmup {
                        s.push(t2.saturating_duration_since(t));
                    }
                    let _ = waiter.release(h).await;
                }
                Ok(Ok((Err(BenchError::TimedOut(_)), _))) | Err(_) => s.timeouts += 1,
                Ok(Ok((Err(e), _))) => {
                    s.errors += 1;
                    note.get_or_insert_with(|| format!("waiter: {e}"));
                }
                Ok(Err(e)) => {
                    s.errors += 1;
                    note.get_or_insert_with(|| format!("waiter task: {e}"));
                }
            }
            if let (Some(before), Some(after)) = (cpu_before, super::stats::process_cpu()) {
                *s.cpu.get_or_insert(Duration::ZERO) += after.saturating_sub(before);
            }
            if s.timeouts >= plan.max_timeouts {
                note = Some(format!("stopped after {} timeouts", s.timeouts));
                break;
            }
        }
        rows.push(Row::from_samples("hand-off", waiter.name(), &s, note));
    }
    rows
}

/// `plan.tasks` tasks, task `j` on resource `j`, acquire+release until the time is up; the
/// rows are named `case` (`throughput`, `transport/throughput`). Each row carries this
/// process's CPU per operation and, from `servers`' and the machine's CPU time over the
/// same slices, the ceiling ([`super::ceiling`]) (or, in its note, why there is none).
pub async fn throughput(
    case: &str,
    clients: &[Client],
    plan: &Plan,
    servers: &Servers,
) -> Vec<Row> {
    // Clients take turns in ROUNDS slices of the duration, like the latency lanes: one
    // long stretch per client would hand whoever ran during a quiet minute the win.
    let slice = plan.throughput / ROUNDS as u32;
    let mut acc: Vec<(Samples, Option<String>, Account)> =
        vec![(Samples::default(), None, Account::default()); clients.len()];
    for _ in 0..ROUNDS {
        for (c, (all, note, account)) in clients.iter().zip(acc.iter_mut()) {
            throughput_slice(case, c, slice, plan, servers, all, note, account).await;
        }
    }
    clients
        .iter()
        .zip(acc)
        .map(|(c, (all, mut note, account))| {
            if all.errors > 0 && note.is_none() {
                note = Some(match &all.first_error {
                    Some(e) => format!("{} failed cycles; first: {e}", all.errors),
                    None => format!("{} failed cycles", all.errors),
                });
            }
            let bound = match (all.wall, all.cpu) {
                (Some(wall), Some(cpu)) => ceiling::usage(&account, all.len() as u64, wall, cpu)
                    .and_then(|u| ceiling::bound(&u)),
                _ => Err(NoBound::Unmeasured("this process's CPU time".into())),
            };
            Row::from_samples(case, c.name(), &all, note).with_ceiling(bound)
        })
        .collect()
}

/// `plan.tasks` tasks on as many resources for `slice`; adds to `all` (wall included) and
/// the servers' and machine's CPU time over the slice to `account`.
#[allow(clippy::too_many_arguments)]
async fn throughput_slice(
    case: &str,
    c: &Client,
    slice: Duration,
    plan: &Plan,
    servers: &Servers,
    all: &mut Samples,
    note: &mut Option<String>,
    account: &mut Account,
) {
    let servers_before = servers.snapshot();
    let started = Instant::now();
    let cpu_before = super::stats::process_cpu();
    let stop_at = started + slice;
    let mut tasks = JoinSet::new();
    for j in 0..plan.tasks {
        let (c, ttl, cap) = (Arc::clone(c), plan.ttl, plan.cap);
        let resource = format!("bench:{case}:{}:{j}", c.name());
        tasks.spawn(async move {
            let mut s = Samples::default();
            while Instant::now() < stop_at {
                match tokio::time::timeout(cap, cycle(c.as_ref(), &resource, ttl)).await {
                    Ok(Ok((_, t))) => s.push(t),
                    Ok(Err(e)) => {
                        s.errors += 1;
                        s.first_error.get_or_insert_with(|| e.to_string());
                    }
                    Err(_) => s.timeouts += 1,
                }
            }
            s
        });
    }
    // Every task stops by `stop_at` plus one capped cycle.
    let joined = tokio::time::timeout(slice + plan.cap * 2, async {
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(s) => {
                    all.merge(&s);
                }
                Err(e) => {
                    note.get_or_insert_with(|| format!("task: {e}"));
                }
            }
        }
    })
    .await;
    if joined.is_err() {
        tasks.abort_all();
        *note = Some("tasks did not stop in time".into());
    }
    *all.wall.get_or_insert(Duration::ZERO) += started.elapsed();
    // Clients take turns, so what this process used meanwhile is this client's cost (and
    // the runtime's, alike for every client).
    if let (Some(before), Some(after)) = (cpu_before, super::stats::process_cpu()) {
        *all.cpu.get_or_insert(Duration::ZERO) += after.saturating_sub(before);
    }
    account.add(servers_before, servers.snapshot());
}

/// Times `chaos fencing-table` end to end on the bench's nodes: the full table
/// (3 rates × 3 modes × 5 runs × 10,000 sections, all runs in flight at once) or, with
/// `--quick`, one run per setting of at most 1,000 sections. `ops_per_s` is completed
/// sections per second over the whole table; `p50_us` carries the wall time.
pub async fn fencing_table_end_to_end(urls: &[String], plan: &Plan) -> Row {
    use crate::commands::fencing_table::{self, FencingTableArgs};
    use crate::workload::mode::{Mode, Preset};
    let (runs, sections, jobs) = if plan.fencing_table_full {
        (5, 10_000, 45)
    } else {
        (1, 1_000, 9)
    };
    let rates = vec![0.001, 0.01, 0.05];
    let total = rates.len() as f64 * 3.0 * f64::from(runs) * sections as f64;
    let args = FencingTableArgs {
        quick: false,
        runs,
        rates,
        modes: vec![Mode::None, Mode::WriteOnly, Mode::ClaimFirst],
        preset: Preset::Default,
        workers: 8,
        sections,
        seed: Some(20_261_130),
        jobs,
        run_timeout: Duration::from_secs(30 * 60),
        json: false,
        json_out: None,
        pg_url: None,
        nodes: urls.to_vec(),
        flavour: crate::cluster::Flavour::Valkey,
        appendfsync: AppendFsync::Everysec,
        node_timeout: None,
    };
    let started = Instant::now();
    let outcome = fencing_table::run(args).await;
    let wall = started.elapsed();
    let label = format!("{runs} run(s) × 9 settings × {sections} sections");
    match outcome {
        Ok(_) => Row {
            p50_us: Some(wall.as_secs_f64() * 1e6),
            ops_per_s: Some(total / wall.as_secs_f64()),
            samples: 1,
            ..Row::skipped(
                "fencing-table",
                "ours-fenced",
                &format!(
                    "{label}: wall time {:.0} s (p50 column)",
                    wall.as_secs_f64()
                ),
            )
        },
        Err(e) => Row {
            errors: 1,
            ..Row::skipped(
                "fencing-table",
                "ours-fenced",
                &format!("{label}: failed: {e}"),
            )
        },
    }
}
