//! One clock for every process of a run: `CLOCK_MONOTONIC`, as offsets from the scenario's
//! start.
//!
//! Worker processes (see [`super::worker_proc`]) and the runner record times on their own
//! tokio `Instant`s, which cannot be compared across processes. Each process reads
//! `CLOCK_MONOTONIC` once next to an `Instant` and converts from then on; the runner passes
//! the scenario's start as raw `CLOCK_MONOTONIC` nanoseconds, so every event of every
//! process lands on the same timeline as the faults.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use tokio::time::Instant;

/// `CLOCK_MONOTONIC` now, in nanoseconds (0 if the clock cannot be read, which Linux never
/// does for this clock).
pub fn monotonic_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => {
            let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
            secs.saturating_mul(1_000_000_000).saturating_add(nanos)
        }
        Err(_) => 0,
    }
}

/// Converts this process's `Instant`s to offsets from a scenario start given in
/// `CLOCK_MONOTONIC` nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct ScenarioClock {
    base_instant: Instant,
    base_ns: u64,
    start_ns: u64,
}

impl ScenarioClock {
    /// A clock whose zero is `start_ns` (`CLOCK_MONOTONIC`, possibly read by another process).
    pub fn new(start_ns: u64) -> Self {
        let base_instant = Instant::now();
        ScenarioClock {
            base_instant,
            base_ns: monotonic_ns(),
            start_ns,
        }
    }

    /// A clock whose zero is now.
    pub fn starting_now() -> Self {
        let c = ScenarioClock::new(0);
        ScenarioClock {
            start_ns: c.base_ns,
            ..c
        }
    }

    /// The zero, in `CLOCK_MONOTONIC` nanoseconds (pass it to worker processes).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// `t` as time since the scenario start (zero for earlier instants).
    pub fn offset(&self, t: Instant) -> Duration {
        let ns = if t >= self.base_instant {
            self.base_ns.saturating_add(
                u64::try_from((t - self.base_instant).as_nanos()).unwrap_or(u64::MAX),
            )
        } else {
            self.base_ns.saturating_sub(
                u64::try_from((self.base_instant - t).as_nanos()).unwrap_or(u64::MAX),
            )
        };
        Duration::from_nanos(ns.saturating_sub(self.start_ns))
    }

    /// `t` as microseconds since the scenario start.
    pub fn us(&self, t: Instant) -> u64 {
        u64::try_from(self.offset(t).as_micros()).unwrap_or(u64::MAX)
    }

    /// The instant that is `offset` after the scenario start.
    pub fn instant_at(&self, offset: Duration) -> Instant {
        let target = self
            .start_ns
            .saturating_add(u64::try_from(offset.as_nanos()).unwrap_or(u64::MAX));
        if target >= self.base_ns {
            self.base_instant + Duration::from_nanos(target - self.base_ns)
        } else {
            self.base_instant
                .checked_sub(Duration::from_nanos(self.base_ns - target))
                .unwrap_or(self.base_instant)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clocks_with_one_start_agree() {
        // Each clock pairs an `Instant` with a `CLOCK_MONOTONIC` reading taken just after
        // it; the two can disagree by at most the time both pairings took, which is
        // measured here rather than assumed (a preempted test takes longer).
        let before = std::time::Instant::now();
        let a = ScenarioClock::starting_now();
        let b = ScenarioClock::new(a.start_ns());
        let took = before.elapsed();
        let now = Instant::now();
        let (x, y) = (a.offset(now), b.offset(now));
        let diff = x.abs_diff(y);
        assert!(diff <= took, "{x:?} vs {y:?}, clocks made within {took:?}");
        let at = a.instant_at(Duration::from_secs(1));
        let off = a.offset(at);
        assert!(off >= Duration::from_millis(999) && off <= Duration::from_millis(1001));
    }
}
