//! The `chaos` command line as CI scripts rely on it: `--version`, the exit-code table
//! (0 pass, 1 safety, 2 harness, 4 liveness, 64 usage), every configuration error refused
//! with 64 before anything starts, SIGINT / SIGTERM / SIGHUP ending in 2 with nothing left
//! running, stdout carrying JSON alone with `--json`, the environment in `--help`, and
//! `chaos down` removing only the runs it is told to remove.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bollard::query_parameters::InspectNetworkOptions;
use redlock_chaos::cluster::docker;
use redlock_chaos::cluster::{LABEL_PROJECT, LABEL_RUN, PROJECT};

fn chaos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(args)
        .output()
        .expect("run chaos")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `chaos scenarios | head`: a reader that stops early ends the output quietly (no panic on
/// the closed pipe), with the command's own exit code.
#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    for args in [&["scenarios"][..], &["scenarios", "--json"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chaos");
        // The reader goes away before the first line is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn version_everywhere() {
    // clap names a subcommand's version line `chaos-run 0.1.0`.
    for args in [
        &["--version"][..],
        &["run", "--version"],
        &["bench", "--version"],
        &["toxiproxy", "--version"],
    ] {
        let out = chaos(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        let line = text(&out);
        assert!(
            line.starts_with("chaos") && line.trim_end().ends_with(env!("CARGO_PKG_VERSION")),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn usage_errors_exit_64_and_help_exits_0() {
    for args in [
        &["no-such-command"][..],
        &["run", "--no-such-flag"],
        &["run", "--duration", "soon"],
        &["down", "--run", "a", "--all"],
        &["fencing-table", "--modes", "sideways"],
    ] {
        let out = chaos(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", text(&out));
    }
    let out = chaos(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("Usage"), "{}", text(&out));
    // The exit codes CI reads, a liveness failure apart from a safety one.
    let help = text(&chaos(&["--help"]));
    for code in [
        "1 a safety expectation failed",
        "2 the harness failed",
        "4 every safety check met but a liveness check failed",
        "64 a setting to change",
    ] {
        assert!(help.contains(code), "{code:?} missing: {help}");
    }
}

#[test]
fn down_without_a_state_file_or_a_run_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("absent.json");
    let out = chaos(&["down", "--state", state.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("--run ID"), "{}", text(&out));
}

#[test]
fn harness_failures_exit_2() {
    // Nothing listens on port 1: the lock nodes cannot be reached at all.
    let out = chaos(&[
        "fencing-table",
        "--quick",
        "--runs",
        "1",
        "--rates",
        "0.01",
        "--modes",
        "claim_first",
        "--nodes",
        "redis://127.0.0.1:1",
        "--pg-url",
        "postgresql://nobody@127.0.0.1:1/none",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A private `TMPDIR` (world-writable and sticky like /tmp: the private PostgreSQL runs as
/// `postgres` when the tests run as root) and an environment variable that every process
/// the command starts inherits, so what it left behind can be found.
struct Sandbox {
    tmp: tempfile::TempDir,
    mark: String,
}

/// The variable [`Sandbox`] marks processes with.
const MARK: &str = "CHAOS_CLI_CONTRACT_MARK";

impl Sandbox {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777))
            .expect("chmod");
        let mark = format!(
            "contract-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Sandbox { tmp, mark }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// `chaos ARGS` in the sandbox, with none of the variables that would change what the
    /// command does.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
        c.args(args)
            .env("TMPDIR", self.path())
            .env(MARK, &self.mark)
            .env_remove("RUST_LOG")
            .env_remove("REDLOCK_NODES")
            .env_remove("PG_DSN");
        c
    }

    /// Live processes carrying the mark, or working in or naming the sandbox (Valkey and
    /// Redis overwrite their environment with their process title, so a server is found
    /// by its working directory, its data dir under the sandbox).
    fn marked(&self) -> Vec<String> {
        let needle = format!("{MARK}={}", self.mark);
        let root = self.path().to_string_lossy().into_owned();
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(p) = name.parse::<u32>() else { continue };
            if !alive(p) {
                continue;
            }
            let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
            if env.split(|b| *b == 0).any(|v| v == needle.as_bytes())
                || cwd.starts_with(self.path())
                || cmd.contains(&root)
            {
                out.push(format!("{p}: {cmd} (in {})", cwd.display()));
            }
        }
        out
    }

    /// What the command left in its `TMPDIR`.
    fn leftovers(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path())
            .expect("read sandbox")
            .flatten()
            .map(|e| e.path())
            .collect()
    }
}

/// Exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// `chaos ARGS` must be refused before it starts anything: exit 64 within a few seconds,
/// stderr naming what to change (`says`), stdout empty, no process and no temp dir left.
fn refused(args: &[&str], says: &str) {
    let sandbox = Sandbox::new();
    let mut child = sandbox
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chaos");
    // A refusal takes milliseconds; 30 s is far beyond it on a loaded machine, and far
    // below what a run that did start would take.
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
                nix::sys::signal::Signal::SIGINT,
            );
            let _ = child.wait();
            panic!("{args:?}: still running after 30 s; it was not refused up front");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{args:?}: {}", text(&out));
    assert!(
        stderr.contains(says),
        "{args:?}: want {says:?} in: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}: stdout: {}", text(&out));
    assert_eq!(
        sandbox.marked(),
        Vec::<String>::new(),
        "{args:?}: left running"
    );
    assert_eq!(
        sandbox.leftovers(),
        Vec::<PathBuf>::new(),
        "{args:?}: left in TMPDIR"
    );
}

#[test]
fn run_refuses_settings_it_cannot_act_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("write");
    let under_a_file = file.join("report");
    let under_a_file = under_a_file.to_str().expect("utf-8");
    let missing = dir.path().join("missing.toml");
    let missing = missing.to_str().expect("utf-8");
    let local = ["run", "--backend", "local"];
    let cases: &[(&[&str], &str)] = &[
        (&["--ttl", "0s"], "--ttl 0s: use a length above zero"),
        // The library's floor: a 2 ms per-node deadline does not fit in 2 ms.
        (&["--ttl", "2ms"], "--ttl 2ms"),
        // 5 ms of work per section leaves nothing of a 3 ms lease.
        (&["--ttl", "3ms"], "--ttl 13ms or more"),
        (
            &["--duration", "0s"],
            "--duration 0s: use a length above zero",
        ),
        (&["--duration", "100000h"], "use at most"),
        // amnesia-split's round of restarts and client-pause's first pauses need longer.
        (&["--duration", "1s"], "`amnesia-split` 20s"),
        (
            &["--scenario", "client-pause", "--duration", "2s"],
            "`client-pause` 7s",
        ),
        (
            &["--scenario", "nope"],
            "unknown scenario \"nope\"; use one of",
        ),
        (
            &["--scenario", "clock-jump", "--flavour", "redis"],
            "use --flavour valkey",
        ),
        (&["--scenario", ""], "--scenario is empty"),
        (&["--scenario", ","], "no scenario named"),
        (&["--workers", "0"], "--workers 0: use at least 1"),
        (&["--nodes", "0"], "--nodes 0: use at least 1"),
        (&["--workers", "200"], "lower --workers"),
        (
            &["--scenario", "client-pause", "--workers", "1"],
            "use --workers 2 or more",
        ),
        (
            &["--scenario", "amnesia-split", "--nodes", "4"],
            "use --nodes 5",
        ),
        (
            &["--pg-url", "postgresql://u@h:notaport/db"],
            "--pg-url / PG_DSN",
        ),
        (&["--report", under_a_file], "--report"),
        (&["--stack", missing], "--stack"),
        (
            &["--images", "sometimes"],
            "invalid value 'sometimes' for '--images",
        ),
        (
            &["--images", "official"],
            "--images official needs the docker backend",
        ),
        (&["--server-image", " "], "--server-image is empty"),
    ];
    for (args, says) in cases {
        let mut all = local.to_vec();
        all.extend_from_slice(args);
        refused(&all, says);
    }
    // Without --backend: refused before the engine is even asked for.
    refused(&["run", "--ttl", "0s"], "--ttl 0s");
    // The official server image has no libfaketime: clock scenarios are refused by name,
    // as with --flavour redis, before any image is looked for or pulled.
    for args in [
        &["run", "--images", "official", "--scenario", "clock-jump"][..],
        &[
            "run",
            "--backend",
            "docker",
            "--images",
            "official",
            "--scenario",
            "kill-minority,clock-skew-fast",
        ],
    ] {
        refused(args, "use --images offline");
    }
}

#[test]
fn fencing_table_refuses_rates_counts_and_nodes_out_of_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--rates", "2.0", "--runs", "0"],
            "--runs 0: use at least 1",
        ),
        (&["--rates", "2.0"], "--rates 2: not a probability"),
        (&["--rates=-0.1"], "--rates -0.1: not a probability"),
        (&["--rates", "NaN"], "not a probability"),
        (&["--workers", "0"], "--workers 0"),
        (&["--sections", "0"], "--sections 0"),
        (&["--jobs", "0"], "--jobs 0"),
        (&["--jobs", "100"], "lower --jobs"),
        (&["--run-timeout", "0s"], "--run-timeout 0s"),
        (&["--node-timeout", "0s"], "--node-timeout 0s"),
        // The presets' TTL is 200 ms: a per-node deadline must be shorter.
        (&["--node-timeout", "300ms"], "--node-timeout"),
        (&["--nodes", "redis://host:notaport"], "unusable URL"),
        (
            &["--nodes", "redis://127.0.0.1:1,redis://127.0.0.1:1"],
            "the same server",
        ),
        (&["--pg-url", "postgresql://u@h:notaport/db"], "--pg-url"),
        (&["--json-out", d], "--json-out"),
    ];
    for (args, says) in cases {
        let mut all = vec!["fencing-table"];
        all.extend_from_slice(args);
        refused(&all, says);
    }
}

