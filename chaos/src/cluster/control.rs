//! How an attached node's process is driven: the runtime side of a stack file's
//! [`Control`](super::stack::Control) — a container on some Docker engine, a process on this
//! host, or nothing.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::StartContainerOptions;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::docker::{container_running, kill_container, status_code};
use super::stack::Control;
use super::{ClusterError, NodeId};

/// Bound on waiting for a killed process or container to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// One node's control, ready to use.
#[derive(Debug)]
pub(crate) enum NodeControl {
    /// No process control.
    None,
    /// A container.
    Docker {
        /// Its engine.
        docker: Docker,
        /// Name or id.
        container: String,
    },
    /// A process on this host.
    Local {
        pid_file: PathBuf,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
        log: Option<PathBuf>,
    },
}

fn docker_err(action: String) -> impl FnOnce(bollard::errors::Error) -> ClusterError {
    move |e| ClusterError::docker(action, e)
}

/// A client for the engine at `engine` (`None`: the local one), checked to answer.
async fn engine(engine: Option<&str>) -> Result<Docker, ClusterError> {
    let unavailable = |detail: String| ClusterError::DockerUnavailable { detail };
    let Some(url) = engine else {
        return super::docker::connect().await;
    };
    let docker = if let Some(path) = url.strip_prefix("unix://") {
        Docker::connect_with_unix(path, 30, bollard::API_DEFAULT_VERSION)
    } else {
        Docker::connect_with_http(url, 30, bollard::API_DEFAULT_VERSION)
    }
    .map_err(|e| unavailable(format!("{url}: {e}")))?;
    match tokio::time::timeout(Duration::from_secs(5), docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(unavailable(format!("{url}: {e}"))),
        Err(_) => Err(unavailable(format!("{url} did not answer within 5s"))),
    }
}

impl NodeControl {
    /// Connects what `control` names (engines are asked to answer once, here).
    pub(crate) async fn open(control: &Control) -> Result<NodeControl, ClusterError> {
        Ok(match control {
            Control::None => NodeControl::None,
            Control::Docker {
                container,
                engine: url,
            } => NodeControl::Docker {
                docker: engine(url.as_deref()).await?,
                container: container.clone(),
            },
            Control::Local {
                pid_file,
                command,
                env,
                cwd,
                log,
            } => NodeControl::Local {
                pid_file: pid_file.clone(),
                command: command.clone(),
                env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                cwd: cwd.clone(),
                log: log.clone(),
            },
        })
    }

    /// Whether it can kill, start, freeze and thaw.
    pub(crate) fn controls_process(&self) -> bool {
        !matches!(self, NodeControl::None)
    }

    fn unsupported(operation: &'static str) -> ClusterError {
        ClusterError::Unsupported {
            backend: "attached",
            operation,
            hint: "this node's control is `none`; give it a docker or local control in the stack file",
        }
    }

