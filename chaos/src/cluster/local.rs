//! Local backend: each primary is a child process on a free loopback port.
//!
//! Layout of the run's temp dir: `n<i>/data` (server `--dir`, holds the AOF),
//! `n<i>/faketime` (libfaketime timestamp file, Valkey), `n<i>/server.log`.
//!
//! Faults: SIGKILL / SIGSTOP / SIGCONT via `nix`. Partitions go through the proxy layer
//! ([`ProxyPlan::Chaos`]: an in-process Toxiproxy-API server, or [`ProxyPlan::External`]):
//! `disconnect` disables the node's proxy, `reconnect` enables it. Without a proxy
//! (`ProxyPlan::Direct`) `disconnect` returns [`ClusterError::Unsupported`]. Dropping a [`LocalCluster`] that was
//! neither taken [`Cluster::down`] nor [`LocalCluster::detach`]ed kills its processes (thawing
//! frozen ones first) and removes the temp dir.

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

use super::stack::{Control, STACK_VERSION, Stack, StackNode, ToxiproxySection};
use super::state::{ClusterState, NodeState};
use super::{
    BackendKind, Cluster, ClusterError, ClusterSpec, DataOnRestart, Flavour, NodeId, ProxyLayer,
    ProxyPlan, Verb, binaries, check_node, faketime_offset, faketime_rate_line, no_clock_faults,
    ports, process_age, proxy_name, redis_url, resp, server_args, worker_addr,
};

const BACKEND: &str = "local";
/// A port collision shows up as the server exiting early; try a few fresh ports.
const PORT_ATTEMPTS: u32 = 5;

#[derive(Debug)]
struct LocalNode {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    frozen: bool,
}

impl LocalNode {
    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
    fn faketime_file(&self) -> PathBuf {
        self.dir.join("faketime")
    }
    fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }
    fn addr(&self) -> SocketAddr {
        ports::loopback(self.port)
    }

    /// SIGCONT (a stopped process would otherwise linger in the kernel) then SIGKILL and reap.
    fn stop_process(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_raw(child.id() as i32);
            // Errors mean the process is already gone, which is what we want.
            let _ = kill(pid, Signal::SIGCONT);
            let _ = kill(pid, Signal::SIGKILL);
            let _ = child.wait();
        }
        self.frozen = false;
    }
}

/// A cluster of local server processes.
#[derive(Debug)]
pub struct LocalCluster {
    flavour: Flavour,
    version: String,
    run_id: String,
    bin: PathBuf,
    faketime: Option<PathBuf>,
    ready_timeout: Duration,
    /// Set once every node is up; `None` with [`ProxyPlan::Direct`].
    proxy: Option<ProxyLayer>,
    root: PathBuf,
    tempdir: Mutex<Option<TempDir>>,
    nodes: Mutex<Vec<LocalNode>>,
    /// Set by `down()` and `detach()`; Drop then leaves things alone.
    finished: AtomicBool,
}

enum SpawnOutcome {
    Ready,
    Exited(String),
    Timeout(String),
}