#[test]
fn other_subcommands_refuse_bad_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let bad_json = d.join("bad.json");
    std::fs::write(&bad_json, "[{\"name\": 1}").expect("write");
    let not_a_report = d.join("not-a-report");
    std::fs::create_dir(&not_a_report).expect("mkdir");
    std::fs::write(not_a_report.join("report.json"), "{}").expect("write");
    let state = d.join("cluster.json");
    std::fs::write(&state, "{}").expect("write");
    let file = d.join("a-file");
    std::fs::write(&file, "x").expect("write");
    let p = |p: &Path| p.to_str().expect("utf-8").to_owned();
    let (bad_json, not_a_report, state) = (p(&bad_json), p(&not_a_report), p(&state));
    let under_a_file = p(&file.join("x.json"));
    let missing_dir = p(&d.join("no-such-report"));
    let in_a_missing_dir = p(&d.join("no-such-dir/bench.json"));
    let fresh_state = p(&d.join("fresh.json"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "lock",
                "--nodes",
                "redis://host:notaport",
                "--resource",
                "r",
            ],
            "unusable URL",
        ),
        (
            vec![
                "lock",
                "--nodes",
                "redis://127.0.0.1:1,redis://127.0.0.1:1",
                "--resource",
                "r",
            ],
            "the same server",
        ),
        (
            vec![
                "lock",
                "--nodes",
                "redis://127.0.0.1:1",
                "--resource",
                "r",
                "--ttl",
                "0s",
            ],
            "ttl is zero",
        ),
        (
            vec!["lock", "--nodes", "redis://127.0.0.1:1", "--resource", ""],
            "--resource is empty",
        ),
        (vec!["report", &missing_dir], "report.json"),
        (vec!["report", &not_a_report], "report.json"),
        (
            vec!["toxiproxy", "-port", "0", "-config", &bad_json],
            "-config",
        ),
        (
            vec![
                "up",
                "--backend",
                "local",
                "--nodes",
                "0",
                "--state",
                &fresh_state,
            ],
            "--nodes 0",
        ),
        (
            vec!["up", "--backend", "local", "--state", &state],
            "already up",
        ),
        (
            vec![
                "up",
                "--backend",
                "local",
                "--images",
                "official",
                "--state",
                &fresh_state,
            ],
            "--images official needs the docker backend",
        ),
        (
            vec!["up", "--images", "nope", "--state", &fresh_state],
            "invalid value 'nope' for '--images",
        ),
        (
            vec!["up", "--backend", "local", "--state", &under_a_file],
            "--state",
        ),
        (vec!["bench", "--json-out", &in_a_missing_dir], "--json-out"),
        (vec!["bench", "--json-out", &under_a_file], "--json-out"),
        // The old spelling of --json-out is refused, not read as something else.
        (vec!["bench", "--json", &fresh_state], "unexpected argument"),
        // Every case, in run order.
        (
            vec!["bench", "--case", "nope"],
            "[possible values: healthy, slow-node, acquire, hand-off, throughput, transport, durable, frozen-node, fencing-table]",
        ),
    ];
    for (args, says) in cases {
        refused(&args, says);
    }
}

