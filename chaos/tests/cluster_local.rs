//! Local-process backend against real servers.

use crate::common;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{T, get, ping, process_alive, set_ex};
use redlock_chaos::cluster::{
    Cluster, ClusterError, ClusterSpec, DataOnRestart, Flavour, LocalCluster, NodeId, Verb,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_faults_and_heals() {
    let c = LocalCluster::up(ClusterSpec::new(Flavour::Valkey, 5))
        .await
        .expect("up");
    let url = |i: usize| c.worker_url(NodeId(i)).expect("url");
    assert_eq!(c.backend_name(), "local");
    assert!(
        c.server_version().starts_with("valkey 8"),
        "{}",
        c.server_version()
    );
    for i in 0..5 {
        ping(&url(i), T).await.expect("initial PING");
    }

    c.kill(NodeId(1)).await.expect("kill");
    assert!(ping(&url(1), T).await.is_err(), "killed node answered");
    c.start(NodeId(1)).await.expect("start");
    ping(&url(1), T).await.expect("PING after start");

    set_ex(&url(2), "k", "v", 600).await;
    c.restart(NodeId(2), DataOnRestart::Keep)
        .await
        .expect("restart keep");
    assert_eq!(get(&url(2), "k").await.as_deref(), Some("v"));
    c.restart(NodeId(2), DataOnRestart::Wipe)
        .await
        .expect("restart wipe");
    assert_eq!(get(&url(2), "k").await, None);

    c.freeze(NodeId(3)).await.expect("freeze");
    let r = ping(&url(3), Duration::from_millis(200)).await;
    assert!(r.as_ref().is_err_and(|e| e.contains("timed out")), "{r:?}");
    c.thaw(NodeId(3)).await.expect("thaw");
    ping(&url(3), T).await.expect("PING after thaw");

    set_ex(&url(4), "lease", "x", 10).await;
    c.set_clock_offset(NodeId(4), 20).await.expect("offset");
    assert_eq!(
        get(&url(4), "lease").await,
        None,
        "+20s did not expire a 10s key"
    );
    c.reset_clock(NodeId(4)).await.expect("reset");
    set_ex(&url(4), "lease", "y", 10).await;
    assert_eq!(get(&url(4), "lease").await.as_deref(), Some("y"));

    let err = c.disconnect(NodeId(0)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClusterError::Unsupported {
                backend: "local",
                ..
            }
        ),
        "{err}"
    );

    // down with a node frozen: every process gone, temp dir removed, down idempotent
    c.freeze(NodeId(0)).await.expect("freeze before down");
    let pids: Vec<u32> = c.pids().into_iter().flatten().collect();
    assert_eq!(pids.len(), 5);
    let dir = c.root_dir().to_path_buf();
    c.down().await.expect("down");
    c.down().await.expect("second down");
    for pid in pids {
        assert!(!process_alive(pid), "server {pid} survived down()");
    }
    assert!(!dir.exists(), "{} survived down()", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_has_no_clock_faults() {
    let c = LocalCluster::up(ClusterSpec::new(Flavour::Redis, 2))
        .await
        .expect("up");
    assert!(
        c.server_version().starts_with("redis 7"),
        "{}",
        c.server_version()
    );
    ping(&c.worker_url(NodeId(1)).unwrap(), T)
        .await
        .expect("PING");
    let err = c.set_clock_offset(NodeId(0), 20).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClusterError::ClockFaultsUnsupported {
                flavour: Flavour::Redis
            }
        ),
        "{err}"
    );
    // Said before a scenario plays, so that it is not applicable rather than broken.
    let why = c.check(Verb::Clock, NodeId(0)).unwrap_err();
    assert!(why.contains("--flavour valkey"), "{why}");
    assert!(c.check(Verb::Kill, NodeId(0)).is_ok());
    c.down().await.expect("down");
}

#[test]
fn panic_in_test_body_leaves_nothing() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let seen: Arc<Mutex<(Vec<u32>, Option<PathBuf>)>> = Arc::default();
    let seen2 = seen.clone();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async move {
            let c = LocalCluster::up(ClusterSpec::new(Flavour::Valkey, 3))
                .await
                .expect("up");
            c.freeze(NodeId(1)).await.expect("freeze");
            *seen2.lock().unwrap() = (
                c.pids().into_iter().flatten().collect(),
                Some(c.root_dir().to_path_buf()),
            );
            panic!("deliberate panic with the cluster up");
        })
    }));
    assert!(outcome.is_err(), "the body should have panicked");
    let (pids, dir) = seen.lock().unwrap().clone();
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert!(!process_alive(pid), "server {pid} survived the panic");
    }
    let dir = dir.expect("dir");
    assert!(!dir.exists(), "{} survived the panic", dir.display());
}
