//! The crate's examples, run against real servers: each example's `run` is included here
//! as a module, so the code users copy is the code that is tested.

use crate::support;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/quick_start.rs"]
mod quick_start;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/long_job.rs"]
mod long_job;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/graceful_shutdown.rs"]
mod graceful_shutdown;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/web_handler.rs"]
mod web_handler;

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

/// One response of the web example: status and JSON body.
async fn post(http: &reqwest::Client, url: String) -> (u16, serde_json::Value) {
    let response = http.post(url).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

fn held(body: &serde_json::Value) -> (u64, u64, u64) {
    let field = |name: &str| {
        body[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    (field("held_from_us"), field("held_to_us"), field("fence"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_handler_serialises_one_order_and_runs_different_orders_in_parallel() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    // Each request holds its order this long: long enough that requests sent together are
    // served together, and that a refusal "at once" (milliseconds) is far from one that
    // waited for the hold, on a loaded machine too.
    const HOLD: Duration = Duration::from_millis(600);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let urls = cluster.urls();
    let server = tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        web_handler::serve(listener, &urls, HOLD, stopped).await
    });
    let http = reqwest::Client::new();

    // Five requests for one order that wait: all served, one at a time, tokens growing.
    let waiting: Vec<_> = (0..5)
        .map(|_| post(&http, format!("{base}/orders/1/process?wait_ms=20000")))
        .collect();
    let mut served: Vec<(u64, u64, u64)> = futures::future::join_all(waiting)
        .await
        .into_iter()
        .map(|(status, body)| {
            assert_eq!(status, 200, "{body}");
            held(&body)
        })
        .collect();
    served.sort();
    for pair in served.windows(2) {
        let ((_, first_to, first_fence), (second_from, _, second_fence)) = (pair[0], pair[1]);
        assert!(first_to <= second_from, "overlapping holds: {served:?}");
        assert!(
            first_fence < second_fence,
            "tokens in hold order: {served:?}"
        );
    }

    // While one request holds the order, requests that do not wait get 409 at once.
    let holder = tokio::spawn({
        let (http, url) = (http.clone(), format!("{base}/orders/2/process"));
        async move { post(&http, url).await }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tokio::task::block_in_place(|| cluster.holding("order:2").len()) < 2
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = std::time::Instant::now();
    let refused: Vec<_> = (0..3)
        .map(|_| post(&http, format!("{base}/orders/2/process")))
        .collect();
    for (status, body) in futures::future::join_all(refused).await {
        assert_eq!(status, 409, "{body}");
    }
    assert!(
        started.elapsed() < HOLD / 2,
        "refused at once, not after the hold: {:?}",
        started.elapsed()
    );
    let (status, body) = holder.await.expect("holder");
    assert_eq!(status, 200, "{body}");

    // Two orders at once: both held at the same time.
    let (a, b) = tokio::join!(
        post(&http, format!("{base}/orders/3/process?wait_ms=5000")),
        post(&http, format!("{base}/orders/4/process?wait_ms=5000")),
    );
    assert_eq!((a.0, b.0), (200, 200), "{} {}", a.1, b.1);
    let ((a_from, a_to, _), (b_from, b_to, _)) = (held(&a.1), held(&b.1));
    assert!(
        a_from < b_to && b_from < a_to,
        "different orders ran in parallel: {a_from}..{a_to} and {b_from}..{b_to}"
    );

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops")
        .expect("no panic")
        .expect("clean shutdown");
    assert_eq!(lock_keys_left(&cluster), []);
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
