//! Shared by the Toxiproxy compatibility tests: an in-process `chaos
//! toxiproxy`, a tiny echo server as the upstream (Toxiproxy's own tests do
//! the same), raw HTTP calls that show status, headers and JSON as a
//! client sees them, and timed round trips through a proxy.

#![allow(dead_code, unreachable_pub)]

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redlock_chaos::proxy::{ProxyServer, ServeOptions};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Bound for "this did not hang": far above any delay a test sets up.
pub const FAST: Duration = Duration::from_secs(5);

/// Echoes every byte back on every connection until dropped.
pub struct Echo {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Echo {
    pub async fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
        let addr = listener.local_addr().expect("echo addr");
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = sock.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        Echo { addr, task }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An answer as a client sees it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Answer {
    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// The `error` message of an error answer.
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }
}

pub struct Rig {
    // Field order = drop order: the server (and its proxies) before the echo.
    pub server: ProxyServer,
    pub echo: Echo,
    http: reqwest::Client,
}

impl Rig {
    pub async fn new() -> Rig {
        Rig::with_options(&ServeOptions::default()).await
    }

    pub async fn with_options(options: &ServeOptions) -> Rig {
        let echo = Echo::start().await;
        let server = ProxyServer::start_with(SocketAddr::from(([127, 0, 0, 1], 0)), options)
            .await
            .expect("API server starts");
        Rig {
            server,
            echo,
            http: reqwest::Client::builder()
                .timeout(FAST)
                .build()
                .expect("http client"),
        }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// One API call; `body` is sent as JSON text.
    pub async fn call(&self, method: &str, path: &str, body: Option<&str>) -> Answer {
        self.call_as(method, path, body, None).await
    }

    /// One API call with a given user agent.
    pub async fn call_as(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        user_agent: Option<&str>,
    ) -> Answer {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{path}", self.url()));
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        if let Some(ua) = user_agent {
            req = req.header("user-agent", ua);
        }
        let resp = req.send().await.expect("API answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        Answer {
            status,
            headers,
            text,
        }
    }

    /// Creates an enabled proxy to the echo server on a free port; returns its address.
    pub async fn echo_proxy(&self, name: &str) -> SocketAddr {
        let body = format!(
            r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{}"}}"#,
            self.echo.addr
        );
        let a = self.call("POST", "/proxies", Some(&body)).await;
        assert_eq!(a.status, 201, "{}", a.text);
        a.json()["listen"]
            .as_str()
            .expect("listen")
            .parse()
            .expect("listen is an address")
    }

    /// Adds a toxic; panics unless the server accepted it.
    pub async fn toxic(&self, proxy: &str, body: &str) -> Value {
        let a = self
            .call("POST", &format!("/proxies/{proxy}/toxics"), Some(body))
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
        a.json()
    }
}

/// Writes `n` bytes and reads the `n` echoed back; the time it took.
pub async fn round_trip(s: &mut TcpStream, n: usize, within: Duration) -> io::Result<Duration> {
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let start = Instant::now();
    let work = async {
        s.write_all(&data).await?;
        let mut back = vec![0u8; n];
        s.read_exact(&mut back).await?;
        if back != data {
            return Err(io::Error::other("echo came back altered"));
        }
        Ok(())
    };
    match tokio::time::timeout(within, work).await {
        Ok(r) => r.map(|()| start.elapsed()),
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// Reads until the peer closes or `within` passes: `Ok` is a close (EOF or
/// reset), `Err(TimedOut)` means the connection stayed open.
pub async fn closed_within(s: &mut TcpStream, within: Duration) -> io::Result<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    let wait = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    match tokio::time::timeout(within, wait).await {
        Ok(()) => Ok(start.elapsed()),
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
