//! One scenario on the run's shared cluster and database.
//!
//! 1. Reset: proxies reset (enabled, no toxics), FLUSHALL on every node through its admin
//!    URL, every node answering through its proxy; the mode rows of the ledger set to 0.
//! 2. Start 4 modes × W workers, each mode with its own resource, row and lock client. In
//!    process when the scenario has no client-side faults; as `chaos worker` processes
//!    when it has (client stalls are SIGSTOP of those processes; client pauses are the
//!    workers stopping themselves, resumed by [`worker_proc::spawn`]).
//! 3. At t = 0 (a short start-up margin after the workers were started, so all of them and
//!    the nemesis share one zero), play the schedule with [`Nemesis::run_until`], which
//!    heals on every exit path; sample every mode's counter every 250 ms and tell the
//!    observer about once a second.
//! 4. Workers stop starting sections at t = duration; wait for them (bounded), read each
//!    row and its log, and compute each mode's report, the history and the verdict.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Env;
use super::chaos_workload::{DEFAULT_ACQUIRE_WAIT, WorkerEvent, WorkerSpec, run_worker};
use super::clock::{ScenarioClock, monotonic_ns};
use super::faults::{clock_rates, fault_windows, forgets};
use super::leaks;
use super::pause::{PauseBy, PausePlan};
use super::quorum_probe;
use super::record::{FinalRead, ModeRecord};
use super::retire::{self, LateRetire};
use super::split;
use super::suite;
use super::verdict::{Promises, judge_late_retire, judge_quorum_probe, verdict_for};
use super::worker_proc::{self, ProcessControl};
use crate::checker::availability::{self, idle_fault_windows, recovery};
use crate::checker::handoff;
use crate::checker::history::OpKind;
use crate::checker::leak;
use crate::checker::renewal::{self, Bound};
use crate::checker::truth::ClockRates;
use crate::cluster::{Cluster, NodeId, Verb};
use crate::lockut::{LockKind, LockUnderTest, Mutation};
use crate::nemesis::{Nemesis, ScheduledFault};
use crate::report::observer::{Progress, RunObserver};
use crate::report::{FaultWindow, ModeReport, ModeTimeline, Outcome, ScenarioReport, Verdict};
use crate::scenario::{Clients, Expectation, Proxied, Scenario, Work};
use crate::workload::Mode;
use crate::workload::ledger::{Ledger, State};

/// Counter sampling period.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Samples between two observer ticks (≈ 1 s).
const TICK_EVERY_SAMPLES: u32 = 4;
/// Margin between starting workers and t = 0: in-process tasks, and processes (which
/// connect to PostgreSQL and the nodes first; a late one just misses the first moments).
const STARTUP_TASKS: Duration = Duration::from_millis(150);
const STARTUP_PROCESSES: Duration = Duration::from_millis(800);
/// After t = duration, how long workers may take to finish their last section.
const FINISH_GRACE: Duration = Duration::from_secs(10);
/// Bound on the reset before a scenario.
const RESET_WITHIN: Duration = Duration::from_secs(15);
/// Bound on draining the events once every worker has ended (they are all in the channel).
const CONSUMER_WITHIN: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn harness_none<T>(harness: &mut Vec<String>, why: String) -> Option<T> {
    harness.push(why);
    None
}

