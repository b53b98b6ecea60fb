//! A minimal RESP exchange over TCP, for readiness checks.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Send `PING` to `addr` and expect `+PONG`, all within `timeout`.
///
/// Errors are strings because they only feed [`super::ClusterError::NotReady`] messages.
pub async fn ping(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let exchange = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut stream = BufReader::new(stream);
        stream
            .get_mut()
            .write_all(b"*1\r\n$4\r\nPING\r\n")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut line = String::new();
        let n = stream
            .read_line(&mut line)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed without a reply".to_string());
        }
        if line.starts_with("+PONG") {
            Ok(())
        } else {
            // e.g. "-LOADING Redis is loading the dataset in memory".
            Err(format!("reply {:?}", line.trim_end()))
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(format!("no reply within {timeout:?}")),
    }
}

/// Poll [`ping`] until it succeeds or `deadline` passes; returns the last error on timeout.
pub async fn wait_ready(addr: SocketAddr, within: Duration) -> Result<(), String> {
    let start = tokio::time::Instant::now();
    let mut last = String::from("never probed");
    // Bounded: stops at `within`.
    while start.elapsed() < within {
        match ping(addr, Duration::from_millis(500)).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(last)
}
