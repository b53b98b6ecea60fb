//! Which images the Docker backend runs: the official ones (Valkey, Shopify's Toxiproxy,
//! PostgreSQL) or the offline ones built from this host's binaries ([`super::image`]).
//!
//! [`ImageSource`] is the choice (`--images auto|official|offline`), [`ImagePlan`] the choice
//! with the official names, [`resolve`] the decision for one role: an official image present
//! on the engine is used; an absent one is pulled (the engine's own registry settings and
//! credentials apply); with [`ImageSource::Auto`] a pull that gets no answer within
//! [`REGISTRY_ANSWER`], or fails, means "build the offline one instead".
//!
//! The official images take the same command lines and environment as the offline
//! stand-ins `chaos images` builds (those were made to), so the backend starts either the
//! same way:
//! - server: `valkey-server <args>` (`redis-server` for `--flavour redis`), data in `/data`;
//! - proxy: Toxiproxy's `-host=0.0.0.0 -port=8474`, proxies made through its API;
//! - PostgreSQL: `POSTGRES_HOST_AUTH_METHOD=trust`, server options as `-c` arguments, user
//!   `postgres` ([`super::pg_container`]).
//!
//! # Trade-offs
//! - Clock faults need libfaketime inside the server's container, which the official images
//!   do not have: with an official server image the clock verbs are not applicable
//!   ([`super::Cluster::check`]), and `chaos run --images official` leaves the clock
//!   scenarios out of `all` and refuses them by name.
//! - The whole pull is bounded by [`PULL_TIMEOUT`]; a slower registry fails `official`
//!   and makes `auto` build offline images.

use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{ClusterError, Flavour, docker};

/// The official Valkey image (the tag `compose/docker-compose.yml` names).
pub const DEFAULT_VALKEY_IMAGE: &str = "valkey/valkey:8";
/// The official Redis image, for `--flavour redis`.
pub const DEFAULT_REDIS_IMAGE: &str = "redis:7";
/// Shopify's Toxiproxy image (the tag the compose file names).
pub const DEFAULT_TOXIPROXY_IMAGE: &str = "ghcr.io/shopify/toxiproxy:2.12.0";
/// The official PostgreSQL image.
pub const DEFAULT_POSTGRES_IMAGE: &str = "postgres:15";
/// How long a pull may take to show the first sign of a registry (`auto` then builds
/// offline images; `official` fails).
pub const REGISTRY_ANSWER: Duration = Duration::from_secs(10);
/// Upper bound on one whole pull.
pub const PULL_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the Docker backend's images come from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum ImageSource {
    /// Official images when present on the engine or pullable, else offline ones.
    Auto,
    /// Official images only, pulled when absent; no registry answering is an error.
    Official,
    /// Images built from the binaries installed on this host (Linux only); no registry.
    #[default]
    Offline,
}

impl ImageSource {
    /// Lower-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ImageSource::Auto => "auto",
            ImageSource::Official => "official",
            ImageSource::Offline => "offline",
        }
    }
}

/// What an image is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The primaries.
    Server,
    /// The Toxiproxy-API proxy in front of them.
    Proxy,
    /// The run's PostgreSQL.
    Postgres,
}

impl Role {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Proxy => "proxy",
            Role::Postgres => "postgres",
        }
    }
}

/// The images a Docker cluster asks for. The library's default is
/// [`ImageSource::Offline`] (what the backend always did, and no registry is ever asked);
/// the CLI's is [`ImageSource::Auto`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagePlan {
    /// Official, offline, or whichever is available.
    pub source: ImageSource,
    /// The server image; `None`: [`DEFAULT_VALKEY_IMAGE`] or [`DEFAULT_REDIS_IMAGE`].
    pub server: Option<String>,
    /// The Toxiproxy image; `None`: [`DEFAULT_TOXIPROXY_IMAGE`].
    pub toxiproxy: Option<String>,
    /// The PostgreSQL image; `None`: [`DEFAULT_POSTGRES_IMAGE`].
    pub postgres: Option<String>,
    /// The run has clock faults: with [`ImageSource::Auto`], the server runs on the
    /// offline image (it carries libfaketime) whenever this host has the server binary to
    /// build it from, so that `auto` never costs a run its clock scenarios.
    pub clock_faults: bool,
}