/// `chaos ARGS` is stopped by `signal` once stderr shows `ready`: it exits 2, says so, and
/// leaves no process and nothing in its TMPDIR.
fn stopped_by(signal: nix::sys::signal::Signal, args: &[&str], ready: &str) {
    let sandbox = Sandbox::new();
    let child = sandbox
        .command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chaos");
    let mut child = KillOnDrop(child);
    let mut stderr = BufReader::new(child.0.stderr.take().expect("stderr"));
    let mut seen = String::new();
    let mut line = String::new();
    while !line.contains(ready) {
        line.clear();
        let n = stderr.read_line(&mut line).expect("read stderr");
        seen.push_str(&line);
        assert!(n > 0, "{args:?} ended before {ready:?}: {seen}");
    }
    // Mid-work: servers, PostgreSQL and (for `run`) workers are all up.
    std::thread::sleep(Duration::from_secs(1));
    let started = sandbox.marked();
    assert!(!started.is_empty(), "{args:?}: nothing to clean up?");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).expect("pid")),
        signal,
    )
    .expect("signal");
    // Teardown stops the workers (each bounded), heals, stops the servers and PostgreSQL:
    // seconds; 60 s is ten times what it takes on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?}: still running 60 s after {signal}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(2), "{args:?} after {signal}: {rest}");
    assert!(rest.contains(signal.as_str()), "{args:?}: {rest}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sandbox.marked().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        sandbox.marked(),
        Vec::<String>::new(),
        "{args:?}: left running after {signal} (started: {started:?})"
    );
    assert_eq!(
        sandbox.leftovers(),
        Vec::<PathBuf>::new(),
        "{args:?}: left in TMPDIR after {signal}"
    );
}

