//! [`Nemesis`]: play a [`Schedule`] on a timeline, record what really happened, always heal.
//!
//! Heal guarantee, by exit path:
//! - normal end, or the `stop` future of [`Nemesis::run_until`] firing (Ctrl-C): everything
//!   still active is healed, awaited, before the report is returned;
//! - an error from a verb: recorded in the report, the run goes on, and the final heal still
//!   runs (a failed apply is healed at once, best effort, in case it half-happened);
//! - the run future dropped mid-fault (cancelled by `select!`/`timeout`, or a panic
//!   unwinding through it): a guard hands the active faults to a heal task spawned on the
//!   current runtime; [`Nemesis::heal_all`] waits for that task and heals anything left.
//!
//! Active faults live in one list that heals *drain*: the runner, the guard and `heal_all`
//! never heal the same fault twice, and a failed heal goes back on the list for the next try.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::apply::{WorkerControl, apply, heal};
use super::error::NemesisError;
use super::fault::{Fault, Target, Targets};
use super::schedule::{Capabilities, Schedule};
use crate::cluster::Cluster;

/// Attempts per heal before it is reported as failed (and left for the next heal pass).
const HEAL_ATTEMPTS: u32 = 3;
/// Pause between heal attempts.
const HEAL_RETRY: Duration = Duration::from_millis(200);

/// A fault in effect on one target.
#[derive(Debug, Clone)]
struct Active {
    index: usize,
    fault: Fault,
    target: Target,
}

/// What happened to one scheduled fault.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// Position in the schedule.
    pub index: usize,
    /// The fault.
    pub fault: Fault,
    /// Its targets.
    pub targets: Targets,
    /// Planned start, ms since the run's start.
    pub planned_start_ms: u64,
    /// Planned heal, ms since the run's start.
    pub planned_end_ms: u64,
    /// When applying finished on the first target (`None`: never applied).
    pub applied_ms: Option<u64>,
    /// When applying finished on each node it succeeded on: `(node index, ms)`.
    pub node_applied_ms: Vec<(usize, u64)>,
    /// When healing finished on the last target (`None`: not healed by the runner).
    pub healed_ms: Option<u64>,
    /// Failures of apply or heal, as messages.
    pub errors: Vec<String>,
}

/// The outcome of a run.
#[derive(Debug, Clone, Serialize)]
pub struct NemesisReport {
    /// The schedule as planned.
    pub schedule: Schedule,
    /// One record per scheduled fault, same order.
    pub records: Vec<FaultRecord>,
    /// The `stop` future fired before the schedule ended.
    pub cancelled: bool,
    /// Heals that still failed in the final pass (the cluster may need `chaos down`).
    pub unhealed: Vec<String>,
}

impl NemesisReport {
    /// Nothing was left unhealed.
    pub fn all_healed(&self) -> bool {
        self.unhealed.is_empty()
    }
}

/// Runs schedules against one cluster.
/// The faults in effect, read from another task ([`Nemesis::active_faults`]): a fault is on
/// the list from just before its verb runs until just before its heal.
#[derive(Debug, Clone)]
pub struct ActiveFaults(Arc<Mutex<Vec<Active>>>);

impl ActiveFaults {
    /// `(schedule index, fault, target)` of every fault in effect now.
    pub fn now(&self) -> Vec<(usize, Fault, Target)> {
        lock(&self.0)
            .iter()
            .map(|a| (a.index, a.fault, a.target))
            .collect()
    }
}

#[derive(Debug)]
pub struct Nemesis<C: Cluster + 'static> {
    cluster: Arc<C>,
    workers: Option<Arc<dyn WorkerControl>>,
    worker_count: usize,
    active: Arc<Mutex<Vec<Active>>>,
    /// Heal task spawned by a dropped run's guard.
    pending: Arc<Mutex<Option<JoinHandle<()>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned list is still the truth about what is active; healing must go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Heal `todo` with retries; returns what could not be healed, with the last error.
async fn heal_list<C: Cluster>(
    cluster: &C,
    workers: Option<&dyn WorkerControl>,
    todo: Vec<Active>,
) -> Vec<(Active, String)> {
    let mut failed = Vec::new();
    for a in todo {
        if let Err(e) = heal_one(cluster, workers, &a).await {
            failed.push((a, e.to_string()));
        }
    }
    failed
}

