//! `chaos bench --quick --json-out FILE`: the JSON has the promised shape and every client produced
//! samples. No speed is asserted (the machine is shared).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn quick_bench_writes_a_complete_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("bench.json");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["bench", "--quick", "--json-out"])
        .arg(&json)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run chaos bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chaos bench failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // That --quick stays quick, not a speed: it aims at well under a minute on a quiet
    // machine, and 10 minutes is ten times that (the full bench takes hours).
    assert!(
        started.elapsed() < Duration::from_secs(600),
        "took {:?}",
        started.elapsed()
    );
    assert!(stdout.contains("ratios"), "{stdout}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("read json"))
        .expect("valid JSON");
    let cases = report["cases"].as_array().expect("cases array");
    for row in cases {
        for field in ["case", "client"] {
            assert!(row[field].is_string(), "{field} in {row}");
        }
        for field in ["p50_us", "p99_us", "ops_per_s"] {
            assert!(
                row[field].is_number() || row[field].is_null(),
                "{field} in {row}"
            );
        }
        assert!(row["timeouts"].is_u64(), "timeouts in {row}");
    }
    assert!(report["ratios"].is_object());
    assert!(report["machine"]["cpus"].is_u64());
    assert!(report["date"].as_str().is_some_and(|d| d.len() >= 20));

    let samples = |case: &str, client: &str| {
        cases
            .iter()
            .find(|r| r["case"] == case && r["client"] == client)
            .and_then(|r| r["samples"].as_u64())
            .unwrap_or_else(|| panic!("no row {case} / {client}"))
    };
    let mut clients = vec!["ours", "ours-fenced", "ours-jump-guard", "floor-1-node"];
    if cfg!(feature = "peers") {
        clients.extend(["rslock-0.10", "redlock-2.0-seq"]);
    }
    for client in &clients {
        assert!(
            samples("healthy", client) > 0,
            "{client}: no healthy samples"
        );
        assert!(
            samples("throughput", client) > 0,
            "{client}: no throughput samples"
        );
        if *client != "floor-1-node" {
            assert!(
                samples("slow-node", client) > 0,
                "{client}: no slow-node samples"
            );
            assert!(
                samples("hand-off", client) > 0,
                "{client}: no hand-off samples"
            );
        }
    }
    // Ours has per-node deadlines, so a frozen node never stops it.
    assert!(samples("frozen-node/acquire", "ours") > 0);
    // Durable votes at both fsync policies, beside the memory votes they are compared to.
    for case in ["durable/always", "durable/everysec"] {
        for client in ["ours-fenced", "ours-durable"] {
            assert!(samples(case, client) > 0, "{case} / {client}: no samples");
        }
    }
    // Both of the lock's connections, each row with the client's CPU per operation; the
    // bench itself checked (CLIENT LIST) that `ours-resp3` is on RESP3, and says so.
    for case in ["transport/latency", "transport/throughput"] {
        for client in ["ours", "ours-resp3"] {
            assert!(samples(case, client) > 0, "{case} / {client}: no samples");
            let row = cases
                .iter()
                .find(|r| r["case"] == case && r["client"] == client)
                .expect("row");
            assert!(
                row["cpu_us_per_op"].as_f64().is_some_and(|c| c > 0.0),
                "{case} / {client}: no CPU per op: {row}"
            );
        }
    }
    let row = |case: &str, client: &str| {
        cases
            .iter()
            .find(|r| r["case"] == case && r["client"] == client)
            .unwrap_or_else(|| panic!("no row {case} / {client}"))
    };
    // Client CPU per op beyond throughput (issue 28, item 2).
    for case in ["healthy", "hand-off", "durable/always"] {
        let client = if case == "durable/always" {
            "ours-durable"
        } else {
            "ours"
        };
        let r = row(case, client);
        assert!(
            r["cpu_us_per_op"].as_f64().is_some_and(|c| c > 0.0),
            "{case} / {client}: no CPU per op: {r}"
        );
    }
    // The CPU ceiling (issue 28, item 5): the bench started the servers, so it knows their
    // pids, and 2 s of 64 tasks moves their CPU time by far more than a tick.
    let ours = row("throughput", "ours");
    let number = |field: &str| ours[field].as_f64().filter(|v| v.is_finite() && *v > 0.0);
    for field in [
        "server_cpu_us_per_op",
        "server_cores",
        "ceiling_ops_per_s",
        "of_ceiling",
    ] {
        assert!(number(field).is_some(), "{field}: {ours}");
    }
    let ops = ours["ops_per_s"].as_f64().expect("ops/s");
    let ceiling = number("ceiling_ops_per_s").expect("ceiling");
    let of = number("of_ceiling").expect("fraction");
    assert!((ops / ceiling - of).abs() <= 1e-6 * of, "{ours}");
    assert!(row("throughput", "redis-benchmark-P16")["ceiling_ops_per_s"].is_null());
    let notes = report["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.starts_with("transport: ours-resp3 speaks RESP3"))),
        "{notes:?}"
    );
    let ratios = report["ratios"].as_object().expect("ratios");
    for name in [
        "healthy_p50_ours_over_floor",
        "slow_acquire_p50_over_healthy",
        "frozen_acquire_p99_over_node_timeout",
        "handoff_p50_ms",
        "durable_always_p50_over_fenced",
        "durable_everysec_p50_over_fenced",
        "transport_resp3_p50_over_lean",
        "transport_resp3_ops_over_lean",
        "transport_resp3_cpu_over_lean",
        "throughput_ours_of_ceiling",
    ] {
        assert!(
            ratios[name]["value"].is_number(),
            "{name}: {}",
            ratios[name]
        );
    }
}

/// `--repeat` and `--case`: only the named cases run, each row aggregates every round and
/// carries its p50 range.
#[test]
fn repeat_and_case_selection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args([
            "bench",
            "--quick",
            "--repeat",
            "2",
            "--case",
            "healthy,hand-off",
        ])
        .arg("--json-out")
        .arg(&json)
        .env("RUST_LOG", "info")
        .output()
        .expect("run chaos bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chaos bench failed: {stderr}");
    assert!(
        stderr.contains("bench: round 2/2: hand-off"),
        "no progress line: {stderr}"
    );
    // Not a terminal: plain text, no colour codes in the log lines.
    assert!(stderr.contains("INFO"), "no log line: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes off a terminal: {stderr}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("read json"))
        .expect("valid JSON");
    assert_eq!(report["machine"]["repeat"], 2);
    let cases = report["cases"].as_array().expect("cases array");
    assert!(!cases.is_empty());
    for row in cases {
        let case = row["case"].as_str().expect("case");
        assert!(
            case == "healthy" || case == "hand-off",
            "case {case} was not selected"
        );
        assert_eq!(row["rounds"], 2, "{row}");
        let range = row["p50_range_us"].as_array().expect("p50 range");
        let (lo, hi) = (
            range[0].as_f64().expect("lo"),
            range[1].as_f64().expect("hi"),
        );
        let p50 = row["p50_us"].as_f64().expect("p50");
        assert!(lo <= p50 && p50 <= hi, "{row}");
    }
}
