//! Toxiproxy's toxic tests (`toxics/*_test.go`), ported: what each toxic does
//! to real TCP traffic through `chaos toxiproxy` to an echo upstream.
//!
//! Timing bounds are generous on purpose (the machine is shared); each test
//! prints what it measured. To see the numbers:
//! `cargo nextest run -p redlock-chaos --test integration -E 'test(/^toxiproxy_toxics::/)' --no-capture`

use crate::toxiproxy_rig;

use std::io;
use std::time::{Duration, Instant};

use redlock_chaos::proxy::ServeOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toxiproxy_rig::{FAST, Rig, closed_within, round_trip};

fn between(took: Duration, lo_ms: u64, hi_ms: u64, what: &str) {
    eprintln!("{what}: {took:?}");
    assert!(
        took >= Duration::from_millis(lo_ms) && took <= Duration::from_millis(hi_ms),
        "{what}: {took:?} not in {lo_ms}..={hi_ms} ms"
    );
}

#[tokio::test]
async fn bandwidth_10kb_at_10kbps_takes_a_second_and_the_next_reply_does_not_wait() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"bandwidth","attributes":{"rate":10}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let took = round_trip(&mut s, 10 * 1024, FAST)
        .await
        .expect("10 KB echo");
    // 10240 bytes at 10 bytes/ms: 1.02 s.
    between(took, 800, 2000, "10 KB at 10 KB/s");
    let took = round_trip(&mut s, 10, FAST).await.expect("small echo");
    between(took, 0, 500, "10 B right after");
}

#[tokio::test]
async fn bandwidth_50kb_at_100kbps_takes_half_a_second() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"bandwidth","attributes":{"rate":100}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let took = round_trip(&mut s, 50 * 1024, FAST)
        .await
        .expect("50 KB echo");
    // 51200 bytes at 100 bytes/ms: 0.51 s.
    between(took, 400, 1000, "50 KB at 100 KB/s");
}

#[tokio::test]
async fn bandwidth_trickles_in_slices_instead_of_bursting() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"bandwidth","attributes":{"rate":10}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // 50 KB take 5 s at 10 KB/s: a test delayed by seconds on a loaded machine still reads
    // only part of them.
    const SENT: usize = 50 * 1024;
    s.write_all(&[7u8; SENT]).await.expect("write");
    // After ~250 ms about 2 slices of 1000 bytes are through, not all of them.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut buf = vec![0u8; SENT];
    let n = tokio::time::timeout(FAST, s.read(&mut buf))
        .await
        .expect("some bytes by now")
        .expect("read");
    eprintln!("after 250 ms: first read {n} bytes");
    assert!((1..SENT).contains(&n), "read {n} bytes");
}

#[tokio::test]
async fn removing_bandwidth_releases_the_rest_of_a_chunk_at_once() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"bandwidth","attributes":{"rate":1}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let start = Instant::now();
    let echo = async {
        s.write_all(&[1u8; 5000]).await?;
        let mut back = vec![0u8; 5000];
        s.read_exact(&mut back).await?;
        io::Result::Ok(())
    };
    let remove = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let a = rig
            .call("DELETE", "/proxies/p/toxics/bandwidth_downstream", None)
            .await;
        assert_eq!(a.status, 204);
    };
    let (r, ()) = tokio::join!(tokio::time::timeout(FAST, echo), remove);
    r.expect("not 5 s at 1 KB/s").expect("echo");
    between(
        start.elapsed(),
        250,
        2000,
        "5000 B at 1 KB/s, toxic removed at 300 ms",
    );
}

#[tokio::test]
async fn timeout_restarts_on_every_swallowed_chunk() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    round_trip(&mut s, 10, FAST).await.expect("echo before");
    rig.toxic(
        "p",
        r#"{"type":"timeout","stream":"upstream","attributes":{"timeout":500}}"#,
    )
    .await;
    // Traffic every 200 ms for 1.6 s: never 500 ms of silence, so it stays open.
    for i in 0..8 {
        s.write_all(b"x").await.expect("write while held");
        let r = closed_within(&mut s, Duration::from_millis(200)).await;
        assert_eq!(
            r.map_err(|e| e.kind()),
            Err(io::ErrorKind::TimedOut),
            "closed after {i} chunks"
        );
    }
    eprintln!("timeout=500 with traffic every 200 ms: open after 1.6 s");
    // Silence: closed about 500 ms after the last chunk.
    let took = closed_within(&mut s, FAST).await.expect("closes once idle");
    between(
        took,
        200,
        2000,
        "close after the last chunk (timeout=500, ~300 ms left)",
    );
}

#[tokio::test]
async fn timeout_zero_holds_the_connection_open() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"timeout","attributes":{"timeout":0}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"ping").await.expect("write");
    let r = closed_within(&mut s, Duration::from_millis(1000)).await;
    assert_eq!(
        r.map_err(|e| e.kind()),
        Err(io::ErrorKind::TimedOut),
        "held open, no data"
    );
}