async fn heal_one<C: Cluster>(
    cluster: &C,
    workers: Option<&dyn WorkerControl>,
    a: &Active,
) -> Result<(), NemesisError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match heal(cluster, workers, &a.fault, a.target).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= HEAL_ATTEMPTS => return Err(e),
            Err(e) => {
                tracing::warn!(fault = %a.fault, target = %a.target, error = %e, "heal failed; retrying");
                tokio::time::sleep(HEAL_RETRY).await;
            }
        }
    }
}

/// Heals whatever is active if the run future is dropped before it finished.
struct Guard<C: Cluster + 'static> {
    cluster: Arc<C>,
    workers: Option<Arc<dyn WorkerControl>>,
    active: Arc<Mutex<Vec<Active>>>,
    pending: Arc<Mutex<Option<JoinHandle<()>>>>,
    armed: bool,
}

impl<C: Cluster + 'static> Drop for Guard<C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let todo: Vec<Active> = lock(&self.active).drain(..).collect();
        if todo.is_empty() {
            return;
        }
        let (cluster, workers, active) = (
            self.cluster.clone(),
            self.workers.clone(),
            self.active.clone(),
        );
        let job = async move {
            let failed = heal_list(&*cluster, workers.as_deref(), todo).await;
            for (a, e) in &failed {
                tracing::error!(fault = %a.fault, target = %a.target, error = %e, "heal after cancellation failed");
            }
            lock(&active).extend(failed.into_iter().map(|(a, _)| a));
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => *lock(&self.pending) = Some(rt.spawn(job)),
            Err(_) => {
                // No runtime (dropped from plain code): the cluster's own resources are tied to
                // the runtime that made them, which is gone; its Drop/`chaos down` cleans up.
                tracing::error!(
                    "nemesis dropped outside a runtime with faults active; run `chaos down`"
                );
            }
        }
    }
}

enum Step {
    Apply,
    Heal,
}