impl LocalCluster {
    /// Start `spec.nodes` servers and wait until each answers PING.
    pub async fn up(spec: ClusterSpec) -> Result<LocalCluster, ClusterError> {
        spec.validate()?;
        let run_id = spec.resolve_run_id()?;
        let bin = match &spec.server_bin {
            Some(b) => b.clone(),
            None => binaries::locate_server(spec.flavour)?,
        };
        let version = binaries::server_version(spec.flavour, &bin)?;
        // Valkey always runs under libfaketime (offset +0) so clock faults need no restart.
        let faketime = if spec.clock_faults && spec.flavour.supports_clock_faults() {
            Some(binaries::locate_faketime()?)
        } else {
            None
        };
        let tempdir = tempfile::Builder::new()
            .prefix(&format!("redlock-chaos-{run_id}-"))
            .tempdir()
            .map_err(|e| ClusterError::io("creating the run's temp dir", e))?;
        let root = tempdir.path().to_path_buf();
        let ports = ports::free_loopback_ports(spec.nodes)?;
        let mut nodes = Vec::with_capacity(spec.nodes);
        for (i, port) in ports.into_iter().enumerate() {
            let node = LocalNode {
                port,
                dir: root.join(format!("n{i}")),
                child: None,
                frozen: false,
            };
            std::fs::create_dir_all(node.data_dir()).map_err(|e| {
                ClusterError::io(format!("creating {}", node.data_dir().display()), e)
            })?;
            write_file(&node.faketime_file(), &faketime_offset(0))?;
            nodes.push(node);
        }
        let plan = spec.proxy.clone();
        let mut cluster = LocalCluster {
            flavour: spec.flavour,
            version,
            run_id,
            bin,
            faketime,
            ready_timeout: spec.ready_timeout,
            proxy: None,
            root,
            tempdir: Mutex::new(Some(tempdir)),
            nodes: Mutex::new(nodes),
            finished: AtomicBool::new(false),
        };
        // On error `cluster` is dropped here, which kills whatever did start.
        for i in 0..spec.nodes {
            cluster.start_node(i, true).await?;
        }
        let addrs: Vec<SocketAddr> = cluster.lock().iter().map(|n| n.addr()).collect();
        cluster.proxy = match plan {
            ProxyPlan::Direct => None,
            ProxyPlan::Chaos => Some(ProxyLayer::start_local(&addrs).await?),
            ProxyPlan::External { api, listen_host } => {
                let upstreams: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                Some(ProxyLayer::external(&api, &listen_host, &upstreams).await?)
            }
        };
        Ok(cluster)
    }

    /// The run's temp dir (node data, logs, clock files).
    pub fn root_dir(&self) -> &Path {
        &self.root
    }

    /// Process id of each node's server, `None` for killed nodes.
    pub fn pids(&self) -> Vec<Option<u32>> {
        self.lock()
            .iter()
            .map(|n| n.child.as_ref().map(|c| c.id()))
            .collect()
    }

