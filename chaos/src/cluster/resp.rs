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

/// `INFO server` from `addr`: its `<flavour>_version` (else `redis_version`) as
/// `"<flavour> <version>"`, e.g. `valkey 8.1.4` (for images whose binary is not on this host).
pub async fn server_version(
    addr: SocketAddr,
    flavour: super::Flavour,
    timeout: Duration,
) -> Result<String, String> {
    let exchange = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut stream = BufReader::new(stream);
        stream
            .get_mut()
            .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut header = String::new();
        stream
            .read_line(&mut header)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let len: usize = header
            .trim_end()
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("reply {:?}", header.trim_end()))?;
        let mut body = vec![0; len];
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut body)
            .await
            .map_err(|e| format!("read: {e}"))?;
        Ok::<_, String>(String::from_utf8_lossy(&body).into_owned())
    };
    let info = match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r?,
        Err(_) => return Err(format!("no reply within {timeout:?}")),
    };
    version_in_info(&info, flavour).ok_or_else(|| "no version in INFO server".to_string())
}

fn version_in_info(info: &str, flavour: super::Flavour) -> Option<String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim_end().strip_prefix(name))
            .map(str::to_owned)
    };
    field(&format!("{}_version:", flavour.name()))
        .or_else(|| field("redis_version:"))
        .map(|v| format!("{} {v}", flavour.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Flavour;

    #[test]
    fn the_version_is_the_flavours_own_field() {
        let info =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.4\r\n";
        assert_eq!(
            version_in_info(info, Flavour::Valkey).as_deref(),
            Some("valkey 8.1.4")
        );
        assert_eq!(
            version_in_info("redis_version:7.4.1\r\n", Flavour::Redis).as_deref(),
            Some("redis 7.4.1")
        );
        assert_eq!(version_in_info("# Server\r\n", Flavour::Valkey), None);
    }
}
