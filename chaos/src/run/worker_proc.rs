//! Workers as processes, so a client stall is a real process pause (the "GC pause").
//!
//! - Child side: the hidden `chaos worker …` subcommand ([`WorkerArgs`], [`serve`]) runs one
//!   [`run_worker`] and writes each [`WorkerEvent`] as one JSON line on stdout. It stops at
//!   `--until` (an offset from `--start-ns`, the scenario start on `CLOCK_MONOTONIC`), or
//!   when its stdin closes — the runner holds the other end, so a runner that dies takes its
//!   workers with it.
//! - Parent side: [`spawn`] starts one child per worker and forwards its events;
//!   [`ProcessControl`] is the nemesis's [`WorkerControl`]: a client stall is `SIGSTOP` of
//!   the child, its heal `SIGCONT`. A child that paused itself ([`super::pause`]) is resumed
//!   by [`spawn`]'s reader once the pause's drawn length has passed and a rival of its mode
//!   has written since it stopped (at most [`pause::RIVAL_WAIT_TTLS`] × the TTL). A child is killed (after a
//!   `SIGCONT`, so it is not left stopped) whenever its handle is dropped: normal end,
//!   error, Ctrl-C or panic.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use futures::future::BoxFuture;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::chaos_workload::{WorkerSpec, run_worker};
use super::clock::ScenarioClock;
use super::pause::{self, PauseBy, PausePlan};
use super::record::ModeRecord;
use crate::checker::history::{OpKind, OpOutcome};
use crate::commands::parse_duration;
use crate::judge::events::WorkerEvent;
use crate::lockut::{LockKind, LockUnderTest};
use crate::nemesis::{WorkerControl, WorkerId};
use crate::workload::Mode;

/// Arguments of the hidden `chaos worker` subcommand (one worker of the time-bounded counter).
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// Lock nodes, comma-separated redis:// URLs.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// PostgreSQL connection string.
    #[arg(long)]
    pub pg_dsn: String,
    /// Write mode.
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// Counter row.
    #[arg(long)]
    pub row: i32,
    /// Lock resource (and key prefix).
    #[arg(long)]
    pub resource: String,
    /// The lock under test: ours, plain, or a broken variant of plain.
    #[arg(long, value_parser = LockKind::parse, default_value = "ours")]
    pub lock: LockKind,
    /// Lease TTL.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Duration,
    /// Work inside a section.
    #[arg(long, value_parser = parse_duration, default_value = "5ms")]
    pub work: Duration,
    /// Work until shortly before the end of the reported validity instead of `--work`.
    #[arg(long)]
    pub work_to_validity: bool,
    /// Sections of 2-5 × the TTL under `auto_renew` instead of `--work`.
    #[arg(long)]
    pub renewed: bool,
    /// Budget of one waiting acquire.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub acquire_wait: Duration,
    /// Seed of this worker.
    #[arg(long)]
    pub seed: u64,
    /// Worker index within its mode.
    #[arg(long)]
    pub worker: usize,
    /// Scenario start, `CLOCK_MONOTONIC` nanoseconds.
    #[arg(long)]
    pub start_ns: u64,
    /// Stop at this offset from the scenario start.
    #[arg(long, value_parser = parse_duration)]
    pub until: Duration,
    /// Probability that a section pauses the process right before its write (0: never).
    #[arg(long, default_value_t = 0.0)]
    pub pause_rate: f64,
    /// Shortest pause.
    #[arg(long, value_parser = parse_duration, default_value = "0ms")]
    pub pause_min: Duration,
    /// Longest pause.
    #[arg(long, value_parser = parse_duration, default_value = "0ms")]
    pub pause_max: Duration,
    /// Nodes' admin URLs, comma-separated, in node order: each grant's keys are read there
    /// (server truth). None: no reads.
    #[arg(long, value_delimiter = ',')]
    pub truth_nodes: Vec<String>,
}

impl WorkerArgs {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec {
            worker: self.worker,
            mode: self.mode,
            row: self.row,
            resource: self.resource.clone(),
            ttl: self.ttl,
            work: self.work,
            work_to_validity: self.work_to_validity,
            renewed: self.renewed,
            acquire_wait: self.acquire_wait,
            seed: self.seed,
            until: self.until,
            truth_urls: self.truth_nodes.clone(),
            // Refused with worker processes (`scenario::validate`).
            late_retire: None,
            pause: (self.pause_rate > 0.0).then_some(PausePlan {
                rate: self.pause_rate,
                min: self.pause_min,
                max: self.pause_max,
                by: PauseBy::Signal,
            }),
        }
    }
}