/// Kills the child if the test fails before it ended.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap_or(0)),
                nix::sys::signal::Signal::SIGINT,
            );
            let _ = self.0.wait();
        }
    }
}

/// One run of 1,000,000 sections: far longer than the test waits.
const LONG_TABLE: &[&str] = &[
    "fencing-table",
    "--runs",
    "1",
    "--rates",
    "0.01",
    "--modes",
    "none",
    "--sections",
    "1000000",
    "--jobs",
    "1",
];

#[test]
fn fencing_table_cleans_up_on_sigint_sigterm_and_sighup() {
    use nix::sys::signal::Signal;
    // Printed once PostgreSQL and the five primaries are up.
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        stopped_by(signal, LONG_TABLE, "fencing-table: seed");
    }
}

#[test]
fn sigterm_mid_run_exits_2_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report");
    stopped_by(
        nix::sys::signal::Signal::SIGTERM,
        &[
            "run",
            "--backend",
            "local",
            "--scenario",
            "kill-minority",
            "--duration",
            "60s",
            "--report",
            report.to_str().expect("utf-8"),
        ],
        "kill-minority: started",
    );
    // The interrupted run still leaves its report, with the verdict unknown.
    let json = std::fs::read_to_string(report.join("report.json")).expect("report.json");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["verdict"], "unknown", "{json}");
}

