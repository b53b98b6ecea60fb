//! Server images built from the binaries installed on this host.
//!
//! There is no registry to pull from, so each image is `FROM scratch` plus: the server binary
//! (`/usr/local/bin/<flavour>-server`), every shared library `ldd` lists (at the same paths,
//! loader included) and, for Valkey, libfaketime at [`IMAGE_FAKETIME_LIB`] with its libraries;
//! plus empty `/data` and `/tmp`. The build context is a tar made in memory and sent through
//! the engine API.
//!
//! The proxy image ([`ensure_proxy_image`]) is built the same way from the `chaos` binary
//! itself (`/usr/local/bin/chaos`, entrypoint `chaos toxiproxy`), tagged
//! `redlock-chaos-proxy:<hash>`. A rebuilt `chaos` binary gives a new tag; old ones stay
//! cached until `chaos down --images`.
//!
//! Caching: the tag is `redlock-chaos-<flavour>:<first 16 hex of sha256>` over the recipe
//! version, the Dockerfile and every file's in-image path, mode and bytes. An existing tag is
//! reused; a changed binary gives a new tag. Images carry the project and run labels (the run
//! that built them) and are kept across runs; `docker::remove_images` removes them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::{ClusterError, Flavour, LABEL_PROJECT, LABEL_RUN, PROJECT, binaries};

/// Where libfaketime lives inside Valkey images.
pub const IMAGE_FAKETIME_LIB: &str = "/usr/lib/faketime/libfaketimeMT.so.1";
/// Bumped whenever the image layout changes, so stale cached images are not reused.
const RECIPE_VERSION: &str = "redlock-chaos-image-v1";
/// Label holding the content hash (lets `docker images` show what a tag was built from).
const LABEL_CONTENT: &str = "redlock-chaos.content-sha256";
/// Upper bound on one image build (a build takes a few seconds here).
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);

/// Path of the server binary inside the image.
pub fn image_server_path(flavour: Flavour) -> String {
    format!("/usr/local/bin/{}-server", flavour.name())
}

/// The outcome of [`ensure_image`].
#[derive(Debug, Clone)]
pub struct ImageInfo {
    /// `redlock-chaos-<flavour>:<hash>`.
    pub tag: String,
    /// Whether it was built now (false: reused from the cache).
    pub built: bool,
    /// Time spent (hashing + build, or hashing + lookup).
    pub elapsed: Duration,
}

/// File contents keyed by in-image absolute path (sorted, so the hash is stable).
fn collect_files(
    flavour: Flavour,
    server_bin: &Path,
) -> Result<BTreeMap<String, Vec<u8>>, ClusterError> {
    let mut files = BTreeMap::new();
    let mut add = |in_image: String, host: &Path| -> Result<(), ClusterError> {
        // fs::read follows symlinks: the image gets a regular file at the path ldd reported.
        let bytes = std::fs::read(host)
            .map_err(|e| ClusterError::io(format!("reading {}", host.display()), e))?;
        files.insert(in_image, bytes);
        Ok(())
    };
    add(image_server_path(flavour), server_bin)?;
    for lib in binaries::shared_libraries(server_bin)? {
        add(lib.display().to_string(), &lib)?;
    }
    if flavour.supports_clock_faults() {
        let faketime = binaries::locate_faketime()?;
        add(IMAGE_FAKETIME_LIB.to_string(), &faketime)?;
        for lib in binaries::shared_libraries(&faketime)? {
            add(lib.display().to_string(), &lib)?;
        }
    }
    Ok(files)
}

/// Path of the `chaos` binary inside the proxy image.
pub const IMAGE_CHAOS_PATH: &str = "/usr/local/bin/chaos";

fn dockerfile(entrypoint: &str, files: &BTreeMap<String, Vec<u8>>) -> String {
    // LD_LIBRARY_PATH lists every library dir: the scratch image has no ld.so.cache.
    let mut dirs: Vec<String> = files
        .keys()
        .filter(|p| p.contains(".so"))
        .filter_map(|p| Path::new(p).parent().map(|d| d.display().to_string()))
        .collect();
    dirs.sort();
    dirs.dedup();
    format!(
        "FROM scratch\nCOPY rootfs/ /\nENV LD_LIBRARY_PATH={}\nWORKDIR /data\nENTRYPOINT [\"{}\"]\n",
        dirs.join(":"),
        entrypoint
    )
}

