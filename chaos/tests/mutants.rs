//! The checker proven on broken locks: each deliberate mistake of the rig's plain Redlock
//! makes a stock minority-fault scenario fail on the local backend, on the kind of check it
//! must trip — a safety check (exit 1), or for a lock that stops during minority faults a
//! liveness check (exit 4, or 1 if a safety check failed as well) — with the evidence that
//! mistake must leave; the plain lock without a mistake, and ours, pass the same runs. Each
//! run is 10-20 s of faults.

use std::time::Duration;

use redlock_chaos::cluster::{BackendKind, Flavour};
use redlock_chaos::lockut::{LockKind, Mutation};
use redlock_chaos::report::model::CheckKind;
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

/// The run failed on the lock (not on the harness), every scenario on a check of `kind`,
/// and `evidence` holds for some mode of every scenario. A safety catch fails the run (exit
/// 1); a liveness catch makes it unavailable (exit 4), or failed (exit 1) when a safety
/// check failed beside it.
fn assert_caught(
    report: &ChaosReport,
    what: &str,
    kind: CheckKind,
    evidence: impl Fn(&redlock_chaos::report::ModeReport) -> bool,
) {
    let caught = match kind {
        CheckKind::Safety => report.verdict == Outcome::Fail,
        CheckKind::Liveness => matches!(report.verdict, Outcome::Unavailable | Outcome::Fail),
    };
    assert!(caught, "{what} was not caught: {:?}", report.verdict);
    assert_eq!(
        report.verdict.exit_code(),
        if report.verdict == Outcome::Fail {
            1
        } else {
            4
        }
    );
    for s in &report.scenarios {
        assert!(
            s.verdict
                .reasons
                .iter()
                .any(|r| CheckKind::of(r).is_some_and(|(k, _)| k == kind)),
            "{what}: {} failed no {} check: {:#?}",
            s.name,
            kind.name(),
            s.verdict.reasons
        );
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
    assert_caught(&r, "quorum of one", CheckKind::Safety, |m| {
        m.exclusion_violations > 0
    });
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
    assert_caught(
        &r,
        "release without comparing the token",
        CheckKind::Safety,
        |m| m.exclusion_violations > 0,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_validity_is_caught() {
    // Sections work until shortly before the reported validity ends; slow nodes make
    // acquires slow, so the overstated validity outlasts the keys.
    let r = run(LockKind::Plain(Mutation::FullValidity), "latency", 12, 13).await;
    assert_caught(
        &r,
        "validity not reduced by elapsed time and drift",
        CheckKind::Safety,
        |m| m.exclusion_violations > 0,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_deadline_is_caught() {
    // A frozen node holds every attempt until it thaws: the lock stops for the whole fault,
    // a liveness failure (its held attempts may also leave keys standing: safety, too).
    let r = run(
        LockKind::Plain(Mutation::NoNodeDeadline),
        "pause-minority",
        20,
        14,
    )
    .await;
    assert_caught(&r, "no per-node deadline", CheckKind::Liveness, |m| {
        m.idle_fault_windows > 0
    });
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
