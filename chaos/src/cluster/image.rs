//! Images built from the binaries installed on this host.
//!
//! For when no registry answers (`--images offline`, or `auto` without the official images;
//! see [`super::official`]): every image is `FROM scratch` plus files copied from
//! this host to the paths they have here, with every shared library `ldd` lists (loader
//! included), so binaries find what they were built to find. The build context is a tar
//! made in memory (`Context`) and sent through the engine API.
//!
//! - [`ensure_image`]: the rig's server image: the server binary at [`image_server_path`]
//!   (the entrypoint), for Valkey libfaketime at [`IMAGE_FAKETIME_LIB`], empty `/data` and
//!   `/tmp`. Tagged `redlock-chaos-<flavour>:<hash>`.
//! - [`ensure_proxy_image`]: the rig's proxy, the `chaos` binary at [`IMAGE_CHAOS_PATH`]
//!   (the docker backend runs it as `chaos toxiproxy ...`), tagged `redlock-chaos-proxy:<hash>`.
//!   A rebuilt `chaos` gives a new tag; ones older than ten minutes are
//!   removed when a new one is built.
//! - [`ensure_offline_server_image`], [`ensure_offline_proxy_image`]: stand-ins for
//!   `valkey/valkey:8` and Shopify's Toxiproxy image in the compose stack (`chaos images`,
//!   `compose/docker-compose.offline.yml`), taking the official images' command lines, under
//!   a tag the caller fixes. PostgreSQL's stand-in is [`super::pg_image`].
//!
//! Caching: every image carries the label `redlock-chaos.content-sha256`, a sha256 over the recipe version, the
//! Dockerfile and every context entry's path, mode and bytes; a tag that exists with the same
//! hash is reused. The rig's tags embed the hash, so a changed binary gives a new tag; a fixed
//! tag is rebuilt in place, and the image it named before is removed unless a container
//! still uses it.
//!
//! Labels: the rig's images carry [`LABEL_PROJECT`] and the run that built them and are kept
//! across runs; `docker::remove_images` (`chaos down --images`) removes them. The offline
//! images carry [`LABEL_OFFLINE`] and neither of those: a container inherits its image's
//! labels, and `chaos down --all` removes every container labelled with the project, which
//! must not take a compose stack's containers with it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::{ClusterError, Flavour, LABEL_PROJECT, LABEL_RUN, PROJECT, binaries};

/// Where libfaketime lives inside Valkey images.
pub const IMAGE_FAKETIME_LIB: &str = "/usr/lib/faketime/libfaketimeMT.so.1";
/// Path of the `chaos` binary inside the proxy images.
pub const IMAGE_CHAOS_PATH: &str = "/usr/local/bin/chaos";
/// Label of the offline images (value: the tag they were built for), in place of
/// [`LABEL_PROJECT`]; see the module docs.
pub const LABEL_OFFLINE: &str = "redlock-chaos.offline";
/// Bumped whenever the image layout changes, so stale cached images are not reused.
const RECIPE_VERSION: &str = "redlock-chaos-image-v2";
/// Label holding the content hash (lets `docker images` show what a tag was built from).
const LABEL_CONTENT: &str = "redlock-chaos.content-sha256";
/// Upper bound on one image build (a build takes a few seconds here).
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
/// Where the image's own files sit in a [`Context`]; Dockerfiles copy it to `/`.
pub(crate) const ROOTFS: &str = "rootfs";

/// Path of the server binary inside the image.
pub fn image_server_path(flavour: Flavour) -> String {
    format!("/usr/local/bin/{}-server", flavour.name())
}

/// The outcome of [`ensure_image`] and the other builders.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    /// The tag: `redlock-chaos-<name>:<hash>` or the fixed tag asked for.
    pub tag: String,
    /// Whether it was built now (false: reused from the cache).
    pub built: bool,
    /// Time spent (hashing + build, or hashing + lookup).
    pub elapsed: Duration,
}

