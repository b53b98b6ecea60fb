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
//! - `chaos bench`: our client beside the Rust peers on one local cluster, as ratios.
//! - `chaos run`: every scenario end to end with verdicts (see the library's `run`).
//! - `chaos worker` (hidden): one worker process of `chaos run`.
//! - `chaos toxiproxy-health` (hidden): the offline proxy image's health check.
//!
//! # Exit codes (the CI contract)
//! | code | meaning |
//! |---|---|
//! | 0 | done; every expectation met (`--help` and `--version` too) |
//! | 1 | a safety expectation failed (`run`, `report --exit-code`, `fencing-table`), or `lock` was not granted |
//! | 2 | the harness failed: a server, container, proxy or database could not be run or reached |
//! | 64 | usage: the command line is wrong (`EX_USAGE`); nothing was started |

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
use redlock_chaos::commands::lock::{self, LockArgs};
use redlock_chaos::commands::run::{self as run_cmd, RunArgs};
use redlock_chaos::run::worker_proc::{self, WorkerArgs};

#[derive(Debug, Parser)]
#[command(
    name = "chaos",
    version,
    propagate_version = true,
    about = "Chaos rig for fenced-redlock",
    after_help = "Exit codes: 0 pass, 1 a safety expectation failed, 2 the harness failed, 64 usage error."
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
    /// Benchmark our client against rslock, redlock 2.0 and a one-node floor.
    Bench(BenchArgs),
    /// Run every scenario (or some) end to end: faults, four fenced-counter modes, verdicts.
    Run(RunArgs),
    /// One worker process of `chaos run` (internal).
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Exit 0 when the Toxiproxy API answers with its proxy list (internal: the offline
    /// proxy image's health check, standing in for `toxiproxy-cli list`).
    #[command(hide = true)]
    ToxiproxyHealth(ToxiproxyHealthArgs),
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
    println!("{} proxies: {}", names.len(), names.join(", "));
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
        println!("{}", serde_json::to_string_pretty(&*SCENARIOS)?);
        return Ok(());
    }
    if let Some(name) = &args.toml {
        let s = find(name).ok_or_else(|| {
            let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name.as_str()).collect();
            UsageError(format!(
                "--toml {name}: no such scenario; use one of {}",
                known.join(", ")
            ))
        })?;
        print!("{}", toml::to_string(s)?);
        return Ok(());
    }
    for s in SCENARIOS.iter() {
        let work = match s.work {
            Work::Run => "sections: --work (5 ms)".to_owned(),
            Work::Fixed(d) => format!("sections: {} ms of work", d.as_millis()),
            Work::ToValidity => format!(
                "sections: work until {:.0}-{:.0} % of the TTL before the reported validity ends",
                redlock_chaos::run::chaos_workload::WRITE_ALLOWANCE * 100.0,
                redlock_chaos::run::chaos_workload::TO_VALIDITY_MARGIN * 100.0
            ),
        };
        println!(
            "{:<20} {}  [{work}] [expect: {}]",
            s.name,
            s.about,
            s.expectation.describe()
        );
    }
    println!("\n{}", redlock_chaos::run::verdict::RULES);
    Ok(())
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Report directory holding report.json (as written by `chaos run --report DIR`).
    dir: PathBuf,
    /// Exit with the report's verdict code (0 pass, 1 fail, 2 unknown) instead of 0.
    #[arg(long)]
    exit_code: bool,
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
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Server implementation of the 5 local primaries.
    #[arg(long, value_enum, default_value_t = Flavour::Valkey)]
    flavour: Flavour,
    /// AOF fsync policy of the nodes during the run (5 nodes share one disk here).
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

