//! A deployment `chaos` did not bring up, described by a [`Stack`] file: the nodes, their
//! proxies at some Toxiproxy (ours or Shopify's), and how each node's process is driven
//! (`control::NodeControl`).
//!
//! | verb | needs | how |
//! |---|---|---|
//! | kill / start / freeze / thaw | a docker or local control | container kill/start/pause/unpause, or signals |
//! | restart keeping data | a control | kill, start, wait for PING |
//! | restart empty (amnesia) | a control and a proxy | proxy disabled; kill, start, `FLUSHALL` through the admin URL; proxy enabled |
//! | partition, black hole, latency | a proxy | the Toxiproxy API, by the node's proxy name |
//! | network partition (`docker network disconnect`) | — | never: partition through the proxy |
//! | clock jump | `clock_file` | the libfaketime timestamp file rewritten |
//!
//! Amnesia cannot wipe a volume on someone else's engine; it empties the restarted server
//! instead, while no worker can reach it, which is what the workers would see. What a
//! node's control cannot do, [`Cluster::check`] says before a scenario starts, and the
//! scenario is reported *not applicable*. Nothing is removed at the end: [`Cluster::down`]
//! heals what this run did (thaws, starts, enables proxies, removes toxics, resets clocks).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::control::NodeControl;
use super::stack::Stack;
use super::{Cluster, ClusterError, DataOnRestart, Flavour, NodeId, Verb, check_node};
use crate::proxy::Client;

/// Bound on waiting for a started node to answer PING.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// What this run did to a node, for [`Cluster::down`] to undo.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    killed: bool,
    frozen: bool,
    clock: bool,
}

/// An attached deployment (see the module docs).
#[derive(Debug)]
pub struct AttachedCluster {
    stack: Stack,
    run_id: String,
    flavour: Flavour,
    version: String,
    proxy: Option<Client>,
    controls: Vec<NodeControl>,
    marks: Mutex<Vec<Marks>>,
}

impl AttachedCluster {
    /// Attaches to `stack`: every node must answer PING on its admin URL, the Toxiproxy
    /// API (if any) must answer and hold every named proxy, and every control's engine must
    /// answer.
    ///
    /// # Errors
    /// [`ClusterError`] saying which part of the stack does not answer.
    pub async fn attach(stack: Stack, run_id: String) -> Result<AttachedCluster, ClusterError> {
        let proxy = match &stack.toxiproxy {
            Some(t) => {
                let client = Client::new(&t.api).map_err(|e| ClusterError::InvalidSpec {
                    reason: format!("[toxiproxy] api: {e}"),
                })?;
                super::proxied::wait_api(&client, Duration::from_secs(5)).await?;
                let have = client.proxies().await.map_err(|e| ClusterError::Proxy {
                    action: format!("listing the proxies at {}", t.api),
                    detail: e.to_string(),
                })?;
                for (i, n) in stack.nodes.iter().enumerate() {
                    if let Some(p) = &n.proxy
                        && !have.contains_key(p)
                    {
                        return Err(ClusterError::Proxy {
                            action: format!("attaching node {i}"),
                            detail: format!(
                                "no proxy {p:?} at {} (it has {:?})",
                                t.api,
                                have.keys().collect::<Vec<_>>()
                            ),
                        });
                    }
                }
                Some(client)
            }
            None => None,
        };
        let mut controls = Vec::with_capacity(stack.nodes.len());
        for n in &stack.nodes {
            controls.push(NodeControl::open(&n.control).await?);
        }
        let mut info = String::new();
        for (i, n) in stack.nodes.iter().enumerate() {
            let admin = n.admin_url.as_deref().unwrap_or(&n.url);
            info =
                command(admin, &["INFO", "server"])
                    .await
                    .map_err(|e| ClusterError::Command {
                        program: format!("INFO on node {i} ({admin})"),
                        detail: e,
                    })?;
        }
        let (flavour, version) = server_of(&info);
        let marks = Mutex::new(vec![Marks::default(); stack.nodes.len()]);
        Ok(AttachedCluster {
            stack,
            run_id,
            flavour,
            version,
            proxy,
            controls,
            marks,
        })
    }

