//! `chaos run --lock rslock`: the peer client under a stock scenario. rslock has no
//! fencing tokens, so only the unfenced modes run; its client pauses must show as lost
//! updates, exactly as ours do in `none`.
#![cfg(feature = "peers")]

use std::time::Duration;

use redlock_chaos::cluster::{BackendKind, Flavour};
use redlock_chaos::lockut::LockKind;
use redlock_chaos::report::Outcome;
use redlock_chaos::report::observer::Silent;
use redlock_chaos::run::{self, RunConfig, suite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_runs_its_unfenced_modes_and_loses_updates_to_client_pauses() {
    let mut cfg = RunConfig::new(
        suite::select("client-pause", Flavour::Valkey).expect("scenario"),
        31,
    );
    cfg.backend = Some(BackendKind::Local);
    cfg.duration = Duration::from_secs(10);
    cfg.lock = LockKind::Rslock;
    cfg.run_id = Some(format!("rslock-{}", std::process::id()));
    let report = run::run(cfg, &Silent).await;
    print!("{}", run::table::render(&report));
    assert_eq!(report.lock, "rslock");
    let s = &report.scenarios[0];
    assert_eq!(
        s.modes.keys().collect::<Vec<_>>(),
        ["checked", "none"],
        "only the unfenced modes run on a lock without tokens"
    );
    assert!(
        s.verdict
            .reasons
            .iter()
            .any(|r| r.contains("not applicable: write_only, claim_first")),
        "{:?}",
        s.verdict.reasons
    );
    assert_eq!(report.verdict, Outcome::Pass, "{:#?}", s.verdict.reasons);
    assert!(s.modes["none"].lost > Some(0) && s.modes["none"].stale_writes > 0);
}
