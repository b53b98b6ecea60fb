//! `chaos run`: every scenario end to end, with verdicts.
//!
//! # Map
//! - this file: [`RunConfig`], and [`run`] / [`run_until`]: ONE cluster (with the proxy
//!   layer) and ONE PostgreSQL for the whole run, each scenario played on them in turn,
//!   torn down on every exit path (return, error, cancellation; drop guards on panic).
//! - [`suite`]: the default suite, `--scenario` selection, per-scenario seeds.
//! - [`needs`]: what a scenario needs from the settings (TTL, workers, nodes, duration)
//!   to be judged, checked before anything starts.
//! - [`play`]: one scenario — reset the cluster, start 4 modes × W workers, play the
//!   schedule with the nemesis, sample the counters, build the [`ScenarioReport`].
//! - [`chaos_workload`]: the time-bounded fenced counter worker and its [`WorkerEvent`]s.
//! - [`lease_watch`]: a renewed section's watch of its lease (announced validities, the
//!   loss heard and when).
//! - [`renewal_truth`]: server truth after a renewed lease's renewals, at a bounded rate.
//! - [`worker_proc`]: workers as `chaos worker` processes; client stalls as SIGSTOP.
//! - [`pause`]: client pauses inside critical sections (a worker stops itself; the runner
//!   resumes it).
//! - [`retire`]: `late_retire` — worker 0's fence retirements held at the proxies until
//!   its keys expired.
//! - [`split`]: `amnesia-split` — a victim worker with a bare-majority view, and the node
//!   restarted empty on its grants.
//! - [`faults`]: the nemesis's records as the report's fault windows.
//! - [`clock`]: the run's one clock (`CLOCK_MONOTONIC`) across processes.
//! - [`truth`]: server truth read by each worker right after its grants.
//! - [`leaks`]: the runner's watch of every mode's lock key on every node, for keys of
//!   failed attempts left behind.
//! - [`path_probe`]: how late the lock's own path to a node delivers (stalls that excuse
//!   a late clean-up).
//! - [`cpu_stall`]: when a thread of the processes the lock runs in waited for a CPU
//!   (stalls that excuse a late clean-up).
//! - [`record`]: what the runner keeps of a mode while it plays (the evidence's entries,
//!   the history's operations); [`crate::judge`] makes the numbers and the verdict of them.
//! - [`table`]: the text table `chaos run` prints.
//!
//! [`WorkerEvent`]: crate::judge::events::WorkerEvent
//! [`ModeReport`]: crate::report::ModeReport
//! [`Verdict`]: crate::report::Verdict

pub mod chaos_workload;
pub mod clock;
pub mod cpu_stall;
pub mod faults;
pub mod leaks;
pub mod lease_watch;
pub mod needs;
pub mod path_probe;
pub mod pause;
pub mod play;
pub mod quorum_probe;
pub mod record;
pub mod renewal_truth;
pub mod retire;
pub mod split;
pub mod suite;
pub mod table;
pub mod truth;
pub mod worker_proc;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::LocalBoxFuture;
use tokio_util::sync::CancellationToken;

use crate::cluster::official::{self, ImagePlan, ImageSource, Role, UsedImage};
use crate::cluster::pg_container::PgContainer;
use crate::cluster::stack::Stack;
use crate::cluster::{
    AnyCluster, AttachedCluster, BackendKind, Cluster, ClusterSpec, DEFAULT_NODES, Flavour, NodeId,
    ProxyPlan, docker,
};
use crate::lockut::LockKind;
use crate::pg::Pg;
use crate::report::observer::RunObserver;
use crate::report::{ChaosReport, Outcome, RunImage, ScenarioReport, Verdict};
use crate::scenario::Scenario;
use crate::workload::ledger::Ledger;

/// Version of `report.json` this runner writes.
pub const SCHEMA: u32 = 3;
/// Default workers per mode (4 modes × 3 = 12 on a 2-core machine, as many as before the
/// `checked` mode was added).
pub const DEFAULT_WORKERS: usize = 3;
/// Default lease TTL.
pub const DEFAULT_TTL: Duration = Duration::from_millis(200);
/// Work inside each critical section.
pub const DEFAULT_WORK: Duration = Duration::from_millis(5);

/// Counter rows one run may use: 4 modes × up to 250 scenarios (each scenario of a run
/// has its own rows, by its position in the run).
pub const ROWS_PER_RUN: i32 = 1000;

