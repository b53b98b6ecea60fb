//! The compose stack comes up with no registry: `chaos images`, then
//! `docker-compose -f docker-compose.yml -f docker-compose.offline.yml up -d` under a project
//! of its own; once every service is healthy, workers reach each node through its proxy,
//! inspection reaches it directly, a proxy disabled through the Toxiproxy API cuts its port
//! and enabling it restores it, PostgreSQL answers at the stack file's URL, and `chaos run
//! --stack compose/stack.toml` passes kill-minority and partition-minority. `down -v` runs
//! on every exit path a test can take (a guard's Drop, also while unwinding from a panic).
//!
//! The base file publishes fixed ports (8474, 16379..16383, 26379..26383, 15432: all below
//! Linux's ephemeral range, 32768–60999, from which any test's outgoing connection or
//! port-0 listener may take a port; 55432 did, once) and names
//! its containers: one stack per engine. Nextest runs this in the `docker-cluster` group,
//! one test at a time. A run killed before its guard ran (a nextest timeout) leaves its
//! stack; the next run removes it (its project name carries the pid, which is gone by then).

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::HealthStatusEnum;
use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};
use redlock_chaos::cluster::{docker, resp};

/// Project names of this test: `<prefix><pid>`.
const PROJECT_PREFIX: &str = "redlock-offline-test-";
const SERVICES: [&str; 7] = [
    "node0",
    "node1",
    "node2",
    "node3",
    "node4",
    "toxiproxy",
    "postgres",
];
/// What the base file publishes on 127.0.0.1.
const FIXED_PORTS: [u16; 12] = [
    8474, 16379, 16380, 16381, 16382, 16383, 26379, 26380, 26381, 26382, 26383, 15432,
];
const API: &str = "http://127.0.0.1:8474";
const PG_URL: &str = "postgres://chaos:chaos@127.0.0.1:15432/chaos";
/// Bound on waiting for every health check (they pass in ~15 s here).
const HEALTHY_WITHIN: Duration = Duration::from_secs(90);
/// Bound on one request to a node or the database.
const STEP: Duration = Duration::from_secs(5);

/// The `chaos` binary: `CHAOS_BIN` (scripts/test sets the optimized one: it runs the
/// workers of the attached run and goes into the proxy image) or this package's.
fn chaos_bin() -> PathBuf {
    std::env::var_os("CHAOS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chaos")))
}

fn compose_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compose")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `docker-compose` (v1) or `docker compose` (v2), whichever answers.
fn compose_program() -> Option<Vec<&'static str>> {
    [vec!["docker-compose"], vec!["docker", "compose"]]
        .into_iter()
        .find(|cmd| {
            Command::new(cmd[0])
                .args(&cmd[1..])
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The stack of one project, brought down (`down -v`) when dropped.
struct Stack {
    program: Vec<&'static str>,
    project: String,
}

impl Stack {
    fn compose(&self, args: &[&str]) -> Output {
        Command::new(self.program[0])
            .args(&self.program[1..])
            .args(["-p", &self.project])
            .args([
                "-f",
                "docker-compose.yml",
                "-f",
                "docker-compose.offline.yml",
            ])
            .args(args)
            .current_dir(compose_dir())
            .output()
            .expect("run compose")
    }

    fn down(&self) -> Output {
        self.compose(&["down", "-v", "--remove-orphans", "--timeout", "5"])
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let out = self.down();
        if !out.status.success() {
            eprintln!(
                "compose down -v for {} failed: {}",
                self.project,
                text(&out)
            );
        }
    }
}

/// Skips (or, under CI, fails) when there is nothing to run the stack on.
async fn prerequisites() -> Option<Vec<&'static str>> {
    let missing = if !docker::engine_available().await {
        "no Docker engine answers"
    } else if let Some(program) = compose_program() {
        return Some(program);
    } else {
        "neither docker-compose nor `docker compose` is installed"
    };
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "{missing} and CI=true: the offline compose stack cannot be tested"
    );
    println!("SKIPPED compose_offline: {missing}");
    None
}