/// Plays `scenario` (number `index` of `total`); never fails: harness problems become an
/// unknown verdict with reasons.
pub(crate) async fn play(
    env: &Env,
    scenario: &Scenario,
    index: usize,
    total: usize,
    observer: &dyn RunObserver,
    stop: &CancellationToken,
) -> ScenarioReport {
    let cfg = &env.cfg;
    let seed = suite::scenario_seed(cfg.seed, scenario);
    let w = cfg.workers;
    let duration = cfg.duration;
    let schedule = scenario.schedule(duration, env.cluster.nodes(), w, seed);
    let processes = schedule.faults.iter().any(|f| f.fault.targets_workers())
        || (scenario.pause_rate > 0.0 && !scenario.pauses_tasks());
    let mut harness: Vec<String> = Vec::new();
    let mut progress = Progress {
        scenario: scenario.name.clone(),
        index,
        total,
        elapsed: Duration::ZERO,
        duration,
        sections: Mode::ALL
            .iter()
            .filter(|m| runs_on(**m, env.cfg.lock))
            .map(|m| (m.name().to_owned(), 0))
            .collect(),
        active_faults: Vec::new(),
    };
    observer.scenario_started(&progress);
    // Rows by position in the run: distinct for every scenario of it, files included.
    let modes = Mode::ALL.len() as i32;
    let slot = i32::try_from(index).unwrap_or(0) % (super::ROWS_PER_RUN / modes);
    let rows: Vec<i32> = (0..modes)
        .map(|m| env.row_base + slot * modes + m + 1)
        .collect();
    let report = |harness: Vec<String>,
                  faults: Vec<FaultWindow>,
                  modes: BTreeMap<String, ModeReport>,
                  timeline: BTreeMap<String, ModeTimeline>| {
        let verdict = verdict_for(
            scenario.expectation,
            &modes,
            &harness,
            env.cfg.lock.fences(),
            Promises {
                tokens: !scenario.amnesia_split,
                exclusion: env.cfg.lock.guarded() && scenario.within_guards(),
            },
        );
        ScenarioReport {
            name: scenario.name.clone(),
            about: scenario.about.clone(),
            expected: scenario.expectation.describe().into(),
            seed,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            clients: {
                let layout = if processes {
                    "processes"
                } else {
                    scenario.clients.name()
                };
                match scenario.proxied {
                    Proxied::All => layout.into(),
                    p => format!("{layout}, proxied: {}", p.name()),
                }
            },
            faults,
            modes,
            verdict,
            timeline,
            history: None,
            quorum_probe: None,
            ops: Vec::new(),
        }
    };
    let missing = not_applicable(&*env.cluster, env.cfg.lock, scenario, &schedule.faults);
    if !missing.is_empty() {
        let mut r = report(Vec::new(), Vec::new(), BTreeMap::new(), BTreeMap::new());
        r.verdict = Verdict {
            outcome: Outcome::NotApplicable,
            reasons: missing,
            failed_modes: Vec::new(),
        };
        return r;
    }
    if let Err(e) = reset(env, &rows).await {
        harness.push(format!("reset before the scenario: {e}"));
        return report(harness, Vec::new(), BTreeMap::new(), BTreeMap::new());
    }

    let records: Arc<Mutex<Vec<ModeRecord>>> = Arc::new(Mutex::new(
        Mode::ALL.iter().map(|_| ModeRecord::default()).collect(),
    ));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, WorkerEvent)>();
    let (victim_tx, victim_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let consumer = {
        let records = records.clone();
        let split = scenario.amnesia_split;
        tokio::spawn(async move {
            while let Some((m, ev)) = rx.recv().await {
                if split
                    && matches!(
                        ev,
                        WorkerEvent::Acquire {
                            worker: 0,
                            ok: true,
                            ..
                        }
                    )
                {
                    let _ = victim_tx.send(m);
                }
                if let Some(r) = lock(&records).get_mut(m) {
                    r.push(ev);
                }
            }
        })
    };
    let startup = if processes {
        STARTUP_PROCESSES
    } else {
        STARTUP_TASKS
    };
    let clock = ScenarioClock::new(
        monotonic_ns().saturating_add(u64::try_from(startup.as_nanos()).unwrap_or(0)),
    );
    let worker_stop = stop.child_token();
    // Each running mode's lock key, watched on every node for leaks (when the rig can
    // reach the nodes past the proxies).
    let watched: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| runs_on(*m, env.cfg.lock))
        .collect();
    let control = Arc::new(ProcessControl::new(records.clone()));
    let watcher = (!env.admin_urls.is_empty()).then(|| {
        let keys = watched
            .iter()
            .map(|m| mode_lock(env.cfg.lock, scenario, *m).key(&resource(env, scenario, *m)))
            .collect();
        // The lock runs here and in the worker processes.
        let workers = control.clone();
        let pids = Arc::new(move || {
            let mut pids = vec![i32::try_from(std::process::id()).unwrap_or(i32::MAX)];
            pids.extend(workers.live_pids());
            pids
        });
        tokio::spawn(leaks::watch(
            env.admin_urls.clone(),
            env.worker_urls.clone(),
            keys,
            pids,
            clock,
            duration,
            worker_stop.clone(),
        ))
    });
    let mut tasks: JoinSet<()> = JoinSet::new();
    if let Err(e) = start_workers(
        env,
        scenario,
        seed,
        &rows,
        processes,
        clock,
        &control,
        &tx,
        &worker_stop,
        &mut tasks,
    )
    .await
    {
        harness.push(e);
        worker_stop.cancel();
    }
    drop(tx);

    let wiper = scenario.amnesia_split.then(|| {
        tokio::spawn(split::wipe_on_victim_grants(
            env.cluster.clone(),
            victim_rx,
            clock,
            duration,
            worker_stop.clone(),
            scenario.split_clock_step,
            seed,
        ))
    });
    tokio::time::sleep_until(clock.instant_at(Duration::ZERO)).await;
    let mut nemesis = Nemesis::new(env.cluster.clone());
    if processes {
        nemesis = nemesis.with_workers(control.clone(), w);
    }
    let prober = quorum_probe::applies(env.cfg.lock).then(|| {
        tokio::spawn(quorum_probe::run(
            env.worker_urls.clone(),
            nemesis.active_faults(),
            clock,
            duration,
            worker_stop.clone(),
        ))
    });
    let nemesis_t0 = clock.offset(Instant::now());
    let nemesis_run = nemesis.run_until(&schedule, stop.cancelled());
    tokio::pin!(nemesis_run);
    let mut nemesis_result = None;
    let hard_deadline = clock.instant_at(duration + DEFAULT_ACQUIRE_WAIT + FINISH_GRACE);
    let mut sampler = tokio::time::interval(SAMPLE_EVERY);
    let mut samples = 0u32;
    // Bounded: ends when the nemesis and every worker are done, or at the hard deadline.
    loop {
        if nemesis_result.is_some() && tasks.is_empty() {
            break;
        }
        tokio::select! {
            r = &mut nemesis_run, if nemesis_result.is_none() => nemesis_result = Some(r),
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined
                    && !e.is_cancelled()
                {
                    harness.push(format!("a worker task failed: {e}"));
                }
            }
            _ = sampler.tick() => {
                let at = clock.offset(Instant::now());
                for (m, row) in rows.iter().enumerate() {
                    // Completed sections counted before the value is read: each one's write
                    // committed before its completion was recorded, so the value read
                    // after holds all of them, and a run that lost nothing never shows a
                    // loss (read after, a section completing during the read did).
                    let Some(expected) = lock(&records).get(m).map(ModeRecord::sections) else {
                        continue;
                    };
                    if let Ok(Some(State { value, .. })) = Ledger.read(&env.admin, *row).await
                        && let Some(r) = lock(&records).get_mut(m)
                    {
                        r.sample(at, value, expected);
                    }
                }
                samples += 1;
                if samples.is_multiple_of(TICK_EVERY_SAMPLES) {
                    progress.elapsed = at.min(duration);
                    progress.sections = Mode::ALL
                        .iter()
                        .zip(lock(&records).iter())
                        .filter(|(m, _)| runs_on(**m, env.cfg.lock))
                        .map(|(m, r)| (m.name().to_owned(), r.sections()))
                        .collect();
                    progress.active_faults = nemesis
                        .active()
                        .iter()
                        .map(|(_, f, t)| format!("{} {t}", f.name()))
                        .collect();
                    observer.tick(&progress);
                }
            }
            () = tokio::time::sleep_until(hard_deadline) => {
                harness.push(format!(
                    "{} worker(s) still running {:?} after the scenario's end; stopped",
                    tasks.len(),
                    FINISH_GRACE + DEFAULT_ACQUIRE_WAIT
                ));
                break;
            }
        }
    }
    worker_stop.cancel();
    // Whatever is still running is cut off (processes are killed by their guards).
    tasks.shutdown().await;
    let watched_keys = match watcher {
        None => leaks::Watched::default(),
        Some(w) => w.await.unwrap_or_else(|e| {
            harness.push(format!("the key watcher failed: {e}"));
            leaks::Watched::default()
        }),
    };
    let nemesis_report = match nemesis_result {
        Some(r) => r,
        None => nemesis_run.await,
    };
    let mut wiped = Vec::new();
    if let Some(w) = wiper {
        // Ends at `until` or at the cancel above; a restart in progress is bounded by the
        // cluster's own start timeout.
        match w.await {
            Ok((faults, errors)) => {
                wiped = faults;
                harness.extend(errors);
            }
            Err(e) => harness.push(format!("the amnesia trigger failed: {e}")),
        }
    }
    let quorum_probe = match prober {
        None => None,
        Some(p) => match p.await {
            Ok(Ok(probe)) => Some(probe),
            Ok(Err(e)) => harness_none(&mut harness, e),
            Err(e) => harness_none(&mut harness, format!("the quorum probe failed: {e}")),
        },
    };
    let unhealed = nemesis.heal_all().await;
    harness.extend(unhealed.iter().map(|u| format!("left unhealed: {u}")));
    // Every event must be in: a Grant left in the channel would be a grant unchecked.
    match tokio::time::timeout(CONSUMER_WITHIN, consumer).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => harness.push(format!("the event consumer failed: {e}")),
        Err(_) => harness.push(format!(
            "the event consumer did not finish within {CONSUMER_WITHIN:?}: events may be missing"
        )),
    }
    if stop.is_cancelled() {
        harness.push(format!(
            "interrupted at {:.1}s of {:.0}s; partial numbers",
            clock.offset(Instant::now()).as_secs_f64(),
            duration.as_secs_f64()
        ));
    }
    let mut faults = wiped;
    let rates = match &nemesis_report {
        Ok(r) => clock_rates(r, nemesis_t0),
        Err(_) => ClockRates::default(),
    };
    let forgot = match &nemesis_report {
        Ok(r) => forgets(r, nemesis_t0, env.cluster.nodes()),
        Err(_) => Vec::new(),
    };
    let ttl_us = u64::try_from(scenario_ttl(scenario, env.cfg.ttl).as_micros()).unwrap_or(u64::MAX);
    // Every stall the key watcher saw, a forget's included (a forget stalls nothing itself).
    let rig_stalls: Vec<(u64, u64)> = watched_keys
        .stalls
        .iter()
        .map(|s| (s.from_us, s.to_us))
        .collect();
    faults.extend(match nemesis_report {
        Ok(r) => fault_windows(&r, nemesis_t0, processes, &mut harness),
        Err(e) => {
            harness.push(format!("schedule does not fit the cluster: {e}"));
            Vec::new()
        }
    });

    let records = std::mem::take(&mut *lock(&records));
    let mut history = Vec::new();
    let mut modes: BTreeMap<String, ModeReport> = BTreeMap::new();
    let mut timeline: BTreeMap<String, ModeTimeline> = BTreeMap::new();
    for ((mode, row), record) in Mode::ALL.iter().zip(&rows).zip(records) {
        if !runs_on(*mode, env.cfg.lock) {
            continue;
        }
        for f in record.failures() {
            harness.push(format!("{}: {f}", mode.name()));
        }
        if record.finished_workers() < w && !stop.is_cancelled() {
            harness.push(format!(
                "{}: only {} of {w} workers reported their end",
                mode.name(),
                record.finished_workers()
            ));
        }
        // Unread is unknown: never "every increment lost".
        let end = FinalRead::read(&env.admin, *row, clock).await;
        let end = match end {
            Ok(e) if e.state.state.is_some() => Some(e),
            Ok(_) => harness_none(&mut harness, format!("{}: row {row} vanished", mode.name())),
            Err(e) => harness_none(&mut harness, format!("{}: row {row}: {e}", mode.name())),
        };
        let done = record.finish(mode.name(), end, &rates);
        harness.extend(done.anomalies);
        // Late retirements are faults too: worker 0's own requests held at its proxies.
        faults.extend(retire::fault_windows(
            mode.name(),
            &done.history,
            scenario_ttl(scenario, env.cfg.ttl),
        ));
        history.extend(done.history);
        let (mut m, t) = (done.report, done.timeline);
        m.lock = mode_lock(env.cfg.lock, scenario, *mode).name().into();
        m.loss_heard = renewal::loss_heard(
            &done.renewed,
            &forgot,
            &rig_stalls,
            Bound::for_ttl_us(ttl_us),
        );
        // Client pauses are faults too: on the scenario's fault list, beside the scheduled ones.
        let (kind, how) = PauseBy::for_workers(processes).fault();
        faults.extend(t.pauses.iter().map(|p| FaultWindow {
            kind: kind.into(),
            detail: format!("{} w{}: {how}", mode.name(), p.worker),
            targets: vec![format!("w{}", p.worker)],
            start_ms: p.from_ms.0 / 1000,
            end_ms: p.to_ms.map(|e| e.0 / 1000),
        }));
        modes.insert(mode.name().to_owned(), m);
        timeline.insert(mode.name().to_owned(), t);
    }
    let end_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let blocked = availability::blocked(&watched_keys.stalls, &faults, env.cluster.nodes(), end_ms);
    for (name, m) in modes.iter_mut() {
        if let Some(t) = timeline.get(name) {
            m.idle_fault_windows = idle_fault_windows(&faults, t, &blocked);
            m.recovery = recovery(&faults, t, end_ms, env.cluster.nodes(), &blocked);
        }
    }
    // Hand-offs inside one client: only where a mode's workers share one.
    if !processes && scenario.clients == Clients::Shared {
        for (name, m) in modes.iter_mut() {
            m.hand_offs = handoff::hand_offs(&history, name);
            m.take_overs = handoff::take_overs(&history, name);
        }
    }
    let exempt = leaks::exemptions(&faults);
    let stalls = leaks::outside_faults(&watched_keys.stalls, &faults);
    let until_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    for (mode, samples) in watched.iter().zip(&watched_keys.samples) {
        let granted: HashSet<String> = history
            .iter()
            .filter(|op| op.mode == mode.name() && op.f == OpKind::Acquire)
            .filter_map(|op| op.owner.clone())
            .collect();
        if let Some(m) = modes.get_mut(mode.name()) {
            m.leaks = leak::leaks(
                samples,
                &granted,
                &exempt,
                &stalls,
                scenario_ttl(scenario, env.cfg.ttl),
                until_us,
            );
        }
    }
    let mut r = report(harness, faults, modes, timeline);
    judge_quorum_probe(&mut r.verdict, scenario.expectation, quorum_probe.as_ref());
    if scenario.late_retire {
        judge_late_retire(&mut r.verdict, &r.modes);
    }
    r.quorum_probe = quorum_probe;
    r.history = Some(format!("history/{index:03}-{}.jsonl", scenario.name));
    r.ops = history;
    r
}