/// Settings of one `chaos run`.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Backend; `None`: docker when an engine answers, else local.
    pub backend: Option<BackendKind>,
    /// Scenarios in order: built-ins (see [`suite::select`]) and files
    /// ([`crate::scenario::file`]).
    pub scenarios: Vec<Scenario>,
    /// Length of each scenario.
    pub duration: Duration,
    /// Seed of everything random (schedules, worker start offsets).
    pub seed: u64,
    /// Server implementation.
    pub flavour: Flavour,
    /// Number of primaries.
    pub nodes: usize,
    /// Workers per mode.
    pub workers: usize,
    /// Lease TTL.
    pub ttl: Duration,
    /// Work per section.
    pub work: Duration,
    /// Existing PostgreSQL; `None`: a private one.
    pub pg_url: Option<String>,
    /// Run id (docker label value); `None`: a fresh random one, so a run never collides
    /// with a cluster left by `chaos up` or another run.
    pub run_id: Option<String>,
    /// The `chaos` binary, for worker processes and the docker proxy container; `None`:
    /// [`crate::cluster::binaries::locate_chaos`].
    pub chaos_bin: Option<PathBuf>,
    /// The command line, recorded in the report.
    pub command: String,
    /// The lock under test.
    pub lock: LockKind,
    /// A deployment to attach to instead of bringing a cluster up (`--stack`); `backend`,
    /// `flavour` and `nodes` are then the stack's.
    pub stack: Option<Stack>,
    /// Docker backend: official or offline images for the nodes, the proxy and PostgreSQL
    /// (`--images`; [`official`]). Default offline: no registry is asked.
    pub images: ImagePlan,
}

impl RunConfig {
    /// The default suite's settings with `seed`.
    pub fn new(scenarios: Vec<Scenario>, seed: u64) -> Self {
        RunConfig {
            backend: None,
            scenarios,
            duration: suite::DEFAULT_DURATION,
            seed,
            flavour: Flavour::Valkey,
            nodes: DEFAULT_NODES,
            workers: DEFAULT_WORKERS,
            ttl: DEFAULT_TTL,
            work: DEFAULT_WORK,
            pg_url: None,
            run_id: None,
            chaos_bin: None,
            command: String::new(),
            lock: LockKind::Ours,
            stack: None,
            images: ImagePlan::default(),
        }
    }
}

/// What every scenario of a run shares.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) cfg: RunConfig,
    pub(crate) cluster: Arc<AnyCluster>,
    pub(crate) worker_urls: Vec<String>,
    /// The nodes' direct addresses (past the proxies), where workers read server truth.
    pub(crate) admin_urls: Vec<String>,
    pub(crate) pg_dsn: String,
    pub(crate) admin: tokio_postgres::Client,
    pub(crate) chaos_bin: Option<PathBuf>,
    pub(crate) run_id: String,
    /// First counter row of this run (rows differ between runs sharing a database): a
    /// multiple of [`ROWS_PER_RUN`].
    pub(crate) row_base: i32,
}

/// Runs `cfg` to the end. See [`run_until`].
pub async fn run(cfg: RunConfig, observer: &dyn RunObserver) -> ChaosReport {
    run_until(cfg, observer, CancellationToken::new()).await
}

/// Runs `cfg` until done or `stop` is cancelled (Ctrl-C): the scenario in progress is
/// stopped (nemesis healed, workers stopped), the rest skipped, and its verdict is
/// [`Outcome::Unknown`]. Never fails: a harness failure becomes `Unknown` verdicts whose
/// reasons say what went wrong. The cluster and PostgreSQL are always removed.
///
/// Boxed, so that its state machine (all that it awaits) is compiled once, in this crate,
/// not again in each crate that awaits it: the `chaos` binary and the test binaries (an
/// unboxed `async fn` is compiled where it is polled; issue 25).
pub fn run_until<'a>(
    cfg: RunConfig,
    observer: &'a dyn RunObserver,
    stop: CancellationToken,
) -> LocalBoxFuture<'a, ChaosReport> {
    Box::pin(run_until_unboxed(cfg, observer, stop))
}

