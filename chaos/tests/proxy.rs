//! The Toxiproxy-compatible proxy with real TCP traffic to a real redis-server.

use crate::support;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redlock_chaos::proxy::{
    Client, ClientError, NewProxy, Proxy, ProxyServer, ProxyUpdate, Stream, Toxic, ToxicKind,
};
use serde_json::{Value, json};
use support::{RedisServer, ping, ping_within};
use tokio::net::TcpStream;

/// Generous bound for "this did not hang": far above any real delay here.
const FAST: Duration = Duration::from_secs(3);

struct Rig {
    // Field order = drop order: proxies close before redis dies.
    client: Client,
    server: ProxyServer,
    proxy: Proxy,
    redis: RedisServer,
}

impl Rig {
    async fn new() -> Rig {
        let redis = RedisServer::start();
        let server = ProxyServer::start(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("API server starts");
        let client = Client::new(&server.url()).expect("client");
        let proxy = client
            .create_proxy(&NewProxy::new(
                "redis",
                "127.0.0.1:0",
                redis.addr().to_string(),
            ))
            .await
            .expect("create proxy");
        Rig {
            client,
            server,
            proxy,
            redis,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.listen.parse().expect("listen is an address")
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr()).await.expect("connect")
    }
}

async fn timed_ping(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    ping_within(s, FAST).await.expect("PING through proxy");
    start.elapsed()
}

#[tokio::test]
async fn proxy_in_front_of_redis_answers_ping() {
    let rig = Rig::new().await;
    assert_ne!(rig.addr().port(), 0, "real port is reported");
    assert_ne!(rig.addr(), rig.redis.addr());

    let mut raw = rig.connect().await;
    ping_within(&mut raw, FAST).await.expect("raw PING");

    // And with the redis crate, as the lock client will talk.
    let client = redis::Client::open(format!("redis://{}", rig.addr())).expect("url");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection");
    let pong: String = redis::cmd("PING")
        .query_async(&mut con)
        .await
        .expect("PING");
    assert_eq!(pong, "PONG");
    rig.server.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn downstream_latency_delays_ping() {
    let rig = Rig::new().await;
    let toxic = rig
        .client
        .add_latency(
            "redis",
            Stream::Downstream,
            Duration::from_millis(200),
            Duration::ZERO,
        )
        .await
        .expect("add latency");
    assert_eq!(toxic.name, "latency_downstream");
    let mut s = rig.connect().await;
    let took = timed_ping(&mut s).await;
    assert!(took >= Duration::from_millis(200), "took {took:?}");
}

#[tokio::test]
async fn toxics_reach_an_already_open_connection() {
    let rig = Rig::new().await;
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING before toxics");

    rig.client
        .add_latency(
            "redis",
            Stream::Upstream,
            Duration::from_millis(200),
            Duration::ZERO,
        )
        .await
        .expect("add latency");
    let took = timed_ping(&mut s).await;
    assert!(took >= Duration::from_millis(200), "took {took:?}");

    rig.client
        .remove_toxic("redis", "latency_upstream")
        .await
        .expect("remove");
    rig.client
        .add_toxic(
            "redis",
            &Toxic::new(ToxicKind::Timeout { timeout: 0 }, Stream::Downstream),
        )
        .await
        .expect("add timeout");
    let err = ping_within(&mut s, Duration::from_millis(300))
        .await
        .expect_err("black-holed");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[tokio::test]
async fn disabled_proxy_refuses_and_reset_restores_it() {
    let rig = Rig::new().await;
    let mut open = rig.connect().await;
    ping_within(&mut open, FAST).await.expect("PING");
    rig.client
        .add_latency(
            "redis",
            Stream::Upstream,
            Duration::from_secs(1),
            Duration::ZERO,
        )
        .await
        .expect("add latency");

    let p = rig.client.disable("redis").await.expect("disable");
    assert!(!p.enabled);
    // The open connection was closed, new ones are refused.
    assert!(ping_within(&mut open, FAST).await.is_err());
    let refused = TcpStream::connect(rig.addr())
        .await
        .expect_err("connect must fail while disabled");
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);

    rig.client.reset().await.expect("reset");
    let p = rig.client.get_proxy("redis").await.expect("get");
    assert!(p.enabled);
    assert!(p.toxics.is_empty(), "reset drops toxics");
    assert_eq!(p.listen, rig.proxy.listen, "same port after re-enable");
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING after reset");

    // enable() is the explicit way back too.
    rig.client.disable("redis").await.expect("disable");
    rig.client.enable("redis").await.expect("enable");
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING after enable");
}

#[tokio::test]
async fn timeout_zero_holds_requests_until_the_client_gives_up() {
    let rig = Rig::new().await;
    let holes = rig.client.black_hole("redis").await.expect("black hole");
    assert_eq!(holes.len(), 2);
    let mut s = rig.connect().await;
    let err = ping_within(&mut s, Duration::from_millis(300))
        .await
        .expect_err("must hang");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);

    // Healing removes the timeout toxics, which closes the connections they
    // held (as Toxiproxy does); new connections work at once.
    rig.client.heal("redis").await.expect("heal");
    let err = ping_within(&mut s, FAST)
        .await
        .expect_err("held connection closed");
    assert_ne!(
        err.kind(),
        io::ErrorKind::TimedOut,
        "closed, not hung: {err}"
    );
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING after heal");
}

#[tokio::test]
async fn timeout_with_delay_closes_the_connection() {
    let rig = Rig::new().await;
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING");
    rig.client
        .add_toxic(
            "redis",
            &Toxic::new(ToxicKind::Timeout { timeout: 100 }, Stream::Upstream),
        )
        .await
        .expect("add timeout");
    let err = ping_within(&mut s, FAST).await.expect_err("closed");
    assert_ne!(
        err.kind(),
        io::ErrorKind::TimedOut,
        "closed, not hung: {err}"
    );
}

#[tokio::test]
async fn reset_peer_resets_an_open_connection() {
    let rig = Rig::new().await;
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST).await.expect("PING");
    rig.client
        .add_toxic(
            "redis",
            &Toxic::new(ToxicKind::ResetPeer { timeout: 0 }, Stream::Upstream),
        )
        .await
        .expect("add reset_peer");
    let err = ping_within(&mut s, FAST).await.expect_err("reset");
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
}

