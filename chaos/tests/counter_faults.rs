//! The fenced counter (what `chaos fencing-table` runs) rides out a lock that is
//! unavailable for a while: failed acquires are counted and retried, not fatal.

use crate::support;

use std::time::Duration;

use redlock_chaos::cluster::{Cluster, NodeId};
use redlock_chaos::workload::{CounterConfig, Mode, Preset, Stall, run_counter};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_frozen_for_many_acquire_waits_is_ridden_out() {
    let (cluster, urls) = support::five_primaries().await;
    let pg = support::postgres().await;
    let cfg = CounterConfig {
        nodes: urls,
        pg_dsn: pg.dsn(),
        mode: Mode::ClaimFirst,
        workers: 4,
        sections: 300,
        stall_rate: 0.0,
        timing: Preset::Default.timing(),
        stall: Stall::Sleep,
        seed: 7,
        row: 1,
        resource: format!("counter-faults-{}", std::process::id()),
        // Ten waits fit in the freeze below: far more than the old limit of five retries.
        acquire_wait: Duration::from_millis(100),
        run_timeout: Duration::from_secs(60),
        node_timeout: None,
        done: None,
    };
    let run = tokio::spawn(run_counter(cfg));
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..3 {
        cluster.freeze(NodeId(n)).await.expect("freeze");
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for n in 0..3 {
        cluster.thaw(NodeId(n)).await.expect("thaw");
    }
    let outcome = run
        .await
        .expect("no panic")
        .expect("a lock unavailable for 1.2 s does not end the run");
    let r = outcome.report;
    assert_eq!(
        (r.sections, r.lost, r.exclusion_violations),
        (300, 0, 0),
        "{r:?}"
    );
    assert!(
        r.acquire_failures >= 4,
        "each worker waited out the freeze at least once: {r:?}"
    );
    cluster.down().await.expect("down");
}
