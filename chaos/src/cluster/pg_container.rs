//! The run's PostgreSQL as a container: the official `postgres` image (or the offline one
//! retagged under its name: both take the same environment and arguments).
//!
//! `POSTGRES_HOST_AUTH_METHOD=trust`, user and database `postgres`, the same settings as the
//! private server of [`crate::pg::PgServer`] given as `-c` arguments (which both entrypoints
//! pass on to `postgres`), 5432 published on `127.0.0.1:<free port>`. Labelled with the run
//! like the cluster's containers, so `chaos down --run ID` and the cluster's own clean-up
//! remove it too; dropping the value removes it as well. Its data is the image's anonymous
//! volume, removed with the container.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, StartContainerOptions,
};

use super::official::UsedImage;
use super::{ClusterError, LABEL_PROJECT, LABEL_RUN, PROJECT, docker, ports};
use crate::pg::MAX_CONNECTIONS;

/// How long the first start (initdb, then the server) may take.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Port collisions are retried with a fresh port.
const PORT_ATTEMPTS: u32 = 5;

/// A running PostgreSQL container, removed on drop.
#[derive(Debug)]
pub struct PgContainer {
    name: String,
    port: u16,
    image: UsedImage,
    removed: bool,
}

impl PgContainer {
    /// Start `image` as run `run_id`'s PostgreSQL and wait until it accepts connections.
    ///
    /// # Errors
    /// [`ClusterError`] when the container cannot be created or started, or does not
    /// accept connections within 90 s (the container is then removed).
    pub async fn start(
        docker: &Docker,
        image: UsedImage,
        run_id: &str,
    ) -> Result<PgContainer, ClusterError> {
        let name = format!("redlock-chaos-{run_id}-postgres");
        let labels = HashMap::from([
            (LABEL_PROJECT.to_string(), PROJECT.to_string()),
            (LABEL_RUN.to_string(), run_id.to_string()),
        ]);
        let args: Vec<String> = [
            "fsync=off".to_string(),
            "synchronous_commit=off".into(),
            "full_page_writes=off".into(),
            format!("max_connections={MAX_CONNECTIONS}"),
            "shared_buffers=64MB".into(),
        ]
        .into_iter()
        .flat_map(|setting| ["-c".to_string(), setting])
        .collect();
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = ports::free_loopback_port()?;
            let body = ContainerCreateBody {
                image: Some(image.name.clone()),
                cmd: Some(args.clone()),
                env: Some(vec!["POSTGRES_HOST_AUTH_METHOD=trust".into()]),
                labels: Some(labels.clone()),
                exposed_ports: Some(vec!["5432/tcp".to_string()]),
                host_config: Some(HostConfig {
                    port_bindings: Some(HashMap::from([(
                        "5432/tcp".to_string(),
                        Some(vec![PortBinding {
                            host_ip: Some("127.0.0.1".into()),
                            host_port: Some(port.to_string()),
                        }]),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let opts = CreateContainerOptionsBuilder::default().name(&name).build();
            docker
                .create_container(Some(opts), body)
                .await
                .map_err(|e| ClusterError::docker(format!("creating container {name}"), e))?;
            let mut pg = PgContainer {
                name: name.clone(),
                port,
                image: image.clone(),
                removed: false,
            };
            match docker
                .start_container(&name, None::<StartContainerOptions>)
                .await
            {
                Ok(()) => {
                    pg.wait_ready().await?;
                    return Ok(pg);
                }
                Err(e) => {
                    let collision = docker::is_port_collision(&e);
                    pg.remove(docker).await?;
                    if !collision {
                        return Err(ClusterError::docker(format!("starting {name}"), e));
                    }
                    last_error = e.to_string();
                }
            }
        }
        Err(ClusterError::Command {
            program: format!("docker start {name}"),
            detail: format!("no free port after {PORT_ATTEMPTS} attempts: {last_error}"),
        })
    }

    /// `host=127.0.0.1 port=… user=postgres dbname=postgres`.
    pub fn dsn(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// The image it runs.
    pub fn image(&self) -> &UsedImage {
        &self.image
    }

    async fn wait_ready(&self) -> Result<(), ClusterError> {
        let started = tokio::time::Instant::now();
        loop {
            let attempt =
                tokio::time::timeout(Duration::from_secs(2), crate::pg::connect(&self.dsn())).await;
            let last = match attempt {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 2s".to_string(),
            };
            if started.elapsed() > READY_TIMEOUT {
                return Err(ClusterError::Command {
                    program: format!("postgres in {}", self.name),
                    detail: format!(
                        "not accepting connections after {READY_TIMEOUT:?} (last: {last}); see docker logs {}",
                        self.name
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn remove(&mut self, docker: &Docker) -> Result<(), ClusterError> {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(&self.name, Some(opts)).await {
            Err(e) if docker::status_code(&e) != Some(404) => Err(ClusterError::docker(
                format!("removing container {}", self.name),
                e,
            )),
            _ => {
                self.removed = true;
                Ok(())
            }
        }
    }
}

impl Drop for PgContainer {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // As the cluster's Drop: no await here, maybe no runtime; a thread with its own.
        let name = self.name.clone();
        let handle = std::thread::Builder::new()
            .name("redlock-chaos-pg-cleanup".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    eprintln!("redlock-chaos: cannot remove {name}; run `chaos down`");
                    return;
                };
                let removed = rt.block_on(async {
                    let d = docker::connect().await?;
                    let opts = RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build();
                    match tokio::time::timeout(
                        Duration::from_secs(60),
                        d.remove_container(&name, Some(opts)),
                    )
                    .await
                    {
                        Ok(Err(e)) if docker::status_code(&e) != Some(404) => {
                            Err(ClusterError::docker(format!("removing {name}"), e))
                        }
                        _ => Ok(()),
                    }
                });
                if let Err(e) = removed {
                    eprintln!("redlock-chaos: {e}; run `chaos down`");
                }
            });
        if let Ok(h) = handle {
            let _ = h.join();
        }
    }
}
