//! Attach mode end to end, as a user drives it, through the `chaos` binary: `chaos up
//! --stack-out s.toml` in one process, `chaos run --stack s.toml` in another (one scenario
//! per control verb an attached stack drives — kill, restart empty, freeze, proxy, clock —
//! each verdict a pass, each verb applied and healed), `chaos down` after. Every scenario
//! runs self-started in `chaos_run_local.rs` and `chaos_run_docker.rs`; what attach mode
//! adds is how the faults reach the nodes, one verb at a time. On the local backend also a
//! stack whose nodes have no control: node faults are *not applicable* in report.json,
//! report.html and junit.xml (skipped), proxy faults still run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redlock_chaos::cluster::stack::{Control, Stack};
use redlock_chaos::cluster::state::ClusterState;
use redlock_chaos::report::{ChaosReport, Outcome};
use redlock_e2e::{assert_all_pass, chaos_bin, engine_or_skip, eventually, processes_mentioning};

/// A scratch dir with the cluster `chaos up` left in it; `chaos down` on drop (also when
/// the test panics).
struct Up {
    dir: PathBuf,
    run_id: String,
}

impl Up {
    fn state(&self) -> PathBuf {
        self.dir.join("cluster.json")
    }
    fn stack(&self) -> PathBuf {
        self.dir.join("s.toml")
    }

