//! Cross-process release: a lease handed over as JSON and adopted by an independent
//! client — in this process, and in a second OS process.
#![cfg(feature = "serde")]

use crate::support;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/release_elsewhere.rs"]
mod release_elsewhere;

use std::time::Duration;

use fenced_redlock::handle::LeaseHandle;
use fenced_redlock::{LockError, Redlock};
use support::{Cluster, Flavour};
use tokio::task::block_in_place;

/// Lock keys (not fence counters) left on any server.
fn lock_keys(cluster: &Cluster) -> Vec<(usize, String)> {
    cluster
        .keys()
        .into_iter()
        .filter(|(_, k)| !k.contains(&0xFF))
        .map(|(i, k)| (i, String::from_utf8_lossy(&k).into_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_handed_over_as_json_is_extended_and_released_by_another_client() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        // Process A: its own prefix, fencing on.
        let a = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(5))
            .key_prefix("jobs:")
            .fencing(true)
            .build()
            .expect("valid");
        let lease = a.try_acquire("nightly").await.expect("free");
        let fence = lease.fence();
        let json = serde_json::to_string(&lease.into_handle()).expect("serializes");
        // Handing over disarmed A's lease: A's shutdown releases nothing.
        a.shutdown().await.expect("nothing pending");
        assert!(
            block_in_place(|| cluster.holding("jobs:nightly")).len() >= 2,
            "{flavour:?}: the keys stay for B"
        );
        let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(value["key"], "jobs:nightly");
        assert_eq!(value["fence"], fence.expect("fenced").get());
        assert!(
            !format!("{:?}", serde_json::from_str::<LeaseHandle>(&json))
                .contains(value["token"].as_str().expect("a token"))
        );

        // Process B: independent client, no prefix, fencing off.
        let b = Redlock::builder(cluster.urls())
            .ttl(Duration::from_secs(3))
            .build()
            .expect("valid");
        let handle: LeaseHandle = serde_json::from_str(&json).expect("deserializes");
        assert!(handle.valid_until() > std::time::SystemTime::now());
        let mut adopted = b.adopt(handle).expect("a good handle");
        assert_eq!(adopted.resource(), "nightly");
        assert_eq!(adopted.key(), "jobs:nightly");
        assert_eq!(adopted.fence(), fence, "the same grant, the same token");
        // Honest: nothing is known about validity here until an extend succeeds.
        assert_eq!(adopted.remaining(), Duration::ZERO);
        assert!(!adopted.is_valid());
        let validity = adopted.extend().await.expect("the keys are ours");
        assert!(
            validity > Duration::from_secs(2),
            "{flavour:?}: {validity:?}"
        );
        assert!(adopted.is_valid());
        // Still held against others.
        let err = b.try_acquire("jobs:nightly").await.expect_err("held");
        assert!(err.is_contended(), "{err}");

        let report = adopted.release().await;
        assert!(report.released() >= 2, "{flavour:?}: {report:?}");
        assert_eq!(
            block_in_place(|| cluster.wait_gone("jobs:nightly", Duration::from_secs(2))),
            Vec::<usize>::new(),
            "{flavour:?}"
        );
        b.shutdown().await.expect("clean");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_needs_no_extend_and_an_expired_handle_cannot_be_extended() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let a = Redlock::builder(cluster.urls())
        .ttl(Duration::from_millis(300))
        .build()
        .expect("valid");
    let b = Redlock::builder(cluster.urls()).build().expect("valid");

    // Released straight away, without an extend. The acquiring process hands the handle
    // over and exits: its shutdown waits for the `SET` the acquire did not wait for (see
    // "One gap" in the handle docs: the adopter's release is not queued behind it, and a
    // `SET` landing after the release would leave that node's key until its TTL).
    let first = Redlock::builder(cluster.urls())
        .ttl(Duration::from_millis(300))
        .build()
        .expect("valid");
    let json = serde_json::to_string(&first.try_acquire("r1").await.expect("free").into_handle())
        .expect("serializes");
    first.shutdown().await.expect("clean");
    let report = b
        .adopt(serde_json::from_str(&json).expect("deserializes"))
        .expect("good")
        .release_all()
        .await;
    assert!(report.released() >= 2, "{report:?}");
    let left = block_in_place(|| lock_keys(&cluster));
    assert!(
        left.is_empty(),
        "keys left after the release: {left:?}; {report:?}"
    );

    // Expired in transit: the extend finds the keys gone and the lease is lost.
    let json = serde_json::to_string(&a.try_acquire("r2").await.expect("free").into_handle())
        .expect("serializes");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut late = b
        .adopt(serde_json::from_str(&json).expect("deserializes"))
        .expect("good");
    let err = late.extend().await.expect_err("expired");
    // Every node that answered said "not ours": the keys are gone, the lease is lost.
    assert!(
        matches!(err, LockError::QuorumNotReached { .. }) && err.is_contended(),
        "{err}"
    );
    assert!(!late.is_valid());
    let _ = late.release().await;
}

/// A handle whose token was upper-cased in transit (by a system that treats hex as
/// case-insensitive) still names the keys: the adopted lease extends and releases them.
/// It was once adopted as written, and then matched nothing: the servers hold the token
/// in lower case, and compare bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_with_an_upper_cased_token_extends_and_releases_the_keys() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let a = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    let mut handle =
        serde_json::to_value(a.try_acquire("shouted").await.expect("free").into_handle())
            .expect("serializes");
    // The acquire's late `SET`s land before the adopter's release (see "One gap").
    a.shutdown().await.expect("clean");
    let token = handle["token"].as_str().expect("a token").to_owned();
    assert!(token.bytes().any(|b| b.is_ascii_lowercase()), "{token}");
    handle["token"] = serde_json::Value::from(token.to_ascii_uppercase());
    let b = Redlock::builder(cluster.urls()).build().expect("valid");
    let mut adopted = b
        .adopt(serde_json::from_value(handle).expect("deserializes"))
        .expect("32 hex digits");
    adopted.extend().await.expect("the keys are ours");
    assert_eq!(adopted.owner_token(), token, "the token the servers hold");
    let report = adopted.release_all().await;
    assert!(report.released() >= 2, "{report:?}");
    let left = block_in_place(|| lock_keys(&cluster));
    assert!(left.is_empty(), "keys left after the release: {left:?}");
}