    /// The stack it is attached to.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    fn marks(&self) -> MutexGuard<'_, Vec<Marks>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn admin(&self, i: usize) -> &str {
        let n = &self.stack.nodes[i];
        n.admin_url.as_deref().unwrap_or(&n.url)
    }

    /// The verb on `node`, or why it cannot be done here.
    fn can(&self, verb: Verb, node: NodeId) -> Result<usize, ClusterError> {
        let i = check_node(node, self.nodes())?;
        self.check(verb, node)
            .map_err(|hint| ClusterError::InvalidSpec {
                reason: format!("{node}: {hint}"),
            })?;
        Ok(i)
    }

    async fn wait_ready(&self, i: usize) -> Result<(), ClusterError> {
        let admin = self.admin(i).to_owned();
        let start = tokio::time::Instant::now();
        let mut last = String::new();
        while start.elapsed() < READY_WITHIN {
            match command(&admin, &["PING"]).await {
                Ok(_) => return Ok(()),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ClusterError::Command {
            program: format!("PING on node {i} ({admin})"),
            detail: format!("no answer within {READY_WITHIN:?}: {last}"),
        })
    }

    fn proxy_err(&self, action: String) -> impl FnOnce(crate::proxy::ClientError) -> ClusterError {
        move |e| ClusterError::Proxy {
            action,
            detail: e.to_string(),
        }
    }

    async fn set_proxy(&self, i: usize, enabled: bool) -> Result<(), ClusterError> {
        let (Some(client), Some(name)) = (&self.proxy, &self.stack.nodes[i].proxy) else {
            return Ok(());
        };
        let r = if enabled {
            client.enable(name).await
        } else {
            client.disable(name).await
        };
        r.map(drop)
            .map_err(self.proxy_err(format!("setting proxy {name} enabled={enabled}")))
    }

    fn clock_file(&self, i: usize) -> Result<&std::path::Path, ClusterError> {
        self.stack.nodes[i]
            .clock_file
            .as_deref()
            .ok_or(ClusterError::Unsupported {
                backend: "attached",
                operation: "clock faults",
                hint: "give the node a clock_file (its libfaketime timestamp file)",
            })
    }
}

/// `INFO server` → flavour and `"valkey 8.1.8"`.
fn server_of(info: &str) -> (Flavour, String) {
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(k).map(str::to_owned))
    };
    match field("valkey_version:") {
        Some(v) => (Flavour::Valkey, format!("valkey {v}")),
        None => (
            Flavour::Redis,
            format!("redis {}", field("redis_version:").unwrap_or_default()),
        ),
    }
}

