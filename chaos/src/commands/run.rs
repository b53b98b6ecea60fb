//! `chaos run`: the arguments, and what the command prints and writes (see [`crate::run`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::signals::Interrupt;
use super::{CommandError, checks};
use crate::cluster::official::{ImageArgs, ImageSource};
use crate::cluster::stack::Stack;
use crate::cluster::{BackendKind, DEFAULT_NODES, Flavour};
use crate::lockut::LockKind;
use crate::report::{self, Outcome};
use crate::run::{self, RunConfig, needs, suite};
use crate::scenario::validate;
use crate::scenario::{Scenario, Shape, file};
use crate::workload::Mode;

/// Arguments of `chaos run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Backend; default: docker whenever an engine answers, else local.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// A suite, `default` or `all` (the default suite and the nightly's: every scenario), or
    /// scenario names separated by commas (see `chaos scenarios`). Default: `default`, or
    /// none when --scenario-file is given.
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
    /// Report directory (report.json, report.html, junit.xml); default
    /// `target/chaos/<run-id>/`. Checked for writing before anything starts.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Print report.json on stdout, and nothing else there (the table goes to stderr).
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
    /// The lock under test: `ours` (fenced_redlock), `ours-guarded` (ours with the restart
    /// quarantine and the clock-jump guard on: held to exclusion wherever the guards see
    /// every fault), `rslock` (the peer crate, `peers`
    /// feature; no fencing tokens, so only `none` and `checked` run), `plain` (the rig's
    /// textbook Redlock), or a deliberately broken plain one: `quorum-of-one`,
    /// `full-validity`, `unchecked-release`, `no-node-deadline` (for proving the checker).
    #[arg(long, value_parser = LockKind::parse, default_value = "ours")]
    pub lock: LockKind,
    /// Attach to the deployment this stack file describes (TOML; see docs/rig.md, "Running
    /// against your own deployment") instead of bringing a cluster up. Node faults its
    /// controls cannot apply make their scenarios not applicable.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["backend", "nodes", "flavour", "images"])]
    pub stack: Option<PathBuf>,
    /// Which images the docker backend runs.
    #[command(flatten)]
    pub images: ImageArgs,
    /// Run id (docker label value); default: a fresh random one.
    #[arg(long, hide = true)]
    pub run_id: Option<String>,
}

/// The longest `--duration`: a week per scenario is past any soak a run is for, and keeps
/// every deadline the run computes from it far inside the clock's range.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Runs the command; returns the exit code (0 pass, 1 safety failure, 2 harness failure or
/// a signal, 4 liveness failure with every safety check met, 64 a setting that cannot be
/// acted on, found before anything starts).
pub async fn run(args: RunArgs) -> u8 {
    let (stack, scenarios) = match check(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("chaos run: {e}");
            return e.exit_code();
        }
    };
    // Before anything starts: SIGTERM and SIGHUP would otherwise end the process at once
    // and leave the cluster and PostgreSQL running.
    let mut interrupt = match Interrupt::listen() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("chaos run: {e}");
            return e.exit_code();
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
    cfg.nodes = stack.as_ref().map_or(args.nodes, |s| s.nodes.len());
    cfg.run_id = args.run_id.clone();
    cfg.lock = args.lock;
    cfg.stack = stack;
    cfg.images = args.images.plan();
    cfg.images.clock_faults = cfg.scenarios.iter().any(|s| s.needs_clock_faults());
    cfg.command = std::env::args().collect::<Vec<_>>().join(" ");
    let stop = CancellationToken::new();
    let signals = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let signal = interrupt.recv().await;
            eprintln!("chaos run: {signal}: stopping workers, healing, tearing down");
            stop.cancel();
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
    signals.abort();
    let table = run::table::render(&report);
    // With --json, stdout is the JSON alone (for `jq`); the table goes to the terminal.
    if args.json {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    let dir = args
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_REPORT_ROOT).join(&report.run_id));
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
            // The worse outcome: a lock that failed still fails (exit 1 or 4) without its files.
            return report.verdict.worst(Outcome::Unknown).exit_code();
        }
    }
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(j) => crate::outln!("{j}"),
            Err(e) => {
                eprintln!("chaos run: {e}");
                // The worse outcome, not the larger code: a safety failure (1) outranks
                // the harness (2).
                return report.verdict.worst(Outcome::Unknown).exit_code();
            }
        }
    }
    report.verdict.exit_code()
}

/// Where reports go without `--report`: `<this>/<run-id>/`.
const DEFAULT_REPORT_ROOT: &str = "target/chaos";

