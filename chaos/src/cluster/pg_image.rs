//! A PostgreSQL image built from the binaries installed on this host: the offline stand-in for
//! the official `postgres:15` in the compose stack (`chaos images`,
//! `compose/docker-compose.offline.yml`).
//!
//! `FROM scratch` with, at the paths they have on this host (so the binaries find their share
//! and lib dirs as they were built to): `postgres`, `initdb`, `pg_ctl`, `pg_isready` and
//! `psql` from the bin dir ([`pg::BIN_DIR_ENV`], default [`pg::DEFAULT_BIN_DIR`]) with their
//! libraries; the share dir (`pg_config --sharedir`: catalogs, `postgres.bki`, time zone
//! abbreviations); every module in the lib dir (`pg_config --pkglibdir`: PL/pgSQL, the
//! encoding conversions, snowball, contrib) but the JIT provider; the system time zones when
//! PostgreSQL was built to use them; `/bin/sh` (dash) for the entrypoint and health checks;
//! and `/etc/passwd`, `/etc/group` with a `postgres` user ([`PG_UID`]) the image runs as,
//! because `postgres` refuses to run as root and there is no `su` to drop to it.
//!
//! The entrypoint (`pg_entrypoint.sh`) takes the official image's environment: on an empty
//! `PGDATA` (`/var/lib/postgresql/data`, owned by `postgres` in the image, so a fresh volume
//! is too) it runs `initdb` for `POSTGRES_USER` with `POSTGRES_PASSWORD` (host connections
//! from any address use scram-sha-256, local ones trust), creates `POSTGRES_DB`, then runs
//! `postgres` listening on `0.0.0.0:5432`, its socket in `/var/run/postgresql` where
//! `pg_isready` looks.
//!
//! # Trade-offs
//! - No `llvmjit.so`: it pulls in LLVM (~100 MB). `jit = on` then finds no provider and
//!   plans without JIT, which is what the rig's small queries do anyway.
//! - Locale `C`, encoding UTF-8: a scratch image has no locale data (`en_US.utf8` in the
//!   official image). Sorting is by byte.
//! - No `chown`, `gosu` or coreutils: a bind-mounted `PGDATA` must already belong to
//!   [`PG_UID`]; named volumes (as in the compose file) are set up by the engine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bollard::Docker;

use super::ClusterError;
use super::image::{Context, ImageInfo, LABEL_OFFLINE, ROOTFS, Tag, ensure_built, in_rootfs};
use crate::pg;

/// User and group id of `postgres` in the image (the official image's too).
pub const PG_UID: u32 = 999;
/// The data dir, as in the official image.
pub const IMAGE_PGDATA: &str = "/var/lib/postgresql/data";
/// Where the server puts its socket and `pg_isready`/`psql` look (Debian's build default).
const IMAGE_SOCKET_DIR: &str = "/var/run/postgresql";
const ENTRYPOINT_PATH: &str = "/usr/local/bin/docker-entrypoint.sh";
const ENTRYPOINT: &str = include_str!("pg_entrypoint.sh");
/// The shell for the entrypoint and `CMD-SHELL` health checks (dash on Debian).
const HOST_SH: &str = "/bin/sh";
/// Installed programs the image carries.
const PROGRAMS: [&str; 5] = ["postgres", "initdb", "pg_ctl", "pg_isready", "psql"];
/// The system time zones (`--with-system-tzdata`); used when the share dir has none.
const SYSTEM_ZONEINFO: &str = "/usr/share/zoneinfo";
/// Owned by `postgres`: copied with `--chown` from these context dirs.
const OWNED_DATA: &str = "owned-data";
const OWNED_SOCKET: &str = "owned-socket";

/// Where the installed PostgreSQL lives.
#[derive(Debug, Clone)]
pub struct PgInstall {
    /// `postgres`, `initdb` …
    pub bin_dir: PathBuf,
    /// `pg_config --sharedir`.
    pub share_dir: PathBuf,
    /// `pg_config --pkglibdir`.
    pub lib_dir: PathBuf,
    /// `"PostgreSQL 15.14"`, from `postgres --version`.
    pub version: String,
}

impl PgInstall {
    /// The bin dir from [`pg::BIN_DIR_ENV`] (default [`pg::DEFAULT_BIN_DIR`]) and the dirs
    /// its `pg_config` names.
    ///
    /// # Errors
    /// [`ClusterError::BinaryNotFound`] when a program is missing; [`ClusterError::Command`]
    /// when `pg_config` or `postgres --version` fails.
    pub fn locate() -> Result<PgInstall, ClusterError> {
        let bin_dir = std::env::var_os(pg::BIN_DIR_ENV)
            .map_or_else(|| PathBuf::from(pg::DEFAULT_BIN_DIR), PathBuf::from);
        for program in PROGRAMS.iter().chain(&["pg_config"]) {
            let path = bin_dir.join(program);
            if !path.is_file() {
                return Err(ClusterError::BinaryNotFound {
                    what: format!("{program} (install postgresql-15)"),
                    tried: vec![path.display().to_string()],
                    env_var: pg::BIN_DIR_ENV,
                });
            }
        }
        let config = |flag: &str| run(&bin_dir.join("pg_config"), flag).map(PathBuf::from);
        let share_dir = config("--sharedir")?;
        let lib_dir = config("--pkglibdir")?;
        // "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)" → "PostgreSQL 15.14"
        let out = run(&bin_dir.join("postgres"), "--version")?;
        let version = out
            .split_whitespace()
            .nth(2)
            .map_or_else(|| out.clone(), |v| format!("PostgreSQL {v}"));
        Ok(PgInstall {
            bin_dir,
            share_dir,
            lib_dir,
            version,
        })
    }
}