/// Brings down stacks of earlier runs of this test whose process is gone.
async fn remove_abandoned(d: &Docker, program: &[&'static str]) {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec!["com.docker.compose.project".to_string()],
    )]);
    let containers = d
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list containers");
    let mut projects: Vec<String> = containers
        .into_iter()
        .filter_map(|c| c.labels?.get("com.docker.compose.project").cloned())
        .filter(|p| {
            p.strip_prefix(PROJECT_PREFIX)
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !PathBuf::from(format!("/proc/{pid}")).exists())
        })
        .collect();
    projects.sort();
    projects.dedup();
    for project in projects {
        eprintln!("removing the stack an earlier run left: {project}");
        drop(Stack {
            program: program.to_vec(),
            project,
        });
    }
}

/// Names the first fixed port someone else holds (their stack, say), so the failure says why.
fn assert_ports_free() {
    for port in FIXED_PORTS {
        if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
            panic!(
                "127.0.0.1:{port} is taken ({e}); the compose stack publishes fixed ports: \
                 is another stack up (docker ps --filter name=redlock-chaos-)?"
            );
        }
    }
}

/// Waits until every service's health check passes; panics with the states and logs if not.
async fn wait_healthy(d: &Docker, stack: &Stack) {
    let deadline = Instant::now() + HEALTHY_WITHIN;
    loop {
        let mut states = Vec::new();
        for service in SERVICES {
            let name = format!("redlock-chaos-{service}");
            let state = match d
                .inspect_container(&name, None::<InspectContainerOptions>)
                .await
            {
                Ok(c) => {
                    let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
                    assert_eq!(
                        labels.get("com.docker.compose.project"),
                        Some(&stack.project),
                        "{name} belongs to another project"
                    );
                    c.state.and_then(|s| s.health).and_then(|h| h.status)
                }
                Err(e) => panic!("{name}: {e}"),
            };
            states.push((service, state));
        }
        if states
            .iter()
            .all(|(_, s)| *s == Some(HealthStatusEnum::HEALTHY))
        {
            return;
        }
        if Instant::now() > deadline {
            let logs = stack.compose(&["logs", "--no-color", "--tail", "20"]);
            panic!(
                "not every service healthy within {HEALTHY_WITHIN:?}: {states:?}\n{}",
                text(&logs)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::time::timeout(STEP, client.get_multiplexed_async_connection())
        .await
        .unwrap_or_else(|_| panic!("{url}: no connection within {STEP:?}"))
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

async fn cmd<T: redis::FromRedisValue>(
    conn: &mut redis::aio::MultiplexedConnection,
    url: &str,
    command: &redis::Cmd,
) -> T {
    tokio::time::timeout(STEP, command.query_async(conn))
        .await
        .unwrap_or_else(|_| panic!("{url}: no answer within {STEP:?}"))
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_stack_comes_up_and_is_torn_down() {
    let started = Instant::now();
    let Some(program) = prerequisites().await else {
        return;
    };
    let d = docker::connect().await.expect("connect");
    remove_abandoned(&d, &program).await;
    assert_ports_free();

    let images = Command::new(chaos_bin())
        .arg("images")
        .output()
        .expect("run chaos images");
    assert!(images.status.success(), "chaos images: {}", text(&images));
    println!("chaos images ({:?}):\n{}", started.elapsed(), text(&images));

    let stack = Stack {
        program,
        project: format!("{PROJECT_PREFIX}{}", std::process::id()),
    };
    let up = stack.compose(&["up", "-d"]);
    assert!(up.status.success(), "compose up: {}", text(&up));
    wait_healthy(&d, &stack).await;
    println!("healthy after {:?}", started.elapsed());

    // Workers through proxy `node<i>`, inspection direct: a write through one is read
    // through the other, so proxy i forwards to node i.
    for i in 0..5u16 {
        let worker = format!("redis://127.0.0.1:{}", 26379 + i);
        let admin = format!("redis://127.0.0.1:{}", 16379 + i);
        let mut w = connect(&worker).await;
        let pong: String = cmd(&mut w, &worker, &redis::cmd("PING")).await;
        assert_eq!(pong, "PONG", "{worker}");
        let value = format!("through proxy node{i}");
        let () = cmd(
            &mut w,
            &worker,
            redis::cmd("SET").arg("offline-test").arg(&value),
        )
        .await;
        let got: String = cmd(&mut w, &worker, redis::cmd("GET").arg("offline-test")).await;
        assert_eq!(got, value, "{worker}");
        let mut a = connect(&admin).await;
        let pong: String = cmd(&mut a, &admin, &redis::cmd("PING")).await;
        assert_eq!(pong, "PONG", "{admin}");
        let got: String = cmd(&mut a, &admin, redis::cmd("GET").arg("offline-test")).await;
        assert_eq!(got, value, "{admin} does not hold what {worker} wrote");
    }

    // A proxy disabled through the API cuts its port; enabled, it forwards again.
    let api = redlock_chaos::proxy::Client::new(API).expect("client");
    let proxies = api.proxies().await.expect("list proxies");
    assert_eq!(
        proxies.keys().map(String::as_str).collect::<Vec<_>>(),
        ["node0", "node1", "node2", "node3", "node4"]
    );
    api.disable("node0").await.expect("disable node0");
    let cut = resp::ping(addr(26379), Duration::from_secs(2)).await;
    assert!(cut.is_err(), "26379 still answers PING with node0 disabled");
    resp::ping(addr(26380), STEP)
        .await
        .expect("node1 stays up while node0 is cut");
    api.enable("node0").await.expect("enable node0");
    resp::ping(addr(26379), STEP)
        .await
        .expect("26379 answers again once node0 is enabled");

    // PostgreSQL at the stack file's URL, with the password the compose file sets.
    let (client, conn) =
        tokio::time::timeout(STEP, tokio_postgres::connect(PG_URL, tokio_postgres::NoTls))
            .await
            .expect("postgres: no connection in time")
            .expect("postgres connect");
    let conn = tokio::spawn(conn);
    let row = client
        .query_one("SELECT current_database(), current_user, 40 + 2", &[])
        .await
        .expect("query");
    assert_eq!(row.get::<_, String>(0), "chaos");
    assert_eq!(row.get::<_, String>(1), "chaos");
    assert_eq!(row.get::<_, i32>(2), 42);
    drop(client);
    let _ = conn.await;

    // Attached: two scenarios through compose/stack.toml, container kills on this engine
    // and partitions at the stack's Toxiproxy; both must pass.
    let report_dir = std::env::temp_dir().join(format!("compose-attach-{}", std::process::id()));
    let run = Command::new(chaos_bin())
        .args(["run", "--stack"])
        .arg(compose_dir().join("stack.toml"))
        .args([
            "--scenario",
            "kill-minority,partition-minority",
            "--duration",
            "10s",
            "--seed",
            "20261201",
            "--report",
        ])
        .arg(&report_dir)
        .output()
        .expect("run chaos run --stack");
    println!(
        "chaos run --stack ({:?}):\n{}",
        started.elapsed(),
        text(&run)
    );
    let report: redlock_chaos::report::ChaosReport = serde_json::from_str(
        &std::fs::read_to_string(report_dir.join("report.json")).expect("report.json"),
    )
    .expect("report.json parses");
    let _ = std::fs::remove_dir_all(&report_dir);
    assert_eq!(report.backend, "attached");
    assert_eq!(report.server_version.split(' ').next(), Some("valkey"));
    for s in &report.scenarios {
        assert_eq!(
            s.verdict.outcome,
            redlock_chaos::report::Outcome::Pass,
            "{}: {:#?}",
            s.name,
            s.verdict.reasons
        );
        assert!(!s.faults.is_empty(), "{}: no fault was applied", s.name);
    }
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));

    let down = stack.down();
    assert!(down.status.success(), "compose down -v: {}", text(&down));
    for service in SERVICES {
        let name = format!("redlock-chaos-{service}");
        assert!(
            d.inspect_container(&name, None::<InspectContainerOptions>)
                .await
                .is_err(),
            "{name} is still there after down -v"
        );
    }
    let ours = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("com.docker.compose.project={}", stack.project)],
    )]);
    let volumes = d
        .list_volumes(Some(
            bollard::query_parameters::ListVolumesOptionsBuilder::default()
                .filters(&ours)
                .build(),
        ))
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default();
    assert!(
        volumes.is_empty(),
        "volumes left after down -v: {volumes:?}"
    );
    let networks = d
        .list_networks(Some(
            bollard::query_parameters::ListNetworksOptionsBuilder::default()
                .filters(&ours)
                .build(),
        ))
        .await
        .expect("list networks");
    assert!(
        networks.is_empty(),
        "networks left after down -v: {networks:?}"
    );
    println!("up, checked and down in {:?}", started.elapsed());
}