async fn bench(args: BenchArgs) -> Result<(), redlock_chaos::bench::BenchError> {
    use redlock_chaos::bench::{self, BenchConfig, BenchError};
    let mut config = BenchConfig::new(args.quick);
    config.flavour = args.flavour;
    config.appendfsync = args.appendfsync;
    if let Some(r) = args.repeat {
        config.repeat = r as usize;
    }
    if !args.cases.is_empty() {
        config.cases = args.cases;
    }
    // Ctrl-C drops the run, whose guards stop the servers (thawing a frozen one first), the
    // proxy and PostgreSQL; its default action would leave them running.
    let report = tokio::select! {
        r = bench::run(&config) => r?,
        _ = tokio::signal::ctrl_c() => return Err(BenchError::Interrupted),
    };
    print!("{}", bench::table::render(&report));
    if let Some(path) = &args.json {
        let io = |source| BenchError::Io {
            action: format!("writing {}", path.display()),
            source,
        };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| io(std::io::Error::other(e)))?;
        std::fs::write(path, text).map_err(io)?;
    }
    Ok(())
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
    // `chaos run` prints its own progress; the proxy's per-connection warnings (expected
    // while nodes are killed) and the nemesis's info lines would drown it.
    let default_filter = match cli.command {
        Command::Run(_) => "warn,redlock_chaos::proxy=error,redlock_chaos::run=info",
        Command::Worker(_) | Command::ToxiproxyHealth(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal shows them, not in CI logs or files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Toxiproxy(args) => match args.api_addr() {
            Ok(addr) => redlock_chaos::proxy::run(addr, &args.options())
                .await
                .map_err(Into::into),
            Err(e) => Err(e.into()),
        },
        Command::Up(args) => up(args).await.map_err(Into::into),
        Command::Down(args) => down(args).await,
        Command::Images => redlock_chaos::commands::images::run()
            .await
            .map(|images| print!("{}", redlock_chaos::commands::images::render(&images)))
            .map_err(Into::into),
        Command::ToxiproxyHealth(args) => toxiproxy_health(args).await,
        Command::Run(args) => return ExitCode::from(run_cmd::run(args).await),
        Command::Worker(args) => return ExitCode::from(worker_proc::serve(args).await),
        Command::Scenarios(args) => scenarios(args),
        Command::FencingTable(args) => {
            return match fencing_table::run(args).await {
                Ok(outcome) => {
                    print!("{}", outcome.text);
                    for f in &outcome.safety_failures {
                        eprintln!("chaos: safety: {f}");
                    }
                    if outcome.safety_failures.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    eprintln!("chaos: {e}");
                    ExitCode::from(EXIT_HARNESS)
                }
            };
        }
        Command::Report(args) => return report(args),
        Command::Lock(args) => {
            return match lock::run(args).await {
                Ok((out, acquired)) => {
                    println!("{out}");
                    if acquired {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    eprintln!("chaos: {e}");
                    ExitCode::from(EXIT_HARNESS)
                }
            };
        }
        Command::Bench(args) => bench(args).await.map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos: {e}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::from(EXIT_HARNESS)
            }
        }
    }
}

/// The harness failed (see the exit-code table in the module docs).
const EXIT_HARNESS: u8 = 2;
/// The command line is wrong (`EX_USAGE` of sysexits.h).
const EXIT_USAGE: u8 = redlock_chaos::commands::EXIT_USAGE;

/// A command line that parses but cannot be acted on (exit 64).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn report(args: ReportArgs) -> ExitCode {
    match redlock_chaos::report::rerender(&args.dir) {
        Ok((report, paths)) => {
            println!("{}", paths.html.display());
            println!("{}", paths.junit.display());
            let code = report.verdict.exit_code();
            if args.exit_code {
                ExitCode::from(code)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("chaos: {e}");
            ExitCode::from(EXIT_HARNESS)
        }
    }
}

async fn up(args: UpArgs) -> Result<(), cluster::ClusterError> {
    if args.state.exists() {
        return Err(cluster::ClusterError::StateFile {
            path: args.state.clone(),
            detail: "a cluster is already up; run `chaos down` first".into(),
        });
    }
    let backend = match args.backend {
        Some(b) => b,
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
    let spec = ClusterSpec::new(args.flavour, args.nodes).with_proxy(plan);
    // Ctrl-C while coming up drops the half-built cluster, whose Drop guard cleans up.
    let cluster = tokio::select! {
        c = AnyCluster::up(backend, spec) => match c {
            Ok(c) => c,
            Err(e) => {
                stop_proxy(&proxy_process);
                return Err(e);
            }
        },
        _ = tokio::signal::ctrl_c() => {
            stop_proxy(&proxy_process);
            eprintln!("interrupted; cleaned up");
            return Ok(());
        }
    };
    println!(
        "run {} ({} backend, {}), {} nodes:",
        cluster.run_id(),
        cluster.backend_name(),
        cluster.server_version(),
        cluster.nodes()
    );
    for i in 0..cluster.nodes() {
        println!("  {}", cluster.worker_url(NodeId(i))?);
    }
    if let Some(p) = cluster.proxy() {
        println!(
            "  proxy API: {} (proxies node0..node{})",
            p.base_url(),
            cluster.nodes() - 1
        );
    }
    if let Some(path) = &args.stack_out {
        let written = cluster.stack().and_then(|stack| {
            stack
                .write(path)
                .map_err(|e| cluster::ClusterError::io(format!("writing {}", path.display()), e))
        });
        if let Err(e) = written {
            stop_proxy(&proxy_process);
            return Err(e);
        }
    }
    let mut st = match cluster.detach() {
        Ok(st) => st,
        Err(e) => {
            stop_proxy(&proxy_process);
            return Err(e);
        }
    };
    st.proxy_pid = proxy_process.map(|p| p.pid);
    st.write(&args.state)?;
    println!("state: {}", args.state.display());
    if let Some(path) = &args.stack_out {
        println!("stack: {}", path.display());
    }
    Ok(())
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
            return Err(UsageError(format!(
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
        println!(
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
        println!(
            "docker: removed {} containers, {} networks, {} volumes",
            removed.containers.len(),
            removed.networks.len(),
            removed.volumes.len()
        );
        if args.images {
            let d = docker::connect().await?;
            let images = docker::remove_images(&d).await?;
            println!("docker: removed {} images", images.len());
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