/// A build context made in memory: files and directories by path in the context (an image's
/// own files under [`ROOTFS`]), each with its mode. The engine's `COPY` keeps modes but not
/// owners: everything belongs to root unless the Dockerfile says `COPY --chown`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    files: BTreeMap<String, (u32, Vec<u8>)>,
    dirs: BTreeMap<String, u32>,
}

/// `/usr/bin/x` → `rootfs/usr/bin/x`.
pub(crate) fn in_rootfs(in_image: &str) -> String {
    format!("{ROOTFS}/{}", in_image.trim_start_matches('/'))
}

fn read_host(host: &Path) -> Result<Vec<u8>, ClusterError> {
    // fs::read follows symlinks: the image gets a regular file at the path asked for.
    std::fs::read(host).map_err(|e| ClusterError::io(format!("reading {}", host.display()), e))
}

impl Context {
    /// Empty `/data` (the working dir) and `/tmp`.
    fn with_data_and_tmp() -> Context {
        let mut ctx = Context::default();
        ctx.add_dir(in_rootfs("/data"), 0o755);
        ctx.add_dir(in_rootfs("/tmp"), 0o1777);
        ctx
    }

    /// A file holding `bytes` at `path` in the context.
    pub(crate) fn add_bytes(&mut self, path: impl Into<String>, bytes: Vec<u8>, mode: u32) {
        self.files.insert(path.into(), (mode, bytes));
    }

    /// The host file `host` at `in_image` in the image.
    pub(crate) fn add_host_file(
        &mut self,
        in_image: &str,
        host: &Path,
        mode: u32,
    ) -> Result<(), ClusterError> {
        self.add_bytes(in_rootfs(in_image), read_host(host)?, mode);
        Ok(())
    }

    /// The executable `host` at `in_image`, and every library `ldd` lists for it at the
    /// path it has on this host.
    pub(crate) fn add_binary(&mut self, in_image: &str, host: &Path) -> Result<(), ClusterError> {
        self.add_host_file(in_image, host, 0o755)?;
        self.add_libraries_of(host)
    }

    /// Every library `ldd` lists for `host`, at the path it has on this host.
    pub(crate) fn add_libraries_of(&mut self, host: &Path) -> Result<(), ClusterError> {
        for lib in binaries::shared_libraries(host)? {
            let in_image = lib.display().to_string();
            if !self.files.contains_key(&in_rootfs(&in_image)) {
                self.add_host_file(&in_image, &lib, 0o755)?;
            }
        }
        Ok(())
    }

    /// A directory at `path` in the context (parents of files need not be added).
    pub(crate) fn add_dir(&mut self, path: impl Into<String>, mode: u32) {
        self.dirs.insert(path.into(), mode);
    }

