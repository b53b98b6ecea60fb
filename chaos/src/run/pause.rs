//! Client pauses inside critical sections (`client-pause`): a worker process stops itself
//! while it holds a lease, and the runner resumes it later.
//!
//! Why the worker decides and the runner resumes: a pause only hurts when it lands between
//! the last moment a holder looked at its lease and its write, a window of microseconds.
//! Fault schedules on a timeline almost never hit it, so the worker draws (seeded) right
//! after its validity check whether to pause, prints a [`WorkerEvent::Pausing`] line with
//! the drawn length and sends itself `SIGSTOP`. A stopped process cannot wake itself, so the
//! runner, reading that line, sends `SIGCONT` once the length has passed *and* a rival of
//! the same mode has written since the stop, or [`RIVAL_WAIT_TTLS`] × the TTL after it,
//! whichever comes first (see [`super::worker_proc`]), and on every exit path before that.
//! Waiting for the rival is the adversary's schedule — the pause that loses an update is the
//! one during which someone else wrote — and it makes the loss a matter of the pause
//! happening, not of how many sections a slow machine fits into a drawn length.
//!
//! Where a mode's workers share one client (`Clients::Shared`, in-process tasks) a pause
//! is the task's own sleep instead ([`PauseBy::Sleep`]): one task of a process stuck (a
//! slow call, a blocked await) while its siblings, on the same client, go on waiting for
//! the lock it holds — they must not wait past its validity.
//!
//! [`WorkerEvent::Pausing`]: crate::judge::events::WorkerEvent::Pausing

use std::time::Duration;

use rand::Rng;

/// Pause lengths, as multiples of the TTL: always beyond the lease, so the paused write is
/// stale, and short enough for tens of pauses per minute.
pub const PAUSE_TTLS: (f64, f64) = (1.5, 3.0);

/// The longest a stopped worker process is kept stopped waiting for a rival's write, as a
/// multiple of the TTL (4 s at 200 ms): a rival that waits for the lock gets it one TTL
/// after the stop and writes within a few round trips even on a slow machine; a mode none
/// of whose workers can write (a fault that stops them all) does not keep one stopped for
/// long.
pub const RIVAL_WAIT_TTLS: f64 = 20.0;

/// How often and how long a worker pauses while holding a lease.
///
/// Pauses come as a seeded renewal process rather than a coin per section: the first
/// after 1 to `1/rate` sections, then every `0.5/rate` to `1.5/rate` sections (mean
/// `1/rate`). The share of paused sections is `rate` either way, but every worker that
/// completes `1/rate` sections is sure to pause: a short run cannot miss the fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PausePlan {
    /// Share of sections that pause, in `(0, 1]`.
    pub rate: f64,
    /// Shortest pause.
    pub min: Duration,
    /// Longest pause.
    pub max: Duration,
    /// How the worker pauses.
    pub by: PauseBy,
}

/// How a worker pauses: the whole process, or only its own task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseBy {
    /// The worker process stops itself (`SIGSTOP`) and the runner resumes it.
    Signal,
    /// The worker's task sleeps; the rest of its process (its siblings on the same client,
    /// the client's connections) runs on.
    Sleep,
}

impl PauseBy {
    /// Worker processes stop themselves; in-process workers (tasks) sleep.
    pub fn for_workers(processes: bool) -> Self {
        if processes {
            PauseBy::Signal
        } else {
            PauseBy::Sleep
        }
    }

    /// The pause's fault kind in reports, and what the worker did. A task's sleep stops no
    /// clean-up, so it is no leak exemption, unlike a process's stop.
    pub fn fault(self) -> (&'static str, &'static str) {
        match self {
            PauseBy::Signal => (
                "client-pause",
                "stopped itself holding a lease, resumed by the runner",
            ),
            PauseBy::Sleep => (
                "task-pause",
                "slept holding a lease while its siblings went on",
            ),
        }
    }
}

impl PausePlan {
    /// Pauses with probability `rate` lasting [`PAUSE_TTLS`] × `ttl`, taken `by`.
    pub fn for_ttl(rate: f64, ttl: Duration, by: PauseBy) -> Self {
        PausePlan {
            rate: rate.clamp(0.0, 1.0),
            min: ttl.mul_f64(PAUSE_TTLS.0),
            max: ttl.mul_f64(PAUSE_TTLS.1),
            by,
        }
    }

    /// Mean sections between pauses (`1/rate`, at least 1).
    fn mean_gap(&self) -> u32 {
        if self.rate <= 0.0 {
            return u32::MAX;
        }
        (1.0 / self.rate.min(1.0))
            .round()
            .clamp(1.0, f64::from(u32::MAX)) as u32
    }

    /// The pauses of one worker, drawn from `rng`.
    pub fn start(&self, rng: &mut impl Rng) -> Pauses {
        Pauses {
            plan: *self,
            until_next: rng.random_range(1..=self.mean_gap()),
        }
    }

    /// A pause's length.
    fn length(&self, rng: &mut impl Rng) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let lo = u64::try_from(self.min.as_micros()).unwrap_or(u64::MAX);
        let hi = u64::try_from(self.max.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rng.random_range(lo..=hi))
    }
}

/// One worker's pauses (see [`PausePlan`]).
#[derive(Debug, Clone)]
pub struct Pauses {
    plan: PausePlan,
    until_next: u32,
}

impl Pauses {
    /// Called once per section: whether it pauses, and for how long.
    pub fn next_section(&mut self, rng: &mut impl Rng) -> Option<Duration> {
        if self.plan.rate <= 0.0 {
            return None;
        }
        self.until_next = self.until_next.saturating_sub(1);
        if self.until_next > 0 {
            return None;
        }
        let mean = self.plan.mean_gap();
        self.until_next = rng.random_range((mean / 2).max(1)..=(mean + mean / 2).max(1));
        Some(self.plan.length(rng))
    }
}

/// Whether process `pid` is stopped (state `T` in `/proc/PID/stat`). `false` when it cannot
/// be read (gone, or not Linux).
pub fn is_stopped(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name is in parentheses and may hold spaces; the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn pauses_outlast_the_lease_follow_the_rate_and_never_miss() {
        let ttl = Duration::from_millis(200);
        let plan = PausePlan::for_ttl(0.1, ttl, PauseBy::Signal);
        for seed in 0..50 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut p = plan.start(&mut rng);
            let at: Vec<(usize, Duration)> = (0..4000)
                .filter_map(|i| p.next_section(&mut rng).map(|d| (i, d)))
                .collect();
            assert!((300..500).contains(&at.len()), "{}", at.len());
            // The first pause within 1/rate sections, none further apart than 1.5/rate.
            assert!(at[0].0 < 10, "{at:?}");
            assert!(at.windows(2).all(|w| w[1].0 - w[0].0 <= 15));
            assert!(at.iter().all(|(_, d)| {
                *d >= Duration::from_millis(300) && *d <= Duration::from_millis(600)
            }));
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut never = PausePlan::for_ttl(0.0, ttl, PauseBy::Signal).start(&mut rng);
        assert!((0..1000).all(|_| never.next_section(&mut rng).is_none()));
    }

    #[test]
    fn a_running_process_is_not_stopped() {
        assert!(!is_stopped(std::process::id() as i32));
        assert!(!is_stopped(i32::MAX));
    }
}