impl<C: Cluster + 'static> Nemesis<C> {
    /// A nemesis for `cluster` (no client-side faults).
    pub fn new(cluster: Arc<C>) -> Self {
        Nemesis {
            cluster,
            workers: None,
            worker_count: 0,
            active: Arc::default(),
            pending: Arc::default(),
        }
    }

    /// Let client-side faults ([`Fault::ClientStall`]) reach `count` workers through `control`.
    pub fn with_workers(mut self, control: Arc<dyn WorkerControl>, count: usize) -> Self {
        self.workers = Some(control);
        self.worker_count = count;
        self
    }

    /// The cluster.
    pub fn cluster(&self) -> &Arc<C> {
        &self.cluster
    }

    /// What this cluster and nemesis can do, for [`Schedule::validate`].
    pub fn capabilities(&self) -> Capabilities {
        Capabilities {
            nodes: self.cluster.nodes(),
            workers: self.worker_count,
            proxy: self.cluster.proxy().is_some(),
            network_partitions: self.cluster.backend_name() == "docker",
            flavour: self.cluster.flavour(),
            worker_control: self.workers.is_some(),
        }
    }

    /// Faults in effect now, as `(schedule index, fault, target)`.
    pub fn active(&self) -> Vec<(usize, Fault, Target)> {
        self.active_faults().now()
    }

    /// A handle that lists the faults in effect, for a task running beside the nemesis.
    pub fn active_faults(&self) -> ActiveFaults {
        ActiveFaults(self.active.clone())
    }

    /// Heal everything active (waiting first for a dropped run's heal task). Returns what
    /// still could not be healed. Safe to call at any time, any number of times.
    pub async fn heal_all(&self) -> Vec<String> {
        let pending = lock(&self.pending).take();
        if let Some(task) = pending {
            // A panicking heal task leaves its faults on the list; healed below.
            let _ = task.await;
        }
        let todo: Vec<Active> = lock(&self.active).drain(..).collect();
        let failed = heal_list(&*self.cluster, self.workers.as_deref(), todo).await;
        let msgs = failed
            .iter()
            .map(|(a, e)| format!("{} on {}: {e}", a.fault, a.target))
            .collect();
        lock(&self.active).extend(failed.into_iter().map(|(a, _)| a));
        msgs
    }

    /// Play `schedule` to its end, then heal. See [`Nemesis::run_until`].
    pub async fn run(&self, schedule: &Schedule) -> Result<NemesisReport, NemesisError> {
        self.run_until(schedule, std::future::pending()).await
    }

    /// Play `schedule` (time 0 = now) until it ends or `stop` completes (e.g. Ctrl-C), then
    /// heal everything still active. Apply/heal failures are recorded, not returned; `Err` only
    /// when the schedule does not fit this cluster (nothing is applied then).
    pub async fn run_until(
        &self,
        schedule: &Schedule,
        stop: impl Future<Output = ()>,
    ) -> Result<NemesisReport, NemesisError> {
        schedule.validate(&self.capabilities())?;
        let mut guard = Guard {
            cluster: self.cluster.clone(),
            workers: self.workers.clone(),
            active: self.active.clone(),
            pending: self.pending.clone(),
            armed: true,
        };
        let mut records: Vec<FaultRecord> = schedule
            .faults
            .iter()
            .enumerate()
            .map(|(index, sf)| FaultRecord {
                index,
                fault: sf.fault,
                targets: sf.targets.clone(),
                planned_start_ms: ms(sf.start),
                planned_end_ms: ms(sf.end),
                applied_ms: None,
                node_applied_ms: Vec::new(),
                healed_ms: None,
                errors: Vec::new(),
            })
            .collect();
        let mut events: Vec<(Duration, u8, usize, Step)> = Vec::new();
        for (i, sf) in schedule.faults.iter().enumerate() {
            events.push((sf.start, 1, i, Step::Apply));
            // Heals sort before applies at the same instant: a node is healed before the next
            // fault hits it.
            events.push((sf.end, 0, i, Step::Heal));
        }
        events.sort_by_key(|(at, order, i, _)| (*at, *order, *i));
        let t0 = Instant::now();
        let mut cancelled = false;
        tokio::pin!(stop);
        for (at, _, i, step) in events {
            tokio::select! {
                biased;
                () = &mut stop => {
                    cancelled = true;
                    break;
                }
                () = tokio::time::sleep_until(t0 + at) => {}
            }
            let sf = &schedule.faults[i];
            match step {
                Step::Apply => self.apply_step(i, sf, t0, &mut records[i]).await,
                Step::Heal => self.heal_step(i, t0, &mut records[i]).await,
            }
        }
        let unhealed = self.heal_all().await;
        guard.armed = false;
        Ok(NemesisReport {
            schedule: schedule.clone(),
            records,
            cancelled,
            unhealed,
        })
    }

    async fn apply_step(
        &self,
        index: usize,
        sf: &super::ScheduledFault,
        t0: Instant,
        rec: &mut FaultRecord,
    ) {
        let window = sf.end.saturating_sub(sf.start);
        for target in sf.targets.iter() {
            // On the list BEFORE the verb runs: if this future is dropped mid-apply, the guard
            // heals a fault that may have half-happened (heals tolerate "was not applied").
            lock(&self.active).push(Active {
                index,
                fault: sf.fault,
                target,
            });
            let r = apply(
                &*self.cluster,
                self.workers.as_deref(),
                &sf.fault,
                target,
                window,
            )
            .await;
            match r {
                Ok(()) => {
                    let at = ms(t0.elapsed());
                    rec.applied_ms.get_or_insert(at);
                    if let Target::Node(node) = target {
                        rec.node_applied_ms.push((node.0, at));
                    }
                    tracing::info!(fault = %sf.fault, %target, "applied");
                }
                Err(e) => {
                    lock(&self.active).retain(|a| !(a.index == index && a.target == target));
                    tracing::warn!(fault = %sf.fault, %target, error = %e, "apply failed");
                    rec.errors.push(format!("apply on {target}: {e}"));
                    // It may have half-happened; undo, best effort.
                    let _ = heal(&*self.cluster, self.workers.as_deref(), &sf.fault, target).await;
                }
            }
        }
    }

    async fn heal_step(&self, index: usize, t0: Instant, rec: &mut FaultRecord) {
        let todo: Vec<Active> = {
            let mut active = lock(&self.active);
            let (mine, rest) = active.drain(..).partition(|a| a.index == index);
            *active = rest;
            mine
        };
        if todo.is_empty() {
            return;
        }
        let failed = heal_list(&*self.cluster, self.workers.as_deref(), todo).await;
        for (a, e) in &failed {
            rec.errors.push(format!("heal on {}: {e}", a.target));
        }
        if failed.is_empty() {
            rec.healed_ms = Some(ms(t0.elapsed()));
        }
        // Left active: the final heal pass tries again.
        lock(&self.active).extend(failed.into_iter().map(|(a, _)| a));
    }
}