    /// This cluster as a stack file (for `chaos up --stack-out`): each node a local
    /// process (its pid in `n<i>/pid`, written now, and the command line that started it),
    /// behind its proxy when there is a proxy layer, with its clock file under libfaketime.
    pub fn stack(&self) -> Result<Stack, ClusterError> {
        self.ensure_up()?;
        let nodes = self.lock();
        let mut out = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let pid_file = n.dir.join("pid");
            if let Some(c) = &n.child {
                write_file(&pid_file, &format!("{}\n", c.id()))?;
            }
            let mut command = vec![self.bin.display().to_string()];
            command.extend(server_args(
                "127.0.0.1",
                n.port,
                &n.data_dir().display().to_string(),
            ));
            let env = self
                .faketime_env(n)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            out.push(StackNode {
                url: redis_url(worker_addr(self.proxy.as_ref(), NodeId(i), n.addr())),
                admin_url: Some(redis_url(n.addr())),
                proxy: self.proxy.as_ref().map(|_| proxy_name(NodeId(i))),
                clock_file: self.faketime.as_ref().map(|_| n.faketime_file()),
                control: Control::Local {
                    pid_file,
                    command,
                    env,
                    cwd: None,
                    log: Some(n.log_file()),
                },
            });
        }
        Ok(Stack {
            version: STACK_VERSION,
            name: format!("chaos up {}", self.run_id),
            toxiproxy: self.proxy.as_ref().map(|p| ToxiproxySection {
                api: p.client().base_url().to_string(),
            }),
            postgres: None,
            nodes: out,
        })
    }

    /// The environment a node's server runs with under libfaketime (empty without it).
    fn faketime_env(&self, node: &LocalNode) -> Vec<(&'static str, String)> {
        match &self.faketime {
            Some(lib) => vec![
                ("LD_PRELOAD", lib.display().to_string()),
                (
                    "FAKETIME_TIMESTAMP_FILE",
                    node.faketime_file().display().to_string(),
                ),
                ("FAKETIME_NO_CACHE", "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
            ],
            None => Vec::new(),
        }
    }

    /// Leave the processes running and the temp dir in place; describe them for `chaos down`.
    ///
    /// Refused with an in-process proxy ([`ProxyPlan::Chaos`]): it would die with this process
    /// and leave the worker URLs dead.
    pub fn detach(self) -> Result<ClusterState, ClusterError> {
        if self.proxy.as_ref().is_some_and(|p| p.in_process()) {
            return Err(ClusterError::InvalidSpec {
                reason: "the local backend's proxy runs in this process and cannot outlive it; bring the cluster up with ProxyPlan::Direct (`chaos up --no-proxy`) or ProxyPlan::External, or use --backend docker".into(),
            });
        }
        self.finished.store(true, Ordering::SeqCst);
        if let Some(t) = self
            .tempdir
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            // Keep the directory: `chaos down` removes it later.
            let _ = t.keep();
        }
        let nodes = self
            .lock()
            .iter()
            .enumerate()
            .map(|(i, n)| NodeState {
                worker_url: redis_url(worker_addr(self.proxy.as_ref(), NodeId(i), n.addr())),
                admin_url: redis_url(n.addr()),
                pid: n.child.as_ref().map(|c| c.id()),
                container: None,
            })
            .collect();
        Ok(ClusterState {
            backend: BackendKind::Local,
            run_id: self.run_id.clone(),
            flavour: self.flavour,
            server_version: self.version.clone(),
            nodes,
            proxy_api: self
                .proxy
                .as_ref()
                .map(|p| p.client().base_url().to_string()),
            proxy_pid: None,
            dir: Some(self.root.clone()),
        })
        // Dropping `self` now does nothing (finished), and std `Child` does not kill on drop.
    }

    fn lock(&self) -> MutexGuard<'_, Vec<LocalNode>> {
        // A poisoned lock only means another thread panicked mid-update; node state is still
        // usable for cleanup, so recover instead of propagating the panic.
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ensure_up(&self) -> Result<(), ClusterError> {
        if self.finished.load(Ordering::SeqCst) {
            Err(ClusterError::AlreadyDown {
                run_id: self.run_id.clone(),
            })
        } else {
            Ok(())
        }
    }

    fn spawn(&self, node: &LocalNode) -> Result<Child, ClusterError> {
        let log = File::create(node.log_file())
            .map_err(|e| ClusterError::io(format!("creating {}", node.log_file().display()), e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| ClusterError::io("duplicating the log file handle", e))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(server_args(
            "127.0.0.1",
            node.port,
            &node.data_dir().display().to_string(),
        ))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        // Own process group: a Ctrl-C in the terminal reaches only `chaos`, which then
        // decides (down or detach) instead of the servers dying behind its back.
        .process_group(0);
        cmd.envs(self.faketime_env(node));
        cmd.spawn()
            .map_err(|e| ClusterError::io(format!("starting {}", self.bin.display()), e))
    }

    /// Spawn node `i` and wait for PING. With `new_port_on_collision`, an early exit (most
    /// likely a port taken since it was picked) is retried on a fresh port.
    async fn start_node(&self, i: usize, new_port_on_collision: bool) -> Result<(), ClusterError> {
        let attempts = if new_port_on_collision {
            PORT_ATTEMPTS
        } else {
            1
        };
        let mut last_error = String::new();
        for attempt in 0..attempts {
            let addr = {
                let mut nodes = self.lock();
                let node = &mut nodes[i];
                if attempt > 0 {
                    node.port = ports::free_loopback_port()?;
                }
                let child = self.spawn(node)?;
                node.child = Some(child);
                node.frozen = false;
                node.addr()
            };
            match self.wait_spawned(i, addr).await {
                SpawnOutcome::Ready => return Ok(()),
                SpawnOutcome::Exited(log) => {
                    self.lock()[i].stop_process();
                    last_error = format!("server exited: {log}");
                    if !log.contains("in use") {
                        break;
                    }
                }
                SpawnOutcome::Timeout(e) => {
                    self.lock()[i].stop_process();
                    return Err(ClusterError::NotReady {
                        node: NodeId(i),
                        addr,
                        waited: self.ready_timeout,
                        last_error: e,
                        log_hint: self.lock()[i].log_file().display().to_string(),
                    });
                }
            }
        }
        Err(ClusterError::PortsExhausted {
            node: NodeId(i),
            attempts,
            last_error,
        })
    }

    async fn wait_spawned(&self, i: usize, addr: SocketAddr) -> SpawnOutcome {
        let start = tokio::time::Instant::now();
        let mut last = String::from("never probed");
        while start.elapsed() < self.ready_timeout {
            let exited = {
                let mut nodes = self.lock();
                let node = &mut nodes[i];
                match node.child.as_mut().map(|c| c.try_wait()) {
                    Some(Ok(Some(status))) => {
                        Some(format!("{status}; log: {}", tail(&node.log_file())))
                    }
                    _ => None,
                }
            };
            if let Some(why) = exited {
                return SpawnOutcome::Exited(why);
            }
            match resp::ping(addr, Duration::from_millis(500)).await {
                Ok(()) => return SpawnOutcome::Ready,
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        SpawnOutcome::Timeout(last)
    }

    fn proxy_or_unsupported(
        &self,
        operation: &'static str,
    ) -> Result<&crate::proxy::Client, ClusterError> {
        self.proxy
            .as_ref()
            .map(|p| p.client())
            .ok_or(ClusterError::Unsupported {
                backend: BACKEND,
                operation,
                hint: "local processes share the loopback; bring the cluster up with a proxy (ProxyPlan::Chaos) or use --backend docker",
            })
    }

    fn signal(&self, node: NodeId, sig: Signal, frozen: bool) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        let mut nodes = self.lock();
        let n = &mut nodes[i];
        let Some(child) = &n.child else {
            return Err(ClusterError::NodeState {
                node,
                state: "killed",
                hint: "call start() first",
            });
        };
        kill(Pid::from_raw(child.id() as i32), sig).map_err(|e| ClusterError::Command {
            program: format!("kill -{sig} {}", child.id()),
            detail: e.to_string(),
        })?;
        n.frozen = frozen;
        Ok(())
    }

    fn teardown(&self) {
        for n in self.lock().iter_mut() {
            n.stop_process();
        }
        if let Some(t) = self
            .tempdir
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            // Best effort: nothing useful to do if removal fails during cleanup.
            let _ = t.close();
        }
    }
}

