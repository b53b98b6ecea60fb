//! `chaos lock` as a user runs it: real servers, the real binary, its JSON and exit codes.

mod support;

use std::process::Command;

use support::RedisServer;

fn chaos_lock(nodes: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args([
            "lock",
            "--nodes",
            nodes,
            "--resource",
            "cli:test",
            "--ttl",
            "2s",
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
    assert_ne!(code, 0, "{text}");
    assert_eq!(json["acquired"], false, "{text}");
    assert!(text.contains("needed 2"), "{text}");
}