#[tokio::test]
async fn removing_a_timeout_toxic_closes_held_connections() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"timeout","attributes":{"timeout":0}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"ping").await.expect("write");
    let r = closed_within(&mut s, Duration::from_millis(200)).await;
    assert_eq!(
        r.map_err(|e| e.kind()),
        Err(io::ErrorKind::TimedOut),
        "held"
    );
    let a = rig
        .call("DELETE", "/proxies/p/toxics/timeout_downstream", None)
        .await;
    assert_eq!(a.status, 204);
    closed_within(&mut s, FAST)
        .await
        .expect("closed when the toxic went away");
    // New connections are clean.
    let mut s = TcpStream::connect(addr).await.expect("connect");
    round_trip(&mut s, 10, FAST).await.expect("echo after");
}

#[tokio::test]
async fn latency_adds_up_across_streams_and_jitter_stays_in_range() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic(
        "p",
        r#"{"type":"latency","stream":"upstream","attributes":{"latency":100}}"#,
    )
    .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    between(
        round_trip(&mut s, 10, FAST).await.expect("echo"),
        100,
        1000,
        "latency 100 up",
    );
    rig.toxic("p", r#"{"type":"latency","attributes":{"latency":100}}"#)
        .await;
    between(
        round_trip(&mut s, 10, FAST).await.expect("echo"),
        200,
        1200,
        "100 up + 100 down",
    );
    let a = rig
        .call(
            "PATCH",
            "/proxies/p/toxics/latency_downstream",
            Some(r#"{"attributes":{"latency":50,"jitter":50}}"#),
        )
        .await;
    assert_eq!(a.status, 200);
    for _ in 0..3 {
        between(
            round_trip(&mut s, 10, FAST).await.expect("echo"),
            100,
            1200,
            "100 up + 50±50 down",
        );
    }
}

/// The rig's `retire-late` scenario adds a toxic, waits for the API's answer, then sends:
/// the chunk must meet the toxic on a connection that was already open (the link's
/// writer must take the toxic change before a chunk that arrived after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toxic_the_api_confirmed_applies_to_the_next_chunk() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    round_trip(&mut s, 10, FAST).await.expect("echo");
    for i in 0..20 {
        rig.toxic(
            "p",
            r#"{"name":"late","type":"latency","stream":"upstream","attributes":{"latency":60}}"#,
        )
        .await;
        let took = round_trip(&mut s, 10, FAST).await.expect("echo");
        let a = rig.call("DELETE", "/proxies/p/toxics/late", None).await;
        assert_eq!(a.status, 204, "{}", a.text);
        assert!(
            took >= Duration::from_millis(60),
            "round {i}: a chunk sent after the toxic was confirmed came back in {took:?} (want >= 60 ms)"
        );
    }
}

#[tokio::test]
async fn slicer_delivers_everything_in_pieces() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic(
        "p",
        r#"{"type":"slicer","attributes":{"average_size":10,"size_variation":5,"delay":1000}}"#,
    )
    .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // ~100 pieces, 1 ms apart.
    between(
        round_trip(&mut s, 1000, FAST).await.expect("intact"),
        50,
        // ~100 ms of delays took ~330 ms here (timer granularity): 12 times that.
        4000,
        "1000 B sliced",
    );
}

#[tokio::test]
async fn limit_data_closes_after_the_budget() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"limit_data","attributes":{"bytes":100}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    round_trip(&mut s, 50, FAST).await.expect("within budget");
    s.write_all(&[9u8; 100]).await.expect("write");
    let mut got = Vec::new();
    tokio::time::timeout(FAST, s.read_to_end(&mut got))
        .await
        .expect("closed, not hung")
        .expect("clean close");
    assert_eq!(got.len(), 50, "exactly the rest of the 100-byte budget");
}

#[tokio::test]
async fn slow_close_delays_the_close() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"slow_close","attributes":{"delay":300}}"#)
        .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    round_trip(&mut s, 10, FAST).await.expect("echo");
    s.shutdown().await.expect("half-close");
    let took = closed_within(&mut s, FAST).await.expect("closes");
    between(took, 250, 2000, "close delayed by slow_close 300");
}

#[tokio::test]
async fn reset_peer_resets_after_its_timeout() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic(
        "p",
        r#"{"type":"reset_peer","stream":"upstream","attributes":{"timeout":100}}"#,
    )
    .await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let start = Instant::now();
    s.write_all(b"hello").await.expect("write");
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(FAST, s.read(&mut buf))
        .await
        .expect("not hung");
    assert_eq!(
        r.map_err(|e| e.kind()).err(),
        Some(io::ErrorKind::ConnectionReset)
    );
    between(start.elapsed(), 80, 2000, "reset_peer timeout 100");
}

