//! `chaos`: command-line entry point.
//!
//! - `chaos toxiproxy`: serve the Toxiproxy HTTP API.
//! - `chaos up`: bring a cluster up, print its worker URLs, write the state file, leave it
//!   running.
//! - `chaos down`: remove everything `chaos up` (or a crashed run) left behind.
//! - `chaos images`: build the images `compose/docker-compose.offline.yml` names.
//! - `chaos scenarios`: list the named fault scenarios, one line each (`--json`: all of
//!   them in the scenario file format; `--toml NAME`: one as a TOML file).
//! - `chaos fencing-table`: the fenced counter at every stall rate × mode (see the library's
//!   `commands::fencing_table`).
//! - `chaos lock`: acquire once, hold, release, report per node.
//! - `chaos report DIR`: re-render `report.html` and `junit.xml` from `DIR/report.json`.
//! - `chaos judge DIR`: judge a recorded run again from its evidence and history.
//! - `chaos bench`: our client beside the Rust peers on one local cluster, as ratios.
//! - `chaos run`: every scenario end to end with verdicts (see the library's `run`).
//! - `chaos worker` (hidden): one worker process of `chaos run`.
//! - `chaos toxiproxy-health` (hidden): the offline proxy image's health check.
//! - `chaos schema --write DIR` (hidden): write the JSON Schemas of `docs/schema/` (see the
//!   library's `schema`).
//!
//! # Exit codes (the CI contract)
//! | code | meaning |
//! |---|---|
//! | 0 | done; every expectation met (`--help` and `--version` too) |
//! | 1 | a safety expectation failed (`run`, `judge`, `report --exit-code`, `fencing-table`) |
//! | 2 | the harness failed: a server, container, proxy or database could not be run or reached; or SIGINT, SIGTERM or SIGHUP stopped the command (after removing what it started) |
//! | 3 | `lock` only: the lock was not granted |
//! | 4 | every safety check met, but a liveness check failed: the lock did not grant where it promised to (`run`, `judge`, `report --exit-code`) |
//! | 64 | usage: the command line, or a file or directory it names, is wrong (`EX_USAGE`); found before anything was started |
//!
//! The checks behind 64 live with each subcommand (`commands::run::check`, ...); the
//! mapping is [`redlock_chaos::commands::CommandError::exit_code`], and a verdict's
//! (0, 1, 2, 4) [`redlock_chaos::report::Outcome::exit_code`].
//!
//! # Output
//! stdout carries the result: a table, or with `--json` JSON alone (`run`, `bench`,
//! `fencing-table`, `lock`, `scenarios`, `up`). `--json-out FILE` writes the JSON to a
//! file as well (`bench`, `fencing-table`). Progress goes to stderr (bars on a terminal,
//! plain lines otherwise); log lines only what `RUST_LOG` asks for (errors by default).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use redlock_chaos::cluster::state::{self, ClusterState};
use redlock_chaos::cluster::{
    self, AnyCluster, BackendKind, Cluster, ClusterSpec, DEFAULT_NODES, Flavour, NodeId, ProxyPlan,
    docker, local, proxy_process,
};
use redlock_chaos::commands::fencing_table::{self, FencingTableArgs};
use redlock_chaos::commands::judge::{self as judge_cmd, JudgeArgs};
use redlock_chaos::commands::lock::{self, LockArgs};
use redlock_chaos::commands::run::{self as run_cmd, RunArgs};
use redlock_chaos::commands::signals::Interrupt;
use redlock_chaos::commands::{
    CommandError, EXIT_HARNESS, EXIT_NOT_GRANTED, EXIT_SAFETY, EXIT_USAGE, checks,
};
use redlock_chaos::run::worker_proc::{self, WorkerArgs};

