//! `chaos fencing-table`: runs every stall rate × mode × run and prints the table.
//!
//! Lock nodes come from `--nodes` / `REDLOCK_NODES`, else five local primaries are started
//! (cluster module, local backend) and removed afterwards. PostgreSQL comes from
//! `--pg-url` / `PG_DSN`, else a private server is started and removed afterwards.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::future::BoxFuture;

use super::signals::Interrupt;
use super::{CommandError, checks};
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
    /// Print the results as JSON on stdout, and nothing else there (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JSON to FILE (checked for writing before anything starts).
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
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
    /// What goes on stdout: the rendered table with the seed and wall time, or (`--json`)
    /// the results as JSON.
    pub text: String,
    /// With `--json`: the table, for stderr.
    pub table_for_stderr: Option<String>,
    /// Safety findings (see [`table::TableResult::safety_failures`]); the command exits 1 when
    /// there are any.
    pub safety_failures: Vec<String>,
}

/// Every setting, before anything starts.
///
/// # Errors
/// [`CommandError::Usage`] naming the flag and what to write instead.
pub fn check(args: &FencingTableArgs) -> Result<(), CommandError> {
    checks::at_least_one("--runs", args.runs)?;
    checks::at_least_one("--workers", args.workers)?;
    checks::at_least_one("--sections", args.sections)?;
    checks::at_least_one("--jobs", args.jobs)?;
    checks::positive("--run-timeout", args.run_timeout, "30m")?;
    if args.rates.is_empty() {
        return Err(CommandError::usage(
            "--rates is empty: give stall probabilities, e.g. --rates 0.001,0.01",
        ));
    }
    for r in &args.rates {
        checks::probability("--rates", *r)?;
    }
    if args.modes.is_empty() {
        return Err(CommandError::usage(
            "--modes is empty: give modes, e.g. --modes none,claim_first",
        ));
    }
    if let Some(t) = args.node_timeout {
        checks::positive("--node-timeout", t, "5ms")?;
    }
    // The preset's TTL with --node-timeout, and --nodes when given, as the library takes
    // them (a placeholder node when the table starts its own).
    let nodes = if args.nodes.is_empty() {
        vec!["redis://127.0.0.1:1".to_owned()]
    } else {
        args.nodes.clone()
    };
    let what = if args.nodes.is_empty() {
        "--node-timeout"
    } else {
        "--nodes / REDLOCK_NODES"
    };
    checks::lock_settings(what, &nodes, args.preset.timing().ttl, args.node_timeout)?;
    let owned_pg = match args.pg_url.as_deref().map(str::trim) {
        Some(url) if !url.is_empty() => {
            checks::pg_url(url)?;
            false
        }
        _ => true,
    };
    // Each run in flight holds one connection per worker plus its own.
    if owned_pg
        && args
            .jobs
            .saturating_mul(args.workers.saturating_add(1))
            .saturating_add(10)
            > crate::pg::MAX_CONNECTIONS as usize
    {
        return Err(CommandError::usage(format!(
            "--jobs {} × (--workers {} + 1) needs more than the {} connections the private postgres allows; lower --jobs",
            args.jobs,
            args.workers,
            crate::pg::MAX_CONNECTIONS
        )));
    }
    if let Some(path) = &args.json_out {
        checks::writable_file("--json-out", path)?;
    }
    Ok(())
}

/// Runs the command; returns the rendered table and its safety findings.
///
/// # Errors
/// [`CommandError::Usage`] from [`check`] (nothing started), [`CommandError::Interrupted`]
/// on SIGINT, SIGTERM or SIGHUP (everything started removed), else
/// [`CommandError::Harness`].
///
/// Boxed, as [`crate::run::run_until`] is: compiled once, here.
pub fn run(args: FencingTableArgs) -> BoxFuture<'static, Result<Outcome, CommandError>> {
    Box::pin(run_unboxed(args))
}

async fn run_unboxed(args: FencingTableArgs) -> Result<Outcome, CommandError> {
    check(&args)?;
    // Ours from the start: the signals' default action would end the process at once and
    // leave the servers (in process groups of their own) and PostgreSQL running.
    let mut interrupt = Interrupt::listen()?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let sections = if args.quick {
        args.sections.min(QUICK_SECTIONS)
    } else {
        args.sections
    };
    let pg_url = args.pg_url.clone();
    let pg = tokio::task::spawn_blocking(move || Pg::from_url_or_start(pg_url))
        .await
        .map_err(CommandError::harness)?
        .map_err(CommandError::harness)?;
    let mut cluster = None;
    let nodes = if args.nodes.is_empty() {
        let c =
            LocalCluster::up(ClusterSpec::new(args.flavour, DEFAULT_NODES).without_clock_faults())
                .await
                .map_err(|e| CommandError::harness(format!("starting local primaries: {e}")))?;
        let urls = (0..c.nodes())
            .map(|i| c.worker_url(NodeId(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(CommandError::harness)?;
        cluster = Some(c);
        if args.appendfsync == AppendFsync::Everysec {
            for url in &urls {
                crate::bench::set_appendfsync(url, args.appendfsync)
                    .await
                    .map_err(CommandError::harness)?;
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
        r = table::run_table(cfg, progress) => Ok(r),
        signal = interrupt.recv() => {
            eprintln!("fencing-table: {signal}: interrupted; stopping the runs, removing the servers and the database");
            Err(signal)
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
        .map_err(CommandError::harness)?;
    let result = result
        .map_err(|signal| CommandError::Interrupted { signal })?
        .map_err(CommandError::harness)?;
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
    let json = || serde_json::to_string_pretty(&result).map_err(CommandError::harness);
    if let Some(path) = &args.json_out {
        std::fs::write(path, json()?)
            .map_err(|e| CommandError::harness(format!("writing {}: {e}", path.display())))?;
    }
    let table = format!(
        "{}seed {seed}; {sections} sections per run; wall time {:.1}s{cpu}\n",
        table::render(&result),
        wall.as_secs_f64()
    );
    let (text, table_for_stderr) = if args.json {
        (format!("{}\n", json()?), Some(table))
    } else {
        (table, None)
    };
    Ok(Outcome {
        text,
        table_for_stderr,
        safety_failures: result.safety_failures(),
    })
}
