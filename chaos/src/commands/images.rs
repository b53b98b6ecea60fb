//! `chaos images`: build the images `compose/docker-compose.offline.yml` names, from what is
//! installed on this host, so the compose stack comes up where no registry answers.
//!
//! | tag | stands in for | built from |
//! |---|---|---|
//! | [`VALKEY_TAG`] | `valkey/valkey:8` | `valkey-server` and `valkey-cli` ([`binaries::locate_server`]) |
//! | [`TOXIPROXY_TAG`] | `ghcr.io/shopify/toxiproxy` | this `chaos` binary, run as `chaos toxiproxy` |
//! | [`POSTGRES_TAG`] | `postgres:15` | the installed PostgreSQL ([`pg_image`]) |
//!
//! Each takes its official image's command line, environment and health check commands
//! (the proxy's health check excepted: there is no `/toxiproxy-cli`; see the override file).
//! Running it again reuses an image whose content is unchanged, and rebuilds one whose
//! binary changed under the same tag.
//!
//! The tags are outside the rig's `redlock-chaos-<name>:<hash>` names and the images carry
//! no project label, so neither the pruning of stale proxy images nor `chaos down
//! --images`/`--all` removes them (nor, through inherited labels, the stack's containers);
//! `docker rmi` does.

use std::time::Duration;

use bollard::Docker;

use crate::cluster::image::{self, ImageInfo};
use crate::cluster::pg_image::{self, PgInstall};
use crate::cluster::{ClusterError, Flavour, binaries, docker};

/// The Valkey server image.
pub const VALKEY_TAG: &str = "redlock-chaos-offline/valkey:8";
/// The Toxiproxy-compatible proxy image.
pub const TOXIPROXY_TAG: &str = "redlock-chaos-offline/toxiproxy:2";
/// The PostgreSQL image.
pub const POSTGRES_TAG: &str = "redlock-chaos-offline/postgres:15";

/// One image `chaos images` made or found.
#[derive(Debug, Clone)]
pub struct OfflineImage {
    /// One of [`VALKEY_TAG`], [`TOXIPROXY_TAG`], [`POSTGRES_TAG`].
    pub tag: &'static str,
    /// The official image it replaces.
    pub stands_in_for: &'static str,
    /// What it holds, e.g. `valkey 8.1.4`, `PostgreSQL 15.14`.
    pub source: String,
    /// Built now (false: the existing image was up to date).
    pub built: bool,
    /// Size as the engine reports it.
    pub size_bytes: u64,
    /// Time spent on it.
    pub elapsed: Duration,
}

/// Builds (or finds up to date) the three images, one after the other.
///
/// # Errors
/// [`ClusterError`] when no engine answers, a binary is missing or a build fails; images
/// built before the failure stay.
pub async fn run() -> Result<Vec<OfflineImage>, ClusterError> {
    let docker = docker::connect().await?;
    let flavour = Flavour::Valkey;
    let server = binaries::locate_server(flavour)?;
    let cli = binaries::locate_cli(flavour, &server)?;
    let server_version = binaries::server_version(flavour, &server)?;
    let chaos = binaries::locate_chaos()?;
    let pg = PgInstall::locate()?;

    let mut out = Vec::with_capacity(3);
    let info =
        image::ensure_offline_server_image(&docker, flavour, &server, &cli, VALKEY_TAG).await?;
    out.push(describe(&docker, info, VALKEY_TAG, "valkey/valkey:8", server_version).await?);
    let info = image::ensure_offline_proxy_image(&docker, &chaos, TOXIPROXY_TAG).await?;
    let source = format!("chaos {} ({})", env!("CARGO_PKG_VERSION"), chaos.display());
    out.push(
        describe(
            &docker,
            info,
            TOXIPROXY_TAG,
            "ghcr.io/shopify/toxiproxy",
            source,
        )
        .await?,
    );
    let info = pg_image::ensure_pg_image(&docker, &pg, POSTGRES_TAG).await?;
    out.push(describe(&docker, info, POSTGRES_TAG, "postgres:15", pg.version).await?);
    Ok(out)
}

async fn describe(
    docker: &Docker,
    info: ImageInfo,
    tag: &'static str,
    stands_in_for: &'static str,
    source: String,
) -> Result<OfflineImage, ClusterError> {
    let size = docker
        .inspect_image(&info.tag)
        .await
        .map_err(|e| ClusterError::docker(format!("inspecting {tag}"), e))?
        .size
        .unwrap_or(0);
    Ok(OfflineImage {
        tag,
        stands_in_for,
        source,
        built: info.built,
        size_bytes: u64::try_from(size).unwrap_or(0),
        elapsed: info.elapsed,
    })
}

/// One line per image: tag, built or up to date, size, what it holds and replaces.
pub fn render(images: &[OfflineImage]) -> String {
    let mut s = String::new();
    for i in images {
        s.push_str(&format!(
            "{:<36} {:<10} {:>4} MB  {} (for {})\n",
            i.tag,
            if i.built { "built" } else { "up to date" },
            i.size_bytes.div_ceil(1_000_000),
            i.source,
            i.stands_in_for,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_names_the_tag_state_and_size() {
        let line = render(&[OfflineImage {
            tag: VALKEY_TAG,
            stands_in_for: "valkey/valkey:8",
            source: "valkey 8.1.4".into(),
            built: false,
            size_bytes: 18_400_000,
            elapsed: Duration::from_millis(40),
        }]);
        assert!(line.starts_with(VALKEY_TAG), "{line}");
        assert!(line.contains("up to date"), "{line}");
        assert!(line.contains("19 MB"), "{line}");
        assert!(
            line.contains("valkey 8.1.4 (for valkey/valkey:8)"),
            "{line}"
        );
    }
}