/// The lock `mode` runs on in `scenario`: the lock under test, except for the canary —
/// `none` in a must-show scenario runs on the rig's plain Redlock, so what proves the rig
/// can see does not depend on the lock under test (a lock safer than Redlock would leave
/// it blind), and a blind rig is never blamed on that lock.
pub fn mode_lock(under_test: LockKind, scenario: &Scenario, mode: Mode) -> LockKind {
    match (scenario.expectation, mode) {
        (Expectation::MustShow(_), Mode::None) => LockKind::Plain(Mutation::None),
        _ => under_test,
    }
}

/// The lock resource of `mode` in `scenario` (also its keys' prefix, for ours).
fn resource(env: &Env, scenario: &Scenario, mode: Mode) -> String {
    // Under the run's key space, which a `forget` fault empties of lock keys.
    format!(
        "{}{}:{}",
        crate::nemesis::forget::key_space(&env.run_id),
        scenario.name,
        mode.name()
    )
}

/// The scenario's lease TTL: `amnesia-split` needs one longer than a node's restart.
pub(crate) fn scenario_ttl(scenario: &Scenario, run_ttl: Duration) -> Duration {
    let ttl = scenario.ttl.unwrap_or(run_ttl);
    if scenario.amnesia_split {
        split::SPLIT_TTL.max(ttl)
    } else {
        ttl
    }
}