/// Trimmed stdout of `program arg`.
fn run(program: &Path, arg: &str) -> Result<String, ClusterError> {
    let shown = format!("{} {arg}", program.display());
    let out = Command::new(program)
        .arg(arg)
        .output()
        .map_err(|e| ClusterError::io(format!("running {shown}"), e))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            program: shown,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Every regular file under `dir` (symlinks to files followed; symlinked dirs skipped, as
/// `zoneinfo/posix/*` repeat the tree) whose path `keep` accepts, at the same path. Returns
/// the host paths added.
fn add_tree(
    ctx: &mut Context,
    dir: &Path,
    keep: &dyn Fn(&Path) -> bool,
) -> Result<Vec<PathBuf>, ClusterError> {
    let listing = |e| ClusterError::io(format!("listing {}", dir.display()), e);
    let mut added = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let path = entry.map_err(listing)?.path();
        if !keep(&path) {
            continue;
        }
        let reading = |e| ClusterError::io(format!("reading {}", path.display()), e);
        let is_link = std::fs::symlink_metadata(&path)
            .map_err(reading)?
            .is_symlink();
        let meta = std::fs::metadata(&path).map_err(reading)?;
        if meta.is_dir() && !is_link {
            added.extend(add_tree(ctx, &path, keep)?);
        } else if meta.is_file() {
            ctx.add_host_file(&path.display().to_string(), &path, 0o644)?;
            added.push(path);
        }
    }
    Ok(added)
}

/// Everything in the image but the Dockerfile.
fn context(install: &PgInstall) -> Result<Context, ClusterError> {
    let mut ctx = Context::default();
    for program in PROGRAMS {
        let host = install.bin_dir.join(program);
        ctx.add_binary(&host.display().to_string(), &host)?;
    }
    ctx.add_binary("/bin/sh", Path::new(HOST_SH))?;
    add_tree(&mut ctx, &install.share_dir, &|p| {
        // Man pages are for people on the host.
        p.file_name().is_none_or(|n| n != "man")
    })?;
    let timezones = install.share_dir.join("timezone");
    if !timezones.is_dir() && Path::new(SYSTEM_ZONEINFO).is_dir() {
        add_tree(&mut ctx, Path::new(SYSTEM_ZONEINFO), &|_| true)?;
    }
    let modules = |p: &Path| {
        p.extension().is_some_and(|e| e == "so")
            && !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("llvmjit"))
    };
    for lib in add_tree(&mut ctx, &install.lib_dir, &modules)? {
        ctx.add_libraries_of(&lib)?;
    }
    ctx.add_bytes(
        in_rootfs("/etc/passwd"),
        format!(
            "root:x:0:0:root:/root:/bin/sh\npostgres:x:{PG_UID}:{PG_UID}:PostgreSQL:/var/lib/postgresql:/bin/sh\n"
        )
        .into_bytes(),
        0o644,
    );
    ctx.add_bytes(
        in_rootfs("/etc/group"),
        format!("root:x:0:\npostgres:x:{PG_UID}:\n").into_bytes(),
        0o644,
    );
    // glibc's default without this file differs between versions; say "files" outright.
    ctx.add_bytes(
        in_rootfs("/etc/nsswitch.conf"),
        b"passwd: files\ngroup: files\nhosts: files dns\n".to_vec(),
        0o644,
    );
    ctx.add_bytes(
        in_rootfs(ENTRYPOINT_PATH),
        ENTRYPOINT.as_bytes().to_vec(),
        0o755,
    );
    ctx.add_dir(in_rootfs("/tmp"), 0o1777);
    // initdb insists on 0700 (or 0750) for the data dir.
    ctx.add_dir(format!("{OWNED_DATA}/data"), 0o700);
    ctx.add_dir(OWNED_SOCKET, 0o2775);
    Ok(ctx)
}

/// Build (or reuse) `tag`: the image described in the module docs.
///
/// # Errors
/// [`ClusterError`] when PostgreSQL, dash or a library is missing, or the build fails.
pub async fn ensure_pg_image(
    docker: &Docker,
    install: &PgInstall,
    tag: &str,
) -> Result<ImageInfo, ClusterError> {
    let started = Instant::now();
    let ctx = context(install)?;
    let parent = Path::new(IMAGE_PGDATA)
        .parent()
        .map_or_else(|| "/".to_owned(), |p| p.display().to_string());
    let dockerfile = format!(
        "FROM scratch
COPY {ROOTFS}/ /
COPY --chown={PG_UID}:{PG_UID} {OWNED_DATA}/ {parent}/
COPY --chown={PG_UID}:{PG_UID} {OWNED_SOCKET}/ {IMAGE_SOCKET_DIR}/
ENV PATH={bin}:/usr/local/bin:/usr/bin:/bin LD_LIBRARY_PATH={libs} PGDATA={IMAGE_PGDATA}
USER {PG_UID}:{PG_UID}
VOLUME {IMAGE_PGDATA}
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT [\"{ENTRYPOINT_PATH}\"]
",
        bin = install.bin_dir.display(),
        libs = ctx.library_path(),
    );
    let labels = [(LABEL_OFFLINE, tag)];
    ensure_built(docker, &ctx, &dockerfile, Tag::Fixed(tag), &labels, started).await
}