fn print_event(ev: &WorkerEvent) {
    use std::io::Write as _;
    // Serializing our own enum cannot fail; a closed stdout means the runner is gone, and
    // stdin's EOF stops us right after.
    if let Ok(line) = serde_json::to_string(ev) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// Runs `chaos worker`: returns the process exit code (0 after `Done`, 2 after `Failed`).
///
/// Boxed, as [`crate::run::run_until`] is: compiled once, here.
pub fn serve(args: WorkerArgs) -> BoxFuture<'static, u8> {
    Box::pin(serve_unboxed(args))
}

async fn serve_unboxed(args: WorkerArgs) -> u8 {
    let clock = ScenarioClock::new(args.start_ns);
    let spec = args.spec();
    let stop = CancellationToken::new();
    {
        let stop = stop.clone();
        // A plain thread: blocking stdin reads; it ends with the process.
        let _ = std::thread::Builder::new()
            .name("stdin-watch".into())
            .spawn(move || {
                use std::io::Read as _;
                // EOF (or an error) on stdin: the runner is gone or wants us to stop.
                let mut buf = [0u8; 64];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
                stop.cancel();
            });
    }
    let fail = |message: String| {
        print_event(&WorkerEvent::Failed {
            worker: spec.worker,
            message,
        });
        2
    };
    let lock = match LockUnderTest::build(args.lock, &args.nodes, args.ttl, &args.resource, true) {
        Ok(l) => l,
        Err(e) => return fail(format!("lock settings: {e}")),
    };
    let client = match crate::pg::connect(&args.pg_dsn).await {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let mut code = 0;
    // The runner reads the `Pausing` line printed just before and sends SIGCONT.
    let pause_self = || {
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    };
    run_worker(&spec, &lock, &client, clock, &stop, &pause_self, |ev| {
        if matches!(ev, WorkerEvent::Failed { .. }) {
            code = 2;
        }
        print_event(&ev);
    })
    .await;
    // The worker process exits next: let its lock's background clean-ups finish.
    let _ = lock.shutdown().await;
    code
}

/// A worker child; dropping it resumes and kills the process.
#[derive(Debug)]
struct Guarded {
    child: Child,
    alive: Arc<AtomicBool>,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // A stopped child is resumed first, so nothing is left stopped whatever happens
            // next; then `kill_on_drop` sends SIGKILL.
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
            let _ = self.child.start_kill();
        }
        self.alive.store(false, Ordering::SeqCst);
    }
}

/// One spawned worker, as the control sees it.
#[derive(Debug, Clone)]
struct Handle {
    mode: usize,
    worker: usize,
    pid: i32,
    alive: Arc<AtomicBool>,
}

/// Client stalls as `SIGSTOP`/`SIGCONT` of worker processes. A stall of worker `i` stops
/// worker `i` of EVERY mode at once, so every mode sees the same pause.
#[derive(Debug)]
pub struct ProcessControl {
    handles: Mutex<Vec<Handle>>,
    records: Arc<Mutex<Vec<ModeRecord>>>,
    /// Per mode index: writes its workers reported accepted, so a paused worker's reader
    /// sees when a rival has written.
    writes: Mutex<Vec<Arc<watch::Sender<u64>>>>,
}

impl ProcessControl {
    /// A control counting stalls into `records` (one per mode).
    pub fn new(records: Arc<Mutex<Vec<ModeRecord>>>) -> Self {
        ProcessControl {
            handles: Mutex::default(),
            records,
            writes: Mutex::default(),
        }
    }

    /// Mode `mode`'s count of accepted writes.
    fn writes(&self, mode: usize) -> Arc<watch::Sender<u64>> {
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        while writes.len() <= mode {
            writes.push(Arc::new(watch::Sender::new(0)));
        }
        writes[mode].clone()
    }

    /// The pids of the worker processes still running.
    pub fn live_pids(&self) -> Vec<i32> {
        let handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        handles
            .iter()
            .filter(|h| h.alive.load(Ordering::SeqCst))
            .map(|h| h.pid)
            .collect()
    }

    fn signal(&self, worker: WorkerId, sig: Signal) -> Vec<usize> {
        let handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        let mut hit = Vec::new();
        for h in handles.iter().filter(|h| h.worker == worker.0) {
            // A reaped child's pid may belong to someone else now: only signal live ones.
            if h.alive.load(Ordering::SeqCst) && kill(Pid::from_raw(h.pid), sig).is_ok() {
                hit.push(h.mode);
            }
        }
        hit
    }
}

