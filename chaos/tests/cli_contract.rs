//! The `chaos` command line as CI scripts rely on it: `--version`, the exit-code table
//! (0 pass, 1 safety, 2 harness, 64 usage) and `chaos down` removing only the runs it is
//! told to remove.

use std::collections::HashMap;
use std::process::{Command, Output};

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

/// Processes whose parent is `pid` (the servers and PostgreSQL a command started).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // Fields after the command name: state, ppid, ...
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Private PostgreSQL servers (postmasters; `pg_ctl` daemonizes them, so they are nobody's
/// children).
fn private_postgres() -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("postgres") && cmdline.contains("redlock-chaos-pg-") {
            out.push(p);
        }
    }
    out
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

/// Exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn ctrl_c_in_fencing_table_exits_2_and_leaves_nothing_running() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let before = private_postgres();
    let child = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args([
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
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chaos fencing-table");
    let mut child = KillOnDrop(child);
    let mut stderr = BufReader::new(child.0.stderr.take().expect("stderr"));
    let mut line = String::new();
    // Printed once PostgreSQL and the five primaries are up.
    while !line.starts_with("fencing-table: seed") {
        line.clear();
        let n = stderr.read_line(&mut line).expect("read stderr");
        assert!(
            n > 0,
            "chaos fencing-table ended before it started its runs"
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    let mut started = children(child.0.id());
    assert_eq!(started.len(), 5, "five servers expected: {started:?}");
    let pg: Vec<u32> = private_postgres()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!pg.is_empty(), "its private postgres");
    started.extend(pg);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).expect("pid")),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "still running 30 s after Ctrl-C");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(2), "{rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<&u32> = started.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "left running after Ctrl-C: {left:?}");
}
