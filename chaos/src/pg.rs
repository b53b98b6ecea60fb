//! A throwaway PostgreSQL 15 server for the fenced counter, or an existing one.
//!
//! [`PgServer::start`] runs `initdb` and `pg_ctl start` in a fresh temp dir, listening on
//! `127.0.0.1` on a free port with its socket in the temp dir, so nothing on the host is
//! touched. `fsync=off`: the data is thrown away after the run, and durability is not what
//! the counter measures. Dropping the server (also while unwinding from a panic) stops it
//! with `pg_ctl stop -m immediate` and deletes the dir.
//!
//! `initdb` refuses to run as root, so when we are root the binaries run as the `postgres`
//! user, which then owns the temp dir.
//!
//! [`Pg`] is either such a server, the DSN of an existing one (`--pg-url` / `PG_DSN`), or a
//! container of the official image ([`crate::cluster::pg_container`]).

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use tokio_postgres::{Client, NoTls};

/// Where Debian's `postgresql-15` package puts the server binaries.
pub const DEFAULT_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// Overrides [`DEFAULT_BIN_DIR`].
pub const BIN_DIR_ENV: &str = "PG_BIN_DIR";
/// Connections the server accepts: one per worker of every concurrent run, plus slack.
pub const MAX_CONNECTIONS: u32 = 500;
/// How long `pg_ctl start` may wait for the server to accept connections.
const START_TIMEOUT_SECS: u32 = 60;
/// A free port can be taken between probing and binding: try a few.
const PORT_ATTEMPTS: u32 = 5;

/// Everything that can go wrong starting or reaching PostgreSQL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgHarnessError {
    /// A binary is missing.
    #[error("{path} not found: install postgresql-15 (apt) or set {BIN_DIR_ENV} to its bin dir")]
    MissingBinary {
        /// The path looked at.
        path: PathBuf,
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
    /// `initdb` / `pg_ctl` exited with an error.
    #[error("{program} failed ({status}): {stderr}")]
    Command {
        /// The program.
        program: String,
        /// Its exit status.
        status: String,
        /// Its stderr (and the server log tail, for start failures).
        stderr: String,
    },
    /// The server could not be reached or a statement failed.
    #[error("postgres at {dsn}: {}", server_message(source))]
    Postgres {
        /// The DSN used.
        dsn: String,
        /// Underlying error.
        #[source]
        source: tokio_postgres::Error,
    },
}

/// The server's own message when there is one: `tokio_postgres` displays only "db error".
fn server_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// A private PostgreSQL server in a temp dir, removed on drop.
#[derive(Debug)]
pub struct PgServer {
    dir: tempfile::TempDir,
    port: u16,
    bin_dir: PathBuf,
    run_as: Option<(u32, u32)>,
    stopped: bool,
}

