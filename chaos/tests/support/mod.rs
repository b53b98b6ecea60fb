//! Test fixtures: a throwaway `redis-server` on a free loopback port, a raw RESP `PING` so
//! tests control exactly which bytes cross the proxy, five local primaries (the cluster
//! module's local backend) and a private PostgreSQL server. All clean up on drop, also when
//! a test panics.

#![allow(dead_code, unreachable_pub)]

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A `redis-server` child process, killed on drop (also when a test panics).
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    addr: SocketAddr,
}

impl RedisServer {
    /// Starts redis on a free port and waits until it answers PING.
    pub fn start() -> RedisServer {
        // The port is free when we look, but another process may grab it
        // before redis binds: retry a few times with fresh ports.
        let mut last_err = String::new();
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed");
            let mut server = RedisServer {
                child,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
            };
            match server.wait_ready(Duration::from_secs(5)) {
                Ok(()) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process id (for SIGSTOP/SIGCONT).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited early: {status}"));
            }
            if blocking_ping(self.addr).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err("no PONG in time".to_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn blocking_ping(addr: SocketAddr) -> io::Result<()> {
    use std::io::{Read, Write};
    let mut s = StdStream::connect_timeout(&addr, Duration::from_millis(200))?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    s.write_all(PING)?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)?;
    check_pong(&buf)
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

fn check_pong(buf: &[u8]) -> io::Result<()> {
    if buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "unexpected answer {:?}",
            String::from_utf8_lossy(buf)
        )))
    }
}

/// Sends PING on an open connection and reads the PONG.
pub async fn ping(s: &mut TcpStream) -> io::Result<()> {
    s.write_all(PING).await?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).await?;
    check_pong(&buf)
}

/// PING with a deadline; `Err(TimedOut)` if it passes.
pub async fn ping_within(s: &mut TcpStream, within: Duration) -> io::Result<()> {
    match tokio::time::timeout(within, ping(s)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "client timeout")),
    }
}

/// Five primaries; killed and their dir removed when dropped.
pub async fn five_primaries() -> (redlock_chaos::cluster::LocalCluster, Vec<String>) {
    use redlock_chaos::cluster::{Cluster, ClusterSpec, Flavour, LocalCluster, NodeId};
    let cluster = LocalCluster::up(ClusterSpec::new(Flavour::Redis, 5))
        .await
        .expect("starting 5 local redis-server primaries");
    let urls = (0..cluster.nodes())
        .map(|i| cluster.worker_url(NodeId(i)).expect("url"))
        .collect();
    (cluster, urls)
}

/// A private PostgreSQL 15.
pub async fn postgres() -> redlock_chaos::pg::PgServer {
    tokio::task::spawn_blocking(redlock_chaos::pg::PgServer::start)
        .await
        .expect("join")
        .expect("starting postgres")
}