/// Every setting, before anything starts: the stack file, the scenarios (built-ins and
/// files) and what each needs from the run ([`needs`]), ranges, the PostgreSQL URL, the
/// report directory.
fn check(args: &RunArgs) -> Result<(Option<Stack>, Vec<Scenario>), CommandError> {
    let stack = match &args.stack {
        Some(path) => {
            Some(Stack::read(path).map_err(|e| CommandError::usage(format!("--stack {e}")))?)
        }
        None => None,
    };
    let nodes = stack.as_ref().map_or(args.nodes, |s| s.nodes.len());
    checks::at_least_one("--nodes", nodes)?;
    args.images
        .check(args.backend == Some(BackendKind::Local))
        .map_err(CommandError::Usage)?;
    checks::at_least_one("--workers", args.workers)?;
    checks::positive("--duration", args.duration, "20s")?;
    if args.duration > MAX_DURATION {
        return Err(CommandError::usage(format!(
            "--duration {}: use at most {} per scenario; split a longer soak into several runs",
            humantime::format_duration(args.duration),
            humantime::format_duration(MAX_DURATION)
        )));
    }
    checks::positive("--ttl", args.ttl, "200ms")?;
    // The library's limits on the TTL, on a placeholder node (nothing connects).
    checks::lock_settings(
        &format!("--ttl {}", humantime::format_duration(args.ttl)),
        &["redis://127.0.0.1:1".to_owned()],
        args.ttl,
        None,
    )?;
    let owned_pg = match args.pg_url.as_deref().map(str::trim) {
        Some(url) if !url.is_empty() => {
            checks::pg_url(url)?;
            false
        }
        _ => true,
    };
    // Every worker holds one connection; the runner's own and PostgreSQL's reserved ones
    // need room too.
    let connections = Mode::ALL
        .len()
        .saturating_mul(args.workers)
        .saturating_add(10);
    if owned_pg && connections > crate::pg::MAX_CONNECTIONS as usize {
        return Err(CommandError::usage(format!(
            "--workers {}: {} modes × {} workers need more than the {} connections the private postgres allows; lower --workers",
            args.workers,
            Mode::ALL.len(),
            args.workers,
            crate::pg::MAX_CONNECTIONS
        )));
    }
    let scenarios = scenarios(args, nodes)?;
    let shape = Shape {
        duration: args.duration,
        nodes,
        workers: args.workers,
    };
    let work = crate::run::DEFAULT_WORK;
    for s in &scenarios {
        needs::check(s, &shape, s.ttl.unwrap_or(args.ttl), work).map_err(CommandError::Usage)?;
    }
    // Every scenario that needs a longer run, so one change fixes the command line.
    let short: Vec<(String, Duration)> = scenarios
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                needs::minimum_duration(s, args.workers, s.ttl.unwrap_or(args.ttl)),
            )
        })
        .filter(|(_, min)| *min > args.duration)
        .collect();
    if let Some(longest) = short.iter().map(|(_, min)| *min).max() {
        let named: Vec<String> = short
            .iter()
            .map(|(name, min)| format!("`{name}` {}", humantime::format_duration(*min)))
            .collect();
        return Err(CommandError::usage(format!(
            "--duration {}: too short to show what these scenarios must show: {} (see `chaos scenarios`); use --duration {} or leave them out of --scenario",
            humantime::format_duration(args.duration),
            named.join(", "),
            humantime::format_duration(longest)
        )));
    }
    match &args.report {
        Some(dir) => checks::writable_dir("--report", dir)?,
        None => checks::writable_dir(
            "--report (default target/chaos/<run-id>)",
            Path::new(DEFAULT_REPORT_ROOT),
        )?,
    }
    Ok((stack, scenarios))
}

/// The built-ins `--scenario` names (the default suite by default, none by default when
/// there are files), then every `--scenario-file`'s, each checked against the run's shape.
fn scenarios(args: &RunArgs, nodes: usize) -> Result<Vec<Scenario>, CommandError> {
    let spec = match (&args.scenario, args.scenario_files.is_empty()) {
        (Some(spec), _) => Some(spec.as_str()),
        (None, true) => Some("default"),
        (None, false) => None,
    };
    let mut out = match spec {
        Some(spec) => suite::select(spec, args.flavour)
            .map_err(|e| CommandError::usage(format!("--scenario {spec:?}: {e}")))?,
        None => Vec::new(),
    };
    // As `--flavour redis`: clock scenarios leave a suite, and are refused by name.
    let official = args.images.images == ImageSource::Official;
    if official {
        if spec.is_some_and(suite::is_suite) {
            out.retain(|s| !s.needs_clock_faults());
        } else if let Some(s) = out.iter().find(|s| s.needs_clock_faults()) {
            return Err(CommandError::usage(format!(
                "--scenario {}: {} needs clock faults, which the official server image cannot do (no libfaketime); use --images offline",
                spec.unwrap_or_default(),
                s.name
            )));
        }
    }
    let shape = Shape {
        duration: args.duration,
        nodes,
        workers: args.workers,
    };
    for path in &args.scenario_files {
        let usage = |e: String| CommandError::usage(format!("{}: {e}", path.display()));
        for s in file::load(path).map_err(|e| CommandError::usage(e.to_string()))? {
            validate::fits(&s, &shape).map_err(|e| usage(e.to_string()))?;
            if s.needs_clock_faults() && !args.flavour.supports_clock_faults() {
                return Err(usage(format!(
                    "scenario `{}` has clock jumps, which {} cannot do; use --flavour valkey",
                    s.name, args.flavour
                )));
            }
            if s.needs_clock_faults() && official {
                return Err(usage(format!(
                    "scenario `{}` has clock jumps, which the official server image cannot do (no libfaketime); use --images offline",
                    s.name
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
