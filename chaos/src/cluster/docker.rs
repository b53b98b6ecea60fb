//! Docker backend: one private bridge network per run, one container per primary.
//!
//! - Network `redlock-chaos-<run>`; containers `redlock-chaos-<run>-n<i>` on it, each with its
//!   6379 published on `127.0.0.1:<port>` (port picked here, so it stays the same across
//!   kill/start and worker URLs remain valid).
//! - Data: volume `redlock-chaos-<run>-n<i>-g<generation>` at `/data` (AOF, fsync always).
//!   `restart(Wipe)` replaces container and volume with a new generation.
//! - Images ([`official`]): the official server and Toxiproxy images (present or pulled), or
//!   ones built from this host's binaries ([`image`]); an official server runs as
//!   `<flavour>-server <args>` under its image's entrypoint, an official Toxiproxy as
//!   `-host=0.0.0.0 -port=8474`.
//! - Clock (Valkey, offline image only: libfaketime is not in the official one): a host temp dir per run, `n<i>/` bind-mounted at `/faketime`, holding the
//!   libfaketime timestamp file that `set_clock_offset` rewrites.
//! - Proxy ([`ProxyPlan::Chaos`]): container `redlock-chaos-<run>-proxy` on the same network
//!   running this crate's own binary as `chaos toxiproxy --listen 0.0.0.0:8474` (image from
//!   [`image::ensure_proxy_image`]). Proxy `node<i>` listens on `20000+i` inside it with
//!   upstream `<node container>:6379`; the API and every listen port are published on
//!   `127.0.0.1`. Upstreams are names, resolved per connection by the engine's DNS, so they
//!   stay valid across kill/start and `restart(Wipe)` (same name, new container).
//! - Every container, network and volume carries [`LABEL_PROJECT`] and [`LABEL_RUN`];
//!   [`remove_labelled`] removes them by label, which is how `down()`, the Drop guard and
//!   `chaos down` all clean up.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, NetworkConnectRequest, NetworkCreateRequest,
    NetworkDisconnectRequest, PortBinding, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder, RemoveVolumeOptionsBuilder,
    StartContainerOptions,
};
use tempfile::TempDir;

use super::image::{self, IMAGE_FAKETIME_LIB};
use super::official::{self, ImagePlan, ImageSource, Role, UsedImage};
use super::proxied::ProxyLayer;
use super::stack::{Control, STACK_VERSION, Stack, StackNode, ToxiproxySection};
use super::state::{ClusterState, NodeState};
use super::{
    BackendKind, Cluster, ClusterError, ClusterSpec, DataOnRestart, Flavour, LABEL_PROJECT,
    LABEL_RUN, NodeId, PROJECT, ProxyPlan, Verb, binaries, check_node, faketime_offset, ports,
    proxy_name, redis_url, resp, server_args, worker_addr,
};
use crate::proxy::NewProxy;

const BACKEND: &str = "docker";
const LABEL_NODE: &str = "redlock-chaos.node";
/// Port collisions (another process took the picked port) are retried with a fresh port.
const PORT_ATTEMPTS: u32 = 5;
/// Upper bound on any single wait for the engine to change a container's state.
const STATE_WAIT: Duration = Duration::from_secs(10);
/// Port of the proxy API inside the proxy container (Toxiproxy's default).
const PROXY_API_PORT: u16 = 8474;
/// Proxy `node<i>` listens on `PROXY_BASE_PORT + i` inside the proxy container.
const PROXY_BASE_PORT: u16 = 20000;

/// Connect to the local engine (honours `DOCKER_HOST`) and agree on an API version: the engine
/// here may be older than bollard's default version.
pub async fn connect() -> Result<Docker, ClusterError> {
    let docker =
        Docker::connect_with_local_defaults().map_err(|e| ClusterError::DockerUnavailable {
            detail: e.to_string(),
        })?;
    match tokio::time::timeout(Duration::from_secs(5), docker.negotiate_version()).await {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(ClusterError::DockerUnavailable {
            detail: e.to_string(),
        }),
        Err(_) => Err(ClusterError::DockerUnavailable {
            detail: "the engine did not answer within 5s".into(),
        }),
    }
}

/// Whether a Docker engine answers.
pub async fn engine_available() -> bool {
    match connect().await {
        Ok(d) => matches!(
            tokio::time::timeout(Duration::from_secs(3), d.ping()).await,
            Ok(Ok(_))
        ),
        Err(_) => false,
    }
}

