//! `chaos run`: the arguments, and what the command prints and writes (see [`crate::run`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::cluster::stack::Stack;
use crate::cluster::{BackendKind, DEFAULT_NODES, Flavour};
use crate::lockut::LockKind;
use crate::report::{self, Outcome};
use crate::run::{self, RunConfig, suite};
use crate::scenario::validate;
use crate::scenario::{Scenario, Shape, file};

/// Arguments of `chaos run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Backend; default: docker whenever an engine answers, else local.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// `all`, or scenario names separated by commas (see `chaos scenarios`). Default: `all`,
    /// or none when --scenario-file is given.
    #[arg(long)]
    pub scenario: Option<String>,
    /// A scenario file (TOML, or JSON if it ends in .json; see `chaos scenarios --json`),
    /// played after the --scenario ones; repeat for several.
    #[arg(long = "scenario-file", value_name = "FILE")]
    pub scenario_files: Vec<PathBuf>,
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
    /// Attach to the deployment this stack file describes (TOML; see the README's "Running
    /// against your own deployment") instead of bringing a cluster up. Node faults its
    /// controls cannot apply make their scenarios not applicable.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["backend", "nodes", "flavour"])]
    pub stack: Option<PathBuf>,
    /// Run id (docker label value); default: a fresh random one.
    #[arg(long, hide = true)]
    pub run_id: Option<String>,
}

/// Runs the command; returns the exit code (0 pass, 1 safety failure, 2 harness failure,
/// 64 a scenario file that cannot be played).
pub async fn run(mut args: RunArgs) -> u8 {
    let stack = match &args.stack {
        Some(path) => match Stack::read(path) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("chaos run: --stack {e}");
                return super::EXIT_USAGE;
            }
        },
        None => None,
    };
    if let Some(s) = &stack {
        args.nodes = s.nodes.len();
    }
    let scenarios = match scenarios(&args) {
        Ok(s) => s,
        Err(Refused::Usage(e)) => {
            eprintln!("chaos run: {e}");
            return super::EXIT_USAGE;
        }
        Err(Refused::Harness(e)) => {
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
    cfg.stack = stack;
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
            // The worse outcome: a lock that failed still fails (exit 1) without its files.
            return report.verdict.worst(Outcome::Unknown).exit_code();
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

/// Why `chaos run` did not start.
enum Refused {
    /// A scenario file (or its fit to the command line): exit 64.
    Usage(String),
    /// Anything else (as before scenario files: exit 2).
    Harness(String),
}

/// The built-ins `--scenario` names (all by default, none by default when there are
/// files), then every `--scenario-file`'s, each checked against the run's shape.
fn scenarios(args: &RunArgs) -> Result<Vec<Scenario>, Refused> {
    let spec = match (&args.scenario, args.scenario_files.is_empty()) {
        (Some(spec), _) => Some(spec.as_str()),
        (None, true) => Some("all"),
        (None, false) => None,
    };
    let mut out = match spec {
        Some(spec) => suite::select(spec, args.flavour).map_err(Refused::Harness)?,
        None => Vec::new(),
    };
    let shape = Shape {
        duration: args.duration,
        nodes: args.nodes,
        workers: args.workers,
    };
    for path in &args.scenario_files {
        let usage = |e: String| Refused::Usage(format!("{}: {e}", path.display()));
        for s in file::load(path).map_err(|e| Refused::Usage(e.to_string()))? {
            validate::fits(&s, &shape).map_err(|e| usage(e.to_string()))?;
            if s.needs_clock_faults() && !args.flavour.supports_clock_faults() {
                return Err(usage(format!(
                    "scenario `{}` has clock jumps, which {} cannot do; use --flavour valkey",
                    s.name, args.flavour
                )));
            }
            if out.iter().any(|o| o.name == s.name) {
                return Err(usage(format!(
                    "field `name`: a scenario named `{}` is already in this run; give this one another name",
                    s.name
                )));
            }
            out.push(s);
        }
    }
    Ok(out)
}
