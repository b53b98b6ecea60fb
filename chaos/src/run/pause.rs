//! Client pauses inside critical sections (`client-pause`): a worker process stops itself
//! while it holds a lease, and the runner resumes it later.
//!
//! Why the worker decides and the runner resumes: a pause only hurts when it lands between
//! the last moment a holder looked at its lease and its write, a window of microseconds.
//! Fault schedules on a timeline almost never hit it, so the worker draws (seeded) right
//! after its validity check whether to pause, prints a [`WorkerEvent::Pausing`] line with
//! the drawn length and sends itself `SIGSTOP`. A stopped process cannot wake itself, so the
//! runner, reading that line, sends `SIGCONT` once the length has passed (see
//! [`super::worker_proc`]), and on every exit path before that.
//!
//! [`WorkerEvent::Pausing`]: super::chaos_workload::WorkerEvent::Pausing

use std::time::Duration;

use rand::Rng;

/// Pause lengths, as multiples of the TTL: always beyond the lease, so the paused write is
/// stale, and short enough for tens of pauses per minute.
pub const PAUSE_TTLS: (f64, f64) = (1.5, 3.0);

/// How often and how long a worker pauses while holding a lease.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PausePlan {
    /// Probability that a section pauses, in `[0, 1]`.
    pub rate: f64,
    /// Shortest pause.
    pub min: Duration,
    /// Longest pause.
    pub max: Duration,
}

impl PausePlan {
    /// Pauses with probability `rate` lasting [`PAUSE_TTLS`] × `ttl`.
    pub fn for_ttl(rate: f64, ttl: Duration) -> Self {
        PausePlan {
            rate: rate.clamp(0.0, 1.0),
            min: ttl.mul_f64(PAUSE_TTLS.0),
            max: ttl.mul_f64(PAUSE_TTLS.1),
        }
    }

    /// Whether this section pauses, and for how long.
    pub fn draw(&self, rng: &mut impl Rng) -> Option<Duration> {
        if !rng.random_bool(self.rate.clamp(0.0, 1.0)) {
            return None;
        }
        if self.max <= self.min {
            return Some(self.min);
        }
        let lo = u64::try_from(self.min.as_micros()).unwrap_or(u64::MAX);
        let hi = u64::try_from(self.max.as_micros()).unwrap_or(u64::MAX);
        Some(Duration::from_micros(rng.random_range(lo..=hi)))
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
    fn pauses_outlast_the_lease_and_follow_the_rate() {
        let ttl = Duration::from_millis(200);
        let plan = PausePlan::for_ttl(0.25, ttl);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let drawn: Vec<Duration> = (0..4000).filter_map(|_| plan.draw(&mut rng)).collect();
        assert!((800..1200).contains(&drawn.len()), "{}", drawn.len());
        assert!(
            drawn
                .iter()
                .all(|d| *d >= Duration::from_millis(300) && *d <= Duration::from_millis(600))
        );
        assert_eq!(PausePlan::for_ttl(0.0, ttl).draw(&mut rng), None);
    }

    #[test]
    fn a_running_process_is_not_stopped() {
        assert!(!is_stopped(std::process::id() as i32));
        assert!(!is_stopped(i32::MAX));
    }
}
