//! The crate's examples, run against real servers: each example's `run` is included here
//! as a module, so the code users copy is the code that is tested.

mod support;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/quick_start.rs"]
mod quick_start;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/long_job.rs"]
mod long_job;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/graceful_shutdown.rs"]
mod graceful_shutdown;

#[cfg(feature = "blocking")]
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/blocking.rs"]
mod blocking;

use std::time::Duration;

use support::{Cluster, Flavour};

/// Lock keys (not fence counters, which stay by design) left on any server.
fn lock_keys_left(cluster: &Cluster) -> Vec<(usize, String)> {
    cluster
        .keys()
        .into_iter()
        .filter(|(_, k)| !k.contains(&0xFF))
        .map(|(i, k)| (i, String::from_utf8_lossy(&k).into_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_gets_growing_tokens_and_leaves_no_lock_key() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let first = quick_start::run(&cluster.urls()).await.expect("first run");
    let second = quick_start::run(&cluster.urls()).await.expect("second run");
    assert!(second > first, "tokens {first} then {second}");
    assert_eq!(lock_keys_left(&cluster), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_job_outlives_its_ttl_by_renewing_and_stops_when_the_lease_is_lost() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    // 1.5 s of work under a 500 ms lease: renewal carries it.
    let ended = long_job::run(
        &cluster.urls(),
        Duration::from_millis(500),
        15,
        Duration::from_millis(100),
    )
    .await
    .expect("runs");
    assert_eq!(ended, long_job::Ended::Finished { steps: 15 });
    assert_eq!(lock_keys_left(&cluster), []);

    // Freeze a majority mid-job: renewals cannot reach it, the job stops early.
    let urls = cluster.urls();
    let job = tokio::spawn(async move {
        long_job::run(
            &urls,
            Duration::from_millis(500),
            50,
            Duration::from_millis(100),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.servers[0].freeze();
    cluster.servers[1].freeze();
    let ended = tokio::time::timeout(Duration::from_secs(10), job)
        .await
        .expect("the job ends")
        .expect("no panic");
    cluster.servers[0].thaw();
    cluster.servers[1].thaw();
    match ended.expect("runs") {
        long_job::Ended::Lost { steps, .. } => assert!(steps < 50, "{steps} steps"),
        other => panic!("the lease should have been lost: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_leaves_no_lock_key_whenever_it_stops() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    for stop_after_ms in [0u64, 7, 40, 250] {
        let sections = graceful_shutdown::run(
            &cluster.urls(),
            4,
            Duration::from_millis(20),
            tokio::time::sleep(Duration::from_millis(stop_after_ms)),
        )
        .await
        .expect("runs");
        assert_eq!(
            lock_keys_left(&cluster),
            [],
            "stopped after {stop_after_ms} ms ({sections} sections)"
        );
    }
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_threads_write_with_growing_tokens_and_leave_no_lock_key() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let ledger = blocking::run(&cluster.urls(), 4, 5).expect("runs");
    assert_eq!(ledger.len(), 20);
    assert!(
        ledger.windows(2).all(|w| w[0] < w[1]),
        "each write's token is larger than the last: {ledger:?}"
    );
    assert_eq!(lock_keys_left(&cluster), []);
}