#[tokio::test]
async fn toxicity_zero_has_no_effect() {
    let rig = Rig::new().await;
    for stream in [Stream::Upstream, Stream::Downstream] {
        let t = Toxic::new(ToxicKind::Timeout { timeout: 0 }, stream).with_toxicity(0.0);
        rig.client.add_toxic("redis", &t).await.expect("add");
    }
    let mut s = rig.connect().await;
    for _ in 0..5 {
        ping_within(&mut s, FAST).await.expect("PING unaffected");
    }
    let t = rig
        .client
        .get_toxic("redis", "timeout_upstream")
        .await
        .expect("get");
    assert_eq!(t.toxicity, 0.0);

    // Raising toxicity to 1 on the open connection re-rolls and applies.
    rig.client
        .update_toxic("redis", &t.with_toxicity(1.0))
        .await
        .expect("update");
    assert!(
        ping_within(&mut s, Duration::from_millis(300))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn limit_data_and_shaping_toxics() {
    let rig = Rig::new().await;
    for kind in [
        ToxicKind::Slicer {
            average_size: 2,
            size_variation: 1,
            delay: 100,
        },
        ToxicKind::Bandwidth { rate: 100 },
        ToxicKind::SlowClose { delay: 10 },
    ] {
        rig.client
            .add_toxic("redis", &Toxic::new(kind, Stream::Downstream))
            .await
            .expect("add");
    }
    let mut s = rig.connect().await;
    ping_within(&mut s, FAST)
        .await
        .expect("PING through shaping toxics");

    rig.client
        .add_toxic(
            "redis",
            &Toxic::new(ToxicKind::LimitData { bytes: 3 }, Stream::Downstream),
        )
        .await
        .expect("add limit_data");
    let mut s = rig.connect().await;
    let err = ping_within(&mut s, FAST)
        .await
        .expect_err("cut after 3 bytes");
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
}

#[tokio::test]
async fn errors_carry_status_and_server_message() {
    let rig = Rig::new().await;
    let c = &rig.client;

    let dup = c
        .create_proxy(&NewProxy::new("redis", "127.0.0.1:0", "127.0.0.1:1"))
        .await
        .expect_err("duplicate proxy");
    assert!(dup.is_conflict(), "{dup}");
    assert_eq!(dup.message(), Some("proxy already exists"));
    assert!(dup.to_string().contains("proxy already exists"), "{dup}");

    let missing = c.get_proxy("nope").await.expect_err("unknown proxy");
    assert!(matches!(
        &missing,
        ClientError::Api { status: 404, message, .. } if message == "proxy not found"
    ));
    let e = c.disable("nope").await.expect_err("unknown proxy");
    assert_eq!(e.status(), Some(404));
    let e = c.delete_proxy("nope").await.expect_err("unknown proxy");
    assert_eq!(e.status(), Some(404));
    let e = c.toxics("nope").await.expect_err("unknown proxy");
    assert_eq!(e.message(), Some("proxy not found"));

    let t = Toxic::new(ToxicKind::SlowClose { delay: 1 }, Stream::Upstream);
    c.add_toxic("redis", &t).await.expect("add");
    let dup = c.add_toxic("redis", &t).await.expect_err("duplicate toxic");
    assert_eq!(dup.status(), Some(409));
    assert_eq!(dup.message(), Some("toxic already exists"));
    let e = c
        .remove_toxic("redis", "nope")
        .await
        .expect_err("unknown toxic");
    assert_eq!(e.status(), Some(404));
    assert_eq!(e.message(), Some("toxic not found"));
    let e = c
        .get_toxic("redis", "nope")
        .await
        .expect_err("unknown toxic");
    assert!(e.is_not_found());

    // 400s need bodies the typed client cannot produce: go raw.
    let http = reqwest::Client::new();
    let base = rig.server.url();
    for (path, body, needle) in [
        (
            "/proxies/redis/toxics",
            json!({"type": "nope"}),
            "invalid toxic type",
        ),
        (
            "/proxies/redis/toxics",
            json!({"type": "latency", "stream": "sideways"}),
            "stream was invalid",
        ),
        (
            "/proxies",
            json!({"name": "x", "listen": "127.0.0.1:0"}),
            "upstream",
        ),
        ("/proxies", json!("not an object"), "bad request body"),
    ] {
        let resp = http
            .post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status().as_u16(), 400, "{path} {body}");
        let v: Value = resp.json().await.expect("JSON error body");
        assert_eq!(v["status"], 400);
        let msg = v["error"].as_str().expect("error message");
        assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
    }
}

#[tokio::test]
async fn json_shapes_follow_toxiproxy() {
    let rig = Rig::new().await;
    let http = reqwest::Client::new();
    let base = rig.server.url();

    // GET /proxies is an object keyed by name.
    let v: Value = http
        .get(format!("{base}/proxies"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(v["redis"]["name"], "redis");
    assert_eq!(v["redis"]["enabled"], true);
    assert_eq!(v["redis"]["toxics"], json!([]));

    // Toxic defaults: stream downstream, toxicity 1, name <type>_<stream>.
    let resp = http
        .post(format!("{base}/proxies/redis/toxics"))
        .json(&json!({"type": "latency", "attributes": {"latency": 5}}))
        .send()
        .await
        .expect("send");
    assert!(resp.status().is_success());
    let t: Value = resp.json().await.expect("json");
    assert_eq!(
        t,
        json!({"name": "latency_downstream", "type": "latency", "stream": "downstream",
               "toxicity": 1.0, "attributes": {"latency": 5, "jitter": 0}})
    );

    // PATCH updates a toxic with a partial body.
    let t: Value = http
        .patch(format!("{base}/proxies/redis/toxics/latency_downstream"))
        .json(&json!({"attributes": {"jitter": 2}}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(t["attributes"], json!({"latency": 5, "jitter": 2}));

    // Populate creates and updates, answering {"proxies": [...]}.
    let upstream = rig.redis.addr().to_string();
    let populated = rig
        .client
        .populate(&[
            NewProxy {
                enabled: false,
                ..NewProxy::new("redis", rig.proxy.listen.clone(), upstream.clone())
            },
            NewProxy::new("second", "127.0.0.1:0", upstream.clone()),
        ])
        .await
        .expect("populate");
    assert_eq!(populated.len(), 2);
    assert!(
        populated[0].enabled,
        "a kept proxy ignores enabled, as in Toxiproxy"
    );
    assert_eq!(populated[0].toxics.len(), 1, "kept proxy keeps its toxics");
    let second: SocketAddr = populated[1].listen.parse().expect("addr");
    let mut s = TcpStream::connect(second).await.expect("connect second");
    ping(&mut s).await.expect("PING via populated proxy");
    let all = rig.client.proxies().await.expect("list");
    assert_eq!(all.keys().collect::<Vec<_>>(), ["redis", "second"]);

    // Upstream change by update; delete closes and forgets.
    let p = rig
        .client
        .update_proxy(
            "second",
            &ProxyUpdate {
                upstream: Some("127.0.0.1:1".into()),
                ..ProxyUpdate::default()
            },
        )
        .await
        .expect("update");
    assert_eq!(p.upstream, "127.0.0.1:1");
    rig.client.delete_proxy("second").await.expect("delete");
    assert!(
        rig.client
            .get_proxy("second")
            .await
            .unwrap_err()
            .is_not_found()
    );

    assert_eq!(
        rig.client.version().await.expect("version"),
        env!("CARGO_PKG_VERSION")
    );
}

#[tokio::test]
async fn client_calls_time_out() {
    // Accepts (in the backlog) but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", silent.local_addr().expect("addr"));
    let client = Client::with_timeout(&url, Duration::from_millis(200)).expect("client");
    let err = client.version().await.expect_err("must time out");
    assert!(
        matches!(err, ClientError::Timeout { timeout, .. } if timeout == Duration::from_millis(200)),
        "{err}"
    );
}

#[tokio::test]
async fn chaos_toxiproxy_command_serves_the_api() {
    let port = support::free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["toxiproxy", "--listen", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn chaos");
    let client = Client::with_timeout(
        &format!("http://127.0.0.1:{port}"),
        Duration::from_millis(500),
    )
    .expect("client");
    let mut answered = false;
    for _ in 0..100 {
        if client.version().await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SIGTERM (what docker stop sends) must stop it cleanly.
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut status = None;
    for _ in 0..150 {
        if let Some(s) = child.try_wait().expect("try_wait") {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if status.is_none() {
        // Never leave it running, whatever the assertions say next.
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(answered, "chaos toxiproxy never answered /version");
    assert!(term.expect("kill -TERM").success());
    let status = status.expect("chaos did not exit on SIGTERM");
    assert!(status.success(), "clean exit on SIGTERM, got {status}");
}
