//! The measured cases. Each returns table rows; none asserts a speed.
//!
//! - [`latency`]: acquire+release in a loop on one resource, no contention (healthy, slow
//!   node). Rows `<case>` (acquire+release) and `<case>/acquire`.
//! - [`frozen`]: acquire with one node SIGSTOPped. Each sample runs in its own task that
//!   reports the acquire time at once and then releases, so a release that waits for the
//!   frozen node does not slow the next sample; a sample still unanswered at the cap is a
//!   timeout, and after `max_timeouts` the client's case stops. Tasks (including blocking
//!   threads that cannot be cancelled) are kept and joined by the caller after the thaw.
//! - [`handoff`]: a holder releases at `t`, a waiter that was already waiting acquires at
//!   `t′`; the row is the distribution of `t′ − t`.
//! - [`throughput`]: 64 tasks on 64 resources, acquire+release for a fixed time.
//! - [`fencing_table_end_to_end`]: hook for `chaos fencing-table` (branch `fencing`).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::clients::LockClient;
use super::stats::Samples;
use super::{BenchError, Plan, Row};

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

/// Acquire+release `plan.warmup` times unmeasured, then `samples` times measured, each
/// capped at `plan.cap`. A blocking client cut at the cap keeps its thread until the
/// server answers (nothing is frozen in the cases that use this).
pub async fn latency(
    case: &str,
    clients: &[Client],
    samples: usize,
    warmup: usize,
    plan: &Plan,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for c in clients {
        let resource = format!("bench:{case}:{}", c.name());
        let mut total = Samples::default();
        let mut acquire = Samples::default();
        let mut note = None;
        for i in 0..warmup + samples {
            let r = tokio::time::timeout(plan.cap, cycle(c.as_ref(), &resource, plan.ttl)).await;
            if i < warmup {
                continue;
            }
            match r {
                Ok(Ok((a, t))) => {
                    acquire.push(a);
                    total.push(t);
                }
                Ok(Err(e)) => {
                    total.errors += 1;
                    acquire.errors += 1;
                    note.get_or_insert_with(|| format!("first error: {e}"));
                }
                Err(_) => {
                    total.timeouts += 1;
                    acquire.timeouts += 1;
                    if total.timeouts >= plan.max_timeouts {
                        note = Some(format!(
                            "stopped after {} samples timed out at the {:?} cap",
                            total.timeouts, plan.cap
                        ));
                        break;
                    }
                }
            }
        }
        rows.push(Row::from_samples(case, c.name(), &total, note.clone()));
        rows.push(Row::from_samples(
            &format!("{case}/acquire"),
            c.name(),
            &acquire,
            note,
        ));
    }
    rows
}

/// The frozen-node case for one client: acquire latency only. `pending` receives every
/// sample's task (acquire, report, release); the caller joins it after the thaw.
pub async fn frozen(case: &str, c: &Client, plan: &Plan, pending: &mut JoinSet<()>) -> Row {
    let mut s = Samples::default();
    let mut note = None;
    for i in 0..plan.frozen {
        // A fresh resource per sample: releases still waiting on the frozen node must not
        // hold the next sample's key.
        let resource = format!("bench:{case}:{}:{i}", c.name());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task_client = Arc::clone(c);
        let ttl = plan.ttl;
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
        match tokio::time::timeout(plan.cap, rx).await {
            Ok(Ok(Ok(d))) => s.push(d),
            Ok(Ok(Err(e))) => {
                s.errors += 1;
                note.get_or_insert_with(|| format!("first error: {e}"));
            }
            Ok(Err(_)) => s.errors += 1,
            Err(_) => {
                s.timeouts += 1;
                if s.timeouts >= plan.max_timeouts {
                    note = Some(format!(
                        "timed out at the {:?} cap {} times; stopped (no per-node deadline)",
                        plan.cap, s.timeouts
                    ));
                    break;
                }
            }
        }
    }
    Row::from_samples(case, c.name(), &s, note)
}

/// Hand-off: `holders[i]` and `waiters[i]` are two instances of the same client kind (two
/// processes, in effect). `t` is taken just before the holder's release is called, `t′`
/// when the waiter's acquire returns; the waiter has been waiting for 20–40 ms by then.
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
            if s.timeouts >= plan.max_timeouts {
                note = Some(format!("stopped after {} timeouts", s.timeouts));
                break;
            }
        }
        rows.push(Row::from_samples("hand-off", waiter.name(), &s, note));
    }
    rows
}

/// `plan.tasks` tasks, task `j` on resource `j`, acquire+release until the time is up.
pub async fn throughput(clients: &[Client], plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for c in clients {
        let started = Instant::now();
        let stop_at = started + plan.throughput;
        let mut tasks = JoinSet::new();
        for j in 0..plan.tasks {
            let (c, ttl, cap) = (Arc::clone(c), plan.ttl, plan.cap);
            tasks.spawn(async move {
                let resource = format!("bench:throughput:{}:{j}", c.name());
                let mut s = Samples::default();
                while Instant::now() < stop_at {
                    match tokio::time::timeout(cap, cycle(c.as_ref(), &resource, ttl)).await {
                        Ok(Ok((_, t))) => s.push(t),
                        Ok(Err(_)) => s.errors += 1,
                        Err(_) => s.timeouts += 1,
                    }
                }
                s
            });
        }
        let mut all = Samples::default();
        let mut note = None;
        // Every task stops by `stop_at` plus one capped cycle.
        let bound = plan.throughput + plan.cap * 2;
        let joined = tokio::time::timeout(bound, async {
            while let Some(r) = tasks.join_next().await {
                match r {
                    Ok(s) => {
                        all.latencies.extend(s.latencies);
                        all.errors += s.errors;
                        all.timeouts += s.timeouts;
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
            note = Some("tasks did not stop in time".into());
        }
        all.wall = Some(started.elapsed());
        if all.errors > 0 && note.is_none() {
            note = Some(format!("{} failed cycles", all.errors));
        }
        rows.push(Row::from_samples("throughput", c.name(), &all, note));
    }
    rows
}

/// Note on the fencing-table row until the command is merged.
pub const FENCING_TABLE_UNAVAILABLE: &str = "fencing-table not available in this build";

/// Hook: time `chaos fencing-table` end to end on the bench's cluster. The command is
/// being built on branch `fencing`; wire it here after the merge (run it against
/// `urls`, time the whole run, return one row with `ops_per_s` = fenced writes/s).
pub async fn fencing_table_end_to_end(_urls: &[String], _plan: &Plan) -> Row {
    Row::skipped(
        "fencing-table",
        "chaos fencing-table",
        FENCING_TABLE_UNAVAILABLE,
    )
}