/// One command on a fresh connection, within 2 s; the reply as text.
async fn command(url: &str, args: &[&str]) -> Result<String, String> {
    let fut = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        match cmd.query_async::<redis::Value>(&mut conn).await {
            Ok(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Ok(redis::Value::VerbatimString { text, .. }) => Ok(text),
            Ok(other) => Ok(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    };
    tokio::time::timeout(Duration::from_secs(2), fut)
        .await
        .unwrap_or_else(|_| Err("timed out after 2s".into()))
}

impl Cluster for AttachedCluster {
    fn backend_name(&self) -> &'static str {
        "attached"
    }
    fn flavour(&self) -> Flavour {
        self.flavour
    }
    fn server_version(&self) -> &str {
        &self.version
    }
    fn nodes(&self) -> usize {
        self.stack.nodes.len()
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn worker_url(&self, node: NodeId) -> Result<String, ClusterError> {
        let i = check_node(node, self.nodes())?;
        Ok(self.stack.nodes[i].url.clone())
    }
    fn admin_url(&self, node: NodeId) -> Result<String, ClusterError> {
        let i = check_node(node, self.nodes())?;
        Ok(self.admin(i).to_owned())
    }
    fn proxy(&self) -> Option<&Client> {
        self.proxy.as_ref()
    }
    fn proxy_name(&self, node: NodeId) -> String {
        self.stack
            .nodes
            .get(node.0)
            .and_then(|n| n.proxy.clone())
            .unwrap_or_else(|| super::proxy_name(node))
    }
    fn check(&self, verb: Verb, node: NodeId) -> Result<(), String> {
        let Some(n) = self.stack.nodes.get(node.0) else {
            return Err(format!("no such node (the stack has {})", self.nodes()));
        };
        let control = self.controls[node.0].controls_process();
        let proxied = self.proxy.is_some() && n.proxy.is_some();
        let kind = n.control.kind();
        match verb {
            Verb::Kill | Verb::Freeze if !control => Err(format!(
                "{} needs a docker or local control; this node's is `{kind}`",
                verb.name()
            )),
            Verb::RestartWipe if !(control && proxied) => Err(format!(
                "amnesia needs a docker or local control (this node's is `{kind}`) and a proxy (to keep workers off while the restarted server is emptied)"
            )),
            Verb::Proxy if !proxied => {
                Err("needs a proxy: give the node `proxy` and the stack [toxiproxy]".into())
            }
            Verb::Disconnect => Err(
                "network partitions are docker-backend only; attached stacks partition through the proxy"
                    .into(),
            ),
            Verb::Clock if n.clock_file.is_none() => {
                Err("clock faults need the node's clock_file (a libfaketime timestamp file)".into())
            }
            Verb::ClockRate => Err(
                "a clock skew needs the server process's start time (to start the rate without a jump), which an attached stack does not give; run it on a local or Docker cluster"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        let i = self.can(Verb::Kill, node)?;
        self.marks()[i].killed = true;
        self.controls[i].kill(node).await?;
        self.marks()[i].frozen = false;
        Ok(())
    }
    async fn start(&self, node: NodeId) -> Result<(), ClusterError> {
        let i = self.can(Verb::Kill, node)?;
        self.controls[i].start().await?;
        self.wait_ready(i).await?;
        self.marks()[i].killed = false;
        Ok(())
    }
    async fn restart(&self, node: NodeId, data: DataOnRestart) -> Result<(), ClusterError> {
        match data {
            DataOnRestart::Keep => {
                self.kill(node).await?;
                self.start(node).await
            }
            DataOnRestart::Wipe => {
                let i = self.can(Verb::RestartWipe, node)?;
                self.set_proxy(i, false).await?;
                self.kill(node).await?;
                self.start(node).await?;
                command(self.admin(i), &["FLUSHALL"])
                    .await
                    .map_err(|e| ClusterError::Command {
                        program: format!("FLUSHALL on node {i}"),
                        detail: e,
                    })?;
                self.set_proxy(i, true).await
            }
        }
    }
    async fn freeze(&self, node: NodeId) -> Result<(), ClusterError> {
        let i = self.can(Verb::Freeze, node)?;
        self.marks()[i].frozen = true;
        self.controls[i].freeze().await
    }
    async fn thaw(&self, node: NodeId) -> Result<(), ClusterError> {
        let i = self.can(Verb::Freeze, node)?;
        self.controls[i].thaw().await?;
        self.marks()[i].frozen = false;
        Ok(())
    }
    async fn disconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        self.can(Verb::Disconnect, node).map(drop)
    }
    async fn reconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        check_node(node, self.nodes()).map(drop)
    }
    async fn set_clock_offset(
        &self,
        node: NodeId,
        offset_seconds: i64,
    ) -> Result<(), ClusterError> {
        let i = self.can(Verb::Clock, node)?;
        let file = self.clock_file(i)?;
        self.marks()[i].clock = true;
        std::fs::write(file, super::faketime_offset(offset_seconds))
            .map_err(|e| ClusterError::io(format!("writing {}", file.display()), e))
    }
    async fn set_clock_rate(&self, node: NodeId, _rate_ppm: i64) -> Result<(), ClusterError> {
        self.can(Verb::ClockRate, node).map(drop)
    }
    async fn reset_clock(&self, node: NodeId) -> Result<(), ClusterError> {
        let i = check_node(node, self.nodes())?;
        let Ok(file) = self.clock_file(i) else {
            return Ok(());
        };
        std::fs::write(file, super::faketime_offset(0))
            .map_err(|e| ClusterError::io(format!("writing {}", file.display()), e))?;
        self.marks()[i].clock = false;
        Ok(())
    }
    async fn down(&self) -> Result<(), ClusterError> {
        let marks = self.marks().clone();
        let mut first_error = None;
        for (i, m) in marks.iter().enumerate() {
            let node = NodeId(i);
            let mut heal = Vec::new();
            if m.frozen {
                heal.push(self.thaw(node).await);
            }
            if m.killed {
                heal.push(self.start(node).await);
            }
            if m.clock {
                heal.push(self.reset_clock(node).await);
            }
            if let (Some(client), Some(name)) = (&self.proxy, &self.stack.nodes[i].proxy) {
                heal.push(self.set_proxy(i, true).await);
                heal.push(
                    client
                        .heal(name)
                        .await
                        .map_err(self.proxy_err(format!("removing the toxics of {name}"))),
                );
            }
            for r in heal {
                if let Err(e) = r {
                    tracing::error!(node = i, error = %e, "healing an attached node failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
