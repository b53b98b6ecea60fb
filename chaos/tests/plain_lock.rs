//! The rig's plain Redlock on nodes whose connection handshake is slower than its node
//! deadline: the connection must still be made (by a task that outlives the call that
//! started it), or the lock never grants on a loaded machine.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use redlock_chaos::lockut::{Mutation, PlainRedlock};
use support::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Relays `upstream` on a fresh loopback port, holding back each connection's first reply
/// (the answer to the client's handshake) by `delay`; later replies pass at once.
async fn slow_greeting(upstream: SocketAddr, delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
                });
                let mut buf = vec![0u8; 16 * 1024];
                let mut first = true;
                loop {
                    let n = match from_server.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if std::mem::take(&mut first) {
                        tokio::time::sleep(delay).await;
                    }
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_slower_than_the_node_deadline_still_connects() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut urls = Vec::new();
    for s in &servers {
        let relay = slow_greeting(s.addr(), Duration::from_millis(150)).await;
        urls.push(format!("redis://{relay}"));
    }
    // TTL 200 ms: a node deadline of 20 ms, against a 150 ms handshake.
    let lock =
        PlainRedlock::new(&urls, Duration::from_millis(200), Mutation::None).expect("plain lock");
    let lease = lock
        .acquire("slow-greeting", Duration::from_secs(3))
        .await
        .expect("granted once the connections are made");
    assert_eq!(lease.granted().fence, Some(1));
    lock.release(lease).await;
    // Connections are kept: the next grant takes one round.
    let lease = lock
        .acquire("slow-greeting", Duration::from_secs(1))
        .await
        .expect("granted again");
    assert_eq!(lease.granted().attempts, 1);
    assert_eq!(lease.granted().fence, Some(2));
}

/// Every call of the plain lock is one `EVAL`, whatever the servers' script caches hold:
/// with `EVALSHA` a node whose cache was empty took three round trips (`NOSCRIPT`, `SCRIPT
/// LOAD`, `EVALSHA`), and a release whose node deadline ran out before the last was sent
/// left a failed attempt's keys standing (the clean-clone CI of 2026-12-04).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_one_eval_whatever_the_script_cache_holds() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    let admin = |url: &str| {
        redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .expect("admin connection")
    };
    for url in &urls {
        let mut c = admin(url);
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut c)
            .expect("SCRIPT FLUSH");
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut c)
            .expect("CONFIG RESETSTAT");
    }
    let lock =
        PlainRedlock::new(&urls, Duration::from_millis(200), Mutation::None).expect("plain lock");
    let lease = lock
        .acquire("flushed", Duration::from_secs(3))
        .await
        .expect("granted");
    lock.release(lease).await;
    for url in &urls {
        let mut c = admin(url);
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut c)
            .expect("INFO");
        assert!(stats.contains("cmdstat_eval:"), "{url}: {stats}");
        assert!(
            !stats.contains("cmdstat_evalsha") && !stats.contains("cmdstat_script"),
            "{url}: a call needed the script cache: {stats}"
        );
        let held: Option<String> = redis::cmd("GET").arg("flushed").query(&mut c).expect("GET");
        assert_eq!(held, None, "{url}: released");
    }
}
