//! The state file `chaos up` writes (`target/chaos/cluster.json`) and `chaos down` reads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{BackendKind, ClusterError, Flavour};

/// A detached cluster, as recorded for `chaos down` and for other tools (the worker URLs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterState {
    /// Backend that runs it.
    pub backend: BackendKind,
    /// Run id (docker label value).
    pub run_id: String,
    /// Server implementation.
    pub flavour: Flavour,
    /// E.g. `"valkey 8.1.8"`.
    pub server_version: String,
    /// One entry per primary.
    pub nodes: Vec<NodeState>,
    /// Base URL of the proxy layer's Toxiproxy API, if workers go through proxies
    /// (proxy of node `i` is named `node<i>`).
    #[serde(default)]
    pub proxy_api: Option<String>,
    /// Local backend: the `chaos toxiproxy` process serving `proxy_api`, stopped on down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_pid: Option<u32>,
    /// Host directory owned by the run (local: node dirs; docker: clock files), removed on down.
    pub dir: Option<PathBuf>,
}

/// One primary in the state file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeState {
    /// URL for workers.
    pub worker_url: String,
    /// Direct URL for inspection.
    pub admin_url: String,
    /// Local backend: server process id.
    pub pid: Option<u32>,
    /// Docker backend: container name.
    pub container: Option<String>,
}

/// `$CARGO_TARGET_DIR/chaos/cluster.json`, else `target/chaos/cluster.json` under the cwd.
pub fn default_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("chaos").join("cluster.json")
}

impl ClusterState {
    /// Write as pretty JSON, creating parent directories.
    pub fn write(&self, path: &Path) -> Result<(), ClusterError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| ClusterError::io(format!("creating {}", dir.display()), e))?;
        }
        let json = serde_json::to_string_pretty(self).map_err(|e| ClusterError::StateFile {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        std::fs::write(path, json)
            .map_err(|e| ClusterError::io(format!("writing {}", path.display()), e))
    }

    /// Read a state file written by [`ClusterState::write`].
    pub fn read(path: &Path) -> Result<ClusterState, ClusterError> {
        let text = std::fs::read_to_string(path).map_err(|e| ClusterError::StateFile {
            path: path.to_path_buf(),
            detail: format!("{e} (was `chaos up` run from this directory?)"),
        })?;
        serde_json::from_str(&text).map_err(|e| ClusterError::StateFile {
            path: path.to_path_buf(),
            detail: format!("not a cluster state file: {e}"),
        })
    }
}
