//! `chaos fencing-table`: runs every stall rate × mode × run and prints the table.
//!
//! Lock nodes come from `--nodes` / `REDLOCK_NODES`, else five local primaries are started
//! (cluster module, local backend) and removed afterwards. PostgreSQL comes from
//! `--pg-url` / `PG_DSN`, else a private server is started and removed afterwards.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use crate::bench::AppendFsync;
use crate::cluster::{Cluster, ClusterSpec, DEFAULT_NODES, Flavour, LocalCluster, NodeId};
use crate::pg::Pg;
use crate::report::meter::Meter;
use crate::workload::mode::{Mode, Preset};
use crate::workload::table::{self, TableConfig};

/// Sections per run with `--quick`.
pub const QUICK_SECTIONS: u64 = 1_000;

/// Arguments of `chaos fencing-table`.
#[derive(Debug, Args)]
pub struct FencingTableArgs {
    /// CI size: at most 1,000 sections per run.
    #[arg(long)]
    pub quick: bool,
    /// Runs per stall rate and mode.
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Stall probabilities, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.001,0.01,0.05")]
    pub rates: Vec<f64>,
    /// Modes, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,write_only,claim_first"
    )]
    pub modes: Vec<Mode>,
    /// Timings: `default` (5 ms work, 300 ms stalls) or `overlap` (100 ms work, 100-300 ms stalls).
    #[arg(long, value_enum, default_value_t = Preset::Default)]
    pub preset: Preset,
    /// Workers per run.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Completed sections per run.
    #[arg(long, default_value_t = 10_000)]
    pub sections: u64,
    /// Seed (random when not given; printed so the run can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs in flight at once (each holds `workers` Postgres connections).
    #[arg(long, default_value_t = 12)]
    pub jobs: usize,
    /// Budget of each run.
    #[arg(long, value_parser = super::parse_duration, default_value = "30m")]
    pub run_timeout: Duration,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Existing PostgreSQL (DSN or URL); default: start a private one.
    #[arg(long, env = "PG_DSN")]
    pub pg_url: Option<String>,
    /// Lock nodes, comma-separated redis:// URLs; default: start five local primaries.
    #[arg(long, env = "REDLOCK_NODES", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Server for the local primaries.
    #[arg(long, value_enum, default_value_t = Flavour::Redis)]
    pub flavour: Flavour,
    /// AOF fsync policy of the local primaries (not applied to `--nodes`). The table has
    /// no restarts, so durability does not enter its results; with `always`, five nodes
    /// on one disk queue an fsync behind every write (measured: 6.5 % of all CPU samples
    /// in the servers' virtio disk kicks).
    #[arg(long, value_enum, default_value_t = AppendFsync::Everysec)]
    pub appendfsync: AppendFsync,
    /// The lock's per-node deadline (e.g. `5ms`); default: the library's, from the TTL
    /// (`ttl/10` = 20 ms for the presets' 200 ms).
    #[arg(long, value_parser = super::parse_duration)]
    pub node_timeout: Option<Duration>,
}

/// What `chaos fencing-table` produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The rendered table, with the seed and wall time.
    pub text: String,
    /// Safety findings (see [`table::TableResult::safety_failures`]); the command exits 1 when
    /// there are any.
    pub safety_failures: Vec<String>,
}

