//! The JSON Schemas in `docs/schema/` against real output: `chaos scenarios --json` and
//! scenario files, `chaos fencing-table --json-out` and `chaos bench --json-out` on tiny settings.
//! `report.json` is checked on a real run in `scenario_files.rs`, and here on the renderer
//! tests' synthetic report, whose timelines hold every kind of entry a short healthy run
//! lacks (violations, refused writes, pauses, fence regressions).

mod report_fixture;
mod schema;

use std::process::{Command, Output};

use redlock_chaos::report::model::{FenceMark, Ms};
use serde_json::{Value, json};

fn chaos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run chaos")
}

fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn builtin_scenarios_match_the_scenario_schema() {
    let out = chaos(&["scenarios", "--json"]);
    ok(&out);
    let all: Value = serde_json::from_slice(&out.stdout).expect("json");
    schema::check(&all, "scenario.schema.json");
    for s in all.as_array().expect("array") {
        schema::check(s, "scenario.schema.json");
    }
    // The TOML form reads as the same data.
    let out = chaos(&["scenarios", "--toml", "mixed"]);
    ok(&out);
    let toml: Value = toml::from_str(&String::from_utf8_lossy(&out.stdout)).expect("toml");
    schema::check(&toml, "scenario.schema.json");
    // Not vacuous: what the loader refuses, the schema refuses too.
    let mut bad = all[0].clone();
    bad["recipe"]["window"]["on"] = json!([0.3, 1.4]);
    schema::refuses(&bad, "scenario.schema.json");
    let mut bad = all[0].clone();
    bad["expectaton"] = json!("safe-and-available");
    schema::refuses(&bad, "scenario.schema.json");
    let mut bad = all[0].clone();
    bad["timeline"] = json!([]);
    schema::refuses(&bad, "scenario.schema.json");
}

#[test]
fn every_report_entry_matches_the_report_schema() {
    let mut run = report_fixture::report(2, 300);
    // The fixture has no token regressions: one, as the recorder writes it.
    run.scenarios[0].timeline.values_mut().for_each(|t| {
        t.fence_regressions.push(FenceMark {
            worker: 1,
            fence: 7,
            earlier_max: 9,
            at_ms: Ms(1_500),
        })
    });
    let report = serde_json::to_value(&run).expect("json");
    for lane in [
        "violations",
        "rejected",
        "pauses",
        "fence_regressions",
        "lost_updates",
    ] {
        let present = run.scenarios.iter().any(|s| {
            report_lane(&report, &s.name)
                .iter()
                .any(|t| t[lane].as_array().is_some_and(|a| !a.is_empty()))
        });
        assert!(present, "the fixture has no {lane}");
    }
    schema::check(&report, "report.schema.json");
    let mut bad = report.clone();
    bad["verdict"] = json!("passed");
    schema::refuses(&bad, "report.schema.json");
    let mut bad = report;
    bad["scenarios"][0]["modes"]["none"]["lots"] = json!(1);
    schema::refuses(&bad, "report.schema.json");
}

/// Every mode's timeline of scenario `name`.
fn report_lane(report: &Value, name: &str) -> Vec<Value> {
    report["scenarios"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == name)
        .flat_map(|s| s["timeline"].as_object().cloned().unwrap_or_default())
        .map(|(_, t)| t)
        .collect()
}

#[test]
fn fencing_table_json_matches_its_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("table.json");
    let out = chaos(&[
        "fencing-table",
        "--runs",
        "1",
        "--rates",
        "0.05",
        "--sections",
        "40",
        "--workers",
        "2",
        "--jobs",
        "2",
        "--json-out",
        path.to_str().expect("utf-8"),
    ]);
    ok(&out);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("table.json")).expect("json");
    assert!(v["rows"].as_array().is_some_and(|r| !r.is_empty()), "{v}");
    schema::check(&v, "fencing-table.schema.json");
    let mut bad = v.clone();
    bad["rows"][0]["mode"] = json!("sideways");
    schema::refuses(&bad, "fencing-table.schema.json");
}

#[test]
fn bench_json_matches_its_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.json");
    let out = chaos(&[
        "bench",
        "--quick",
        "--case",
        "healthy,transport",
        "--json-out",
        path.to_str().expect("utf-8"),
    ]);
    ok(&out);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("bench.json")).expect("json");
    assert!(v["cases"].as_array().is_some_and(|c| !c.is_empty()), "{v}");
    schema::check(&v, "bench.schema.json");
    let mut bad = v.clone();
    bad["machine"]["appendfsync"] = json!("never");
    schema::refuses(&bad, "bench.schema.json");
}