#[test]
fn sigterm_mid_bench_exits_2_and_leaves_nothing_running() {
    stopped_by(
        nix::sys::signal::Signal::SIGTERM,
        &["bench", "--case", "healthy,throughput", "--repeat", "3"],
        "bench: round 1/3",
    );
}

/// Two labelled networks of two fake runs: `chaos down --run A` removes A's, never B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_removes_only_the_named_run() {
    if !docker::engine_available().await {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "no Docker engine answers and CI=true"
        );
        println!("SKIPPED down_removes_only_the_named_run: no Docker engine answers");
        return;
    }
    let d = docker::connect().await.expect("connect");
    let pid = std::process::id();
    let (a, b) = (format!("cli-test-{pid}-a"), format!("cli-test-{pid}-b"));
    for run in [&a, &b] {
        let labels = HashMap::from([
            (LABEL_PROJECT.to_string(), PROJECT.to_string()),
            (LABEL_RUN.to_string(), run.clone()),
        ]);
        d.create_network(bollard::models::NetworkCreateRequest {
            name: run.clone(),
            labels: Some(labels),
            ..Default::default()
        })
        .await
        .expect("create network");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("absent.json");
    let out = tokio::task::spawn_blocking({
        let (a, state) = (a.clone(), state.clone());
        move || {
            chaos(&[
                "down",
                "--state",
                state.to_str().expect("path"),
                "--run",
                &a,
            ])
        }
    })
    .await
    .expect("join");
    let a_left = d.inspect_network(&a, None::<InspectNetworkOptions>).await;
    let b_left = d.inspect_network(&b, None::<InspectNetworkOptions>).await;
    let _ = d.remove_network(&a).await;
    let _ = d.remove_network(&b).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        a_left.is_err(),
        "run {a} was named but its network is still there"
    );
    assert!(
        b_left.is_ok(),
        "run {b} was not named but its network was removed"
    );
}

/// A scenario with no faults: the shortest real run there is.
const QUIET: &str = r#"name = "quiet"
expectation = "safe-and-available"
timeline = []
"#;