#[derive(Debug, Parser)]
#[command(
    name = "chaos",
    version,
    propagate_version = true,
    about = "Chaos rig for fenced-redlock",
    after_help = after_help()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Toxiproxy HTTP API (and its proxies) until Ctrl-C or SIGTERM. Toxiproxy's own
    /// single-dash flags (`-host`, `-port`, `-config`, `-seed`) are accepted too.
    Toxiproxy(ToxiproxyArgs),
    /// Bring up a cluster of primaries and leave it running.
    Up(UpArgs),
    /// Remove what `chaos up` left: the run in the state file, `--run ID`, or `--all` runs.
    Down(DownArgs),
    /// Build the images compose/docker-compose.offline.yml names (Valkey, the proxy,
    /// PostgreSQL) from the binaries installed here; no registry is used.
    Images,
    /// List the named fault scenarios: name, what happens, what the run should show (or,
    /// with --json / --toml, in the scenario file format).
    Scenarios(ScenariosArgs),
    /// Run the fenced counter at every stall rate × mode and print lost updates per setting.
    FencingTable(FencingTableArgs),
    /// Acquire a lock once, hold it, release it, and report what each node said.
    Lock(LockArgs),
    /// Re-render report.html and junit.xml from an existing report.json.
    Report(ReportArgs),
    /// Judge a recorded run again from its evidence and history files (the same judge
    /// `chaos run` uses); exit with the verdict's code, as `chaos run` does.
    Judge(JudgeArgs),
    /// Benchmark our client against rslock, redlock 2.0 and a one-node floor, and its two
    /// connections against each other.
    Bench(BenchArgs),
    /// Run the default suite (or all, or some scenarios) end to end: faults, four
    /// fenced-counter modes, verdicts.
    Run(RunArgs),
    /// One worker process of `chaos run` (internal).
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Exit 0 when the Toxiproxy API answers with its proxy list (internal: the offline
    /// proxy image's health check, standing in for `toxiproxy-cli list`).
    #[command(hide = true)]
    ToxiproxyHealth(ToxiproxyHealthArgs),
    /// Write the JSON Schemas of report.json, the bench and fencing-table JSON and scenario
    /// files, derived from their types (internal: `chaos schema --write docs/schema`
    /// regenerates the committed ones).
    #[command(hide = true)]
    Schema(SchemaArgs),
}

#[derive(Debug, Args)]
struct SchemaArgs {
    /// Directory to write `report.schema.json`, `bench.schema.json`,
    /// `fencing-table.schema.json` and `scenario.schema.json` into.
    #[arg(long, value_name = "DIR")]
    write: PathBuf,
}

fn schema(args: SchemaArgs) -> Result<(), Box<dyn std::error::Error>> {
    checks::writable_dir("--write", &args.write)?;
    std::fs::create_dir_all(&args.write)?;
    redlock_chaos::schema::write(&args.write)?;
    for doc in redlock_chaos::schema::Document::ALL {
        redlock_chaos::outln!("{}", args.write.join(doc.file_name()).display());
    }
    Ok(())
}

#[derive(Debug, Args)]
struct ToxiproxyHealthArgs {
    /// Base URL of the API.
    #[arg(long, default_value = "http://127.0.0.1:8474")]
    api: String,
}

async fn toxiproxy_health(args: ToxiproxyHealthArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Below the compose file's 2 s health check timeout.
    let client =
        redlock_chaos::proxy::Client::with_timeout(&args.api, std::time::Duration::from_secs(1))?;
    let names: Vec<String> = client.proxies().await?.into_keys().collect();
    redlock_chaos::outln!("{} proxies: {}", names.len(), names.join(", "));
    Ok(())
}