impl Cluster for LocalCluster {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }
    fn flavour(&self) -> Flavour {
        self.flavour
    }
    fn server_version(&self) -> &str {
        &self.version
    }
    fn nodes(&self) -> usize {
        self.lock().len()
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn worker_url(&self, node: NodeId) -> Result<String, ClusterError> {
        let i = check_node(node, self.nodes())?;
        let addr = self.lock()[i].addr();
        Ok(redis_url(worker_addr(self.proxy.as_ref(), node, addr)))
    }
    fn proxy(&self) -> Option<&crate::proxy::Client> {
        self.proxy.as_ref().map(|p| p.client())
    }
    fn admin_url(&self, node: NodeId) -> Result<String, ClusterError> {
        let i = check_node(node, self.nodes())?;
        Ok(redis_url(self.lock()[i].addr()))
    }
    fn check(&self, verb: Verb, node: NodeId) -> Result<(), String> {
        if node.0 >= self.nodes() {
            return Err(format!("{node} does not exist ({} nodes)", self.nodes()));
        }
        match verb {
            Verb::Proxy if self.proxy.is_none() => {
                Err("needs the proxy layer, and this cluster has none".into())
            }
            // Refused before the scenario, not failed in it.
            Verb::Clock | Verb::ClockRate if self.faketime.is_none() => {
                Err(no_clock_faults(self.flavour).to_string())
            }
            _ => Ok(()),
        }
    }
    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        self.lock()[i].stop_process();
        Ok(())
    }
    async fn start(&self, node: NodeId) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        if self.lock()[i].child.is_some() {
            // Already running: start is the heal of kill, and healing twice is harmless.
            return Ok(());
        }
        // Same port as before so worker URLs stay valid.
        self.start_node(i, false).await
    }
    async fn restart(&self, node: NodeId, data: DataOnRestart) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        let data_dir = {
            let mut nodes = self.lock();
            nodes[i].stop_process();
            nodes[i].data_dir()
        };
        if data == DataOnRestart::Wipe {
            std::fs::remove_dir_all(&data_dir)
                .map_err(|e| ClusterError::io(format!("wiping {}", data_dir.display()), e))?;
            std::fs::create_dir_all(&data_dir)
                .map_err(|e| ClusterError::io(format!("creating {}", data_dir.display()), e))?;
        }
        self.start_node(i, false).await
    }
    async fn freeze(&self, node: NodeId) -> Result<(), ClusterError> {
        self.signal(node, Signal::SIGSTOP, true)
    }
    async fn thaw(&self, node: NodeId) -> Result<(), ClusterError> {
        self.signal(node, Signal::SIGCONT, false)
    }
    async fn disconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        self.ensure_up()?;
        check_node(node, self.nodes())?;
        let client = self.proxy_or_unsupported("disconnect")?;
        let name = proxy_name(node);
        client
            .disable(&name)
            .await
            .map(drop)
            .map_err(|e| ClusterError::Proxy {
                action: format!("disabling proxy {name}"),
                detail: e.to_string(),
            })
    }
    async fn reconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        let client = self.proxy_or_unsupported("reconnect")?;
        let name = proxy_name(node);
        client
            .enable(&name)
            .await
            .map_err(|e| ClusterError::Proxy {
                action: format!("enabling proxy {name}"),
                detail: e.to_string(),
            })?;
        // Same contract as docker: back when it answers PING (through the proxy).
        let addr = worker_addr(self.proxy.as_ref(), node, self.lock()[i].addr());
        resp::wait_ready(addr, self.ready_timeout)
            .await
            .map_err(|last_error| ClusterError::NotReady {
                node,
                addr,
                waited: self.ready_timeout,
                last_error,
                log_hint: self.lock()[i].log_file().display().to_string(),
            })
    }
    async fn set_clock_offset(
        &self,
        node: NodeId,
        offset_seconds: i64,
    ) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        if self.faketime.is_none() {
            return Err(no_clock_faults(self.flavour));
        }
        let file = self.lock()[i].faketime_file();
        write_file(&file, &faketime_offset(offset_seconds))
    }
    async fn set_clock_rate(&self, node: NodeId, rate_ppm: i64) -> Result<(), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        if self.faketime.is_none() {
            return Err(no_clock_faults(self.flavour));
        }
        let (file, pid) = {
            let n = &self.lock()[i];
            (n.faketime_file(), n.child.as_ref().map(|c| c.id()))
        };
        let pid = pid.ok_or(ClusterError::NodeState {
            node,
            state: "killed",
            hint: "start it first: a clock skew needs the running server's start time",
        })?;
        let age = process_age(pid)?;
        write_file(&file, &faketime_rate_line(age, rate_ppm))
    }
    async fn reset_clock(&self, node: NodeId) -> Result<(), ClusterError> {
        self.set_clock_offset(node, 0).await
    }
    async fn down(&self) -> Result<(), ClusterError> {
        if !self.finished.swap(true, Ordering::SeqCst) {
            // Proxy first: its connections to the nodes close before the nodes die.
            let proxy = match &self.proxy {
                Some(p) => p.shutdown().await,
                None => Ok(()),
            };
            self.teardown();
            proxy?;
        }
        Ok(())
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if !self.finished.swap(true, Ordering::SeqCst) {
            self.teardown();
        }
    }
}