/// Runs the command; returns the rendered table and its safety findings.
///
/// # Errors
/// A message saying what failed and what to change.
pub async fn run(args: FencingTableArgs) -> Result<Outcome, String> {
    // Ctrl-C is ours from the start: its default action would end the process at once and
    // leave the servers (in process groups of their own) and PostgreSQL running.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| format!("listening for Ctrl-C: {e}"))?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let sections = if args.quick {
        args.sections.min(QUICK_SECTIONS)
    } else {
        args.sections
    };
    let pg_url = args.pg_url.clone();
    let owned_pg = pg_url.as_deref().is_none_or(|u| u.trim().is_empty());
    // Each run in flight holds one connection per worker plus its own.
    if owned_pg
        && args.jobs.saturating_mul(args.workers + 1) + 10 > crate::pg::MAX_CONNECTIONS as usize
    {
        return Err(format!(
            "--jobs {} × (--workers {} + 1) needs more than the {} connections the private postgres allows; lower --jobs",
            args.jobs,
            args.workers,
            crate::pg::MAX_CONNECTIONS
        ));
    }
    let pg = tokio::task::spawn_blocking(move || Pg::from_url_or_start(pg_url))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let mut cluster = None;
    let nodes = if args.nodes.is_empty() {
        let c =
            LocalCluster::up(ClusterSpec::new(args.flavour, DEFAULT_NODES).without_clock_faults())
                .await
                .map_err(|e| format!("starting local primaries: {e}"))?;
        let urls = (0..c.nodes())
            .map(|i| c.worker_url(NodeId(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        cluster = Some(c);
        if args.appendfsync == AppendFsync::Everysec {
            for url in &urls {
                crate::bench::set_appendfsync(url, args.appendfsync)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        urls
    } else {
        args.nodes.clone()
    };
    eprintln!(
        "fencing-table: seed {seed}, {} rates × {} modes × {} runs, {sections} sections, {} workers, preset {}, {} jobs, appendfsync {}, node deadline {}",
        args.rates.len(),
        args.modes.len(),
        args.runs,
        args.workers,
        args.preset.name(),
        args.jobs,
        if args.nodes.is_empty() {
            args.appendfsync.as_str()
        } else {
            "as configured"
        },
        args.node_timeout.map_or_else(
            || "default (ttl/10)".to_owned(),
            |t| humantime::format_duration(t).to_string()
        )
    );
    let cfg = TableConfig {
        nodes,
        pg_dsn: pg.dsn(),
        rates: args.rates.clone(),
        modes: args.modes.clone(),
        runs: args.runs,
        preset: args.preset,
        workers: args.workers,
        sections,
        seed,
        jobs: args.jobs,
        run_timeout: args.run_timeout,
        node_timeout: args.node_timeout,
        done: None,
    };
    let runs = (cfg.rates.len() * cfg.modes.len()) as u64 * u64::from(cfg.runs);
    // Sections complete all the time while runs finish rarely (all at once near the end
    // when every run is in flight): the meter counts sections.
    let meter = Arc::new(Meter::start(
        "fencing-table",
        "sections",
        runs.saturating_mul(sections),
    ));
    let cfg = TableConfig {
        done: Some(meter.counter()),
        ..cfg
    };
    let started = Instant::now();
    let cpu_before = crate::bench::stats::process_cpu();
    let lines = Arc::clone(&meter);
    let progress: Arc<table::Progress> = Arc::new(
        move |done, total, rate, mode, run, r, elapsed| {
            lines.println(&format!(
            "[{done}/{total}] rate {rate} {} run {run}: stalls {} lost {} rejected {} violations {} failed acquires {} ({:.1}s)",
            mode.name(),
            r.stalls,
            r.lost,
            r.rejected,
            r.exclusion_violations,
            r.acquire_failures,
            elapsed.as_secs_f64()
        ));
        },
    );
    let result = tokio::select! {
        r = table::run_table(cfg, progress) => Some(r),
        _ = interrupt.recv() => {
            eprintln!("fencing-table: interrupted; stopping the runs, removing the servers and the database");
            None
        }
    };

    if let Ok(meter) = Arc::try_unwrap(meter) {
        meter.finish();
    }
    if let Some(c) = cluster {
        // Errors here leave processes the Drop guard still removes.
        let _ = c.down().await;
    }
    tokio::task::spawn_blocking(move || drop(pg))
        .await
        .map_err(|e| e.to_string())?;
    let result = result
        .ok_or("interrupted (Ctrl-C); nothing it started is left running")?
        .map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    // This process is every run's lock client and database client: its CPU per section
    // is the harness's cost (the servers and PostgreSQL are other processes).
    let cpu = match (cpu_before, crate::bench::stats::process_cpu()) {
        (Some(before), Some(after)) if runs * sections > 0 => format!(
            "; client CPU {:.0} µs per section ({:.1} s in all)",
            after.saturating_sub(before).as_secs_f64() * 1e6 / (runs * sections) as f64,
            after.saturating_sub(before).as_secs_f64()
        ),
        _ => String::new(),
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(Outcome {
        text: format!(
            "{}seed {seed}; {sections} sections per run; wall time {:.1}s{cpu}\n",
            table::render(&result),
            wall.as_secs_f64()
        ),
        safety_failures: result.safety_failures(),
    })
}