#[derive(Debug, Args)]
struct ToxiproxyArgs {
    /// Address of the HTTP API (or give --host and/or --port, as Toxiproxy).
    #[arg(long, default_value = "127.0.0.1:8474", conflicts_with_all = ["host", "port"])]
    listen: SocketAddr,
    /// Host of the HTTP API (Toxiproxy's -host); default 127.0.0.1.
    #[arg(long)]
    host: Option<String>,
    /// Port of the HTTP API (Toxiproxy's -port); default 8474.
    #[arg(long)]
    port: Option<u16>,
    /// Populate proxies from this JSON file (a /populate body) before serving (Toxiproxy's -config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed for toxicity rolls, jitter and slice sizes (Toxiproxy's -seed; default: random).
    #[arg(long, allow_hyphen_values = true)]
    seed: Option<i64>,
}

impl ToxiproxyArgs {
    fn api_addr(&self) -> Result<SocketAddr, String> {
        if self.host.is_none() && self.port.is_none() {
            return Ok(self.listen);
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        let port = self.port.unwrap_or(8474);
        use std::net::ToSocketAddrs;
        (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("--host {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("--host {host}: resolves to no address"))
    }

    fn options(&self) -> redlock_chaos::proxy::ServeOptions {
        let mut o = redlock_chaos::proxy::ServeOptions::default();
        if let Some(seed) = self.seed {
            // Toxiproxy's seed is an int64; any value, negative too, is a valid seed.
            o.seed(seed as u64);
        }
        if let Some(path) = &self.config {
            o.config(path);
        }
        o
    }
}

/// Toxiproxy's flags are Go-style (`-port 8474`); clap would read `-port` as
/// `-p -o -r -t`. For `chaos toxiproxy` only, those four are respelled `--port`.
fn toxiproxy_dialect(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.get(1).and_then(|a| a.to_str()) != Some("toxiproxy") {
        return args;
    }
    args.into_iter()
        .map(|a| {
            let Some(s) = a.to_str() else { return a };
            let flag = s.split('=').next().unwrap_or(s);
            if ["-host", "-port", "-config", "-seed"].contains(&flag) {
                format!("-{s}").into()
            } else {
                a
            }
        })
        .collect()
}

#[derive(Debug, Args)]
struct ScenariosArgs {
    /// Print every built-in as a JSON array in the scenario file format (one element, e.g.
    /// `jq '.[0]'`, is a valid `--scenario-file`).
    #[arg(long, conflicts_with = "toml")]
    json: bool,
    /// Print the built-in NAME as a TOML scenario file.
    #[arg(long, value_name = "NAME")]
    toml: Option<String>,
}

fn scenarios(args: ScenariosArgs) -> Result<(), Box<dyn std::error::Error>> {
    use redlock_chaos::scenario::{SCENARIOS, Work, find};
    if args.json {
        redlock_chaos::outln!("{}", serde_json::to_string_pretty(&*SCENARIOS)?);
        return Ok(());
    }
    if let Some(name) = &args.toml {
        let s = find(name).ok_or_else(|| {
            let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name.as_str()).collect();
            CommandError::Usage(format!(
                "--toml {name}: no such scenario; use one of {}",
                known.join(", ")
            ))
        })?;
        redlock_chaos::out!("{}", toml::to_string(s)?);
        return Ok(());
    }
    for s in SCENARIOS.iter() {
        let work = match s.work {
            Work::Run => format!(
                "sections: {} ms of work",
                redlock_chaos::run::DEFAULT_WORK.as_millis()
            ),
            Work::Fixed(d) => format!("sections: {} ms of work", d.as_millis()),
            Work::ToValidity => format!(
                "sections: work until {:.0}-{:.0} % of the TTL before the reported validity ends",
                redlock_chaos::run::chaos_workload::WRITE_ALLOWANCE * 100.0,
                redlock_chaos::run::chaos_workload::TO_VALIDITY_MARGIN * 100.0
            ),
            Work::Renewed => "sections: 2-5 × the TTL under auto_renew".into(),
        };
        let minimum = redlock_chaos::run::needs::minimum_duration(
            s,
            redlock_chaos::run::DEFAULT_WORKERS,
            redlock_chaos::run::DEFAULT_TTL,
        );
        let minimum = if minimum.is_zero() {
            String::new()
        } else {
            format!(
                " [--duration {} or more]",
                humantime::format_duration(minimum)
            )
        };
        let suite = if redlock_chaos::run::suite::nightly_only(&s.name) {
            " [nightly suite only: --scenario all]"
        } else {
            ""
        };
        redlock_chaos::outln!(
            "{:<20} {}  [{work}] [expect: {}]{minimum}{suite}",
            s.name,
            s.about,
            s.expectation.describe()
        );
    }
    redlock_chaos::outln!(
        "\nsuites: `chaos run` plays the default suite (--scenario default: every scenario above but the nightly-only ones); --scenario all plays every one"
    );
    redlock_chaos::outln!("\n{}", redlock_chaos::judge::verdict::RULES);
    Ok(())
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Report directory holding report.json (as written by `chaos run --report DIR`).
    dir: PathBuf,
    /// Exit with the report's verdict code (0 pass, 1 a safety failure, 2 unknown, 4 a
    /// liveness failure with every safety check met) instead of 0.
    #[arg(long)]
    exit_code: bool,
    /// Also append a Markdown summary (one row per scenario; not-applicable ones shown as
    /// such) to this file, e.g. "$GITHUB_STEP_SUMMARY"; `-` prints it on stdout instead of
    /// the paths.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct UpArgs {
    /// Backend; default: docker whenever an engine answers, else local.
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Server implementation.
    #[arg(long, value_enum, default_value_t = Flavour::Valkey)]
    flavour: Flavour,
    /// Number of primaries.
    #[arg(long, default_value_t = DEFAULT_NODES)]
    nodes: usize,
    /// Workers connect straight to the nodes. Default: through our Toxiproxy-compatible
    /// proxy, a `chaos toxiproxy` container on docker and a `chaos toxiproxy` process on
    /// local (both removed by `chaos down`).
    #[arg(long, conflicts_with = "toxiproxy_api")]
    no_proxy: bool,
    /// Use this (e.g. Shopify) Toxiproxy API instead of our own proxy; proxies `node<i>`
    /// missing there are created.
    #[arg(long)]
    toxiproxy_api: Option<String>,
    /// IP at which workers reach the external Toxiproxy's listen ports.
    #[arg(long, default_value = "127.0.0.1", requires = "toxiproxy_api")]
    proxy_listen_host: String,
    /// State file to write.
    #[arg(long, default_value_os_t = state::default_path())]
    state: PathBuf,
    /// Also write a stack file describing the cluster, for `chaos run --stack FILE` from
    /// another process (or another host).
    #[arg(long, value_name = "FILE")]
    stack_out: Option<PathBuf>,
    /// Print what came up as JSON on stdout (run id, node URLs, proxy API, files) instead
    /// of text with an `export REDLOCK_NODES=...` line.
    #[arg(long)]
    json: bool,
    /// Which images the docker backend runs (PostgreSQL is not part of `chaos up`).
    #[command(flatten)]
    images: cluster::official::ImageArgs,
}

#[derive(Debug, Args)]
struct DownArgs {
    /// State file written by `chaos up`; its run is the one removed by default.
    #[arg(long, default_value_os_t = state::default_path())]
    state: PathBuf,
    /// Remove this run's labelled Docker resources (the id `chaos up` and reports print),
    /// e.g. one a crashed run left behind.
    #[arg(long, conflicts_with = "all")]
    run: Option<String>,
    /// Remove every run's labelled Docker resources on this engine, other users' included.
    #[arg(long)]
    all: bool,
    /// Also remove the cached server images.
    #[arg(long)]
    images: bool,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Few samples, 2 s throughput: exercises every path in well under a minute.
    #[arg(long)]
    quick: bool,
    /// Print the report as JSON on stdout, and nothing else there (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Also write the report as JSON to FILE (checked for writing before anything starts).
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Server implementation of the 5 local primaries.
    #[arg(long, value_enum, default_value_t = Flavour::Valkey)]
    flavour: Flavour,
    /// AOF fsync policy of the nodes during the run (5 nodes share one disk here). The
    /// durable case sets `always`, then `everysec`, and puts this one back.
    #[arg(long, value_enum, default_value_t = redlock_chaos::bench::AppendFsync::Everysec)]
    appendfsync: redlock_chaos::bench::AppendFsync,
    /// Rounds of every case; rows report the median of the per-round values and their
    /// range (default: 3, or 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=50))]
    repeat: Option<u32>,
    /// Only these cases, comma-separated (default: all).
    #[arg(long = "case", value_enum, value_delimiter = ',')]
    cases: Vec<redlock_chaos::bench::Case>,
}

/// `chaos bench`: settings checked first (exit 64), then the run, stoppable by SIGINT,
/// SIGTERM or SIGHUP.
async fn bench(args: BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    use redlock_chaos::bench::{self, BenchConfig, BenchError};
    if let Some(path) = &args.json_out {
        checks::writable_file("--json-out", path)?;
    }
    let mut config = BenchConfig::new(args.quick);
    config.flavour = args.flavour;
    config.appendfsync = args.appendfsync;
    if let Some(r) = args.repeat {
        config.repeat = r as usize;
    }
    if !args.cases.is_empty() {
        config.cases = args.cases;
    }
    // A signal drops the run, whose guards stop the servers (thawing a frozen one first),
    // the proxy and PostgreSQL; the default action would leave them running.
    let mut interrupt = Interrupt::listen()?;
    let report = tokio::select! {
        r = bench::run(&config) => r?,
        signal = interrupt.recv() => return Err(BenchError::Interrupted { signal }.into()),
    };
    let json = || serde_json::to_string_pretty(&report).map_err(std::io::Error::other);
    if let Some(path) = &args.json_out {
        let io = |source| BenchError::Io {
            action: format!("writing {}", path.display()),
            source,
        };
        std::fs::write(path, json().map_err(io)?).map_err(io)?;
    }
    let table = bench::table::render(&report);
    if args.json {
        eprint!("{table}");
        redlock_chaos::outln!("{}", json()?);
    } else {
        redlock_chaos::out!("{table}");
    }
    Ok(())
}

fn after_help() -> String {
    format!(
        "Exit codes: 0 pass, 1 a safety expectation failed, 2 the harness failed (or a signal stopped the command), 3 `chaos lock`: not granted, 4 every safety check met but a liveness check failed (the lock did not grant where it promised to), 64 a setting to change (nothing was started).\n\n{}",
        redlock_chaos::commands::environment::help()
    )
}

/// The log filter when `RUST_LOG` is not set: errors only (a failed teardown, a fault
/// left unhealed), so stderr is the commands' own progress lines. `chaos toxiproxy` is a
/// server whose log is its output, as Toxiproxy's is.
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Toxiproxy(_) => "info",
        // Expected while nodes are killed: the proxy's per-connection warnings.
        Command::Run(_) | Command::Up(_) | Command::Bench(_) => "error,redlock_chaos::proxy=off",
        _ => "error",
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(toxiproxy_dialect(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(default_log_filter(&cli.command))
            }),
        )
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal shows them, not in CI logs or files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Toxiproxy(args) => toxiproxy(args).await,
        Command::Up(args) => up(args).await,
        Command::Down(args) => down(args).await,
        Command::Images => redlock_chaos::commands::images::run()
            .await
            .map(|images| {
                redlock_chaos::out!("{}", redlock_chaos::commands::images::render(&images))
            })
            .map_err(Into::into),
        Command::ToxiproxyHealth(args) => toxiproxy_health(args).await,
        Command::Run(args) => return ExitCode::from(run_cmd::run(args).await),
        Command::Worker(args) => return ExitCode::from(worker_proc::serve(args).await),
        Command::Scenarios(args) => scenarios(args),
        Command::Schema(args) => schema(args),
        Command::FencingTable(args) => {
            return match fencing_table::run(args).await {
                Ok(outcome) => {
                    if let Some(table) = &outcome.table_for_stderr {
                        eprint!("{table}");
                    }
                    redlock_chaos::out!("{}", outcome.text);
                    for f in &outcome.safety_failures {
                        eprintln!("chaos: safety: {f}");
                    }
                    if outcome.safety_failures.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(EXIT_SAFETY)
                    }
                }
                Err(e) => fail(&e),
            };
        }
        Command::Report(args) => return report(args),
        Command::Judge(args) => {
            return match judge_cmd::run(&args) {
                Ok(j) => ExitCode::from(j.replay.report.verdict.exit_code()),
                Err(e) => fail(&e),
            };
        }
        Command::Lock(args) => {
            return match lock::run(args).await {
                Ok((out, acquired)) => {
                    redlock_chaos::outln!("{out}");
                    if acquired {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(EXIT_NOT_GRANTED)
                    }
                }
                Err(e) => fail(&e),
            };
        }
        Command::Bench(args) => bench(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast::<CommandError>() {
            Ok(e) => fail(&e),
            Err(e) => {
                eprintln!("chaos: {e}");
                ExitCode::from(EXIT_HARNESS)
            }
        },
    }
}