impl WorkerControl for ProcessControl {
    fn stall(&self, worker: WorkerId, _duration: Duration) {
        // The nemesis heals (resumes) at the window's end, and on every exit path.
        let hit = self.signal(worker, Signal::SIGSTOP);
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for m in hit {
            if let Some(r) = records.get_mut(m) {
                r.count_stall();
            }
        }
    }

    fn resume(&self, worker: WorkerId) {
        self.signal(worker, Signal::SIGCONT);
    }
}

/// How long a child that announced a pause may take to actually stop before it is resumed
/// anyway (a busy machine can deschedule it between the line and the signal).
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Waits out a pause announced at `from` with drawn length `length`: that long, then until
/// `writes` passes `seen` (a rival of the mode wrote while the child was stopped), at
/// most until `from + longest`.
///
/// A pause only loses an update when another worker writes while it lasts. A drawn length
/// alone made that a race against the machine's speed: on a slow CI machine `none`
/// completed 7 sections in 12 s of `client-pause` on Docker, paused once, its rivals wrote
/// nothing within the pause, and the canary was blind (2026-12-07).
async fn pause_over(
    from: tokio::time::Instant,
    length: Duration,
    longest: Duration,
    mut writes: watch::Receiver<u64>,
    seen: u64,
) {
    // A length past what an `Instant` holds (a child's nonsense) resumes at once.
    let at = |d: Duration| from.checked_add(d).unwrap_or(from);
    tokio::time::sleep_until(at(length)).await;
    let _ = tokio::time::timeout_at(at(longest.max(length)), writes.wait_for(|&n| n > seen)).await;
}

/// Waits for `pause`, or forever when there is none.
async fn pause_ends(pause: &mut Option<BoxFuture<'static, ()>>) {
    match pause {
        Some(p) => p.await,
        None => std::future::pending().await,
    }
}

/// Resumes a child that announced a pause: waits (bounded) until it has really stopped, so
/// the `SIGCONT` cannot arrive before its `SIGSTOP` and leave it stopped, then continues it.
async fn resume(pid: i32, alive: &AtomicBool) {
    let give_up = tokio::time::Instant::now() + STOP_WAIT;
    // Bounded by STOP_WAIT.
    while alive.load(Ordering::SeqCst)
        && !pause::is_stopped(pid)
        && tokio::time::Instant::now() < give_up
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    if alive.load(Ordering::SeqCst) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
    }
}

