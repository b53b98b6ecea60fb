//! The proxy layer: ONE Toxiproxy-API server holding one proxy per node, named `node0..`.
//!
//! Workers reach node `i` only through proxy `node<i>` (its listen address is
//! [`super::Cluster::worker_url`]); inspection keeps going straight to the node
//! ([`super::Cluster::admin_url`]). Who runs the server depends on the backend and plan:
//!
//! - local + [`ProxyPlan::Chaos`]: an in-process [`ProxyServer`] on `127.0.0.1:0`, proxies
//!   listening on `127.0.0.1:0` (the real ports are read back from the API).
//! - docker + [`ProxyPlan::Chaos`]: a `chaos toxiproxy` container on the run's network, built by
//!   [`super::DockerCluster`]; this module only configures it (`ProxyLayer::configure`).
//! - any backend + [`ProxyPlan::External`]: someone else's Toxiproxy (`ProxyLayer::external`).
//!
//! Proxy upstreams never change after set-up: on docker they are container names (resolved
//! for every new connection, so a node replaced by `restart(Wipe)` is found again), on local
//! they are the nodes' fixed loopback ports.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use super::{ClusterError, NodeId, ProxyPlan};
use crate::proxy::{Client, ClientError, NewProxy, ProxyServer};

/// Bound on waiting for a freshly started proxy API to answer.
pub(crate) const API_READY: Duration = Duration::from_secs(20);

/// Name of node `node`'s proxy: `node<i>`, as in `compose/toxiproxy.json`.
pub fn proxy_name(node: NodeId) -> String {
    format!("node{}", node.0)
}

/// What, if anything, this layer owns and must stop.
#[derive(Debug)]
enum Owned {
    /// In-process server (local backend); taken on shutdown.
    Server(Mutex<Option<ProxyServer>>),
    /// A container (docker backend), removed with the run's other labelled resources.
    Container(String),
    /// Someone else's Toxiproxy: on shutdown, delete the proxies we created and heal the rest.
    External { created: Vec<String> },
}

/// The running proxy layer of a cluster.
#[derive(Debug)]
pub struct ProxyLayer {
    client: Client,
    /// Per node: the address workers connect to.
    listen: Vec<SocketAddr>,
    owned: Owned,
}

fn proxy_err(action: impl Into<String>, e: ClientError) -> ClusterError {
    ClusterError::Proxy {
        action: action.into(),
        detail: e.to_string(),
    }
}

/// The address a worker uses for a proxy that reports `listen` (`0.0.0.0:p` becomes
/// `reach_host:p`: the proxy binds every interface, workers need one they can reach).
fn reachable(listen: &str, reach_host: IpAddr) -> Result<SocketAddr, String> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| format!("listen address {listen:?} is not ip:port ({e})"))?;
    Ok(if addr.ip().is_unspecified() {
        SocketAddr::new(reach_host, addr.port())
    } else {
        addr
    })
}

/// Client and reach host for [`ProxyPlan::External`], once the API answers.
async fn external_client(api: &str, listen_host: &str) -> Result<(Client, IpAddr), ClusterError> {
    let host: IpAddr = listen_host.parse().map_err(|_| ClusterError::InvalidSpec {
        reason: format!(
            "ProxyPlan::External listen_host {listen_host:?} must be an IP address workers can reach (e.g. 127.0.0.1)"
        ),
    })?;
    let client = Client::new(api).map_err(|e| ClusterError::InvalidSpec {
        reason: format!("ProxyPlan::External api: {e}"),
    })?;
    wait_api(&client, Duration::from_secs(5)).await?;
    Ok((client, host))
}

fn read_listen(name: &str, listen: &str, host: IpAddr) -> Result<SocketAddr, ClusterError> {
    reachable(listen, host).map_err(|detail| ClusterError::Proxy {
        action: format!("reading proxy {name}"),
        detail,
    })
}

