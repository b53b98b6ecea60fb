//! The checker proven on broken locks: each deliberate mistake of the rig's plain Redlock
//! makes a stock minority-fault scenario fail (exit 1) on the local backend, with the
//! evidence that mistake must leave; the plain lock without a mistake, and ours, pass the
//! same runs. Each run is 10-20 s of faults.

use std::time::Duration;

use redlock_chaos::cluster::{BackendKind, Flavour};
use redlock_chaos::lockut::{LockKind, Mutation};
use redlock_chaos::report::observer::Silent;
use redlock_chaos::report::{ChaosReport, Outcome};
use redlock_chaos::run::{self, RunConfig, suite};

async fn run(lock: LockKind, scenarios: &str, secs: u64, seed: u64) -> ChaosReport {
    let mut cfg = RunConfig::new(
        suite::select(scenarios, Flavour::Valkey).expect("scenarios"),
        seed,
    );
    cfg.backend = Some(BackendKind::Local);
    cfg.duration = Duration::from_secs(secs);
    cfg.lock = lock;
    cfg.run_id = Some(format!("mutant-{}-{}", lock.name(), std::process::id()));
    cfg.command = format!("mutants test, --lock {}", lock.name());
    let report = run::run(cfg, &Silent).await;
    print!("{}", run::table::render(&report));
    report
}

/// The run failed on safety (not on the harness), and `evidence` holds for some mode of
/// every scenario.
fn assert_caught(
    report: &ChaosReport,
    what: &str,
    evidence: impl Fn(&redlock_chaos::report::ModeReport) -> bool,
) {
    assert_eq!(report.verdict, Outcome::Fail, "{what} was not caught");
    assert_eq!(report.verdict.exit_code(), 1);
    for s in &report.scenarios {
        assert!(
            s.modes.values().any(&evidence),
            "{what}: {} failed without the expected evidence: {:#?}",
            s.name,
            s.verdict.reasons
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_of_one_is_caught() {
    let r = run(
        LockKind::Plain(Mutation::QuorumOfOne),
        "kill-minority",
        10,
        11,
    )
    .await;
    assert_caught(&r, "quorum of one", |m| m.exclusion_violations > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchecked_release_is_caught() {
    let r = run(
        LockKind::Plain(Mutation::UncheckedRelease),
        "kill-minority",
        10,
        12,
    )
    .await;
    assert_caught(&r, "release without comparing the token", |m| {
        m.exclusion_violations > 0
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_validity_is_caught() {
    // Sections work until shortly before the reported validity ends; slow nodes make
    // acquires slow, so the overstated validity outlasts the keys.
    let r = run(LockKind::Plain(Mutation::FullValidity), "latency", 12, 13).await;
    assert_caught(&r, "validity not reduced by elapsed time and drift", |m| {
        m.exclusion_violations > 0
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_deadline_is_caught() {
    // A frozen node holds every attempt until it thaws: the lock stops for the whole fault.
    let r = run(
        LockKind::Plain(Mutation::NoNodeDeadline),
        "pause-minority",
        20,
        14,
    )
    .await;
    assert_caught(&r, "no per-node deadline", |m| m.idle_fault_windows > 0);
}

/// The runs above, on `lock`, must all pass.
async fn passes_the_same_runs(lock: LockKind) {
    for (scenario, secs, seed) in [
        ("kill-minority", 10, 11),
        ("latency", 12, 13),
        ("pause-minority", 20, 14),
    ] {
        let r = run(lock, scenario, secs, seed).await;
        let reasons: Vec<&String> = r
            .scenarios
            .iter()
            .flat_map(|s| s.verdict.reasons.iter())
            .filter(|r| !r.starts_with("ok:"))
            .collect();
        assert_eq!(
            r.verdict,
            Outcome::Pass,
            "{} on {scenario}: {reasons:#?}",
            lock.name()
        );
    }
}

/// Without a mistake the plain lock passes: each mutant above is the only difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_lock_passes_the_same_runs() {
    passes_the_same_runs(LockKind::Plain(Mutation::None)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_passes_the_same_runs() {
    passes_the_same_runs(LockKind::Ours).await;
}
