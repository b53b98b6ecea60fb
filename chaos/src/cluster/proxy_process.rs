//! A `chaos toxiproxy` process of its own, for `chaos up` on the local backend: the
//! in-process proxy would die with `chaos up`, this one lives until `chaos down`, so the
//! cluster it leaves behind has a proxy layer (and a stack file with proxy faults).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{ClusterError, ports};
use crate::proxy::Client;

/// A detached proxy server: its pid and API base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyProcess {
    /// Process id (recorded in the state file; `chaos down` stops it).
    pub pid: u32,
    /// `http://127.0.0.1:<port>`.
    pub api: String,
}

/// Starts `chaos_bin toxiproxy` on a free loopback port, its output in `log`, and waits
/// until its API answers. The process is in its own process group, so it outlives this one.
///
/// # Errors
/// [`ClusterError`] when it cannot start or its API does not answer (it is then stopped).
pub async fn spawn(chaos_bin: &Path, log: &Path) -> Result<ProxyProcess, ClusterError> {
    let port = ports::free_loopback_port()?;
    let out = File::create(log)
        .map_err(|e| ClusterError::io(format!("creating {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| ClusterError::io("duplicating the log file handle", e))?;
    let child = Command::new(chaos_bin)
        .args(["toxiproxy", "--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| ClusterError::io(format!("starting {} toxiproxy", chaos_bin.display()), e))?;
    let proxy = ProxyProcess {
        pid: child.id(),
        api: format!("http://127.0.0.1:{port}"),
    };
    let client = Client::new(&proxy.api).map_err(|e| ClusterError::Proxy {
        action: "connecting to the proxy process".into(),
        detail: e.to_string(),
    })?;
    if let Err(e) = super::proxied::wait_api(&client, Duration::from_secs(10)).await {
        stop(proxy.pid);
        return Err(e);
    }
    Ok(proxy)
}

/// Stops the proxy process `pid` if it still is one (a reused pid is left alone).
/// Returns whether it signalled it.
pub fn stop(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("toxiproxy") {
        return false;
    }
    i32::try_from(pid).is_ok_and(|p| kill(Pid::from_raw(p), Signal::SIGTERM).is_ok())
}