/// Poll the API until it answers (bounded by `within`).
pub(crate) async fn wait_api(client: &Client, within: Duration) -> Result<(), ClusterError> {
    let start = tokio::time::Instant::now();
    let mut last = String::from("never probed");
    while start.elapsed() < within {
        match client.version().await {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ClusterError::Proxy {
        action: format!(
            "waiting {within:?} for the proxy API at {}",
            client.base_url()
        ),
        detail: last,
    })
}

impl ProxyLayer {
    /// Local backend: start an in-process server and one proxy per node address.
    pub(crate) async fn start_local(nodes: &[SocketAddr]) -> Result<ProxyLayer, ClusterError> {
        let server = ProxyServer::start(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(|e| ClusterError::Proxy {
                action: "starting the in-process proxy server on 127.0.0.1:0".into(),
                detail: e.to_string(),
            })?;
        let client = Client::new(&server.url()).map_err(|e| proxy_err("proxy client", e))?;
        let wanted: Vec<NewProxy> = nodes
            .iter()
            .enumerate()
            .map(|(i, a)| NewProxy::new(proxy_name(NodeId(i)), "127.0.0.1:0", a.to_string()))
            .collect();
        let mut layer = ProxyLayer {
            client,
            listen: Vec::new(),
            owned: Owned::Server(Mutex::new(Some(server))),
        };
        layer.listen = layer.populate(&wanted, "127.0.0.1".parse().ok()).await?;
        Ok(layer)
    }

    /// Docker backend: configure the `chaos toxiproxy` container at `api`. `proxies` listen
    /// inside the container; `published[i]` is the host address of proxy `i`'s listen port.
    pub(crate) async fn configure(
        api: &str,
        container: String,
        proxies: &[NewProxy],
        published: Vec<SocketAddr>,
    ) -> Result<ProxyLayer, ClusterError> {
        let client = Client::new(api).map_err(|e| proxy_err("proxy client", e))?;
        wait_api(&client, API_READY).await?;
        let layer = ProxyLayer {
            client,
            listen: published,
            owned: Owned::Container(container),
        };
        layer.populate(proxies, None).await?;
        Ok(layer)
    }

    /// Any backend: use the Toxiproxy at `api`. A missing proxy `node<i>` is created listening
    /// on `<listen_host>:0` with `upstreams[i]`; an existing one must already forward there
    /// (else its traffic would go to some other node: refused, with what to change).
    pub(crate) async fn external(
        api: &str,
        listen_host: &str,
        upstreams: &[String],
    ) -> Result<ProxyLayer, ClusterError> {
        let (client, host) = external_client(api, listen_host).await?;
        let mut listen = Vec::with_capacity(upstreams.len());
        let mut created = Vec::new();
        for (i, upstream) in upstreams.iter().enumerate() {
            let name = proxy_name(NodeId(i));
            let proxy = match client.get_proxy(&name).await {
                Ok(p) if &p.upstream == upstream => p,
                Ok(p) => {
                    return Err(ClusterError::InvalidSpec {
                        reason: format!(
                            "proxy {name} at {api} forwards to {}, not to this cluster's {} ({upstream}); delete it there, or attach to that stack with ProxyLayer::attach",
                            p.upstream,
                            NodeId(i)
                        ),
                    });
                }
                Err(e) if e.is_not_found() => {
                    let p = client
                        .create_proxy(&NewProxy::new(&name, format!("{host}:0"), upstream))
                        .await
                        .map_err(|e| proxy_err(format!("creating proxy {name}"), e))?;
                    created.push(name.clone());
                    p
                }
                Err(e) => return Err(proxy_err(format!("reading proxy {name}"), e)),
            };
            listen.push(read_listen(&name, &proxy.listen, host)?);
        }
        Ok(ProxyLayer {
            client,
            listen,
            owned: Owned::External { created },
        })
    }

    /// Attach to a stack someone else runs (e.g. `compose/`): its Toxiproxy at `api` already
    /// has proxies `node0..node{nodes-1}`, used as they are; workers reach their listen ports
    /// at `listen_host`. Nothing is created; [`ProxyLayer::shutdown`] only heals them.
    pub async fn attach(
        api: &str,
        listen_host: &str,
        nodes: usize,
    ) -> Result<ProxyLayer, ClusterError> {
        let (client, host) = external_client(api, listen_host).await?;
        let mut listen = Vec::with_capacity(nodes);
        for i in 0..nodes {
            let name = proxy_name(NodeId(i));
            let proxy = client.get_proxy(&name).await.map_err(|e| {
                proxy_err(
                    format!("reading proxy {name} (configure node0..node{} there, see compose/toxiproxy.json)", nodes.saturating_sub(1)),
                    e,
                )
            })?;
            listen.push(read_listen(&name, &proxy.listen, host)?);
        }
        Ok(ProxyLayer {
            client,
            listen,
            owned: Owned::External {
                created: Vec::new(),
            },
        })
    }

    /// Create (or update) `wanted` in one call; returns the reported listen addresses,
    /// made reachable via `reach_host` when given.
    async fn populate(
        &self,
        wanted: &[NewProxy],
        reach_host: Option<IpAddr>,
    ) -> Result<Vec<SocketAddr>, ClusterError> {
        let got = self
            .client
            .populate(wanted)
            .await
            .map_err(|e| proxy_err("creating the node proxies", e))?;
        let mut out = Vec::with_capacity(wanted.len());
        for w in wanted {
            let p = got
                .iter()
                .find(|p| p.name == w.name)
                .ok_or_else(|| ClusterError::Proxy {
                    action: "creating the node proxies".into(),
                    detail: format!("the server did not report proxy {}", w.name),
                })?;
            let host = reach_host.unwrap_or(IpAddr::from([127, 0, 0, 1]));
            out.push(
                reachable(&p.listen, host).map_err(|detail| ClusterError::Proxy {
                    action: format!("reading proxy {}", w.name),
                    detail,
                })?,
            );
        }
        Ok(out)
    }

    /// The API client (one server for all nodes).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Address workers use for `node` (`None` if out of range).
    pub fn worker_addr(&self, node: NodeId) -> Option<SocketAddr> {
        self.listen.get(node.0).copied()
    }

    /// Docker: the proxy container's name.
    pub fn container(&self) -> Option<&str> {
        match &self.owned {
            Owned::Container(c) => Some(c),
            _ => None,
        }
    }

    /// Whether this layer lives in this process (it cannot outlive it, so no `detach`).
    pub(crate) fn in_process(&self) -> bool {
        matches!(self.owned, Owned::Server(_))
    }

    /// Worker addresses, one per node.
    pub fn worker_addrs(&self) -> &[SocketAddr] {
        &self.listen
    }

    /// Stop what we own: the in-process server, or our proxies on an external Toxiproxy.
    /// Containers are removed by the backend with the run's other labelled resources.
    pub async fn shutdown(&self) -> Result<(), ClusterError> {
        match &self.owned {
            Owned::Server(s) => {
                let server = s.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(server) = server {
                    server.shutdown().await.map_err(|e| ClusterError::Proxy {
                        action: "stopping the in-process proxy server".into(),
                        detail: e.to_string(),
                    })?;
                }
                Ok(())
            }
            Owned::Container(_) => Ok(()),
            Owned::External { created } => {
                for i in 0..self.listen.len() {
                    let name = proxy_name(NodeId(i));
                    let r = if created.contains(&name) {
                        self.client.delete_proxy(&name).await
                    } else {
                        // Leave an attached proxy as we found it: enabled, no toxics.
                        match self.client.enable(&name).await {
                            Ok(_) => self.client.heal(&name).await,
                            Err(e) => Err(e),
                        }
                    };
                    match r {
                        Err(e) if !e.is_not_found() => {
                            return Err(proxy_err(format!("cleaning up proxy {name}"), e));
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
        }
    }
}

impl ProxyPlan {
    /// Whether workers go through a proxy.
    pub fn is_proxied(&self) -> bool {
        !matches!(self, ProxyPlan::Direct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_listen_becomes_reachable() {
        let h: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            reachable("0.0.0.0:26379", h).unwrap(),
            "127.0.0.1:26379".parse().unwrap()
        );
        assert_eq!(
            reachable("10.0.0.2:1", h).unwrap(),
            "10.0.0.2:1".parse().unwrap()
        );
        assert!(reachable("toxiproxy:1", h).is_err());
        assert_eq!(proxy_name(NodeId(3)), "node3");
    }
}