fn content_hash(dockerfile: &str, files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut h = Sha256::new();
    h.update(RECIPE_VERSION.as_bytes());
    h.update(dockerfile.as_bytes());
    for (path, bytes) in files {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn build_context(
    dockerfile: &str,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<u8>, ClusterError> {
    let tar_err = |e: std::io::Error| ClusterError::io("writing the in-memory build context", e);
    let mut tar = tar::Builder::new(Vec::new());
    let mut dirs: BTreeMap<PathBuf, u32> = BTreeMap::new();
    dirs.insert(PathBuf::from("rootfs/data"), 0o755);
    dirs.insert(PathBuf::from("rootfs/tmp"), 0o1777);
    for path in files.keys() {
        let mut p = Path::new("rootfs").join(path.trim_start_matches('/'));
        while let Some(parent) = p.parent() {
            if parent.as_os_str().is_empty() {
                break;
            }
            dirs.entry(parent.to_path_buf()).or_insert(0o755);
            p = parent.to_path_buf();
        }
    }
    // BTreeMap order puts parents before children.
    for (dir, mode) in &dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(*mode);
        header.set_mtime(0);
        tar.append_data(&mut header, dir, std::io::empty())
            .map_err(tar_err)?;
    }
    let mut add = |path: &Path, bytes: &[u8], mode: u32| -> Result<(), ClusterError> {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        tar.append_data(&mut header, path, bytes).map_err(tar_err)
    };
    add(Path::new("Dockerfile"), dockerfile.as_bytes(), 0o644)?;
    for (path, bytes) in files {
        add(
            &Path::new("rootfs").join(path.trim_start_matches('/')),
            bytes,
            0o755,
        )?;
    }
    tar.into_inner().map_err(tar_err)
}

/// Return the tag of an image for `flavour` built from `server_bin`, building it if needed.
pub async fn ensure_image(
    docker: &Docker,
    flavour: Flavour,
    server_bin: &Path,
    run_id: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let files = collect_files(flavour, server_bin)?;
    let dockerfile = dockerfile(&image_server_path(flavour), &files);
    ensure_built(docker, flavour.name(), &dockerfile, &files, run_id, started).await
}

/// Return the tag of a proxy image holding `chaos_bin` (run as `chaos toxiproxy ...`),
/// building it if needed.
pub async fn ensure_proxy_image(
    docker: &Docker,
    chaos_bin: &Path,
    run_id: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let mut files = BTreeMap::new();
    let bytes = std::fs::read(chaos_bin)
        .map_err(|e| ClusterError::io(format!("reading {}", chaos_bin.display()), e))?;
    files.insert(IMAGE_CHAOS_PATH.to_string(), bytes);
    for lib in binaries::shared_libraries(chaos_bin)? {
        let bytes = std::fs::read(&lib)
            .map_err(|e| ClusterError::io(format!("reading {}", lib.display()), e))?;
        files.insert(lib.display().to_string(), bytes);
    }
    let dockerfile = dockerfile(IMAGE_CHAOS_PATH, &files);
    let info = ensure_built(docker, "proxy", &dockerfile, &files, run_id, started).await?;
    if info.built {
        prune_stale_proxy_images(docker, &info.tag).await;
    }
    Ok(info)
}

/// Proxy images older than this, other than the current one, are removed when a new one is
/// built: every rebuild of `chaos` makes a ~100 MB image, and only the newest is useful.
/// Younger ones are left alone, as another run may be about to start a container from one.
const STALE_PROXY_IMAGE: Duration = Duration::from_secs(600);

/// Best effort: an image still used by a container is refused by the engine and kept.
async fn prune_stale_proxy_images(docker: &Docker, keep: &str) {
    use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
    let filters: HashMap<&str, Vec<&str>> = [("reference", vec!["redlock-chaos-proxy"])]
        .into_iter()
        .collect();
    let Ok(images) = docker
        .list_images(Some(
            ListImagesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
    else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for img in images {
        let age = now.saturating_sub(u64::try_from(img.created).unwrap_or(u64::MAX));
        if img.repo_tags.iter().any(|t| t == keep) || age < STALE_PROXY_IMAGE.as_secs() {
            continue;
        }
        let opts = RemoveImageOptionsBuilder::default().force(false).build();
        if docker.remove_image(&img.id, Some(opts), None).await.is_ok() {
            tracing::debug!(image = ?img.repo_tags, "removed a stale proxy image");
        }
    }
}

/// Build `redlock-chaos-<name>:<hash>` unless that tag exists already.
async fn ensure_built(
    docker: &Docker,
    name: &str,
    dockerfile: &str,
    files: &BTreeMap<String, Vec<u8>>,
    run_id: &str,
    started: Instant,
) -> Result<ImageInfo, ClusterError> {
    let hash = content_hash(dockerfile, files);
    let tag = format!("redlock-chaos-{name}:{}", &hash[..16]);
    if docker.inspect_image(&tag).await.is_ok() {
        return Ok(ImageInfo {
            tag,
            built: false,
            elapsed: started.elapsed(),
        });
    }
    let context = build_context(dockerfile, files)?;
    let labels: HashMap<&str, &str> = [
        (LABEL_PROJECT, PROJECT),
        (LABEL_RUN, run_id),
        (LABEL_CONTENT, hash.as_str()),
    ]
    .into_iter()
    .collect();
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .labels(&labels)
        .build();
    let stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let build = async {
        futures::pin_mut!(stream);
        let mut log = String::new();
        // The stream ends when the engine finishes the build; BUILD_TIMEOUT bounds it anyway.
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(detail) = info.error_detail {
                        return Err(detail.message.unwrap_or_else(|| log.clone()));
                    }
                    if let Some(s) = info.stream {
                        log.push_str(&s);
                    }
                }
                Err(e) => return Err(format!("{e}; output so far: {log}")),
            }
        }
        Ok(log)
    };
    let log = match tokio::time::timeout(BUILD_TIMEOUT, build).await {
        Ok(Ok(log)) => log,
        Ok(Err(detail)) => return Err(ClusterError::ImageBuild { tag, detail }),
        Err(_) => {
            return Err(ClusterError::ImageBuild {
                tag,
                detail: format!("no result within {BUILD_TIMEOUT:?}; is the engine overloaded?"),
            });
        }
    };
    docker
        .inspect_image(&tag)
        .await
        .map_err(|e| ClusterError::ImageBuild {
            tag: tag.clone(),
            detail: format!("build finished but the image is missing ({e}); output: {log}"),
        })?;
    Ok(ImageInfo {
        tag,
        built: true,
        elapsed: started.elapsed(),
    })
}
