//! Test helper: N throwaway `redis-server` processes on free loopback ports, killed on drop.
//! (A directory module, so cargo does not build it as a test binary of its own.)

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Running servers; they are killed and reaped when this is dropped (also on panic).
#[derive(Debug)]
pub struct Servers {
    children: Vec<Child>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl Servers {
    /// Starts `n` servers without persistence and waits until each answers PING.
    pub fn start(n: usize) -> Servers {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut servers = Servers {
            children: Vec::new(),
            ports: Vec::new(),
            _dir: dir,
        };
        for i in 0..n {
            // A port that is free now may be taken before the server binds: try a few.
            let mut started = false;
            for _attempt in 0..5 {
                let port = free_port();
                let node_dir = servers._dir.path().join(format!("n{i}-{port}"));
                std::fs::create_dir_all(&node_dir).expect("node dir");
                let mut child = Command::new(server_bin())
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                    .arg("--dir")
                    .arg(&node_dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn redis-server (is it installed?)");
                if wait_ready(port, &mut child) {
                    servers.children.push(child);
                    servers.ports.push(port);
                    started = true;
                    break;
                }
                let _ = child.kill();
                let _ = child.wait();
            }
            assert!(started, "redis-server {i} did not start");
        }
        servers
    }

    /// `redis://127.0.0.1:port` per server.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// FLUSHALL on server `i` (amnesia without a restart).
    pub async fn flushall(&self, i: usize) {
        let client = redis::Client::open(self.urls()[i].as_str()).expect("url");
        let mut c = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut c)
            .await
            .expect("FLUSHALL");
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn server_bin() -> String {
    std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_owned())
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn wait_ready(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            && let Ok(mut c) = client.get_connection()
            && redis::cmd("PING").query::<String>(&mut c).is_ok()
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