#[test]
fn a_handle_that_no_lease_made_is_refused() {
    let b = Redlock::builder(["redis://127.0.0.1:1"])
        .build()
        .expect("valid");
    let good = serde_json::json!({
        "resource": "r", "key": "r", "token": "0123456789abcdef0123456789abcdef",
        "fence": 3, "valid_until_unix_ms": 0
    });
    let adopt = |patch: serde_json::Value| {
        let mut json = good.clone();
        json.as_object_mut()
            .expect("object")
            .extend(patch.as_object().expect("object").clone());
        let handle: LeaseHandle = serde_json::from_value(json).expect("deserializes");
        b.adopt(handle)
    };
    let ok = adopt(serde_json::json!({})).expect("well-formed");
    // Not sent anywhere: forget it (its drop would try a release against a closed port).
    drop(ok.into_handle());
    for patch in [
        serde_json::json!({ "token": "not-hex-not-32" }),
        serde_json::json!({ "resource": "" }),
        serde_json::json!({ "key": "" }),
        serde_json::json!({ "fence": 0 }),
    ] {
        match adopt(patch.clone()) {
            Err(e @ LockError::InvalidHandle { .. }) => {
                assert!(e.to_string().contains("into_handle"), "{e}");
            }
            other => panic!("{patch}: {other:?}"),
        }
    }
    // Missing fields are refused by the deserializer.
    assert!(serde_json::from_str::<LeaseHandle>(r#"{"resource":"r"}"#).is_err());
}

/// Env vars that turn the ignored test below into the second process.
const CHILD_NODES: &str = "RELEASE_ELSEWHERE_NODES";
const CHILD_HANDLE: &str = "RELEASE_ELSEWHERE_HANDLE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_os_process_releases_the_lease() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let urls = cluster.urls();
    let json = release_elsewhere::hand_over(&urls)
        .await
        .expect("process A acquires");
    assert!(!block_in_place(|| cluster.holding(release_elsewhere::RESOURCE)).is_empty());

    // Process B: this test binary again, running only the example's `release` (below).
    let exe = std::env::current_exe().expect("test binary");
    let output = block_in_place(|| {
        std::process::Command::new(exe)
            .args([
                "--exact",
                // Its path in the `integration` binary, of which this file is a module.
                "handle::process_b_releases_the_handle_it_is_given",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_NODES, urls.join(","))
            .env(CHILD_HANDLE, &json)
            .output()
    })
    .expect("process B runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "process B failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "process B ran its test: {stdout}"
    );
    assert!(stdout.contains("process B released on"), "{stdout}");
    assert_eq!(
        block_in_place(|| cluster.wait_gone(release_elsewhere::RESOURCE, Duration::from_secs(2))),
        Vec::<usize>::new()
    );
    // The fence counter stays (by design); no lock key is left.
    assert!(block_in_place(|| lock_keys(&cluster)).is_empty());
}

/// The second process of `a_second_os_process_releases_the_lease`; does nothing when run
/// on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child half of a_second_os_process_releases_the_lease, which runs it"]
async fn process_b_releases_the_handle_it_is_given() {
    let (Ok(nodes), Ok(json)) = (std::env::var(CHILD_NODES), std::env::var(CHILD_HANDLE)) else {
        return;
    };
    let nodes: Vec<String> = nodes.split(',').map(str::to_owned).collect();
    let report = release_elsewhere::release(&nodes, &json)
        .await
        .expect("process B releases");
    assert!(report.released() >= 2, "{report:?}");
    println!("process B released on {} nodes", report.released());
}