/// Prints `e` and returns its exit code.
fn fail(e: &CommandError) -> ExitCode {
    eprintln!("chaos: {e}");
    ExitCode::from(e.exit_code())
}

/// `chaos toxiproxy`: a bad `--config` file or `--host` is a usage error (64); a port
/// that cannot be bound, a harness one.
async fn toxiproxy(args: ToxiproxyArgs) -> Result<(), Box<dyn std::error::Error>> {
    use redlock_chaos::proxy::ServerError;
    let addr = args.api_addr().map_err(CommandError::Usage)?;
    match redlock_chaos::proxy::run(addr, &args.options()).await {
        Err(e @ ServerError::Config { .. }) => Err(CommandError::usage(format!(
            "-config: {e}; fix the file (a /populate body: a JSON list of proxies) or leave -config out"
        ))
        .into()),
        r => r.map_err(Into::into),
    }
}

fn report(args: ReportArgs) -> ExitCode {
    use redlock_chaos::report::ReportError;
    match redlock_chaos::report::rerender(&args.dir) {
        Ok((report, paths)) => {
            let markdown = args
                .markdown
                .as_ref()
                .map(|f| (f, redlock_chaos::report::render_markdown(&report)));
            match markdown {
                Some((f, md)) if f.as_os_str() == "-" => redlock_chaos::out!("{md}"),
                other => {
                    redlock_chaos::outln!("{}", paths.html.display());
                    redlock_chaos::outln!("{}", paths.junit.display());
                    if let Some((f, md)) = other
                        && let Err(e) = append(f, &md)
                    {
                        return fail(&CommandError::usage(format!(
                            "--markdown {}: {e}; give a file that can be appended to, or -",
                            f.display()
                        )));
                    }
                }
            }
            let code = report.verdict.exit_code();
            if args.exit_code {
                ExitCode::from(code)
            } else {
                ExitCode::SUCCESS
            }
        }
        // The directory is the only input: missing, unreadable, not a report, or not
        // writable are all for the caller to change.
        Err(e @ (ReportError::Io { .. } | ReportError::Parse { .. })) => {
            fail(&CommandError::usage(format!(
                "{e}; give the directory `chaos run --report DIR` wrote (it holds report.json), writable"
            )))
        }
        Err(e) => fail(&CommandError::harness(e)),
    }
}

