//! The quick fencing table's shape, on real Redis primaries and a real PostgreSQL.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use redlock_chaos::cluster::Cluster;
use redlock_chaos::workload::mode::{Mode, Preset};
use redlock_chaos::workload::table::{self, TableConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_table_shape() {
    let (cluster, urls) = support::five_primaries().await;
    let server = support::postgres().await;
    let cfg = TableConfig {
        nodes: urls,
        pg_dsn: server.dsn(),
        rates: vec![0.05],
        modes: vec![Mode::None, Mode::WriteOnly, Mode::ClaimFirst],
        runs: 2,
        preset: Preset::Default,
        workers: 8,
        // At 5 % about 25 stalls per run, each erasing a few increments without fencing:
        // the chance that none loses anything is negligible.
        sections: 500,
        seed: 20_261_104,
        jobs: 6,
        run_timeout: Duration::from_secs(240),
        node_timeout: None,
        done: None,
    };
    let result = table::run_table(cfg, Arc::new(|_, _, _, _, _, _, _| {}))
        .await
        .expect("table");
    let row = |mode| {
        result
            .rows
            .iter()
            .find(|r| r.mode == mode)
            .expect("row for every mode")
    };
    let none = row(Mode::None);
    let write_only = row(Mode::WriteOnly);
    let claim_first = row(Mode::ClaimFirst);
    for r in &result.rows {
        assert_eq!(r.runs.len(), 2);
        for run in &r.runs {
            assert_eq!(run.sections, 500);
            assert!(run.stalls > 0, "{:?}: {run:?}", r.mode);
            assert_eq!(run.exclusion_violations, 0, "{:?}: {run:?}", r.mode);
        }
    }
    for run in &claim_first.runs {
        assert_eq!(run.lost, 0, "claim-first lost updates: {run:?}");
        assert!(
            run.rejected > 0,
            "stalled claims must have been rejected: {run:?}"
        );
    }
    for run in &none.runs {
        assert!(
            run.lost > 0,
            "no fencing at 5 % stalls lost nothing: {run:?}"
        );
        assert_eq!(run.rejected, 0);
    }
    let lost = |r: &table::Row| r.runs.iter().map(|x| x.lost).sum::<i64>();
    assert!(
        lost(write_only) <= lost(none),
        "write-only lost {} > none {}",
        lost(write_only),
        lost(none)
    );
    cluster.down().await.expect("down");
}