impl ImagePlan {
    /// Official names from the defaults, with `source`.
    pub fn new(source: ImageSource) -> Self {
        ImagePlan {
            source,
            ..ImagePlan::default()
        }
    }

    /// The official image name for `role`.
    pub fn official_name(&self, role: Role, flavour: Flavour) -> String {
        let (given, default) = match role {
            Role::Server => (
                &self.server,
                match flavour {
                    Flavour::Valkey => DEFAULT_VALKEY_IMAGE,
                    Flavour::Redis => DEFAULT_REDIS_IMAGE,
                },
            ),
            Role::Proxy => (&self.toxiproxy, DEFAULT_TOXIPROXY_IMAGE),
            Role::Postgres => (&self.postgres, DEFAULT_POSTGRES_IMAGE),
        };
        given.clone().unwrap_or_else(|| default.to_owned())
    }
}

/// The command-line flags that make an [`ImagePlan`] (`chaos run`, `chaos up`).
#[derive(Debug, Clone, clap::Args)]
pub struct ImageArgs {
    /// Docker backend: `official` runs the nodes, the proxy and PostgreSQL on the official
    /// images (pulled when absent; clock faults are then not applicable: no libfaketime),
    /// `offline` on images built from the binaries installed here (Linux), `auto` the
    /// official ones when present or pullable, else offline ones (the server's offline one
    /// whenever the run has clock faults and this host has the server binary).
    #[arg(long, value_enum, default_value_t = ImageSource::Auto)]
    pub images: ImageSource,
    /// The official server image [default: valkey/valkey:8, or redis:7 with --flavour redis].
    #[arg(long, value_name = "IMAGE")]
    pub server_image: Option<String>,
    /// The official Toxiproxy image [default: ghcr.io/shopify/toxiproxy:2.12.0].
    #[arg(long, value_name = "IMAGE")]
    pub toxiproxy_image: Option<String>,
    /// The official PostgreSQL image [default: postgres:15].
    #[arg(long, value_name = "IMAGE")]
    pub postgres_image: Option<String>,
}

impl ImageArgs {
    /// The plan these flags ask for.
    pub fn plan(&self) -> ImagePlan {
        ImagePlan {
            source: self.images,
            server: self.server_image.clone(),
            toxiproxy: self.toxiproxy_image.clone(),
            postgres: self.postgres_image.clone(),
            clock_faults: false,
        }
    }

    /// An empty image name, or `official` with a backend that runs no containers: what to
    /// change (for exit 64).
    pub fn check(&self, local_backend: bool) -> Result<(), String> {
        for (flag, name) in [
            ("--server-image", &self.server_image),
            ("--toxiproxy-image", &self.toxiproxy_image),
            ("--postgres-image", &self.postgres_image),
        ] {
            if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(format!(
                    "{flag} is empty: name an image (e.g. valkey/valkey:8) or leave the flag out"
                ));
            }
        }
        if local_backend && self.images == ImageSource::Official {
            return Err(
                "--images official needs the docker backend (the local backend runs this host's binaries); use --backend docker"
                    .into(),
            );
        }
        Ok(())
    }
}

/// One image a cluster runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedImage {
    /// What it is for.
    pub role: Role,
    /// The name it was started by (`valkey/valkey:8`, `redlock-chaos-valkey:<hash>`).
    pub name: String,
    /// The engine's image id (`sha256:…`).
    pub id: String,
    /// An official image (true) or one built from this host's binaries.
    pub official: bool,
}

