//! Shared helpers for the end-to-end tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redlock_chaos::report::{ChaosReport, Outcome, ScenarioReport};

/// Whether a Docker engine answers; panics when it does not and `CI=true` (the docker
/// tests must run in CI), else prints why the test is skipped.
pub async fn engine_or_skip(test: &str) -> bool {
    if redlock_chaos::cluster::docker::engine_available().await {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: no Docker engine answers and CI=true; the docker tests must run in CI");
    }
    println!("SKIPPED {test}: no Docker engine answers (set CI=true to make this a failure)");
    false
}

/// The `chaos` binary the end-to-end runs start workers and the proxy image from:
/// `$CHAOS_BIN` (`scripts/test` sets it), else the one cargo built beside this test, in the
/// same profile's directory (`target/<profile>/chaos`; built when the `chaos` package is in
/// the same build, e.g. `cargo nextest run --workspace`). Use an optimized profile
/// (`--cargo-profile ci`, as `scripts/test` does): a debug `chaos` is slow enough to miss
/// the scenarios' 20 ms node deadlines on Docker.
pub fn chaos_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CHAOS_BIN") {
        return PathBuf::from(p);
    }
    // This test runs as target/<profile>/deps/<test>-<hash>.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary lives in target/<profile>/deps");
    let p = profile_dir.join("chaos");
    assert!(
        p.is_file(),
        "{} missing: build it in the same profile (`cargo build --profile ci -p redlock-chaos`), \
         run the whole workspace's tests, or set CHAOS_BIN",
        p.display()
    );
    p
}

/// Asserts every scenario passed, printing every verdict's reasons otherwise, after what a
/// CI log needs to tell the machine from the lock: the faults as they ran and each mode's
/// longest stretches without a grant.
pub fn assert_all_pass(report: &ChaosReport) {
    let failed: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.verdict.outcome != Outcome::Pass)
        .map(|s| {
            format!(
                "{} {:?}:\n{}{:#?}",
                s.name,
                s.verdict.outcome,
                timeline_summary(s),
                s.verdict.reasons
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "verdicts not met:\n{}",
        failed.join("\n")
    );
    assert_eq!(report.verdict, Outcome::Pass);
}

/// One line of faults (kind, targets, start-end in ms), then per mode its grant count and
/// its three longest gaps between grants (from-to in ms).
fn timeline_summary(s: &ScenarioReport) -> String {
    let faults: Vec<String> = s
        .faults
        .iter()
        .map(|f| {
            let end = f.end_ms.map_or_else(|| "-".into(), |e| e.to_string());
            format!("{} {} {}-{end}", f.kind, f.targets.join("+"), f.start_ms)
        })
        .collect();
    let mut out = format!("  faults: {}\n", faults.join(", "));
    for (mode, t) in &s.timeline {
        let mut at: Vec<u64> = t.grants.iter().map(|g| g.start_ms.0 / 1000).collect();
        at.sort_unstable();
        let mut gaps: Vec<(u64, u64)> = std::iter::once(0)
            .chain(at.iter().copied())
            .zip(at.iter().copied().chain(std::iter::once(s.duration_ms)))
            .collect();
        gaps.sort_unstable_by_key(|&(a, b)| std::cmp::Reverse(b.saturating_sub(a)));
        let gaps: Vec<String> = gaps
            .iter()
            .take(3)
            .map(|(a, b)| format!("{a}-{b}"))
            .collect();
        out += &format!(
            "  {mode}: {} grants, longest gaps {}\n",
            at.len(),
            gaps.join(", ")
        );
    }
    out
}

/// The scenario a quick-tier run plays on each backend, and for how long: restarts that
/// come back empty after longer than the TTL (kill, start, wipe: the backend's node
/// control, its proxies, the key watcher and the checker all at work) every second or so.
/// Its verdict (the lock holds: no overlap, tokens grow, no leaked keys, every loss a stale
/// write's, fenced modes lose nothing, sections completed) does not depend on how many
/// sections a loaded machine completes, so the run can be short and still trustworthy;
/// every scenario's own verdict is the full tier's `every_scenario_*` runs.
pub const SHORT_RUN: (&str, u64) = ("amnesia-restart", 10);

/// Asserts what a short run must show whatever the machine's speed: the verdicts pass,
/// every mode completed at least one section, and at least one fault was applied and every
/// fault healed.
pub fn assert_played(report: &ChaosReport) {
    assert_all_pass(report);
    for s in &report.scenarios {
        for (mode, m) in &s.modes {
            assert!(m.sections > 0, "{} {mode}: no section completed", s.name);
        }
        assert!(!s.faults.is_empty(), "{}: no fault applied", s.name);
        assert!(
            s.faults.iter().all(|f| f.end_ms.is_some()),
            "{}: unhealed: {:?}",
            s.name,
            s.faults
        );
    }
}

/// Checks the report.json written for `report` has the documented shape.
pub fn assert_report_shape(json: &str, scenarios: usize) {
    let v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("bad JSON ({e}): {json}"));
    for k in [
        "schema",
        "run_id",
        "seed",
        "backend",
        "flavour",
        "server_version",
        "nodes",
        "started_at",
        "command",
        "scenarios",
        "verdict",
    ] {
        assert!(v.get(k).is_some(), "report lacks {k}");
    }
    let list = v
        .get("scenarios")
        .and_then(|s| s.as_array())
        .expect("scenarios array");
    assert_eq!(list.len(), scenarios);
    for s in list {
        for k in [
            "name",
            "about",
            "expected",
            "seed",
            "duration_ms",
            "faults",
            "modes",
            "verdict",
            "timeline",
        ] {
            assert!(s.get(k).is_some(), "scenario lacks {k}");
        }
        let modes = s.get("modes").and_then(|m| m.as_object()).expect("modes");
        assert_eq!(modes.len(), 4, "{s:?}");
        for m in modes.values() {
            for k in [
                "sections",
                "lost",
                "rejected",
                "exclusion_violations",
                "acquire_attempts",
                "acquire_failures",
                "acquire_p50_us",
                "acquire_p99_us",
                "abandoned",
                "stale_writes",
                "fence_regressions",
                "pauses",
            ] {
                assert!(m.get(k).is_some(), "mode lacks {k}");
            }
        }
        let faults = s.get("faults").and_then(|f| f.as_array()).expect("faults");
        assert!(
            !faults.is_empty(),
            "no faults applied in {:?}",
            s.get("name")
        );
        for f in faults {
            assert!(
                f.get("end_ms").is_some_and(|e| !e.is_null()),
                "unhealed fault {f:?}"
            );
        }
    }
}

/// Processes whose command line mentions `needle` (other than this test process).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Zombies hold nothing.
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            out.push(format!("{name}: {cmd}"));
        }
    }
    out
}

/// Polls `f` until it returns true or `within` passes.
pub fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}