#[test]
fn run_json_puts_json_alone_on_stdout_and_no_log_lines_on_stderr() {
    let sandbox = Sandbox::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("quiet.toml");
    std::fs::write(&scenario, QUIET).expect("write");
    let report = dir.path().join("report");
    let out = sandbox
        .command(&[
            "run",
            "--backend",
            "local",
            "--scenario-file",
            scenario.to_str().expect("utf-8"),
            "--nodes",
            "3",
            "--workers",
            "1",
            "--duration",
            "2s",
            "--json",
            "--report",
            report.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run chaos run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // `chaos run --json | python3 -m json.tool`: the whole of stdout is one JSON document.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v["scenarios"][0]["name"], "quiet", "{v}");
    let mut tool = Command::new("python3")
        .args(["-m", "json.tool"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 -m json.tool");
    std::io::Write::write_all(&mut tool.stdin.take().expect("stdin"), &out.stdout).expect("pipe");
    assert!(tool.wait().expect("json.tool").success());
    // The table people read went to stderr; no tracing lines without RUST_LOG.
    assert!(stderr.contains("overall:"), "{stderr}");
    for level in [" INFO ", " WARN "] {
        assert!(
            !stderr.contains(level),
            "a log line without RUST_LOG: {stderr}"
        );
    }
    assert_eq!(sandbox.marked(), Vec::<String>::new());
}

#[test]
fn fencing_table_json_on_stdout_and_in_json_out_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("table.json");
    let out = Sandbox::new()
        .command(&[
            "fencing-table",
            "--runs",
            "1",
            "--rates",
            "0.05",
            "--modes",
            "none",
            "--sections",
            "40",
            "--workers",
            "2",
            "--jobs",
            "1",
            "--json",
            "--json-out",
            file.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run chaos fencing-table");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("json-out")).expect("json");
    assert_eq!(stdout, written);
    assert!(
        stdout["rows"].as_array().is_some_and(|r| !r.is_empty()),
        "{stdout}"
    );
    // The table went to stderr.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("seed"),
        "{}",
        text(&out)
    );
}

/// `chaos up` ends with the `export REDLOCK_NODES=...` line the examples read; `chaos lock`
/// (which reads the same variable) takes the lock on those nodes; `chaos down` removes them.
#[test]
fn up_prints_the_redlock_nodes_the_examples_read() {
    let sandbox = Sandbox::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("cluster.json");
    let state = state.to_str().expect("utf-8");
    let out = sandbox
        .command(&[
            "up",
            "--backend",
            "local",
            "--no-proxy",
            "--nodes",
            "3",
            "--state",
            state,
        ])
        .output()
        .expect("run chaos up");
    let down = || {
        let out = sandbox
            .command(&["down", "--state", state])
            .output()
            .expect("run chaos down");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let nodes = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export REDLOCK_NODES="))
        .map(str::to_owned);
    if out.status.code() != Some(0) || nodes.is_none() {
        down();
        panic!("chaos up: {}", text(&out));
    }
    let nodes = nodes.unwrap_or_default();
    assert_eq!(nodes.split(',').count(), 3, "{stdout}");
    let lock = sandbox
        .command(&["lock", "--resource", "cli:up", "--json"])
        .env("REDLOCK_NODES", &nodes)
        .output()
        .expect("run chaos lock");
    down();
    assert_eq!(lock.status.code(), Some(0), "{}", text(&lock));
    let v: serde_json::Value = serde_json::from_slice(&lock.stdout).expect("json");
    assert_eq!(v["acquired"], true, "{v}");
    assert_eq!(v["nodes"].as_array().map(Vec::len), Some(3), "{v}");
    assert!(
        eventually_empty(&sandbox),
        "left running after chaos down: {:?}",
        sandbox.marked()
    );
}

fn eventually_empty(sandbox: &Sandbox) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sandbox.marked().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    sandbox.marked().is_empty()
}

/// Every variable the binary reads is in `chaos --help` and in the README's table.
#[test]
fn environment_is_documented_in_help_and_readme() {
    let out = chaos(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    for (name, _) in redlock_chaos::commands::environment::VARIABLES {
        assert!(
            help.contains(name),
            "{name} missing from chaos --help:\n{help}"
        );
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "{name} missing from the README's environment table"
        );
    }
    // And the sources read no other variable: every `var_os("X")` / `env = "X"` is listed.
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut read = Vec::new();
    collect_env_reads(Path::new(src), &mut read);
    for name in read {
        assert!(
            redlock_chaos::commands::environment::VARIABLES
                .iter()
                .any(|(n, _)| *n == name),
            "the sources read {name}, which commands::environment does not list"
        );
    }
}

/// Names in `var_os("NAME")`, `var("NAME")` and `env = "NAME"` under `dir`, and the
/// `*_ENV` constants' values.
fn collect_env_reads(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_env_reads(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for pat in ["var_os(\"", "var(\"", "env = \"", "_ENV: &str = \""] {
            for (i, _) in text.match_indices(pat) {
                let rest = &text[i + pat.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                // PATH is the system's search path, not a setting of ours.
                if !name.is_empty() && name != "PATH" && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
}