    fn start(backend: &str) -> Up {
        let dir =
            std::env::temp_dir().join(format!("chaos-attach-{backend}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let mut up = Up {
            dir,
            run_id: String::new(),
        };
        let out = Command::new(chaos_bin())
            // Offline images: tests never ask a registry.
            .args(["up", "--backend", backend, "--images", "offline", "--state"])
            .arg(up.state())
            .arg("--stack-out")
            .arg(up.stack())
            .output()
            .expect("chaos up runs");
        assert!(
            out.status.success(),
            "chaos up: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        up.run_id = ClusterState::read(&up.state()).expect("state").run_id;
        up
    }

    /// `chaos run --stack FILE` with `args`: exit code and report.
    fn run(&self, stack: &Path, report: &str, args: &[&str]) -> (i32, ChaosReport, PathBuf) {
        let dir = self.dir.join(report);
        let out = Command::new(chaos_bin())
            .arg("run")
            .arg("--stack")
            .arg(stack)
            .arg("--report")
            .arg(&dir)
            .args(args)
            .output()
            .expect("chaos run runs");
        println!("{}", String::from_utf8_lossy(&out.stdout));
        let json = std::fs::read_to_string(dir.join("report.json")).unwrap_or_else(|e| {
            panic!(
                "no report.json ({e}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let report: ChaosReport = serde_json::from_str(&json).expect("report.json parses");
        (out.status.code().unwrap_or(-1), report, dir)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let down = Command::new(chaos_bin())
            .args(["down", "--state"])
            .arg(self.state())
            .output();
        if let Ok(o) = &down
            && !o.status.success()
        {
            eprintln!("chaos down: {}", String::from_utf8_lossy(&o.stderr));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One scenario per control verb of an attached node, and the fault kind it must apply.
const ONE_PER_VERB: [(&str, &str); 5] = [
    ("kill-minority", "kill"),
    ("amnesia-restart", "restart-wipe"),
    ("pause-minority", "freeze"),
    ("partition-minority", "partition"),
    ("clock-jump", "clock-jump"),
];

fn every_verb_passes_attached(up: &Up, backend: &str) {
    let names: Vec<&str> = ONE_PER_VERB.iter().map(|(name, _)| *name).collect();
    // 12 s per scenario, as the self-started runs (every recipe is a fraction of the run;
    // each still applies and heals its verb, which the checks below require).
    let (code, report, _) = up.run(
        &up.stack(),
        "verbs",
        &[
            "--scenario",
            &names.join(","),
            "--duration",
            "12s",
            "--seed",
            "20261201",
        ],
    );
    assert_eq!(report.backend, "attached", "{backend}");
    let played: Vec<&str> = report.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(played, names, "{backend}");
    for (s, (_, kind)) in report.scenarios.iter().zip(ONE_PER_VERB) {
        assert!(
            s.faults.iter().any(|f| f.kind == kind),
            "{backend}: {} applied no {kind}: {:?}",
            s.name,
            s.faults
        );
        assert!(
            s.faults.iter().all(|f| f.end_ms.is_some()),
            "{backend}: {} left a fault unhealed: {:?}",
            s.name,
            s.faults
        );
    }
    assert_all_pass(&report);
    assert_eq!(code, 0);
}

#[test]
fn a_local_stack_passes_one_scenario_per_verb_and_reports_what_it_cannot_do() {
    let up = Up::start("local");
    every_verb_passes_attached(&up, "local");

    // The same nodes with no control: node faults cannot be applied.
    let mut stack = Stack::read(&up.stack()).expect("stack file");
    for n in &mut stack.nodes {
        n.control = Control::None;
        n.clock_file = None;
    }
    let blind = up.dir.join("no-control.toml");
    stack.write(&blind).expect("write stack");
    let (code, report, dir) = up.run(
        &blind,
        "blind",
        &[
            "--scenario",
            "kill-minority,partition-minority",
            "--duration",
            "6s",
        ],
    );
    let kill = &report.scenarios[0];
    assert_eq!(kill.name, "kill-minority");
    assert_eq!(kill.verdict.outcome, Outcome::NotApplicable, "{kill:#?}");
    assert!(
        kill.verdict
            .reasons
            .iter()
            .all(|r| r.starts_with("not applicable: kill on node") && r.contains("`none`")),
        "{:?}",
        kill.verdict.reasons
    );
    assert!(kill.modes.is_empty(), "nothing was played");
    assert_eq!(report.scenarios[1].verdict.outcome, Outcome::Pass);
    assert_eq!(report.verdict, Outcome::Pass);
    assert_eq!(code, 0);
    let json = std::fs::read_to_string(dir.join("report.json")).expect("json");
    assert!(json.contains("\"not-applicable\""), "{json}");
    let html = std::fs::read_to_string(dir.join("report.html")).expect("html");
    assert!(html.contains("badge not-applicable"));
    let junit = std::fs::read_to_string(dir.join("junit.xml")).expect("junit");
    assert_eq!(junit.matches("<skipped").count(), 1, "{junit}");
    assert!(junit.contains("kill-minority/all"), "{junit}");

    // The composite action's steps on the same stack, as GitHub runs them.
    action_steps_show_not_applicable(&up, &blind);

    // Only not-applicable scenarios: nothing judged, the harness exit code.
    let (code, report, _) = up.run(
        &blind,
        "none",
        &["--scenario", "kill-minority", "--duration", "6s"],
    );
    assert_eq!(report.verdict, Outcome::Unknown);
    assert_eq!(code, 2);

    let run_id = up.run_id.clone();
    drop(up);
    assert!(
        eventually(Duration::from_secs(10), || processes_mentioning(&run_id)
            .is_empty()),
        "left running after chaos down: {:?}",
        processes_mentioning(&run_id)
    );
}

/// The workspace root (`scripts/`, `.github/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `scripts/chaos-action STEP` with `env`, the GitHub files pointed at `outputs` and
/// `summary`: its exit code and stdout.
fn action_step(step: &str, env: &[(&str, &Path)], outputs: &Path, summary: &Path) -> (i32, String) {
    let mut cmd = Command::new(root().join("scripts/chaos-action"));
    cmd.arg(step)
        .env("CHAOS_BIN", chaos_bin())
        .env("GITHUB_OUTPUT", outputs)
        .env("GITHUB_STEP_SUMMARY", summary);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("scripts/chaos-action runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), stdout)
}

/// The action (`.github/actions/chaos`) run step by step outside GitHub against a stack
/// whose nodes have no control: the run passes, and the job summary shows the kill scenario
/// as not applicable and counts it apart from the pass (the nightly's old summary counted
/// skipped cases as passes).
fn action_steps_show_not_applicable(up: &Up, stack: &Path) {
    let outputs = up.dir.join("github-output");
    let summary = up.dir.join("step-summary.md");
    let report = up.dir.join("action-report");
    let s = Path::new;
    let (code, out) = action_step("build", &[], &outputs, &summary);
    assert_eq!(code, 0, "{out}");
    let (code, _) = action_step(
        "run",
        &[
            ("CHAOS_STACK", stack),
            ("CHAOS_SCENARIO", s("kill-minority,partition-minority")),
            ("CHAOS_DURATION", s("6s")),
            ("CHAOS_SEED", s("7")),
            ("CHAOS_REPORT_DIR", &report),
        ],
        &outputs,
        &summary,
    );
    assert_eq!(code, 0, "the run step never fails itself");
    let written = std::fs::read_to_string(&outputs).expect("GITHUB_OUTPUT written");
    assert!(written.contains("chaos_bin="), "{written}");
    assert!(written.contains("exit_code=0\n"), "{written}");
    let (code, _) = action_step(
        "summary",
        &[("CHAOS_REPORT_DIR", &report)],
        &outputs,
        &summary,
    );
    assert_eq!(code, 0);
    let md = std::fs::read_to_string(&summary).expect("summary written");
    assert!(
        md.contains("| `kill-minority` | not applicable | not applicable: kill on node"),
        "{md}"
    );
    assert!(md.contains("| `partition-minority` | pass |"), "{md}");
    assert!(
        md.contains(
            "1 passed, 0 failed (safety), 0 unavailable (liveness failed, safety held), 0 without a verdict (harness), 1 not applicable"
        ),
        "{md}"
    );
    let (code, out) = action_step(
        "verdict",
        &[("CHAOS_EXIT_CODE", s("0"))],
        &outputs,
        &summary,
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = action_step(
        "verdict",
        &[("CHAOS_EXIT_CODE", s("1"))],
        &outputs,
        &summary,
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("::error::a safety expectation failed"),
        "{out}"
    );
}

/// The verdict step fails on every code but 0 and says which failure it was: a safety
/// failure (1) is never worded as the liveness one (4), nor the other way round. The
/// nightly workflow calls the same step.
#[test]
fn the_verdict_step_tells_safety_from_liveness() {
    let verdict = |code: &str| {
        let out = Command::new(root().join("scripts/chaos-action"))
            .arg("verdict")
            .env("CHAOS_EXIT_CODE", code)
            .env_remove("GITHUB_OUTPUT")
            .env_remove("GITHUB_STEP_SUMMARY")
            .output()
            .expect("scripts/chaos-action runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = verdict("0");
    assert_eq!(code, 0, "{out}");
    let (code, out) = verdict("1");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("::error::a safety expectation failed (exit 1)"),
        "{out}"
    );
    let (code, out) = verdict("4");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("::error::the lock stayed safe but did not grant where it promised to")
            && out.contains("every safety check held (exit 4)"),
        "{out}"
    );
    assert!(!out.contains("safety expectation failed"), "{out}");
    for code in ["2", "64", "", "3"] {
        assert_eq!(verdict(code).0, 1, "exit code {code:?}");
    }
    let nightly = std::fs::read_to_string(root().join(".github/workflows/nightly-chaos.yml"))
        .expect("nightly-chaos.yml");
    assert!(
        nightly.contains("run: scripts/chaos-action verdict"),
        "the nightly's verdict is the action's step"
    );
}

/// Every step of the action calls a step `scripts/chaos-action` has, with inputs it reads.
#[test]
fn the_action_calls_only_what_its_script_offers() {
    let action = std::fs::read_to_string(root().join(".github/actions/chaos/action.yml"))
        .expect("action.yml");
    let script = std::fs::read_to_string(root().join("scripts/chaos-action")).expect("script");
    let steps: Vec<&str> = action
        .split("scripts/chaos-action\" ")
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_alphabetic()).next())
        .collect();
    assert_eq!(steps, ["build", "run", "summary", "verdict"], "{action}");
    for step in steps {
        assert!(
            script.contains(&format!("\n  {step})")),
            "no step {step} in the script"
        );
    }
    for line in action.lines() {
        let key = line.trim().split(':').next().unwrap_or_default();
        if key.starts_with("CHAOS_") {
            assert!(
                script.contains(&format!("${{{key}")),
                "the script never reads {key}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_stack_passes_one_scenario_per_verb() {
    if !engine_or_skip("a_docker_stack_passes_one_scenario_per_verb").await {
        return;
    }
    let up = Up::start("docker");
    let run_id = up.run_id.clone();
    tokio::task::spawn_blocking(move || {
        every_verb_passes_attached(&up, "docker");
        drop(up);
    })
    .await
    .expect("attached run");
    let d = redlock_chaos::cluster::docker::connect()
        .await
        .expect("docker");
    let left = redlock_chaos::cluster::docker::list_labelled(&d, Some(&run_id))
        .await
        .expect("list");
    assert!(left.is_empty(), "left after chaos down: {left:?}");
}