async fn run_until_unboxed(
    cfg: RunConfig,
    observer: &dyn RunObserver,
    stop: CancellationToken,
) -> ChaosReport {
    let run_id = cfg
        .run_id
        .clone()
        .unwrap_or_else(|| format!("run-{:08x}", rand::random::<u32>()));
    let backend = match cfg.backend {
        Some(b) => b,
        // Unused when attaching: no need to ask for an engine.
        None if cfg.stack.is_some() => BackendKind::Local,
        // Official images are containers: no engine is a harness failure, not a local run.
        None if cfg.images.source == ImageSource::Official => BackendKind::Docker,
        None => BackendKind::detect().await,
    };
    let mut report = ChaosReport {
        schema: SCHEMA,
        run_id: run_id.clone(),
        seed: cfg.seed,
        backend: match (&cfg.stack, backend) {
            (Some(_), _) => "attached",
            (None, BackendKind::Docker) => "docker",
            (None, BackendKind::Local) => "local",
        }
        .into(),
        lock: cfg.lock.name().into(),
        flavour: cfg.flavour.name().into(),
        server_version: String::new(),
        nodes: cfg.stack.as_ref().map_or(cfg.nodes, |s| s.nodes.len()),
        images: Vec::new(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: cfg.command.clone(),
        scenarios: Vec::new(),
        verdict: Outcome::Pass,
    };
    tracing::info!(
        run_id,
        backend = report.backend,
        seed = cfg.seed,
        "chaos run starting"
    );
    match setup(&cfg, backend, &run_id, &stop).await {
        Ok((env, pg)) => {
            report.server_version = env.cluster.server_version().to_owned();
            report.flavour = env.cluster.flavour().name().into();
            let pg_image = match &pg {
                Pg::Container(c) => Some(c.image().clone()),
                _ => None,
            };
            report.images = pg_image
                .into_iter()
                .chain(env.cluster.images())
                .map(run_image)
                .collect();
            let total = cfg.scenarios.len();
            for (index, scenario) in cfg.scenarios.iter().enumerate() {
                if stop.is_cancelled() {
                    break;
                }
                let r = play::play(&env, scenario, index, total, observer, &stop).await;
                observer.scenario_finished(&r);
                report.scenarios.push(r);
            }
            if let Err(e) = env.cluster.down().await {
                tracing::error!(error = %e, "cluster teardown failed; run `chaos down`");
                report.verdict = Outcome::Unknown;
            }
            drop(env);
            // pg_ctl stop blocks.
            let _ = tokio::task::spawn_blocking(move || drop(pg)).await;
        }
        Err(reason) => {
            tracing::error!(%reason, "chaos run could not start");
            // A PostgreSQL container whose start was cut short (a signal) is labelled with
            // the run; the cluster's own clean-up never ran if it never came up.
            if backend == BackendKind::Docker
                && cfg.stack.is_none()
                && cfg.images.source != ImageSource::Offline
                && let Err(e) = docker::remove_labelled(Some(&run_id)).await
            {
                tracing::error!(error = %e, "cleanup failed; run `chaos down --run {run_id}`");
            }
            for s in &cfg.scenarios {
                let r = unknown(s, &cfg, reason.clone());
                observer.scenario_finished(&r);
                report.scenarios.push(r);
            }
        }
    }
    if stop.is_cancelled() {
        report.verdict = report.verdict.worst(Outcome::Unknown);
    }
    report.verdict = report
        .scenarios
        .iter()
        .fold(report.verdict, |acc, s| acc.worst(s.verdict.outcome));
    // Nothing played (or nothing could be): nothing was judged.
    if report
        .scenarios
        .iter()
        .all(|s| s.verdict.outcome == Outcome::NotApplicable)
    {
        report.verdict = Outcome::Unknown;
    }
    report
}

/// A scenario that could not run.
fn unknown(s: &Scenario, cfg: &RunConfig, reason: String) -> ScenarioReport {
    ScenarioReport {
        name: s.name.clone(),
        about: s.about.clone(),
        expected: s.expectation.describe().into(),
        seed: suite::scenario_seed(cfg.seed, s),
        duration_ms: u64::try_from(cfg.duration.as_millis()).unwrap_or(u64::MAX),
        clients: String::new(),
        faults: Vec::new(),
        modes: Default::default(),
        verdict: Verdict {
            outcome: Outcome::Unknown,
            reasons: vec![format!("harness: {reason}")],
            failed_modes: Vec::new(),
        },
        timeline: Default::default(),
        history: None,
        quorum_probe: None,
        ops: Vec::new(),
        evidence: None,
        evidence_json: None,
    }
}

/// PostgreSQL, then the cluster; on failure (or `stop`) whatever was started is dropped,
/// which removes it.
async fn setup(
    cfg: &RunConfig,
    backend: BackendKind,
    run_id: &str,
    stop: &CancellationToken,
) -> Result<(Env, Pg), String> {
    if cfg.workers == 0 {
        return Err("--workers 0: use at least 1 worker per mode".into());
    }
    if cfg.scenarios.is_empty() {
        return Err("no scenarios to run".into());
    }
    let pg_url = cfg.pg_url.clone().or_else(|| {
        cfg.stack
            .as_ref()
            .and_then(|s| s.postgres.as_ref().map(|p| p.url.clone()))
    });
    let pg = tokio::select! {
        r = start_pg(cfg, backend, run_id, pg_url) => r?,
        () = stop.cancelled() => return Err("interrupted while starting postgres".into()),
    };
    let chaos_bin = match &cfg.chaos_bin {
        Some(p) => Some(p.clone()),
        None => crate::cluster::binaries::locate_chaos().ok(),
    };
    let mut spec = ClusterSpec::new(cfg.flavour, cfg.nodes).with_proxy(ProxyPlan::Chaos);
    spec.run_id = Some(run_id.to_owned());
    spec.images = cfg.images.clone();
    spec.proxy_bin = chaos_bin.clone();
    let up = async {
        match &cfg.stack {
            Some(stack) => AttachedCluster::attach(stack.clone(), run_id.to_owned())
                .await
                .map(AnyCluster::Attached)
                .map_err(|e| format!("attaching to the stack {:?}: {e}", stack.name)),
            None => AnyCluster::up(backend, spec)
                .await
                .map_err(|e| format!("cluster up: {e}")),
        }
    };
    let cluster = tokio::select! {
        c = up => c?,
        () = stop.cancelled() => return Err("interrupted while bringing the cluster up".into()),
    };
    let cluster = Arc::new(cluster);
    let worker_urls = (0..cluster.nodes())
        .map(|i| cluster.worker_url(NodeId(i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("worker urls: {e}"))?;
    let admin_urls = (0..cluster.nodes())
        .map(|i| cluster.admin_url(NodeId(i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("admin urls: {e}"))?;
    let admin = crate::pg::connect(&pg.dsn())
        .await
        .map_err(|e| e.to_string())?;
    Ledger
        .create_if_missing(&admin)
        .await
        .map_err(|e| format!("creating the ledger tables: {e}"))?;
    let row_base = i32::try_from(suite::mix(cfg.seed, u64::from(rand::random::<u32>())) % 100_000)
        .unwrap_or(0)
        * ROWS_PER_RUN;
    Ok((
        Env {
            cfg: cfg.clone(),
            cluster,
            worker_urls,
            admin_urls,
            pg_dsn: pg.dsn(),
            admin,
            chaos_bin,
            run_id: run_id.to_owned(),
            row_base,
        },
        pg,
    ))
}

/// The run's PostgreSQL: `pg_url` when given; on the docker backend, a container of the
/// official image when `cfg.images` finds one ([`official::resolve`]); else a private server
/// from this host's binaries.
async fn start_pg(
    cfg: &RunConfig,
    backend: BackendKind,
    run_id: &str,
    pg_url: Option<String>,
) -> Result<Pg, String> {
    let given = pg_url.as_deref().is_some_and(|u| !u.trim().is_empty());
    if !given
        && cfg.stack.is_none()
        && backend == BackendKind::Docker
        && cfg.images.source != ImageSource::Offline
    {
        let postgres = |e: crate::cluster::ClusterError| format!("postgres: {e}");
        let d = docker::connect().await.map_err(postgres)?;
        if let Some(image) = official::resolve(&d, &cfg.images, Role::Postgres, cfg.flavour)
            .await
            .map_err(postgres)?
        {
            let c = PgContainer::start(&d, image, run_id)
                .await
                .map_err(postgres)?;
            return Ok(Pg::Container(c));
        }
    }
    tokio::task::spawn_blocking(move || Pg::from_url_or_start(pg_url))
        .await
        .map_err(|e| format!("starting postgres: {e}"))?
        .map_err(|e| format!("postgres: {e}"))
}

/// The report's record of `image`.
fn run_image(image: UsedImage) -> RunImage {
    RunImage {
        role: image.role.name().into(),
        name: image.name,
        id: image.id,
        source: if image.official {
            "official"
        } else {
            "offline"
        }
        .into(),
    }
}
