//! `chaos run` on the docker backend: the default suite (the local run plays every scenario,
//! the nightly workflow all of them on Docker), verdicts met, and nothing labelled with the
//! run id left; one short scenario, the same checks (the quick tier's run on this
//! backend); then Ctrl-C (SIGINT) of a `chaos run` process mid-scenario: exit code 2,
//! nothing labelled left, no worker processes left.
//! Skipped (with a message) without a Docker engine, unless `CI=true`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redlock_chaos::cluster::docker;
use redlock_chaos::cluster::{BackendKind, Flavour};
use redlock_chaos::report::observer::Silent;
use redlock_chaos::run::{self, RunConfig, suite};
use redlock_e2e::{
    SHORT_RUN, assert_all_pass, assert_played, chaos_bin, engine_or_skip, eventually,
    processes_mentioning,
};

async fn labelled_left(run_id: &str) -> docker::Labelled {
    let d = docker::connect().await.expect("docker");
    docker::list_labelled(&d, Some(run_id))
        .await
        .expect("list labelled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_suite_meets_its_expectations_on_docker() {
    if !engine_or_skip("the_default_suite_meets_its_expectations_on_docker").await {
        return;
    }
    let run_id = format!("e2e-docker-{}", std::process::id());
    // The default suite, not all 20: the four nightly-only scenarios run here in the local
    // run (same scenario code, other fault plumbing) and on Docker every night. That keeps
    // ~80 s of serial time out of every CI run (issue 25: the full tier's 35-minute budget).
    // For the same budget, 12 s per scenario rather than the suite's 20 s (every recipe is
    // a fraction of the run: 12 s still lays several fault windows per scenario), except
    // `amnesia-split`, which plays 20 s in a run of its own: in 8 s it was blind once on
    // Docker (its empty restarts take ~1 s each there and its victims hold 3 s leases: 12
    // sections in `none`).
    let (split, rest): (Vec<_>, Vec<_>) = suite::select("default", Flavour::Valkey)
        .expect("default")
        .into_iter()
        .partition(|s| s.name == "amnesia-split");
    assert_eq!(split.len(), 1, "amnesia-split is in the default suite");
    for (scenarios, secs, part) in [(rest, 12, "rest"), (split, 20, "split")] {
        let run_id = format!("{run_id}-{part}");
        let mut cfg = RunConfig::new(scenarios, 424_242);
        cfg.backend = Some(BackendKind::Docker);
        cfg.duration = Duration::from_secs(secs);
        cfg.run_id = Some(run_id.clone());
        cfg.chaos_bin = Some(chaos_bin());
        let started = Instant::now();
        let report = run::run(cfg, &Silent).await;
        print!("{}", run::table::render(&report));
        println!("{part}: wall time {:.1}s", started.elapsed().as_secs_f64());
        let left = labelled_left(&run_id).await;
        assert!(left.is_empty(), "left behind: {left:?}");
        assert_eq!(report.backend, "docker");
        assert_all_pass(&report);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_meets_its_expectation_on_docker() {
    if !engine_or_skip("a_short_run_meets_its_expectation_on_docker").await {
        return;
    }
    let run_id = format!("e2e-short-docker-{}", std::process::id());
    let (scenario, secs) = SHORT_RUN;
    let mut cfg = RunConfig::new(
        suite::select(scenario, Flavour::Valkey).expect("scenario"),
        7,
    );
    cfg.backend = Some(BackendKind::Docker);
    cfg.duration = Duration::from_secs(secs);
    cfg.run_id = Some(run_id.clone());
    cfg.chaos_bin = Some(chaos_bin());
    let report = run::run(cfg, &Silent).await;
    print!("{}", run::table::render(&report));
    let left = labelled_left(&run_id).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(report.backend, "docker");
    assert_eq!(report.scenarios.len(), 1);
    assert_played(&report);
    assert!(
        eventually(Duration::from_secs(10), || processes_mentioning(&run_id)
            .is_empty()),
        "processes left: {:?}",
        processes_mentioning(&run_id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_scenario_exits_2_and_leaves_nothing() {
    if !engine_or_skip("sigint_mid_scenario_exits_2_and_leaves_nothing").await {
        return;
    }
    let run_id = format!("e2e-sigint-{}", std::process::id());
    let report_dir = std::env::temp_dir().join(format!("chaos-report-{run_id}"));
    let mut child = Command::new(chaos_bin())
        .args([
            "run",
            "--backend",
            "docker",
            // Tests never ask a registry.
            "--images",
            "offline",
            "--scenario",
            "client-stall",
            "--duration",
            "40s",
        ])
        .arg("--run-id")
        .arg(&run_id)
        .arg("--report")
        .arg(&report_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chaos run");
    let pid = Pid::from_raw(child.id() as i32);
    // Mid-scenario: the worker processes (which carry the run id) are up and running.
    let running = eventually(Duration::from_secs(120), || {
        processes_mentioning(&format!("chaos:{run_id}:")).len() >= 6
    });
    if !running {
        let _ = child.kill();
        let _ = child.wait();
        let _ = docker::remove_labelled(Some(&run_id)).await;
        panic!("the run's workers never started");
    }
    std::thread::sleep(Duration::from_secs(4));
    kill(pid, Signal::SIGINT).expect("SIGINT");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let status = status.expect("chaos run did not exit within 90 s of SIGINT");
    assert_eq!(status.code(), Some(2), "interrupted run must exit 2");
    let json = std::fs::read_to_string(report_dir.join("report.json")).expect("partial report");
    let _ = std::fs::remove_dir_all(&report_dir);
    assert!(json.contains("interrupted"), "{json}");
    let left = labelled_left(&run_id).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        eventually(Duration::from_secs(10), || processes_mentioning(&run_id)
            .is_empty()),
        "processes left: {:?}",
        processes_mentioning(&run_id)
    );
}