/// Appends `text` to `path`, creating it.
fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

async fn up(args: UpArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.state.exists() {
        return Err(CommandError::usage(format!(
            "--state {}: a cluster is already up; run `chaos down` first (or give another --state)",
            args.state.display()
        ))
        .into());
    }
    checks::at_least_one("--nodes", args.nodes)?;
    args.images
        .check(args.backend == Some(BackendKind::Local))
        .map_err(CommandError::Usage)?;
    checks::writable_file("--state", &args.state)?;
    if let Some(path) = &args.stack_out {
        checks::writable_file("--stack-out", path)?;
    }
    // Before anything starts: a signal while coming up drops the half-built cluster.
    let mut interrupt = Interrupt::listen()?;
    let backend = match args.backend {
        Some(b) => b,
        None if args.images.images == cluster::official::ImageSource::Official => {
            BackendKind::Docker
        }
        None => BackendKind::detect().await,
    };
    // The local backend's proxy runs in-process and would die with `chaos up`: it gets a
    // `chaos toxiproxy` process of its own instead, which `chaos down` stops.
    let mut proxy_process = None;
    let plan = match (&args.toxiproxy_api, backend) {
        (Some(api), _) => ProxyPlan::External {
            api: api.clone(),
            listen_host: args.proxy_listen_host.clone(),
        },
        _ if args.no_proxy => ProxyPlan::Direct,
        (None, BackendKind::Docker) => ProxyPlan::Chaos,
        (None, BackendKind::Local) => {
            let exe = std::env::current_exe()
                .map_err(|e| cluster::ClusterError::io("locating this chaos binary", e))?;
            let dir = args
                .state
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            std::fs::create_dir_all(dir)
                .map_err(|e| cluster::ClusterError::io(format!("creating {}", dir.display()), e))?;
            let log = dir.join(format!("toxiproxy-{}.log", std::process::id()));
            let p = proxy_process::spawn(&exe, &log).await?;
            let api = p.api.clone();
            proxy_process = Some(p);
            ProxyPlan::External {
                api,
                listen_host: "127.0.0.1".into(),
            }
        }
    };
    let stop_proxy = |p: &Option<proxy_process::ProxyProcess>| {
        if let Some(p) = p {
            proxy_process::stop(p.pid);
        }
    };
    let mut spec = ClusterSpec::new(args.flavour, args.nodes).with_proxy(plan);
    spec.images = args.images.plan();
    let cluster = tokio::select! {
        c = AnyCluster::up(backend, spec) => match c {
            Ok(c) => c,
            Err(e) => {
                stop_proxy(&proxy_process);
                return Err(e.into());
            }
        },
        signal = interrupt.recv() => {
            stop_proxy(&proxy_process);
            return Err(CommandError::Interrupted { signal }.into());
        }
    };
    let urls = match (0..cluster.nodes())
        .map(|i| cluster.worker_url(NodeId(i)))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(urls) => urls,
        Err(e) => {
            stop_proxy(&proxy_process);
            return Err(e.into());
        }
    };
    let proxy_api = cluster.proxy().map(|p| p.base_url().to_string());
    let run_id = cluster.run_id().to_owned();
    let (backend_name, server_version) = (
        cluster.backend_name().to_owned(),
        cluster.server_version().to_owned(),
    );
    if let Some(path) = &args.stack_out {
        let written = cluster.stack().and_then(|stack| {
            stack
                .write(path)
                .map_err(|e| cluster::ClusterError::io(format!("writing {}", path.display()), e))
        });
        if let Err(e) = written {
            stop_proxy(&proxy_process);
            return Err(e.into());
        }
    }
    let mut st = match cluster.detach() {
        Ok(st) => st,
        Err(e) => {
            stop_proxy(&proxy_process);
            return Err(e.into());
        }
    };
    st.proxy_pid = proxy_process.map(|p| p.pid);
    st.write(&args.state)?;
    let up = UpReport {
        run_id,
        backend: backend_name,
        server_version,
        nodes: urls,
        proxy_api,
        state: args.state.clone(),
        stack: args.stack_out.clone(),
    };
    if args.json {
        redlock_chaos::outln!("{}", serde_json::to_string_pretty(&up)?);
    } else {
        redlock_chaos::out!("{}", up.render());
    }
    Ok(())
}