/// Starts every worker (tasks or processes) into `tasks`.
#[allow(clippy::too_many_arguments)]
async fn start_workers(
    env: &Env,
    scenario: &Scenario,
    seed: u64,
    rows: &[i32],
    processes: bool,
    clock: ScenarioClock,
    control: &ProcessControl,
    tx: &tokio::sync::mpsc::UnboundedSender<(usize, WorkerEvent)>,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<(), String> {
    let cfg = &env.cfg;
    let ttl = scenario_ttl(scenario, cfg.ttl);
    let (first_urls, other_urls) = views(scenario, &env.worker_urls, &env.admin_urls);
    let first_apart = first_urls != other_urls;
    // One retirement holds worker 0's proxies at a time, across modes.
    let late_retire = match (scenario.late_retire, env.cluster.proxy()) {
        (true, Some(proxy)) => Some(LateRetire::new(
            proxy.clone(),
            (0..env.cluster.nodes())
                .map(|n| env.cluster.proxy_name(NodeId(n)))
                .collect(),
            ttl,
        )),
        _ => None,
    };
    for (m, mode) in Mode::ALL.iter().enumerate() {
        if !runs_on(*mode, cfg.lock) {
            continue;
        }
        let resource = resource(env, scenario, *mode);
        let kind = mode_lock(cfg.lock, scenario, *mode);
        // Shared: one client per mode (and one for worker 0 when it has a view of its own:
        // the amnesia-split victim, or the only proxied worker); per worker: built in the
        // loop. Processes always have their own.
        let shared = !processes && scenario.clients == Clients::Shared;
        // A shared client's waiters wake on release notices in `none` and `checked` and
        // poll in the fenced modes, so both hand-off paths meet the faults (`Clients::Shared`).
        let notify = !shared || matches!(mode, Mode::None | Mode::Checked);
        let build = |urls: &[String]| {
            LockUnderTest::build(kind, urls, ttl, &resource, notify)
                .map_err(|e| format!("lock settings: {e}"))
        };
        let (shared_lock, first_lock) = if shared {
            (Some(build(&other_urls)?), Some(build(&first_urls)?))
        } else {
            (None, None)
        };
        for i in 0..cfg.workers {
            // amnesia-split: worker 0 sees a bare majority and holds to the end of its lease.
            let victim = scenario.amnesia_split && i == 0;
            // Worker 0 with a view of its own has a client of its own.
            let apart = first_apart && i == 0;
            let urls = if i == 0 { &first_urls } else { &other_urls };
            let lock = match (processes, apart, &shared_lock, &first_lock) {
                (true, ..) => None,
                (false, true, _, Some(l)) | (false, false, Some(l), _) => Some(l.clone()),
                (false, ..) => Some(build(urls)?),
            };
            let spec = WorkerSpec {
                worker: i,
                mode: *mode,
                row: rows[m],
                resource: resource.clone(),
                ttl,
                work: match scenario.work {
                    Work::Fixed(d) => d,
                    Work::Run | Work::ToValidity | Work::Renewed => cfg.work,
                },
                work_to_validity: scenario.work == Work::ToValidity || victim,
                renewed: scenario.work == Work::Renewed && !victim,
                acquire_wait: DEFAULT_ACQUIRE_WAIT,
                seed: suite::mix(seed, (m * 1000 + i) as u64),
                until: cfg.duration,
                // Processes stop themselves; the tasks of a shared client sleep.
                pause: (scenario.pause_rate > 0.0).then(|| {
                    PausePlan::for_ttl(scenario.pause_rate, ttl, PauseBy::for_workers(processes))
                }),
                truth_urls: env.admin_urls.clone(),
                late_retire: late_retire.clone().filter(|_| i == 0 && kind.retires()),
            };
            match lock {
                None => {
                    let bin = env.chaos_bin.as_deref().ok_or_else(|| {
                        "client stalls need worker processes, but the chaos binary was not found; \
                         build it (cargo build -p redlock-chaos) or set CHAOS_BIN"
                            .to_owned()
                    })?;
                    let fut = worker_proc::spawn(
                        bin,
                        kind,
                        urls,
                        &env.pg_dsn,
                        &spec,
                        m,
                        clock,
                        control,
                        tx.clone(),
                        stop.clone(),
                    )?;
                    tasks.spawn(fut);
                }
                Some(lock) => {
                    let client = crate::pg::connect(&env.pg_dsn)
                        .await
                        .map_err(|e| e.to_string())?;
                    let (tx, stop) = (tx.clone(), stop.clone());
                    tasks.spawn(async move {
                        tokio::time::sleep_until(clock.instant_at(Duration::ZERO)).await;
                        // No pause plan in process: nothing ever asks to stop.
                        run_worker(&spec, &lock, &client, clock, &stop, &|| {}, |ev| {
                            let _ = tx.send((m, ev));
                        })
                        .await;
                    });
                }
            }
        }
    }
    Ok(())
}

/// Worker 0's URLs of the nodes and every other worker's, from the proxied URLs and the
/// nodes' own: the amnesia-split victim reaches a bare majority; with `proxied =
/// first-worker` only worker 0 goes through the proxies, the others straight to the nodes.
pub(crate) fn views(
    scenario: &Scenario,
    proxied: &[String],
    direct: &[String],
) -> (Vec<String>, Vec<String>) {
    match (scenario.amnesia_split, scenario.proxied) {
        (true, _) => (split::victim_view(proxied), proxied.to_vec()),
        (false, Proxied::FirstWorker) => (proxied.to_vec(), direct.to_vec()),
        (false, _) => (proxied.to_vec(), proxied.to_vec()),
    }
}

/// Why `scenario` cannot be played on `cluster`, one line per fault and node that cannot
/// be applied (empty: it can). Nothing is skipped silently: such a scenario is reported
/// not applicable, never played without its faults.
pub(crate) fn not_applicable<C: Cluster>(
    cluster: &C,
    lock: LockKind,
    scenario: &Scenario,
    faults: &[ScheduledFault],
) -> Vec<String> {
    let mut asks: Vec<(String, Verb, NodeId)> = Vec::new();
    for f in faults {
        if let Some(verb) = f.fault.needs() {
            for n in f.targets.nodes() {
                asks.push((f.fault.name().to_owned(), verb, *n));
            }
        }
    }
    if scenario.proxied == Proxied::FirstWorker && cluster.proxy().is_none() {
        return vec![
            "not applicable: proxied = first-worker: this cluster has no proxies in front of its nodes"
                .into(),
        ];
    }
    if scenario.late_retire && !lock.retires() {
        return vec![format!(
            "not applicable: late_retire retires fence counters, which only our lock does (--lock {} has no retire_fence)",
            lock.name()
        )];
    }
    if scenario.amnesia_split {
        asks.push((
            "amnesia".into(),
            Verb::RestartWipe,
            split::wiped_node(cluster.nodes()),
        ));
    }
    // The step, and the proxy that keeps clients off the node until it is made.
    if scenario.split_clock_step.is_some() {
        for verb in [Verb::Clock, Verb::Proxy] {
            asks.push((
                "clock step after amnesia".into(),
                verb,
                split::wiped_node(cluster.nodes()),
            ));
        }
    }
    let mut out: Vec<String> = asks
        .into_iter()
        .filter_map(|(what, verb, node)| {
            cluster
                .check(verb, node)
                .err()
                .map(|why| format!("not applicable: {what} on {node}: {why}"))
        })
        .collect();
    out.dedup();
    out
}

/// Proxies reset, nodes flushed and answering through their proxies, rows at 0.
async fn reset(env: &Env, rows: &[i32]) -> Result<(), String> {
    let deadline = Instant::now() + RESET_WITHIN;
    // Only this cluster's proxies: an attached Toxiproxy may serve others too.
    if let Some(p) = env.cluster.proxy() {
        for i in 0..env.cluster.nodes() {
            let name = env.cluster.proxy_name(NodeId(i));
            if env.cluster.check(Verb::Proxy, NodeId(i)).is_err() {
                continue;
            }
            p.enable(&name)
                .await
                .map_err(|e| format!("enabling proxy {name}: {e}"))?;
            p.heal(&name)
                .await
                .map_err(|e| format!("removing the toxics of proxy {name}: {e}"))?;
        }
    }
    for i in 0..env.cluster.nodes() {
        let admin = env
            .cluster
            .admin_url(NodeId(i))
            .map_err(|e| e.to_string())?;
        retry(&admin, "FLUSHALL", deadline).await?;
    }
    for url in &env.worker_urls {
        retry(url, "PING", deadline).await?;
    }
    for row in rows {
        Ledger
            .reset(&env.admin, *row)
            .await
            .map_err(|e| format!("resetting row {row}: {e}"))?;
    }
    Ok(())
}

/// `command` on `url` until it succeeds or `deadline` passes.
async fn retry(url: &str, command: &str, deadline: Instant) -> Result<(), String> {
    let mut last = String::new();
    // Bounded by the deadline.
    while Instant::now() < deadline {
        match redis_cmd(url, command).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("{command} on {url}: {last}"))
}

async fn redis_cmd(url: &str, command: &str) -> Result<(), String> {
    let fut = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        redis::cmd(command)
            .query_async::<redis::Value>(&mut conn)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(Duration::from_secs(2), fut)
        .await
        .unwrap_or_else(|_| Err("timed out after 2s".into()))
}

/// Whether `mode` runs on `lock`: the fenced modes need fencing tokens.
fn runs_on(mode: Mode, lock: LockKind) -> bool {
    lock.fences() || !mode.is_fenced()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::find;

    fn urls(port: u16) -> Vec<String> {
        (0..5)
            .map(|i| format!("redis://127.0.0.1:{}/", port + i))
            .collect()
    }

    #[test]
    fn only_worker_0_goes_through_the_proxies_when_a_scenario_says_so() {
        let (proxied, direct) = (urls(7000), urls(6000));
        let mut s = find("latency").expect("latency").clone();
        assert_eq!(
            views(&s, &proxied, &direct),
            (proxied.clone(), proxied.clone())
        );
        s.proxied = Proxied::FirstWorker;
        assert_eq!(
            views(&s, &proxied, &direct),
            (proxied.clone(), direct.clone())
        );
        // The amnesia-split victim reaches a bare majority through the proxies.
        let split = find("amnesia-split").expect("amnesia-split");
        let (first, others) = views(split, &proxied, &direct);
        assert_eq!(others, proxied);
        assert_eq!(first[..3], proxied[..3]);
        assert!(
            first[3..]
                .iter()
                .all(|u| !proxied.contains(u) && !direct.contains(u))
        );
    }

    #[test]
    fn a_scenario_ttl_replaces_the_runs() {
        let run = Duration::from_millis(200);
        let mut s = find("latency").expect("latency").clone();
        assert_eq!(scenario_ttl(&s, run), run);
        s.ttl = Some(Duration::from_secs(1));
        assert_eq!(scenario_ttl(&s, run), Duration::from_secs(1));
        // amnesia-split keeps its floor.
        let mut split = find("amnesia-split").expect("amnesia-split").clone();
        split.ttl = Some(Duration::from_secs(1));
        assert_eq!(scenario_ttl(&split, run), split::SPLIT_TTL);
    }
}
