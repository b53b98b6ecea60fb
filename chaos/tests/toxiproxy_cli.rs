//! `chaos toxiproxy` on Toxiproxy's command line: `-host`, `-port`,
//! `-config FILE` (populate at start) and `-seed`, single-dash as Toxiproxy
//! spells them.

use crate::support;
use crate::toxiproxy_rig;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redlock_chaos::proxy::Client;
use tokio::net::TcpStream;
use toxiproxy_rig::{Echo, FAST, round_trip};

/// Kills the server on every exit path.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn single_dash_flags_and_a_config_file_populate_at_start() {
    let echo = Echo::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("toxiproxy.json");
    let proxy_port = support::free_port();
    std::fs::write(
        &config,
        format!(
            r#"[{{"name":"from_config","listen":"127.0.0.1:{proxy_port}","upstream":"{}"}}]"#,
            echo.addr
        ),
    )
    .expect("write config");
    let port = support::free_port();
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args([
                "toxiproxy",
                "-host",
                "127.0.0.1",
                "-port",
                &port.to_string(),
            ])
            .arg("-config")
            .arg(&config)
            .args(["-seed", "-42"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chaos toxiproxy"),
    );
    let client = Client::with_timeout(
        &format!("http://127.0.0.1:{port}"),
        Duration::from_millis(500),
    )
    .expect("client");
    let start = Instant::now();
    let proxies = loop {
        match client.proxies().await {
            Ok(p) => break p,
            Err(e) if start.elapsed() > FAST => panic!("API never answered: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let p = proxies
        .get("from_config")
        .expect("proxy from the config file");
    assert!(p.enabled);
    let mut s = TcpStream::connect(("127.0.0.1", proxy_port))
        .await
        .expect("connect");
    round_trip(&mut s, 100, FAST)
        .await
        .expect("echo through the configured proxy");
}

#[test]
fn difference_a_bad_config_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bad.json");
    std::fs::write(&config, r#"[{"name":"no_upstream"}]"#).expect("write");
    let port = support::free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["toxiproxy", "--port", &port.to_string(), "--config"])
        .arg(&config)
        .output()
        .expect("run chaos toxiproxy");
    // Toxiproxy logs the error and serves no proxies; we refuse to start.
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing required field: upstream at proxy 1"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["toxiproxy", "-port", &port.to_string(), "-config"])
        .arg(dir.path().join("missing.json"))
        .output()
        .expect("run chaos toxiproxy");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));
}
