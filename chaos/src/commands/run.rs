//! `chaos run`: the arguments, and what the command prints and writes (see [`crate::run`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::cluster::{BackendKind, DEFAULT_NODES, Flavour};
use crate::lockut::LockKind;
use crate::report::{self, Outcome};
use crate::run::{self, RunConfig, suite};

/// Arguments of `chaos run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Backend; default: docker whenever an engine answers, else local.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// `all`, or scenario names separated by commas (see `chaos scenarios`).
    #[arg(long, default_value = "all")]
    pub scenario: String,
    /// Length of each scenario.
    #[arg(long, value_parser = super::parse_duration, default_value = "20s")]
    pub duration: Duration,
    /// Seed (random when not given; recorded in the report so the run can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Report directory; default `target/chaos/<run-id>/`.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Also print report.json on stdout.
    #[arg(long)]
    pub json: bool,
    /// Server implementation.
    #[arg(long, value_enum, default_value_t = Flavour::Valkey)]
    pub flavour: Flavour,
    /// Existing PostgreSQL (DSN or URL); default: a private one.
    #[arg(long, env = "PG_DSN")]
    pub pg_url: Option<String>,
    /// Workers per mode (four modes run at once).
    #[arg(long, default_value_t = run::DEFAULT_WORKERS)]
    pub workers: usize,
    /// Lease TTL.
    #[arg(long, value_parser = super::parse_duration, default_value = "200ms")]
    pub ttl: Duration,
    /// Number of primaries.
    #[arg(long, default_value_t = DEFAULT_NODES)]
    pub nodes: usize,
    /// The lock under test: `ours` (fenced_redlock), `rslock` (the peer crate, `peers`
    /// feature; no fencing tokens, so only `none` and `checked` run), `plain` (the rig's
    /// textbook Redlock), or a deliberately broken plain one: `quorum-of-one`,
    /// `full-validity`, `unchecked-release`, `no-node-deadline` (for proving the checker).
    #[arg(long, value_parser = LockKind::parse, default_value = "ours")]
    pub lock: LockKind,
    /// Run id (docker label value); default: a fresh random one.
    #[arg(long, hide = true)]
    pub run_id: Option<String>,
}

/// Runs the command; returns the exit code (0 pass, 1 safety failure, 2 harness failure).
pub async fn run(args: RunArgs) -> u8 {
    let scenarios = match suite::select(&args.scenario, args.flavour) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("chaos run: {e}");
            return Outcome::Unknown.exit_code();
        }
    };
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut cfg = RunConfig::new(scenarios, seed);
    cfg.backend = args.backend;
    cfg.duration = args.duration;
    cfg.flavour = args.flavour;
    cfg.pg_url = args.pg_url.clone();
    cfg.workers = args.workers;
    cfg.ttl = args.ttl;
    cfg.nodes = args.nodes;
    cfg.run_id = args.run_id.clone();
    cfg.lock = args.lock;
    cfg.command = std::env::args().collect::<Vec<_>>().join(" ");
    let stop = CancellationToken::new();
    let ctrl_c = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("chaos run: interrupted; stopping workers, healing, tearing down");
                stop.cancel();
            }
        })
    };
    eprintln!(
        "chaos run: seed {seed}, {} scenario(s) × {:.0}s",
        cfg.scenarios.len(),
        cfg.duration.as_secs_f64()
    );
    let started = Instant::now();
    let observer = report::progress::observer_for_terminal();
    let report = run::run_until(cfg, observer.as_ref(), stop).await;
    ctrl_c.abort();
    print!("{}", run::table::render(&report));
    let dir = args
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/chaos").join(&report.run_id));
    match report::write_all(&dir, &report) {
        Ok(paths) => eprintln!(
            "report: {} · {} · {} (wall time {:.1}s)",
            paths.json.display(),
            paths.html.display(),
            paths.junit.display(),
            started.elapsed().as_secs_f64()
        ),
        Err(e) => {
            eprintln!("chaos run: {e}");
            return Outcome::Unknown.exit_code().max(report.verdict.exit_code());
        }
    }
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(j) => println!("{j}"),
            Err(e) => eprintln!("chaos run: {e}"),
        }
    }
    report.verdict.exit_code()
}
