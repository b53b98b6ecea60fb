//! Free loopback ports.
//!
//! A port is picked by binding `127.0.0.1:0` and releasing it; another process may grab it
//! before the server binds, so callers retry on a collision.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use super::ClusterError;

/// A loopback port that was free a moment ago.
pub fn free_loopback_port() -> Result<u16, ClusterError> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .map_err(|e| ClusterError::io("binding 127.0.0.1:0 to pick a free port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| ClusterError::io("reading the picked port", e))?
        .port();
    Ok(port)
}

/// `count` distinct loopback ports that were free a moment ago.
pub fn free_loopback_ports(count: usize) -> Result<Vec<u16>, ClusterError> {
    // Hold every listener until all are picked so the kernel cannot hand out duplicates.
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let l = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .map_err(|e| ClusterError::io("binding 127.0.0.1:0 to pick a free port", e))?;
        listeners.push(l);
    }
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| ClusterError::io("reading the picked port", e))
        })
        .collect()
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}