/// Stop processes recorded in a local state file and remove its dir (`chaos down`).
///
/// Only signals a pid whose command line still names a `*-server` binary, so a pid reused by
/// an unrelated process since `chaos up` is left alone.
pub fn teardown_detached(state: &ClusterState) -> Result<usize, ClusterError> {
    let mut stopped = 0;
    // The pids at `chaos up`, and those of servers an attached run started since
    // (`n<i>/pid`, see `stack`).
    let mut pids: Vec<u32> = state.nodes.iter().filter_map(|n| n.pid).collect();
    if let Some(dir) = &state.dir {
        for i in 0..state.nodes.len() {
            let file = dir.join(format!("n{i}")).join("pid");
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                pids.push(pid);
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("-server") {
            continue;
        }
        let pid = Pid::from_raw(pid as i32);
        let _ = kill(pid, Signal::SIGCONT);
        if kill(pid, Signal::SIGKILL).is_ok() {
            stopped += 1;
        }
    }
    if let Some(dir) = &state.dir
        && dir.exists()
    {
        std::fs::remove_dir_all(dir)
            .map_err(|e| ClusterError::io(format!("removing {}", dir.display()), e))?;
    }
    Ok(stopped)
}

fn write_file(path: &Path, contents: &str) -> Result<(), ClusterError> {
    std::fs::write(path, contents)
        .map_err(|e| ClusterError::io(format!("writing {}", path.display()), e))
}

/// Last few lines of a log file, for error messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}