/// Starts `chaos worker` (binary `bin`) for `spec` of mode index `mode`, forwarding its
/// events to `events`. The returned future ends when the child does (or at `stop`, killing
/// it); a child that ends without `Done`/`Failed` is reported as failed.
///
/// # Errors
/// A message when the process cannot be started.
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    bin: &Path,
    lock: LockKind,
    nodes: &[String],
    pg_dsn: &str,
    spec: &WorkerSpec,
    mode: usize,
    clock: ScenarioClock,
    control: &ProcessControl,
    events: UnboundedSender<(usize, WorkerEvent)>,
    stop: CancellationToken,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static, String> {
    let us = |d: Duration| format!("{}us", d.as_micros());
    let mut cmd = Command::new(bin);
    cmd.arg("worker")
        .arg("--nodes")
        .arg(nodes.join(","))
        .arg("--pg-dsn")
        .arg(pg_dsn)
        .arg("--mode")
        .arg(spec.mode.name())
        .arg("--row")
        .arg(spec.row.to_string())
        .arg("--resource")
        .arg(&spec.resource)
        .arg("--lock")
        .arg(lock.name())
        .arg("--ttl")
        .arg(us(spec.ttl))
        .arg("--work")
        .arg(us(spec.work))
        .arg("--acquire-wait")
        .arg(us(spec.acquire_wait))
        .arg("--seed")
        .arg(spec.seed.to_string())
        .arg("--worker")
        .arg(spec.worker.to_string())
        .arg("--start-ns")
        .arg(clock.start_ns().to_string())
        .arg("--until")
        .arg(us(spec.until));
    if spec.work_to_validity {
        cmd.arg("--work-to-validity");
    }
    if spec.renewed {
        cmd.arg("--renewed");
    }
    if !spec.truth_urls.is_empty() {
        cmd.arg("--truth-nodes").arg(spec.truth_urls.join(","));
    }
    if let Some(p) = spec.pause {
        cmd.arg("--pause-rate")
            .arg(p.rate.to_string())
            .arg("--pause-min")
            .arg(us(p.min))
            .arg("--pause-max")
            .arg(us(p.max));
    }
    // Workers log what the run's `RUST_LOG` asks for (inherited; errors when unset) on the
    // run's stderr; their stdout is the event stream.
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting worker process {}: {e}", bin.display()))?;
    let pid = child
        .id()
        .ok_or_else(|| "worker process exited at once".to_owned())?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "worker process has no stdout".to_owned())?;
    let alive = Arc::new(AtomicBool::new(true));
    control
        .handles
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Handle {
            mode,
            worker: spec.worker,
            pid: pid as i32,
            alive: alive.clone(),
        });
    let worker = spec.worker;
    let mut guarded = Guarded { child, alive };
    let pid = pid as i32;
    let writes = control.writes(mode);
    // The longest a pause waits for a rival's write.
    let longest = spec.ttl.mul_f64(pause::RIVAL_WAIT_TTLS);
    Ok(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut ended = false;
        // The pause of the child that stopped itself (at most one at a time: a stopped
        // child prints nothing more).
        let mut pause: Option<BoxFuture<'static, ()>> = None;
        // Bounded: the child stops by itself at `until`, closing stdout; `stop` cuts it short;
        // a pause is bounded by `longest` (or its drawn length) plus `STOP_WAIT`.
        loop {
            let line = tokio::select! {
                l = lines.next_line() => l,
                () = pause_ends(&mut pause) => {
                    resume(pid, &guarded.alive).await;
                    pause = None;
                    let _ = events.send((mode, WorkerEvent::Resumed { worker, at_us: clock.us(tokio::time::Instant::now()) }));
                    continue;
                }
                () = stop.cancelled() => {
                    let _ = events.send((mode, WorkerEvent::Failed { worker, message: "stopped (interrupted)".into() }));
                    return; // `guarded` is dropped: SIGCONT, SIGKILL.
                }
            };
            match line {
                Ok(Some(l)) => match serde_json::from_str::<WorkerEvent>(&l) {
                    Ok(ev) => {
                        ended |=
                            matches!(ev, WorkerEvent::Done { .. } | WorkerEvent::Failed { .. });
                        match &ev {
                            WorkerEvent::Pausing {
                                resume_after_us, ..
                            } => {
                                let rx = writes.subscribe();
                                let seen = *rx.borrow();
                                pause = Some(Box::pin(pause_over(
                                    tokio::time::Instant::now(),
                                    Duration::from_micros(*resume_after_us),
                                    longest,
                                    rx,
                                    seen,
                                )));
                            }
                            WorkerEvent::Op(op)
                                if op.f == OpKind::Write && op.outcome == OpOutcome::Ok =>
                            {
                                writes.send_modify(|n| *n += 1);
                            }
                            _ => {}
                        }
                        let _ = events.send((mode, ev));
                    }
                    Err(e) => {
                        let _ = events.send((
                            mode,
                            WorkerEvent::Failed {
                                worker,
                                message: format!("unreadable event {l:?}: {e}"),
                            },
                        ));
                        ended = true;
                    }
                },
                Ok(None) | Err(_) => break,
            }
        }
        guarded.alive.store(false, Ordering::SeqCst);
        let status = tokio::time::timeout(Duration::from_secs(5), guarded.child.wait()).await;
        if !ended {
            let _ = events.send((
                mode,
                WorkerEvent::Failed {
                    worker,
                    message: format!("worker process ended without a last event ({status:?})"),
                },
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    const LENGTH: Duration = Duration::from_millis(30);
    const LONGEST: Duration = Duration::from_millis(600);

    /// How long a pause announced now lasts when `write_after` (if any) a rival writes.
    async fn lasts(write_after: Option<Duration>) -> Duration {
        let writes = watch::Sender::new(5_u64);
        let from = Instant::now();
        let over = pause_over(from, LENGTH, LONGEST, writes.subscribe(), 5);
        let rival = async {
            if let Some(after) = write_after {
                tokio::time::sleep(after).await;
                writes.send_modify(|n| *n += 1);
            }
        };
        futures::future::join(over, rival).await;
        from.elapsed()
    }

    #[tokio::test]
    async fn a_pause_lasts_its_length_then_until_a_rival_wrote() {
        // No rival write: held to the longest.
        assert!(lasts(None).await >= LONGEST);
        // A write during the drawn length: the length is still served.
        let early = lasts(Some(Duration::from_millis(5))).await;
        assert!(early >= LENGTH && early < LONGEST, "{early:?}");
        // A write after it: resumed on the write, well before the longest.
        let late = lasts(Some(Duration::from_millis(120))).await;
        assert!(
            late >= Duration::from_millis(120) && late < LONGEST,
            "{late:?}"
        );
    }
}