    /// Every image directory holding a shared library, `:`-separated, for `LD_LIBRARY_PATH`:
    /// a scratch image has no `ld.so.cache`.
    pub(crate) fn library_path(&self) -> String {
        let mut dirs: Vec<String> = self
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(ROOTFS))
            .filter(|p| p.contains(".so"))
            .filter_map(|p| Path::new(p).parent().map(|d| d.display().to_string()))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.join(":")
    }

    /// Hex sha256 of the recipe version, `dockerfile` and every entry.
    fn content_hash(&self, dockerfile: &str) -> String {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(RECIPE_VERSION.as_bytes());
        field(dockerfile.as_bytes());
        for (path, mode) in &self.dirs {
            field(b"dir");
            field(path.as_bytes());
            field(&mode.to_le_bytes());
        }
        for (path, (mode, bytes)) in &self.files {
            field(b"file");
            field(path.as_bytes());
            field(&mode.to_le_bytes());
            field(bytes);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The context as a tar: the Dockerfile, then directories (parents first), then files.
    fn tar(&self, dockerfile: &str) -> Result<Vec<u8>, ClusterError> {
        let tar_err =
            |e: std::io::Error| ClusterError::io("writing the in-memory build context", e);
        let mut tar = tar::Builder::new(Vec::new());
        let mut dirs: BTreeMap<PathBuf, u32> = self
            .dirs
            .iter()
            .map(|(p, mode)| (PathBuf::from(p), *mode))
            .collect();
        for path in self.files.keys().chain(self.dirs.keys()) {
            for parent in Path::new(path).ancestors().skip(1) {
                if !parent.as_os_str().is_empty() {
                    dirs.entry(parent.to_path_buf()).or_insert(0o755);
                }
            }
        }
        let mut append = |path: &Path, kind, bytes: &[u8], mode: u32| {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_size(bytes.len() as u64);
            header.set_mode(mode);
            header.set_mtime(0);
            tar.append_data(&mut header, path, bytes).map_err(tar_err)
        };
        append(
            Path::new("Dockerfile"),
            tar::EntryType::Regular,
            dockerfile.as_bytes(),
            0o644,
        )?;
        // BTreeMap order puts parents before children.
        for (dir, mode) in &dirs {
            append(dir, tar::EntryType::Directory, &[], *mode)?;
        }
        for (path, (mode, bytes)) in &self.files {
            append(Path::new(path), tar::EntryType::Regular, bytes, *mode)?;
        }
        tar.into_inner().map_err(tar_err)
    }
}

/// Which tag an image gets.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tag<'a> {
    /// `redlock-chaos-<name>:<first 16 hex of the content hash>`.
    Hashed(&'a str),
    /// This tag, rebuilt in place when the content changes.
    Fixed(&'a str),
}

/// The server binary and its libraries, plus (`with_faketime`) libfaketime and its.
fn server_context(
    flavour: Flavour,
    server_bin: &Path,
    with_faketime: bool,
) -> Result<Context, ClusterError> {
    let mut ctx = Context::with_data_and_tmp();
    ctx.add_binary(&image_server_path(flavour), server_bin)?;
    if with_faketime {
        let faketime = binaries::locate_faketime()?;
        ctx.add_host_file(IMAGE_FAKETIME_LIB, &faketime, 0o755)?;
        ctx.add_libraries_of(&faketime)?;
    }
    Ok(ctx)
}

/// Return the tag of an image for `flavour` built from `server_bin`, building it if needed.
pub async fn ensure_image(
    docker: &Docker,
    flavour: Flavour,
    server_bin: &Path,
    run_id: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let ctx = server_context(flavour, server_bin, flavour.supports_clock_faults())?;
    let dockerfile = format!(
        "FROM scratch\nCOPY {ROOTFS}/ /\nENV LD_LIBRARY_PATH={}\nWORKDIR /data\nENTRYPOINT [\"{}\"]\n",
        ctx.library_path(),
        image_server_path(flavour)
    );
    let labels = [(LABEL_PROJECT, PROJECT), (LABEL_RUN, run_id)];
    ensure_built(
        docker,
        &ctx,
        &dockerfile,
        Tag::Hashed(flavour.name()),
        &labels,
        started,
    )
    .await
}

/// Build (or reuse) `tag`: a stand-in for the official server image (`valkey/valkey:8`),
/// taking its command lines: no entrypoint, `<flavour>-server` and `<flavour>-cli` (for
/// health checks) on `PATH`, working dir `/data`, port 6379. `cli_bin` is the client found
/// beside the server ([`binaries::locate_cli`]).
pub async fn ensure_offline_server_image(
    docker: &Docker,
    flavour: Flavour,
    server_bin: &Path,
    cli_bin: &Path,
    tag: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let mut ctx = server_context(flavour, server_bin, false)?;
    ctx.add_binary(&format!("/usr/local/bin/{}-cli", flavour.name()), cli_bin)?;
    let dockerfile = format!(
        "FROM scratch\nCOPY {ROOTFS}/ /\nENV PATH=/usr/local/bin LD_LIBRARY_PATH={}\nWORKDIR /data\nEXPOSE 6379\nCMD [\"{}-server\"]\n",
        ctx.library_path(),
        flavour.name()
    );
    let labels = [(LABEL_OFFLINE, tag)];
    ensure_built(docker, &ctx, &dockerfile, Tag::Fixed(tag), &labels, started).await
}

/// The `chaos` binary and its libraries.
fn chaos_context(chaos_bin: &Path) -> Result<Context, ClusterError> {
    let mut ctx = Context::with_data_and_tmp();
    ctx.add_binary(IMAGE_CHAOS_PATH, chaos_bin)?;
    Ok(ctx)
}

/// Return the tag of a proxy image holding `chaos_bin` (run as `chaos toxiproxy ...`),
/// building it if needed.
pub async fn ensure_proxy_image(
    docker: &Docker,
    chaos_bin: &Path,
    run_id: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let ctx = chaos_context(chaos_bin)?;
    let dockerfile = format!(
        "FROM scratch\nCOPY {ROOTFS}/ /\nENV LD_LIBRARY_PATH={}\nWORKDIR /data\nENTRYPOINT [\"{IMAGE_CHAOS_PATH}\"]\n",
        ctx.library_path()
    );
    let labels = [(LABEL_PROJECT, PROJECT), (LABEL_RUN, run_id)];
    let info = ensure_built(
        docker,
        &ctx,
        &dockerfile,
        Tag::Hashed("proxy"),
        &labels,
        started,
    )
    .await?;
    if info.built {
        prune_stale_proxy_images(docker, &info.tag).await;
    }
    Ok(info)
}

/// Build (or reuse) `tag`: a stand-in for Shopify's Toxiproxy image, taking its command line.
/// Entrypoint `chaos toxiproxy` (which reads Toxiproxy's single-dash flags), default
/// arguments `-host=0.0.0.0` as Shopify's, API on 8474.
pub async fn ensure_offline_proxy_image(
    docker: &Docker,
    chaos_bin: &Path,
    tag: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let ctx = chaos_context(chaos_bin)?;
    let dockerfile = format!(
        "FROM scratch\nCOPY {ROOTFS}/ /\nENV LD_LIBRARY_PATH={}\nWORKDIR /data\nEXPOSE 8474\nENTRYPOINT [\"{IMAGE_CHAOS_PATH}\", \"toxiproxy\"]\nCMD [\"-host=0.0.0.0\"]\n",
        ctx.library_path()
    );
    let labels = [(LABEL_OFFLINE, tag)];
    ensure_built(docker, &ctx, &dockerfile, Tag::Fixed(tag), &labels, started).await
}

/// Proxy images older than this, other than the current one, are removed when a new one is
/// built: every rebuild of `chaos` makes a ~100 MB image, and only the newest is useful.
/// Younger ones are left alone, as another run may be about to start a container from one.
const STALE_PROXY_IMAGE: Duration = Duration::from_secs(600);

/// Best effort: an image still used by a container is refused by the engine and kept.
async fn prune_stale_proxy_images(docker: &Docker, keep: &str) {
    use bollard::query_parameters::ListImagesOptionsBuilder;
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

/// Build `dockerfile` over `ctx` as `tag` with `labels` (and [`LABEL_CONTENT`]), unless an
/// image with that tag and content hash exists already.
pub(crate) async fn ensure_built(
    docker: &Docker,
    ctx: &Context,
    dockerfile: &str,
    tag: Tag<'_>,
    labels: &[(&str, &str)],
    started: Instant,
) -> Result<ImageInfo, ClusterError> {
    let hash = ctx.content_hash(dockerfile);
    let tag = match tag {
        Tag::Hashed(name) => format!("redlock-chaos-{name}:{}", &hash[..16]),
        Tag::Fixed(tag) => tag.to_owned(),
    };
    let previous = match docker.inspect_image(&tag).await {
        Ok(img) => {
            let content = img
                .config
                .as_ref()
                .and_then(|c| c.labels.as_ref())
                .and_then(|l| l.get(LABEL_CONTENT));
            if content == Some(&hash) {
                return Ok(ImageInfo {
                    tag,
                    built: false,
                    elapsed: started.elapsed(),
                });
            }
            img.id
        }
        Err(_) => None,
    };
    let context = ctx.tar(dockerfile)?;
    let labels: HashMap<&str, &str> = labels
        .iter()
        .copied()
        .chain([(LABEL_CONTENT, hash.as_str())])
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
    if let Some(old) = previous {
        // Best effort: the engine refuses while a container still uses it, and it stays
        // (untagged) until `docker image prune`.
        let opts = RemoveImageOptionsBuilder::default().force(false).build();
        if docker.remove_image(&old, Some(opts), None).await.is_ok() {
            tracing::debug!(image = %old, %tag, "removed the image the tag named before");
        }
    }
    Ok(ImageInfo {
        tag,
        built: true,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Context {
        let mut ctx = Context::with_data_and_tmp();
        ctx.add_bytes(in_rootfs("/usr/local/bin/x"), b"x".to_vec(), 0o755);
        ctx.add_bytes(in_rootfs("/lib/a/liba.so.1"), b"a".to_vec(), 0o755);
        ctx.add_bytes(in_rootfs("/lib/a/libb.so.2"), b"b".to_vec(), 0o755);
        ctx.add_bytes(
            in_rootfs("/lib64/ld-linux-x86-64.so.2"),
            b"l".to_vec(),
            0o755,
        );
        ctx.add_dir("owned/data", 0o700);
        ctx
    }

    #[test]
    fn library_path_lists_each_library_dir_once() {
        assert_eq!(sample().library_path(), "/lib/a:/lib64");
    }

    #[test]
    fn the_content_hash_covers_modes_and_directories() {
        let base = sample().content_hash("FROM scratch\n");
        assert_eq!(base, sample().content_hash("FROM scratch\n"));
        assert_ne!(base, sample().content_hash("FROM scratch\nUSER 1\n"));
        let mut mode = sample();
        mode.add_bytes(in_rootfs("/usr/local/bin/x"), b"x".to_vec(), 0o644);
        assert_ne!(base, mode.content_hash("FROM scratch\n"));
        let mut dir = sample();
        dir.add_dir("owned/data", 0o750);
        assert_ne!(base, dir.content_hash("FROM scratch\n"));
    }

    #[test]
    fn the_tar_lists_parents_first_and_keeps_modes() {
        let bytes = sample().tar("FROM scratch\n").expect("tar");
        let mut archive = tar::Archive::new(bytes.as_slice());
        let entries: Vec<(String, u32)> = archive
            .entries()
            .expect("entries")
            .map(|e| {
                let e = e.expect("entry");
                let path = e.path().expect("path").display().to_string();
                (path, e.header().mode().expect("mode"))
            })
            .collect();
        let position = |p: &str| {
            entries
                .iter()
                .position(|(q, _)| q.trim_end_matches('/') == p)
                .unwrap_or_else(|| panic!("{p} missing from {entries:?}"))
        };
        assert_eq!(position("Dockerfile"), 0);
        assert!(position("rootfs/usr") < position("rootfs/usr/local/bin"));
        assert!(position("rootfs/usr/local/bin") < position("rootfs/usr/local/bin/x"));
        assert!(position("owned") < position("owned/data"));
        let mode = |p: &str| entries[position(p)].1;
        assert_eq!(mode("owned/data"), 0o700);
        assert_eq!(mode("rootfs/tmp"), 0o1777);
        assert_eq!(mode("rootfs/usr/local/bin/x"), 0o755);
    }
}