fn label_filter(run_id: Option<&str>) -> HashMap<String, Vec<String>> {
    let value = match run_id {
        Some(id) => format!("{LABEL_RUN}={id}"),
        None => format!("{LABEL_PROJECT}={PROJECT}"),
    };
    HashMap::from([("label".to_string(), vec![value])])
}

/// Names of labelled resources (of one run, or of every run when `run_id` is `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labelled {
    /// Container names.
    pub containers: Vec<String>,
    /// Network names.
    pub networks: Vec<String>,
    /// Volume names.
    pub volumes: Vec<String>,
}

impl Labelled {
    /// No resources at all.
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.networks.is_empty() && self.volumes.is_empty()
    }
}

/// List labelled containers (any state), networks and volumes.
pub async fn list_labelled(
    docker: &Docker,
    run_id: Option<&str>,
) -> Result<Labelled, ClusterError> {
    let filters = label_filter(run_id);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(|e| ClusterError::docker("listing labelled containers", e))?
        .into_iter()
        .filter_map(|c| {
            c.names
                .and_then(|n| n.first().map(|s| s.trim_start_matches('/').to_string()))
                .or(c.id)
        })
        .collect();
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(|e| ClusterError::docker("listing labelled networks", e))?
        .into_iter()
        .filter_map(|n| n.name.or(n.id))
        .collect();
    let volumes = docker
        .list_volumes(Some(
            ListVolumesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(|e| ClusterError::docker("listing labelled volumes", e))?
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    Ok(Labelled {
        containers,
        networks,
        volumes,
    })
}

/// Remove every labelled container, network and volume (of one run, or of all runs when
/// `run_id` is `None`). Images are kept as a cache; see [`remove_images`].
/// Returns what was removed. Safe to call repeatedly.
pub async fn remove_labelled(run_id: Option<&str>) -> Result<Labelled, ClusterError> {
    let docker = connect().await?;
    remove_labelled_with(&docker, run_id).await
}

/// [`remove_labelled`] with an existing client.
pub async fn remove_labelled_with(
    docker: &Docker,
    run_id: Option<&str>,
) -> Result<Labelled, ClusterError> {
    let found = list_labelled(docker, run_id).await?;
    let mut errors = Vec::new();
    for c in &found.containers {
        // Force-removing a paused container fails on some engines; unpausing a running or
        // stopped one fails harmlessly.
        let _ = docker.unpause_container(c).await;
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        if let Err(e) = docker.remove_container(c, Some(opts)).await
            && !is_not_found(&e)
        {
            errors.push(format!("container {c}: {e}"));
        }
    }
    for n in &found.networks {
        if let Err(e) = docker.remove_network(n).await
            && !is_not_found(&e)
        {
            errors.push(format!("network {n}: {e}"));
        }
    }
    for v in &found.volumes {
        let opts = RemoveVolumeOptionsBuilder::default().force(true).build();
        if let Err(e) = docker.remove_volume(v, Some(opts)).await
            && !is_not_found(&e)
        {
            errors.push(format!("volume {v}: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(ClusterError::Command {
            program: "docker cleanup".into(),
            detail: format!("could not remove {}; retry `chaos down`", errors.join("; ")),
        })
    }
}

/// Remove the cached server images (`chaos down --images`). Returns their tags/ids.
pub async fn remove_images(docker: &Docker) -> Result<Vec<String>, ClusterError> {
    let images = docker
        .list_images(Some(
            ListImagesOptionsBuilder::default()
                .filters(&label_filter(None))
                .build(),
        ))
        .await
        .map_err(|e| ClusterError::docker("listing labelled images", e))?;
    let mut removed = Vec::new();
    for img in images {
        let name = img.repo_tags.first().cloned().unwrap_or(img.id.clone());
        let opts = RemoveImageOptionsBuilder::default().force(true).build();
        docker
            .remove_image(&img.id, Some(opts), None)
            .await
            .map_err(|e| ClusterError::docker(format!("removing image {name}"), e))?;
        removed.push(name);
    }
    Ok(removed)
}

pub(crate) fn status_code(e: &bollard::errors::Error) -> Option<u16> {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Whether the engine reports container `name` running.
pub(crate) async fn container_running(docker: &Docker, name: &str) -> Result<bool, ClusterError> {
    let info = docker
        .inspect_container(name, None)
        .await
        .map_err(|e| ClusterError::docker(format!("inspecting {name}"), e))?;
    Ok(info.state.and_then(|s| s.running).unwrap_or(false))
}

/// SIGKILL container `name` (node `node`) in any state, and wait (bounded) until the engine
/// reports it stopped, so a following start is not a no-op.
pub(crate) async fn kill_container(
    docker: &Docker,
    node: NodeId,
    name: &str,
) -> Result<(), ClusterError> {
    // The engine refuses to kill a paused container; a kill is meant to work in any state.
    let _ = docker.unpause_container(name).await;
    let opts = KillContainerOptionsBuilder::default()
        .signal("SIGKILL")
        .build();
    if let Err(e) = docker.kill_container(name, Some(opts)).await {
        // 409: not running — already killed, which is the goal.
        if status_code(&e) != Some(409) {
            return Err(ClusterError::docker(format!("killing {name}"), e));
        }
    }
    let start = tokio::time::Instant::now();
    while container_running(docker, name).await? {
        if start.elapsed() > STATE_WAIT {
            return Err(ClusterError::NodeState {
                node,
                state: "still running 10s after SIGKILL",
                hint: "check the engine (docker ps) and retry",
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    status_code(e) == Some(404)
}

pub(crate) fn is_port_collision(e: &bollard::errors::Error) -> bool {
    let s = e.to_string();
    s.contains("port is already allocated") || s.contains("address already in use")
}

/// `tag`, just built or found up to date, as a [`UsedImage`] with its id.
async fn offline_image(
    docker: &Docker,
    role: Role,
    tag: String,
) -> Result<UsedImage, ClusterError> {
    let id = official::image_id(docker, &tag).await?.unwrap_or_default();
    Ok(UsedImage {
        role,
        name: tag,
        id,
        official: false,
    })
}

#[derive(Debug)]
struct DockerNode {
    name: String,
    port: u16,
    generation: u32,
    clock_dir: Option<PathBuf>,
}

impl DockerNode {
    fn volume(&self) -> String {
        format!("{}-g{}", self.name, self.generation)
    }
    fn addr(&self) -> SocketAddr {
        ports::loopback(self.port)
    }
}

/// A cluster of server containers.
#[derive(Debug)]
pub struct DockerCluster {
    docker: Docker,
    flavour: Flavour,
    version: String,
    run_id: String,
    /// The server image, then (once started) the proxy container's.
    images: Vec<UsedImage>,
    network: String,
    ready_timeout: Duration,
    /// Set once every node is up; `None` with [`ProxyPlan::Direct`].
    proxy: Option<ProxyLayer>,
    clock_root: Mutex<Option<TempDir>>,
    nodes: Mutex<Vec<DockerNode>>,
    /// Set by `down()` and `detach()`; Drop then leaves things alone.
    finished: AtomicBool,
}

impl DockerCluster {
    /// Build (or reuse) the image, create the network, volumes and containers, and wait until
    /// every node answers PING on its published port.
    pub async fn up(spec: ClusterSpec) -> Result<DockerCluster, ClusterError> {
        spec.validate()?;
        let run_id = spec.resolve_run_id()?;
        let docker = connect().await?;
        // An official image's version is asked of its first node once it answers.
        let (version, server_image) = match official::resolve(
            &docker,
            &spec.images,
            Role::Server,
            spec.flavour,
        )
        .await?
        {
            Some(img) => (None, img),
            None => {
                let bin = match &spec.server_bin {
                    Some(b) => b.clone(),
                    None => binaries::locate_server(spec.flavour)?,
                };
                let version = binaries::server_version(spec.flavour, &bin)?;
                let image = image::ensure_image(&docker, spec.flavour, &bin, &run_id).await?;
                tracing::info!(tag = %image.tag, built = image.built, elapsed = ?image.elapsed, "server image ready");
                (
                    Some(version),
                    offline_image(&docker, Role::Server, image.tag).await?,
                )
            }
        };
        // libfaketime is in the offline image only.
        let clock_root = if spec.clock_faults
            && spec.flavour.supports_clock_faults()
            && !server_image.official
        {
            Some(
                tempfile::Builder::new()
                    .prefix(&format!("redlock-chaos-{run_id}-clock-"))
                    .tempdir()
                    .map_err(|e| ClusterError::io("creating the clock temp dir", e))?,
            )
        } else {
            None
        };
        let ports = ports::free_loopback_ports(spec.nodes)?;
        let mut nodes = Vec::with_capacity(spec.nodes);
        for (i, port) in ports.into_iter().enumerate() {
            let clock_dir = match &clock_root {
                Some(root) => {
                    let dir = root.path().join(format!("n{i}"));
                    std::fs::create_dir_all(&dir)
                        .map_err(|e| ClusterError::io(format!("creating {}", dir.display()), e))?;
                    let ts = dir.join("ts");
                    std::fs::write(&ts, faketime_offset(0))
                        .map_err(|e| ClusterError::io(format!("writing {}", ts.display()), e))?;
                    Some(dir)
                }
                None => None,
            };
            nodes.push(DockerNode {
                name: format!("redlock-chaos-{run_id}-n{i}"),
                port,
                generation: 0,
                clock_dir,
            });
        }
        let plan = spec.proxy.clone();
        // Locate the proxy binary before creating anything, so a missing one fails fast
        // where it is sure to be needed (an official proxy image may make it unneeded).
        let proxy_bin = match (&plan, &spec.proxy_bin) {
            (ProxyPlan::Chaos, Some(b)) => Some(b.clone()),
            (ProxyPlan::Chaos, None) if spec.images.source == ImageSource::Offline => {
                Some(binaries::locate_chaos()?)
            }
            (ProxyPlan::Chaos, None) => binaries::locate_chaos().ok(),
            _ => None,
        };
        let mut cluster = DockerCluster {
            network: format!("redlock-chaos-{run_id}"),
            docker,
            flavour: spec.flavour,
            version: version.clone().unwrap_or_default(),
            run_id,
            images: vec![server_image],
            ready_timeout: spec.ready_timeout,
            proxy: None,
            clock_root: Mutex::new(clock_root),
            nodes: Mutex::new(nodes),
            finished: AtomicBool::new(false),
        };
        // From here on, an early return drops `cluster`, whose Drop removes what was created.
        cluster.create_network().await?;
        for i in 0..spec.nodes {
            cluster.create_and_start(i).await?;
        }
        for i in 0..spec.nodes {
            cluster.wait_ready(i).await?;
        }
        if version.is_none() {
            let addr = cluster.lock()[0].addr();
            cluster.version = resp::server_version(addr, spec.flavour, Duration::from_secs(5))
                .await
                .map_err(|e| ClusterError::Command {
                    program: format!("INFO server on {addr}"),
                    detail: e,
                })?;
        }
        cluster.proxy = match plan {
            ProxyPlan::Direct => None,
            ProxyPlan::Chaos => {
                let (layer, img) = cluster
                    .start_proxy_container(proxy_bin.as_deref(), &spec.images)
                    .await?;
                cluster.images.push(img);
                Some(layer)
            }
            ProxyPlan::External { api, listen_host } => {
                let upstreams: Vec<String> = cluster
                    .container_names()
                    .into_iter()
                    .map(|n| format!("{n}:6379"))
                    .collect();
                Some(ProxyLayer::external(&api, &listen_host, &upstreams).await?)
            }
        };
        Ok(cluster)
    }

    /// Find (official) or build (offline) the proxy image, start the proxy container on the
    /// run's network with its API and one listen port per node published on 127.0.0.1, and
    /// create the node proxies.
    async fn start_proxy_container(
        &self,
        chaos_bin: Option<&std::path::Path>,
        plan: &ImagePlan,
    ) -> Result<(ProxyLayer, UsedImage), ClusterError> {
        let (img, cmd) = match official::resolve(&self.docker, plan, Role::Proxy, self.flavour)
            .await?
        {
            // Toxiproxy's entrypoint, its own flags.
            Some(img) => (
                img,
                vec!["-host=0.0.0.0".into(), format!("-port={PROXY_API_PORT}")],
            ),
            None => {
                let bin = chaos_bin.ok_or_else(|| ClusterError::InvalidSpec {
                    reason: "no chaos binary for the proxy container; set ClusterSpec::proxy_bin or CHAOS_BIN".into(),
                })?;
                let built = image::ensure_proxy_image(&self.docker, bin, &self.run_id).await?;
                tracing::info!(tag = %built.tag, built = built.built, elapsed = ?built.elapsed, "proxy image ready");
                (
                    offline_image(&self.docker, Role::Proxy, built.tag).await?,
                    vec![
                        "toxiproxy".into(),
                        "--listen".into(),
                        format!("0.0.0.0:{PROXY_API_PORT}"),
                    ],
                )
            }
        };
        let n = self.nodes();
        if n > usize::from(u16::MAX - PROXY_BASE_PORT) {
            return Err(ClusterError::InvalidSpec {
                reason: format!("{n} nodes do not fit the proxy's port range"),
            });
        }
        let name = format!("redlock-chaos-{}-proxy", self.run_id);
        let inner = |i: usize| PROXY_BASE_PORT + i as u16;
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let host_ports = ports::free_loopback_ports(n + 1)?;
            let (api_port, node_ports) = (host_ports[0], &host_ports[1..]);
            let bind = |port: u16| {
                Some(vec![PortBinding {
                    // Loopback only, like the nodes.
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(port.to_string()),
                }])
            };
            let mut bindings = HashMap::from([(format!("{PROXY_API_PORT}/tcp"), bind(api_port))]);
            for (i, p) in node_ports.iter().enumerate() {
                bindings.insert(format!("{}/tcp", inner(i)), bind(*p));
            }
            let body = ContainerCreateBody {
                image: Some(img.name.clone()),
                cmd: Some(cmd.clone()),
                labels: Some(self.labels(None)),
                exposed_ports: Some(bindings.keys().cloned().collect()),
                host_config: Some(HostConfig {
                    network_mode: Some(self.network.clone()),
                    port_bindings: Some(bindings),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let opts = CreateContainerOptionsBuilder::default().name(&name).build();
            self.docker
                .create_container(Some(opts), body)
                .await
                .map_err(|e| ClusterError::docker(format!("creating container {name}"), e))?;
            match self
                .docker
                .start_container(&name, None::<StartContainerOptions>)
                .await
            {
                Ok(()) => {
                    let proxies: Vec<NewProxy> = self
                        .container_names()
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            NewProxy::new(
                                proxy_name(NodeId(i)),
                                format!("0.0.0.0:{}", inner(i)),
                                format!("{c}:6379"),
                            )
                        })
                        .collect();
                    let published = node_ports.iter().map(|p| ports::loopback(*p)).collect();
                    let api = format!("http://{}", ports::loopback(api_port));
                    let layer = ProxyLayer::configure(&api, name, &proxies, published).await?;
                    return Ok((layer, img));
                }
                Err(e) if is_port_collision(&e) => {
                    last_error = e.to_string();
                    let opts = RemoveContainerOptionsBuilder::default().force(true).build();
                    self.docker
                        .remove_container(&name, Some(opts))
                        .await
                        .map_err(|e| ClusterError::docker(format!("removing {name}"), e))?;
                }
                Err(e) => {
                    return Err(ClusterError::docker(
                        format!("starting container {name}"),
                        e,
                    ));
                }
            }
        }
        Err(ClusterError::Proxy {
            action: format!("publishing the ports of {name} after {PORT_ATTEMPTS} attempts"),
            detail: last_error,
        })
    }

    /// The proxy container's name (docker + [`ProxyPlan::Chaos`]).
    pub fn proxy_container(&self) -> Option<&str> {
        self.proxy.as_ref().and_then(|p| p.container())
    }

    /// The images this cluster runs: the nodes', then the proxy's (when it has one).
    pub fn images(&self) -> &[UsedImage] {
        &self.images
    }

    /// Name of the run's private network.
    pub fn network(&self) -> &str {
        &self.network
    }

    /// Container name of each node.
    pub fn container_names(&self) -> Vec<String> {
        self.lock().iter().map(|n| n.name.clone()).collect()
    }

    /// This cluster as a stack file (for `chaos up --stack-out`): each node a container on
    /// the local engine, behind its proxy, with its clock file when clock faults work.
    pub fn stack(&self) -> Result<Stack, ClusterError> {
        self.ensure_up()?;
        let nodes = self
            .lock()
            .iter()
            .enumerate()
            .map(|(i, n)| StackNode {
                url: redis_url(worker_addr(self.proxy.as_ref(), NodeId(i), n.addr())),
                admin_url: Some(redis_url(n.addr())),
                proxy: self.proxy.as_ref().map(|_| proxy_name(NodeId(i))),
                clock_file: n.clock_dir.as_ref().map(|d| d.join("ts")),
                control: Control::Docker {
                    container: n.name.clone(),
                    engine: None,
                },
            })
            .collect();
        Ok(Stack {
            version: STACK_VERSION,
            name: format!("chaos up {}", self.run_id),
            toxiproxy: self.proxy.as_ref().map(|p| ToxiproxySection {
                api: p.client().base_url().to_string(),
            }),
            postgres: None,
            nodes,
        })
    }

    /// Leave everything running (for `chaos up`) and describe it for the state file.
    pub fn detach(self) -> Result<ClusterState, ClusterError> {
        self.finished.store(true, Ordering::SeqCst);
        let dir = self
            .clock_root
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|t| t.keep());
        let nodes = self
            .lock()
            .iter()
            .enumerate()
            .map(|(i, n)| NodeState {
                worker_url: redis_url(worker_addr(self.proxy.as_ref(), NodeId(i), n.addr())),
                admin_url: redis_url(n.addr()),
                pid: None,
                container: Some(n.name.clone()),
            })
            .collect();
        Ok(ClusterState {
            backend: BackendKind::Docker,
            run_id: self.run_id.clone(),
            flavour: self.flavour,
            server_version: self.version.clone(),
            nodes,
            proxy_api: self
                .proxy
                .as_ref()
                .map(|p| p.client().base_url().to_string()),
            proxy_pid: None,
            dir,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<DockerNode>> {
        // Poisoning only means a panic elsewhere; the names/ports are still right for cleanup.
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

    fn labels(&self, node: Option<usize>) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (LABEL_PROJECT.to_string(), PROJECT.to_string()),
            (LABEL_RUN.to_string(), self.run_id.clone()),
        ]);
        if let Some(i) = node {
            labels.insert(LABEL_NODE.to_string(), i.to_string());
        }
        labels
    }

    async fn create_network(&self) -> Result<(), ClusterError> {
        let req = NetworkCreateRequest {
            name: self.network.clone(),
            driver: Some("bridge".into()),
            labels: Some(self.labels(None)),
            ..Default::default()
        };
        self.docker
            .create_network(req)
            .await
            .map_err(|e| ClusterError::docker(format!("creating network {}", self.network), e))?;
        Ok(())
    }

    /// Create node `i`'s volume and container and start it, moving to a fresh host port if the
    /// picked one was taken meanwhile.
    async fn create_and_start(&self, i: usize) -> Result<(), ClusterError> {
        let mut last_error = String::new();
        for attempt in 0..PORT_ATTEMPTS {
            if attempt > 0 {
                let port = ports::free_loopback_port()?;
                self.lock()[i].port = port;
            }
            let (name, volume, port, clock_dir) = {
                let nodes = self.lock();
                let n = &nodes[i];
                (n.name.clone(), n.volume(), n.port, n.clock_dir.clone())
            };
            self.docker
                .create_volume(VolumeCreateRequest {
                    name: Some(volume.clone()),
                    labels: Some(self.labels(Some(i))),
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::docker(format!("creating volume {volume}"), e))?;
            let mut binds = vec![format!("{volume}:/data")];
            let mut env = Vec::new();
            if let Some(dir) = &clock_dir {
                binds.push(format!("{}:/faketime", dir.display()));
                env.extend([
                    format!("LD_PRELOAD={IMAGE_FAKETIME_LIB}"),
                    "FAKETIME_TIMESTAMP_FILE=/faketime/ts".to_string(),
                    "FAKETIME_NO_CACHE=1".to_string(),
                    "FAKETIME_DONT_FAKE_MONOTONIC=1".to_string(),
                ]);
            }
            let server = &self.images[0];
            let mut cmd = server_args("0.0.0.0", 6379, "/data");
            if server.official {
                // The official entrypoint runs its command (as the server's own user).
                cmd.insert(0, format!("{}-server", self.flavour.name()));
            }
            let body = ContainerCreateBody {
                image: Some(server.name.clone()),
                cmd: Some(cmd),
                env: Some(env),
                labels: Some(self.labels(Some(i))),
                exposed_ports: Some(vec!["6379/tcp".to_string()]),
                host_config: Some(HostConfig {
                    binds: Some(binds),
                    network_mode: Some(self.network.clone()),
                    port_bindings: Some(HashMap::from([(
                        "6379/tcp".to_string(),
                        Some(vec![PortBinding {
                            // Loopback only: nothing outside this machine can reach the nodes.
                            host_ip: Some("127.0.0.1".into()),
                            host_port: Some(port.to_string()),
                        }]),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let opts = CreateContainerOptionsBuilder::default().name(&name).build();
            self.docker
                .create_container(Some(opts), body)
                .await
                .map_err(|e| ClusterError::docker(format!("creating container {name}"), e))?;
            match self
                .docker
                .start_container(&name, None::<StartContainerOptions>)
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if is_port_collision(&e) => {
                    last_error = e.to_string();
                    self.remove_node_container(i).await?;
                }
                Err(e) => {
                    return Err(ClusterError::docker(
                        format!("starting container {name}"),
                        e,
                    ));
                }
            }
        }
        Err(ClusterError::PortsExhausted {
            node: NodeId(i),
            attempts: PORT_ATTEMPTS,
            last_error,
        })
    }

    /// Force-remove node `i`'s container and its current volume.
    async fn remove_node_container(&self, i: usize) -> Result<(), ClusterError> {
        let (name, volume) = {
            let nodes = self.lock();
            (nodes[i].name.clone(), nodes[i].volume())
        };
        let _ = self.docker.unpause_container(&name).await;
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(&name, Some(opts)).await {
            Err(e) if !is_not_found(&e) => {
                return Err(ClusterError::docker(
                    format!("removing container {name}"),
                    e,
                ));
            }
            _ => {}
        }
        let opts = RemoveVolumeOptionsBuilder::default().force(true).build();
        match self.docker.remove_volume(&volume, Some(opts)).await {
            Err(e) if !is_not_found(&e) => {
                Err(ClusterError::docker(format!("removing volume {volume}"), e))
            }
            _ => Ok(()),
        }
    }

    async fn wait_ready(&self, i: usize) -> Result<(), ClusterError> {
        let (addr, name) = {
            let nodes = self.lock();
            (nodes[i].addr(), nodes[i].name.clone())
        };
        resp::wait_ready(addr, self.ready_timeout)
            .await
            .map_err(|last_error| ClusterError::NotReady {
                node: NodeId(i),
                addr,
                waited: self.ready_timeout,
                last_error,
                log_hint: format!("docker logs {name}"),
            })
    }

    fn node_name(&self, node: NodeId) -> Result<(usize, String), ClusterError> {
        self.ensure_up()?;
        let i = check_node(node, self.nodes())?;
        Ok((i, self.lock()[i].name.clone()))
    }

    async fn kill_node(&self, i: usize, name: &str) -> Result<(), ClusterError> {
        kill_container(&self.docker, NodeId(i), name).await
    }
}

impl Cluster for DockerCluster {
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
        let no_clock = self
            .clock_root
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none();
        match verb {
            Verb::Proxy if self.proxy.is_none() => {
                Err("needs the proxy layer, and this cluster has none".into())
            }
            Verb::Clock | Verb::ClockRate if no_clock && self.images[0].official => Err(format!(
                "clock faults need libfaketime in the server image, and the official {} has none; `--images offline` runs them (Linux, from this host's binaries)",
                self.images[0].name
            )),
            Verb::Clock | Verb::ClockRate if no_clock => {
                Err(super::no_clock_faults(self.flavour).to_string())
            }
            _ => Ok(()),
        }
    }
    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        let (i, name) = self.node_name(node)?;
        self.kill_node(i, &name).await
    }
    async fn start(&self, node: NodeId) -> Result<(), ClusterError> {
        let (i, name) = self.node_name(node)?;
        if let Err(e) = self
            .docker
            .start_container(&name, None::<StartContainerOptions>)
            .await
        {
            // 304: already started — healing twice is harmless.
            if status_code(&e) != Some(304) {
                return Err(ClusterError::docker(format!("starting {name}"), e));
            }
        }
        self.wait_ready(i).await
    }
    async fn restart(&self, node: NodeId, data: DataOnRestart) -> Result<(), ClusterError> {
        let (i, name) = self.node_name(node)?;
        match data {
            DataOnRestart::Keep => {
                self.kill_node(i, &name).await?;
                self.docker
                    .start_container(&name, None::<StartContainerOptions>)
                    .await
                    .map_err(|e| ClusterError::docker(format!("starting {name}"), e))?;
            }
            DataOnRestart::Wipe => {
                // A volume cannot be emptied while a container holds it, so the node gets a
                // new container on a new, empty volume (same name, port and network).
                self.kill_node(i, &name).await?;
                self.remove_node_container(i).await?;
                self.lock()[i].generation += 1;
                self.create_and_start(i).await?;
            }
        }
        self.wait_ready(i).await
    }
    async fn freeze(&self, node: NodeId) -> Result<(), ClusterError> {
        let (_, name) = self.node_name(node)?;
        self.docker
            .pause_container(&name)
            .await
            .map_err(|e| ClusterError::docker(format!("pausing {name} (is it running?)"), e))
    }
    async fn thaw(&self, node: NodeId) -> Result<(), ClusterError> {
        let (_, name) = self.node_name(node)?;
        self.docker
            .unpause_container(&name)
            .await
            .map_err(|e| ClusterError::docker(format!("unpausing {name} (is it frozen?)"), e))
    }
    async fn disconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        let (_, name) = self.node_name(node)?;
        let req = NetworkDisconnectRequest {
            container: name.clone(),
            force: Some(true),
        };
        self.docker
            .disconnect_network(&self.network, req)
            .await
            .map_err(|e| {
                ClusterError::docker(format!("disconnecting {name} from {}", self.network), e)
            })
    }
    async fn reconnect(&self, node: NodeId) -> Result<(), ClusterError> {
        let (i, name) = self.node_name(node)?;
        let req = NetworkConnectRequest {
            container: name.clone(),
            endpoint_config: None,
        };
        self.docker
            .connect_network(&self.network, req)
            .await
            .map_err(|e| {
                ClusterError::docker(format!("connecting {name} to {}", self.network), e)
            })?;
        self.wait_ready(i).await
    }
    async fn set_clock_offset(
        &self,
        node: NodeId,
        offset_seconds: i64,
    ) -> Result<(), ClusterError> {
        let (i, _) = self.node_name(node)?;
        let Some(dir) = self.lock()[i].clock_dir.clone() else {
            return Err(super::no_clock_faults(self.flavour));
        };
        let ts = dir.join("ts");
        std::fs::write(&ts, faketime_offset(offset_seconds))
            .map_err(|e| ClusterError::io(format!("writing {}", ts.display()), e))
    }
    async fn set_clock_rate(&self, node: NodeId, rate_ppm: i64) -> Result<(), ClusterError> {
        let (i, name) = self.node_name(node)?;
        let Some(dir) = self.lock()[i].clock_dir.clone() else {
            return Err(super::no_clock_faults(self.flavour));
        };
        // The server is the container's first process; its host pid's /proc entry has its
        // start time (the engine runs on this host: the Docker backend needs it anyway for
        // its bind mounts).
        let info = self
            .docker
            .inspect_container(&name, None)
            .await
            .map_err(|e| ClusterError::docker(format!("inspecting {name}"), e))?;
        let pid = info
            .state
            .and_then(|s| s.pid)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or(ClusterError::NodeState {
                node,
                state: "not running",
                hint: "start it first: a clock skew needs the running server's start time",
            })?;
        let age = super::process_age(pid)?;
        let ts = dir.join("ts");
        std::fs::write(&ts, super::faketime_rate_line(age, rate_ppm))
            .map_err(|e| ClusterError::io(format!("writing {}", ts.display()), e))
    }
    async fn reset_clock(&self, node: NodeId) -> Result<(), ClusterError> {
        self.set_clock_offset(node, 0).await
    }
    async fn down(&self) -> Result<(), ClusterError> {
        if self.finished.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // External Toxiproxy: remove our proxies there (a container is removed by label below).
        let proxy = match &self.proxy {
            Some(p) => p.shutdown().await,
            None => Ok(()),
        };
        let result = remove_labelled_with(&self.docker, Some(&self.run_id)).await;
        if let Some(t) = self
            .clock_root
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = t.close();
        }
        if result.is_err() {
            // Let a later down()/Drop try again.
            self.finished.store(false, Ordering::SeqCst);
        }
        result.map(|_| ())?;
        proxy
    }
}

impl Drop for DockerCluster {
    fn drop(&mut self) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        // Drop cannot await, and may run inside (or outside) a tokio runtime, possibly while
        // unwinding: clean up from a fresh thread with its own small runtime and wait for it.
        let run_id = self.run_id.clone();
        let handle = std::thread::Builder::new()
            .name("redlock-chaos-cleanup".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!(
                            "redlock-chaos: cannot clean up run {run_id}: {e}; run `chaos down`"
                        );
                        return;
                    }
                };
                // The timer must be created inside the runtime (it needs its time driver).
                let cleanup = async {
                    tokio::time::timeout(Duration::from_secs(60), remove_labelled(Some(&run_id)))
                        .await
                };
                match rt.block_on(cleanup) {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => eprintln!(
                        "redlock-chaos: cleanup of run {run_id} failed: {e}; run `chaos down`"
                    ),
                    Err(_) => eprintln!(
                        "redlock-chaos: cleanup of run {run_id} timed out; run `chaos down`"
                    ),
                }
            });
        if let Ok(h) = handle {
            let _ = h.join();
        }
        // The clock TempDir (if any) is removed by its own Drop after this.
    }
}
