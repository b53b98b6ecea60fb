//! The JSON Schemas in `docs/schema/`: the committed files are the ones derived from the
//! types (`redlock_chaos::schema`), and they take real output: `chaos scenarios --json` and
//! scenario files, `chaos fencing-table --json-out` and `chaos bench --json-out` on tiny
//! settings. `report.json` is checked on a real run in `scenario_files.rs`, and here on the
//! renderer tests' synthetic report, whose timelines hold every kind of entry a short
//! healthy run lacks (violations, refused writes, pauses, fence regressions). Each also
//! refuses what the loaders refuse or the rig never writes.

use crate::report_fixture;
use crate::schema;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use redlock_chaos::report::model::{FenceMark, Ms};
use redlock_chaos::schema::Document;
use serde_json::{Value, json};

/// How to bring the committed schemas up to date, for failure messages.
const REGENERATE: &str = "cargo run --locked -p redlock-chaos -- schema --write docs/schema";

fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema")
}

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

/// A field added, renamed, retyped or documented anew changes its document's schema: the
/// committed file must follow, byte for byte.
#[test]
fn committed_schemas_are_the_ones_derived_from_the_types() {
    let stale: Vec<&str> = Document::ALL
        .into_iter()
        .filter(|doc| {
            let path = committed_dir().join(doc.file_name());
            std::fs::read_to_string(path).ok().as_deref() != Some(doc.to_json().as_str())
        })
        .map(Document::file_name)
        .collect();
    assert!(
        stale.is_empty(),
        "docs/schema/ {stale:?} differ from the schemas derived from their types; regenerate \
         them from the workspace root with\n    {REGENERATE}\nand commit the result"
    );
}

/// `chaos schema --write DIR` writes exactly what the library derives, and refuses a
/// directory it cannot write into before writing anything.
#[test]
fn chaos_schema_writes_every_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = chaos(&["schema", "--write", dir.path().to_str().expect("utf-8")]);
    ok(&out);
    for doc in Document::ALL {
        let written = std::fs::read_to_string(dir.path().join(doc.file_name())).expect("written");
        assert_eq!(written, doc.to_json(), "{}", doc.file_name());
    }
    let file = dir.path().join(Document::Report.file_name());
    let out = chaos(&["schema", "--write", file.join("x").to_str().expect("utf-8")]);
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
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
    let mut bad = all[0].clone();
    bad["name"] = json!("kill minority");
    schema::refuses(&bad, "scenario.schema.json");
    // A fault's parameters are its kind's: a partition's `via` on a kill, a jitter past 100 %.
    let timed = |fault: Value| {
        let mut s = all[0].clone();
        s.as_object_mut().expect("object").remove("recipe");
        s["timeline"] = json!([{ "fault": fault, "targets": "one", "start": "1s", "end": "2s" }]);
        s
    };
    schema::check(
        &timed(json!({ "kind": "slow", "latency_ms": [100, 200] })),
        "scenario.schema.json",
    );
    schema::refuses(
        &timed(json!({ "kind": "kill", "via": "network" })),
        "scenario.schema.json",
    );
    schema::refuses(
        &timed(json!({ "kind": "slow", "latency_ms": 100, "jitter_pct": 150 })),
        "scenario.schema.json",
    );
    schema::refuses(&timed(json!({ "kind": "slow" })), "scenario.schema.json");
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
    let mut bad = report.clone();
    bad["scenarios"][0]["modes"]["none"]["lots"] = json!(1);
    schema::refuses(&bad, "report.schema.json");
    let mut bad = report.clone();
    let none = bad["scenarios"][0]["modes"]["none"].clone();
    bad["scenarios"][0]["modes"]["sideways"] = none;
    schema::refuses(&bad, "report.schema.json");
    let mut bad = report;
    bad["scenarios"][0]["faults"] = json!([{
        "kind": "kill", "detail": "", "targets": ["node0"], "start_ms": 0, "end_ms": 1
    }]);
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
    let mut bad = v.clone();
    bad["rows"][0]["stall_rate"] = json!(1.5);
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
    let mut bad = v;
    bad["cases"][0]["rounds"] = json!(0);
    schema::refuses(&bad, "bench.schema.json");
}