impl PgServer {
    /// Runs `initdb` and starts the server; returns once it accepts connections.
    ///
    /// # Errors
    /// [`PgHarnessError`] when a binary is missing or a step fails.
    pub fn start() -> Result<PgServer, PgHarnessError> {
        let bin_dir = std::env::var_os(BIN_DIR_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_BIN_DIR));
        for b in ["initdb", "pg_ctl", "postgres"] {
            let path = bin_dir.join(b);
            if !path.exists() {
                return Err(PgHarnessError::MissingBinary { path });
            }
        }
        let run_as = if current_uid()? == 0 {
            Some(postgres_ids()?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("redlock-chaos-pg-")
            .tempdir()
            .map_err(|e| io("creating the postgres temp dir", e))?;
        // From here on, `server` owns the dir: an error return drops it and cleans up.
        let mut server = PgServer {
            dir,
            port: 0,
            bin_dir,
            run_as,
            stopped: true,
        };
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(server.dir.path(), Some(uid), Some(gid))
                .map_err(|e| io("handing the temp dir to the postgres user", e))?;
        }
        server.run("initdb", |c| {
            c.arg("-D").arg(server.data_dir()).args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]);
        })?;
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port()?;
            let options = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={sock} \
                 -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                 -c max_connections={MAX_CONNECTIONS} -c shared_buffers=64MB",
                port = server.port,
                sock = server.dir.path().display(),
            );
            let log = server.dir.path().join("server.log");
            let started = server.run("pg_ctl", |c| {
                c.arg("start")
                    .arg("-D")
                    .arg(server.data_dir())
                    .arg("-l")
                    .arg(&log)
                    .args(["-w", "-t", &START_TIMEOUT_SECS.to_string(), "-o", &options]);
            });
            match started {
                Ok(()) => {
                    server.stopped = false;
                    return Ok(server);
                }
                Err(PgHarnessError::Command {
                    program,
                    status,
                    stderr,
                }) => {
                    let tail = std::fs::read_to_string(&log).unwrap_or_default();
                    let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                    // Make sure a half-started server is not left behind before retrying.
                    server.stop();
                    last = Some(PgHarnessError::Command {
                        program,
                        status,
                        stderr: format!("{stderr}; log: {tail}"),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io("starting postgres", std::io::ErrorKind::Other.into())))
    }

    /// `host=127.0.0.1 port=… user=postgres dbname=postgres`.
    pub fn dsn(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(
        &self,
        program: &str,
        configure: impl FnOnce(&mut Command),
    ) -> Result<(), PgHarnessError> {
        let mut cmd = Command::new(self.bin_dir.join(program));
        configure(&mut cmd);
        cmd.stdin(Stdio::null()).current_dir(self.dir.path());
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid).env("HOME", self.dir.path());
        }
        let out: Output = cmd
            .output()
            .map_err(|e| io(format!("running {program}"), e))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(PgHarnessError::Command {
                program: program.to_owned(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    fn stop(&mut self) {
        // Immediate: the data is about to be deleted, a clean shutdown would only cost time.
        let _ = self.run("pg_ctl", |c| {
            c.arg("stop").arg("-D").arg(self.data_dir()).args([
                "-m",
                "immediate",
                "-w",
                "-t",
                "30",
            ]);
        });
        self.stopped = true;
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let pid_file = self.data_dir().join("postmaster.pid");
        if !self.stopped || pid_file.exists() {
            self.stop();
        }
        // The TempDir removes the directory after this.
    }
}

/// Either a private server or an existing one.
#[derive(Debug)]
pub enum Pg {
    /// Started by us; removed on drop.
    Owned(PgServer),
    /// Someone else's: only the counter table is created in it.
    External(String),
    /// A container started by us (the docker backend on official images); removed on drop.
    Container(crate::cluster::pg_container::PgContainer),
}

impl Pg {
    /// Uses `url` when given (e.g. from `--pg-url` / `PG_DSN`), else starts a server.
    /// Blocking (initdb takes a second or two): call from `spawn_blocking` in async code.
    ///
    /// # Errors
    /// As [`PgServer::start`].
    pub fn from_url_or_start(url: Option<String>) -> Result<Pg, PgHarnessError> {
        match url {
            Some(u) if !u.trim().is_empty() => Ok(Pg::External(u)),
            _ => Ok(Pg::Owned(PgServer::start()?)),
        }
    }

    /// The connection string.
    pub fn dsn(&self) -> String {
        match self {
            Pg::Owned(s) => s.dsn(),
            Pg::External(u) => u.clone(),
            Pg::Container(c) => c.dsn(),
        }
    }

    /// Opens a connection; its driver runs as a spawned task until the client is dropped.
    ///
    /// # Errors
    /// [`PgHarnessError::Postgres`] when the server cannot be reached.
    pub async fn connect(&self) -> Result<Client, PgHarnessError> {
        connect(&self.dsn()).await
    }
}

/// Connects to `dsn` (no TLS: the rig only talks to loopback).
///
/// # Errors
/// [`PgHarnessError::Postgres`] when the server cannot be reached.
pub async fn connect(dsn: &str) -> Result<Client, PgHarnessError> {
    let (client, connection) = tokio_postgres::connect(dsn, NoTls)
        .await
        .map_err(|source| PgHarnessError::Postgres {
            dsn: dsn.to_owned(),
            source,
        })?;
    tokio::spawn(async move {
        // Ends with an error when the server goes away; the client's next call reports it.
        let _ = connection.await;
    });
    Ok(client)
}

fn io(action: impl Into<String>, source: std::io::Error) -> PgHarnessError {
    PgHarnessError::Io {
        action: action.into(),
        source,
    }
}

fn free_port() -> Result<u16, PgHarnessError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| io("finding a free port", e))?;
    Ok(l.local_addr()
        .map_err(|e| io("finding a free port", e))?
        .port())
}

fn current_uid() -> Result<u32, PgHarnessError> {
    id_number(&["-u"])
}

/// The `postgres` user's uid and gid (from `id`, so no passwd parsing of our own).
fn postgres_ids() -> Result<(u32, u32), PgHarnessError> {
    Ok((
        id_number(&["-u", "postgres"])?,
        id_number(&["-g", "postgres"])?,
    ))
}

fn id_number(args: &[&str]) -> Result<u32, PgHarnessError> {
    let out = Command::new("id")
        .args(args)
        .output()
        .map_err(|e| io("running id", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse().map_err(|_| PgHarnessError::Command {
        program: format!("id {}", args.join(" ")),
        status: out.status.to_string(),
        stderr: format!(
            "{} (initdb refuses root, so a `postgres` user must exist)",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}