    /// SIGKILL, and wait until it is gone.
    pub(crate) async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        match self {
            NodeControl::None => Err(Self::unsupported("kill")),
            NodeControl::Docker { docker, container } => {
                kill_container(docker, node, container).await
            }
            NodeControl::Local { pid_file, .. } => {
                let Some(pid) = read_pid(pid_file)? else {
                    return Ok(());
                };
                let _ = kill(pid, Signal::SIGCONT);
                let _ = kill(pid, Signal::SIGKILL);
                let start = tokio::time::Instant::now();
                while alive(pid) {
                    if start.elapsed() > GONE_WITHIN {
                        return Err(ClusterError::NodeState {
                            node,
                            state: "still alive 10s after SIGKILL",
                            hint: "check the process and retry",
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(())
            }
        }
    }

    /// Starts it if it is not running (the caller waits for PING).
    pub(crate) async fn start(&self) -> Result<(), ClusterError> {
        match self {
            NodeControl::None => Err(Self::unsupported("start")),
            NodeControl::Docker { docker, container } => {
                if container_running(docker, container).await? {
                    return Ok(());
                }
                docker
                    .start_container(container, None::<StartContainerOptions>)
                    .await
                    .or_else(|e| {
                        if status_code(&e) == Some(304) {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })
                    .map_err(docker_err(format!("starting {container}")))
            }
            NodeControl::Local {
                pid_file,
                command,
                env,
                cwd,
                log,
            } => {
                if read_pid(pid_file)?.is_some_and(alive) {
                    return Ok(());
                }
                let out = match log {
                    Some(p) => Stdio::from(
                        OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(p)
                            .map_err(|e| ClusterError::io(format!("opening {}", p.display()), e))?,
                    ),
                    None => Stdio::null(),
                };
                let err = match log {
                    Some(p) => Stdio::from(
                        OpenOptions::new()
                            .append(true)
                            .open(p)
                            .map_err(|e| ClusterError::io(format!("opening {}", p.display()), e))?,
                    ),
                    None => Stdio::null(),
                };
                let mut cmd = Command::new(&command[0]);
                cmd.args(&command[1..])
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err)
                    // Its own process group: it outlives this run, as it was before.
                    .process_group(0);
                if let Some(d) = cwd {
                    cmd.current_dir(d);
                }
                let child = cmd
                    .spawn()
                    .map_err(|e| ClusterError::io(format!("starting {}", command[0]), e))?;
                std::fs::write(pid_file, format!("{}\n", child.id()))
                    .map_err(|e| ClusterError::io(format!("writing {}", pid_file.display()), e))?;
                // Not waited for here: it runs on after this process (std's Child does not
                // kill on drop); a zombie, if it dies while we run, is reaped by our exit.
                Ok(())
            }
        }
    }

    /// SIGSTOP / `docker pause`.
    pub(crate) async fn freeze(&self) -> Result<(), ClusterError> {
        match self {
            NodeControl::None => Err(Self::unsupported("freeze")),
            NodeControl::Docker { docker, container } => {
                let mut attempt = 1;
                loop {
                    match docker.pause_container(container).await {
                        Err(e) if attempt < FREEZE_ATTEMPTS && freeze_refused(&e) => {
                            tracing::warn!(%container, error = %e, attempt, "docker pause refused; trying again");
                            attempt += 1;
                            tokio::time::sleep(FREEZE_RETRY).await;
                        }
                        r => return r.map_err(docker_err(format!("pausing {container}"))),
                    }
                }
            }
            NodeControl::Local { pid_file, .. } => signal(pid_file, Signal::SIGSTOP),
        }
    }

    /// SIGCONT / `docker unpause`; a no-op when it is not frozen.
    pub(crate) async fn thaw(&self) -> Result<(), ClusterError> {
        match self {
            NodeControl::None => Err(Self::unsupported("thaw")),
            NodeControl::Docker { docker, container } => {
                match docker.unpause_container(container).await {
                    // 409: not paused (or not running), which is what a heal wants.
                    Err(e) if status_code(&e) != Some(409) => {
                        Err(ClusterError::docker(format!("unpausing {container}"), e))
                    }
                    _ => Ok(()),
                }
            }
            NodeControl::Local { pid_file, .. } => signal(pid_file, Signal::SIGCONT),
        }
    }
}

/// Tries of a `docker pause` the runtime refused ([`freeze_refused`]).
const FREEZE_ATTEMPTS: u32 = 3;
/// Pause between them.
const FREEZE_RETRY: Duration = Duration::from_millis(100);

/// Whether `e` is the runtime giving up on freezing the container's cgroup ("OCI runtime
/// pause failed: unable to freeze", status 500): a process it could not stop in time (in
/// the middle of an fsync, say). runc thaws what it froze before it reports that, so
/// pausing again is safe. Seen once on 2026-12-05 (pause-minority, docker backend, Docker
/// 20.10), which made the scenario unknown.
fn freeze_refused(e: &bollard::errors::Error) -> bool {
    status_code(e) == Some(500) && e.to_string().contains("unable to freeze")
}

fn read_pid(path: &Path) -> Result<Option<Pid>, ClusterError> {
    match std::fs::read_to_string(path) {
        Ok(s) => s
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|p| *p > 0)
            .map(|p| Some(Pid::from_raw(p)))
            .ok_or_else(|| ClusterError::StateFile {
                path: path.to_path_buf(),
                detail: format!("{:?} is not a process id", s.trim()),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ClusterError::io(format!("reading {}", path.display()), e)),
    }
}

/// Exists and is not a zombie.
fn alive(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn signal(pid_file: &Path, sig: Signal) -> Result<(), ClusterError> {
    let pid = read_pid(pid_file)?.ok_or_else(|| ClusterError::StateFile {
        path: pid_file.to_path_buf(),
        detail: "missing: is the server running?".into(),
    })?;
    kill(pid, sig).map_err(|e| ClusterError::io(format!("{sig} to {pid}"), e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(status_code: u16, message: &str) -> bollard::errors::Error {
        bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: message.into(),
        }
    }

    #[test]
    fn only_a_refused_freeze_is_tried_again() {
        assert!(freeze_refused(&server_error(
            500,
            "Cannot pause container 1a0a: OCI runtime pause failed: unable to freeze: unknown"
        )));
        // Not running, already paused, no such container: trying again changes nothing.
        assert!(!freeze_refused(&server_error(
            409,
            "Container 1a0a is not running"
        )));
        assert!(!freeze_refused(&server_error(
            409,
            "Container 1a0a is already paused"
        )));
        assert!(!freeze_refused(&server_error(404, "No such container: n0")));
        assert!(!freeze_refused(&server_error(500, "driver failed")));
    }
}
