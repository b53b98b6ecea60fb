//! `chaos lock` as a user runs it: real servers, the real binary, its JSON and exit codes.

use crate::support;

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redis::Commands;

use support::RedisServer;

fn chaos_lock(nodes: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    chaos_lock_ttl(nodes, "2s", extra)
}

fn chaos_lock_ttl(nodes: &str, ttl: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args([
            "lock",
            "--nodes",
            nodes,
            "--resource",
            "cli:test",
            "--ttl",
            ttl,
            "--json",
        ])
        .args(extra)
        .output()
        .expect("run chaos lock");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        format!("{stdout}\n{stderr}"),
    )
}

#[test]
fn acquires_with_a_fence_and_reports_every_node() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let nodes: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    let (code, json, text) = chaos_lock(&nodes.join(","), &["--fence", "--wait", "1s"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["acquired"], true, "{text}");
    assert_eq!(json["resource"], "cli:test");
    assert!(
        json["validity_ms"]
            .as_u64()
            .is_some_and(|v| v > 0 && v <= 2000),
        "{text}"
    );
    assert!(json["elapsed_us"].as_u64().is_some(), "{text}");
    assert!(json["fence"].as_u64().is_some_and(|f| f >= 1), "{text}");
    let reported = json["nodes"].as_array().expect("nodes array");
    assert_eq!(reported.len(), 3, "{text}");
    for n in reported {
        assert!(
            n["addr"]
                .as_str()
                .is_some_and(|a| a.starts_with("127.0.0.1:")),
            "{text}"
        );
        assert!(n["outcome"].is_string(), "{text}");
    }
    // A second grant gets a larger token.
    let (_, again, text) = chaos_lock(&nodes.join(","), &["--fence"]);
    assert!(again["fence"].as_u64() > json["fence"].as_u64(), "{text}");
}

#[test]
fn fails_with_the_quorum_error_when_a_majority_is_down() {
    let up = RedisServer::start();
    let dead: Vec<String> = (0..2)
        .map(|_| format!("redis://127.0.0.1:{}", support::free_port()))
        .collect();
    let nodes = format!("redis://{},{}", up.addr(), dead.join(","));
    let (code, json, text) = chaos_lock(&nodes, &["--wait", "0s"]);
    // Not granted is an answer (3), not a safety failure (1) nor a broken harness (2).
    assert_eq!(code, 3, "{text}");
    assert_eq!(json["acquired"], false, "{text}");
    assert!(text.contains("needed 2"), "{text}");
}

/// Another owner holds the resource on 3 of 5 nodes and every node was just frozen and
/// thawed: the command fails, and when it has exited no key of ours is left anywhere (the
/// clean-up of its last attempt ran before the process ended).
#[test]
fn leaves_no_key_behind_when_the_resource_is_held_on_a_majority() {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let nodes: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    let admin = |s: &RedisServer| {
        redis::Client::open(format!("redis://{}", s.addr()))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("admin connection")
    };
    for s in &servers[..3] {
        let _: () = admin(s).pset_ex("cli:test", "other", 30_000).expect("SET");
    }
    for signal in [Signal::SIGSTOP, Signal::SIGCONT] {
        for s in &servers {
            let pid = Pid::from_raw(i32::try_from(s.pid()).expect("pid"));
            kill(pid, signal).expect("signal the server");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // A 10 s TTL gives each node call a 500 ms deadline: the clean-up completes within it
    // even on a loaded machine.
    let (code, json, text) = chaos_lock_ttl(&nodes.join(","), "10s", &["--wait", "300ms"]);
    assert_eq!(code, 3, "{text}");
    assert_eq!(json["acquired"], false, "{text}");
    for (i, s) in servers.iter().enumerate() {
        let value: Option<String> = admin(s).get("cli:test").expect("GET");
        let expected = (i < 3).then(|| "other".to_owned());
        assert_eq!(value, expected, "node {i} after chaos lock exited: {text}");
    }
}

/// SIGTERM (and SIGHUP) while `chaos lock --hold` holds the lease: the command releases it
/// before it exits with 2, so no key is left to expire by itself.
#[test]
fn a_signal_during_the_hold_releases_the_lease_and_exits_2() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let nodes: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    let admin = |s: &RedisServer| {
        redis::Client::open(format!("redis://{}", s.addr()))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("admin connection")
    };
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let child = Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args([
                "lock",
                "--resource",
                "cli:held",
                "--ttl",
                "60s",
                "--hold",
                "60s",
            ])
            .arg("--nodes")
            .arg(nodes.join(","))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run chaos lock");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let held = |s: &RedisServer| admin(s).exists::<_, bool>("cli:held").expect("EXISTS");
        // Granted once every node has the key (bounded: 30 s, a thousand times the usual).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !servers.iter().all(held) {
            if std::time::Instant::now() > deadline {
                let _ = kill(pid, Signal::SIGKILL);
                panic!("chaos lock did not take the lock within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        kill(pid, signal).expect("signal");
        let out = child.wait_with_output().expect("wait");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{signal}: {text}");
        assert!(text.contains(signal.as_str()), "{text}");
        for (i, s) in servers.iter().enumerate() {
            assert!(!held(s), "{signal}: node {i} still holds the key: {text}");
        }
    }
}
