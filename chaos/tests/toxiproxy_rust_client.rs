//! The `toxiproxy_rust` crate (crates.io, 0.1.6) drives `chaos toxiproxy`:
//! every call it offers, with traffic through the proxies to an echo server.
//!
//! The crate is blocking (reqwest's blocking client starts its own runtime),
//! so it runs on `spawn_blocking`, away from the test's runtime.
//!
//! Not exercised: the `TOXIPROXY` static, which is fixed to
//! `127.0.0.1:8474` (a shared port a parallel test must not take); it is
//! `Client::new("127.0.0.1:8474")`, which this test covers on a free port.

use crate::toxiproxy_rig;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use toxiproxy_rig::Rig;
use toxiproxy_rust::client::Client;
use toxiproxy_rust::proxy::ProxyPack;

/// Blocking echo round trip through `listen`; the time it took.
fn echo(listen: &str, within: Duration) -> std::io::Result<Duration> {
    let addr: SocketAddr = listen.parse().expect("listen is an address");
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, within)?;
    s.set_read_timeout(Some(within))?;
    s.write_all(b"hello")?;
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf)?;
    assert_eq!(&buf, b"hello");
    Ok(start.elapsed())
}

fn refused(listen: &str) -> bool {
    let addr: SocketAddr = listen.parse().expect("listen is an address");
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
}

const T: Duration = Duration::from_secs(3);

/// The latency toxic: far above a loopback echo (about a millisecond), so its presence and
/// its absence are told apart on a loaded machine.
const LATENCY_MS: u32 = 1000;
const LATENCY: Duration = Duration::from_millis(LATENCY_MS as u64);

fn every_call(api: SocketAddr, upstream: String) {
    let client = Client::new(api);
    assert!(client.is_running());
    let version = client.version().expect("version");
    assert!(version.contains("\"version\""), "{version}");
    assert!(client.all().expect("all").is_empty());

    // populate creates; populate again with the same config keeps them.
    let proxies = client
        .populate(vec![
            ProxyPack::new("rs_one".into(), "127.0.0.1:0".into(), upstream.clone()),
            ProxyPack::new("rs_two".into(), "localhost:0".into(), upstream.clone()),
        ])
        .expect("populate");
    assert_eq!(proxies.len(), 2);
    let one = client.find_proxy("rs_one").expect("find_proxy");
    let listen = one.proxy_pack.listen.clone();
    assert!(!listen.ends_with(":0"), "{listen}");
    echo(&listen, T).expect("echo through populated proxy");
    let again = client
        .populate(vec![ProxyPack::new(
            "rs_one".into(),
            listen.clone(),
            upstream.clone(),
        )])
        .expect("populate again");
    assert_eq!(again[0].proxy_pack.listen, listen, "kept, same port");
    assert_eq!(client.all().expect("all").len(), 2);

    // Every toxic builder, then the toxics list.
    one.with_latency("downstream".into(), LATENCY_MS, 0, 1.0)
        .with_bandwidth("upstream".into(), 1000, 1.0)
        .with_slow_close("downstream".into(), 10, 1.0)
        .with_slicer("upstream".into(), 64, 8, 10, 1.0)
        .with_limit_data("upstream".into(), 1_000_000, 1.0);
    let toxics = one.toxics().expect("toxics");
    let mut names: Vec<_> = toxics.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "bandwidth_upstream",
            "latency_downstream",
            "limit_data_upstream",
            "slicer_upstream",
            "slow_close_downstream"
        ]
    );
    let lat = toxics
        .iter()
        .find(|t| t.r#type == "latency")
        .expect("latency");
    assert_eq!(lat.attributes.get("latency"), Some(&LATENCY_MS));
    let took = echo(&listen, T).expect("echo with toxics");
    assert!(took >= LATENCY, "latency acts: {took:?}");

    // apply: run the closure, then remove every toxic.
    one.apply(|| {
        assert!(echo(&listen, T).expect("echo") >= LATENCY);
    })
    .expect("apply");
    assert!(one.toxics().expect("toxics").is_empty());
    // Removed: a loopback echo takes about a millisecond; half the latency is hundreds of
    // times that.
    let took = echo(&listen, T).expect("echo");
    assert!(took < LATENCY / 2, "latency removed: {took:?}");

    // timeout toxic, then delete_all_toxics.
    one.with_timeout("upstream".into(), 0, 1.0);
    assert!(echo(&listen, Duration::from_millis(300)).is_err(), "held");
    one.delete_all_toxics().expect("delete_all_toxics");
    echo(&listen, T).expect("echo after heal");

    // disable / enable / with_down.
    one.disable().expect("disable");
    assert!(refused(&listen));
    assert!(
        !client
            .find_proxy("rs_one")
            .expect("find")
            .proxy_pack
            .enabled
    );
    one.enable().expect("enable");
    echo(&listen, T).expect("echo after enable");
    one.with_down(|| assert!(refused(&listen)))
        .expect("with_down");
    echo(&listen, T).expect("echo after with_down");

    // find_and_reset_proxy: toxics gone, enabled again.
    one.with_latency("downstream".into(), 500, 0, 1.0);
    one.disable().expect("disable");
    let reset = client
        .find_and_reset_proxy("rs_one")
        .expect("find_and_reset_proxy");
    assert!(reset.toxics().expect("toxics").is_empty());
    echo(&listen, T).expect("echo after find_and_reset_proxy");

    // reset: every proxy enabled, no toxics.
    one.with_latency("downstream".into(), 500, 0, 1.0);
    let two = client.find_proxy("rs_two").expect("find");
    two.disable().expect("disable");
    client.reset().expect("reset");
    assert!(
        client
            .find_proxy("rs_two")
            .expect("find")
            .proxy_pack
            .enabled
    );
    assert!(one.toxics().expect("toxics").is_empty());

    // delete; find_proxy of a missing proxy is an error (a 404 body is not a proxy).
    one.delete().expect("delete");
    assert!(refused(&listen));
    assert!(client.find_proxy("rs_one").is_err());
    two.delete().expect("delete");
    assert!(client.all().expect("all").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_rust_every_call() {
    let rig = Rig::new().await;
    let api = rig.server.addr();
    let upstream = rig.echo.addr.to_string();
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || every_call(api, upstream)),
    )
    .await
    .expect("client calls finished within 60 s")
    .expect("every toxiproxy_rust call behaved");
}