/// The official image for `role` under `plan`, present or pulled; `None` when `plan` says
/// offline, or says auto and the image is neither present nor pullable.
///
/// # Errors
/// With [`ImageSource::Official`]: [`ClusterError::ImagePull`] when the image is absent and
/// cannot be pulled; any source: [`ClusterError::Docker`] when the engine fails otherwise.
pub async fn resolve(
    docker: &Docker,
    plan: &ImagePlan,
    role: Role,
    flavour: Flavour,
) -> Result<Option<UsedImage>, ClusterError> {
    if plan.source == ImageSource::Offline {
        return Ok(None);
    }
    if plan.source == ImageSource::Auto
        && plan.clock_faults
        && role == Role::Server
        && super::binaries::locate_server(flavour).is_ok()
    {
        tracing::info!("clock faults wanted: the server runs on the offline image (libfaketime)");
        return Ok(None);
    }
    let name = plan.official_name(role, flavour);
    if let Some(id) = image_id(docker, &name).await? {
        return Ok(Some(UsedImage {
            role,
            name,
            id,
            official: true,
        }));
    }
    tracing::info!(image = %name, "pulling");
    match pull(docker, &name).await {
        Ok(()) => {
            let id = image_id(docker, &name)
                .await?
                .ok_or_else(|| ClusterError::ImagePull {
                    image: name.clone(),
                    detail: "the pull ended but the engine does not list the image".into(),
                })?;
            Ok(Some(UsedImage {
                role,
                name,
                id,
                official: true,
            }))
        }
        Err(detail) if plan.source == ImageSource::Auto => {
            tracing::info!(image = %name, %detail, "not pullable: building the offline image");
            Ok(None)
        }
        Err(detail) => Err(ClusterError::ImagePull {
            image: name,
            detail,
        }),
    }
}

/// The id of the image `name` on the engine; `None` when it has none by that name.
pub async fn image_id(docker: &Docker, name: &str) -> Result<Option<String>, ClusterError> {
    match docker.inspect_image(name).await {
        Ok(info) => Ok(Some(info.id.unwrap_or_default())),
        Err(e) if docker::status_code(&e) == Some(404) => Ok(None),
        Err(e) => Err(ClusterError::docker(format!("inspecting image {name}"), e)),
    }
}

/// Pull `name`: a first answer within [`REGISTRY_ANSWER`], the whole within
/// [`PULL_TIMEOUT`]. The error is what went wrong, for messages.
async fn pull(docker: &Docker, name: &str) -> Result<(), String> {
    let opts = CreateImageOptionsBuilder::default()
        .from_image(name)
        .build();
    let mut stream = docker.create_image(Some(opts), None, None);
    let started = tokio::time::Instant::now();
    let mut answered = false;
    loop {
        let wait = if answered {
            PULL_TIMEOUT.saturating_sub(started.elapsed())
        } else {
            REGISTRY_ANSWER
        };
        let item = match tokio::time::timeout(wait, stream.next()).await {
            Ok(item) => item,
            Err(_) if answered => {
                return Err(format!("the pull took longer than {PULL_TIMEOUT:?}"));
            }
            Err(_) => return Err(format!("no registry answered within {REGISTRY_ANSWER:?}")),
        };
        match item {
            None => return Ok(()),
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(info)) => {
                if let Some(message) = info.error_detail.and_then(|d| d.message) {
                    return Err(message);
                }
                answered = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_names_default_to_the_compose_files_tags() {
        let plan = ImagePlan::new(ImageSource::Auto);
        assert_eq!(
            plan.official_name(Role::Server, Flavour::Valkey),
            "valkey/valkey:8"
        );
        assert_eq!(plan.official_name(Role::Server, Flavour::Redis), "redis:7");
        assert_eq!(
            plan.official_name(Role::Proxy, Flavour::Valkey),
            "ghcr.io/shopify/toxiproxy:2.12.0"
        );
        assert_eq!(
            plan.official_name(Role::Postgres, Flavour::Valkey),
            "postgres:15"
        );
    }

    #[test]
    fn a_given_name_replaces_the_default() {
        let plan = ImagePlan {
            server: Some("valkey/valkey:8.1".into()),
            ..ImagePlan::new(ImageSource::Official)
        };
        assert_eq!(
            plan.official_name(Role::Server, Flavour::Redis),
            "valkey/valkey:8.1"
        );
    }
}