#[tokio::test]
async fn noop_and_toxicity_zero_change_nothing() {
    let rig = Rig::new().await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic("p", r#"{"type":"noop"}"#).await;
    rig.toxic("p", r#"{"type":"timeout","toxicity":0}"#).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    for _ in 0..3 {
        round_trip(&mut s, 100, FAST).await.expect("unaffected");
    }
}

/// Which of `n` sequential connections a toxicity-0.5 black hole hits.
async fn toxicity_pattern(seed: u64, n: usize) -> Vec<bool> {
    let mut o = ServeOptions::default();
    o.seed(seed);
    let rig = Rig::with_options(&o).await;
    let addr = rig.echo_proxy("p").await;
    rig.toxic(
        "p",
        r#"{"type":"timeout","stream":"upstream","toxicity":0.5}"#,
    )
    .await;
    let mut hit = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        hit.push(
            round_trip(&mut s, 4, Duration::from_millis(300))
                .await
                .is_err(),
        );
    }
    hit
}

#[tokio::test]
async fn the_same_seed_draws_the_same_toxicity_rolls() {
    let a = toxicity_pattern(7, 10).await;
    let b = toxicity_pattern(7, 10).await;
    eprintln!("seed 7, toxicity 0.5 over 10 connections: {a:?}");
    assert_eq!(a, b);
    assert!(
        a.contains(&true) && a.contains(&false),
        "a real draw: {a:?}"
    );
}

/// A proxy to a bare listener, with both ends of one proxied connection:
/// (client side, upstream side), as Toxiproxy's `WithEstablishedProxy`.
async fn established(rig: &Rig) -> (TcpStream, TcpStream) {
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let body = format!(
        r#"{{"name":"est","listen":"127.0.0.1:0","upstream":"{}"}}"#,
        upstream.local_addr().expect("addr")
    );
    let a = rig.call("POST", "/proxies", Some(&body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    let listen = a.json()["listen"].as_str().expect("listen").to_owned();
    let client = TcpStream::connect(listen.as_str()).await.expect("connect");
    let (server, _) = tokio::time::timeout(FAST, upstream.accept())
        .await
        .expect("proxy connects upstream")
        .expect("accept");
    (client, server)
}

#[tokio::test]
async fn bandwidth_upstream_480kb_at_1000kbps() {
    // toxics/bandwidth_test.go: 480 KB upstream at 1 MB/s takes ~480 ms.
    let rig = Rig::new().await;
    let (mut client, mut server) = established(&rig).await;
    rig.toxic(
        "est",
        r#"{"type":"bandwidth","stream":"upstream","attributes":{"rate":1000}}"#,
    )
    .await;
    let payload: Vec<u8> = b"hello world ".repeat(40_000);
    let sent = payload.clone();
    let writer = tokio::spawn(async move {
        client.write_all(&sent).await.expect("write");
        client.shutdown().await.expect("close");
    });
    let start = Instant::now();
    let mut got = vec![0u8; payload.len()];
    tokio::time::timeout(FAST, server.read_exact(&mut got))
        .await
        .expect("not hung")
        .expect("upstream reads it all");
    let took = start.elapsed();
    assert!(got == payload, "upstream got the bytes unchanged");
    writer.await.expect("writer");
    between(took, 380, 1500, "480 KB at 1000 KB/s");
}

#[tokio::test]
async fn removing_a_timeout_toxic_closes_both_sides() {
    // toxics/timeout_test.go: TestTimeoutToxicClosesConnectionOnRemove.
    let rig = Rig::new().await;
    let (mut client, mut server) = established(&rig).await;
    rig.toxic(
        "est",
        r#"{"type":"timeout","name":"to_delete","stream":"upstream"}"#,
    )
    .await;
    let a = rig
        .call("DELETE", "/proxies/est/toxics/to_delete", None)
        .await;
    assert_eq!(a.status, 204);
    closed_within(&mut client, Duration::from_secs(1))
        .await
        .expect("client side closed");
    closed_within(&mut server, Duration::from_secs(1))
        .await
        .expect("upstream side closed");
}

#[tokio::test]
async fn removing_latency_behind_a_timeout_does_not_hang() {
    // toxics/timeout_test.go: TestTimeoutToxicDoesNotCauseHang.
    let rig = Rig::new().await;
    let (mut client, _server) = established(&rig).await;
    rig.toxic("est", r#"{"type":"latency","name":"might_block","stream":"upstream","attributes":{"latency":10}}"#)
        .await;
    rig.toxic(
        "est",
        r#"{"type":"timeout","name":"timeout","stream":"upstream"}"#,
    )
    .await;
    for _ in 0..5 {
        client.write_all(b"hello").await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = Instant::now();
    let a = rig
        .call("DELETE", "/proxies/est/toxics/might_block", None)
        .await;
    assert_eq!(a.status, 204);
    between(
        start.elapsed(),
        0,
        1000,
        "removing latency behind a timeout",
    );
}