/// What `chaos up` brought up, as it prints it.
#[derive(Debug, serde::Serialize)]
struct UpReport {
    run_id: String,
    backend: String,
    server_version: String,
    /// The URLs workers (and the examples, through `REDLOCK_NODES`) use.
    nodes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy_api: Option<String>,
    state: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack: Option<PathBuf>,
}

impl UpReport {
    /// The text form; its `export REDLOCK_NODES=...` line is what the examples in
    /// `redlock/examples/` read (`eval "$(chaos up | grep ^export)"`).
    fn render(&self) -> String {
        let mut s = format!(
            "run {} ({} backend, {}), {} nodes:\n",
            self.run_id,
            self.backend,
            self.server_version,
            self.nodes.len()
        );
        for url in &self.nodes {
            s.push_str(&format!("  {url}\n"));
        }
        if let Some(api) = &self.proxy_api {
            s.push_str(&format!(
                "  proxy API: {api} (proxies node0..node{})\n",
                self.nodes.len().saturating_sub(1)
            ));
        }
        s.push_str(&format!("state: {}\n", self.state.display()));
        if let Some(stack) = &self.stack {
            s.push_str(&format!("stack: {}\n", stack.display()));
        }
        s.push_str(&format!("export REDLOCK_NODES={}\n", self.nodes.join(",")));
        s
    }
}

