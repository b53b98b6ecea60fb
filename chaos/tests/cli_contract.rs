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