async fn down(args: DownArgs) -> Result<(), Box<dyn std::error::Error>> {
    let st = if args.state.exists() {
        Some(ClusterState::read(&args.state)?)
    } else {
        None
    };
    // Which Docker runs to remove: never every user's runs unless asked for (`--all`).
    let docker_runs: Option<Option<String>> = match (&args.run, args.all, &st) {
        (Some(id), _, _) => Some(Some(id.clone())),
        (None, true, _) => Some(None),
        (None, false, Some(st)) if st.backend == BackendKind::Docker => {
            Some(Some(st.run_id.clone()))
        }
        (None, false, Some(_)) => None,
        (None, false, None) => {
            return Err(CommandError::Usage(format!(
                "no state file at {}: name the run to remove with --run ID (see `docker ps --filter label=redlock-chaos.run`), or --all for every run on this engine",
                args.state.display()
            ))
            .into());
        }
    };
    if let Some(st) = &st
        && st.backend == BackendKind::Local
    {
        let n = local::teardown_detached(st)?;
        let proxy = st.proxy_pid.is_some_and(proxy_process::stop);
        redlock_chaos::outln!(
            "local run {}: stopped {n} processes{}",
            st.run_id,
            if proxy { " and its proxy" } else { "" }
        );
    }
    // Docker resources are found by label, state file or not (a crashed run writes none).
    if let Some(run) = docker_runs
        && docker::engine_available().await
    {
        let removed = docker::remove_labelled(run.as_deref()).await?;
        redlock_chaos::outln!(
            "docker: removed {} containers, {} networks, {} volumes",
            removed.containers.len(),
            removed.networks.len(),
            removed.volumes.len()
        );
        if args.images {
            let d = docker::connect().await?;
            let images = docker::remove_images(&d).await?;
            redlock_chaos::outln!("docker: removed {} images", images.len());
        }
    }
    if let Some(st) = &st {
        if let Some(dir) = &st.dir
            && dir.exists()
        {
            std::fs::remove_dir_all(dir).map_err(|e| cluster::ClusterError::Io {
                action: format!("removing {}", dir.display()),
                source: e,
            })?;
        }
        std::fs::remove_file(&args.state).map_err(|e| cluster::ClusterError::Io {
            action: format!("removing {}", args.state.display()),
            source: e,
        })?;
    }
    Ok(())
}
