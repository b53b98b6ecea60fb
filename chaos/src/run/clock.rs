//! One clock for every process of a run: `CLOCK_MONOTONIC`, as offsets from the scenario's
//! start.
//!
//! Worker processes (see [`super::worker_proc`]) and the runner record times on their own
//! tokio `Instant`s, which cannot be compared across processes. Each process reads
//! `CLOCK_MONOTONIC` once on each side of an `Instant` (again, if a preemption widened the
//! bracket) and converts from then on; the runner passes
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

/// Tries at pairing an `Instant` with `CLOCK_MONOTONIC` before taking the tightest seen.
const PAIRING_TRIES: u32 = 1_000;

/// A pairing this tight is taken at once: its error (half of it) is far below the gaps
/// between one holder's end and the next one's grant (a round trip at least).
const TIGHT_PAIRING_NS: u64 = 2_000;

/// An `Instant` and the `CLOCK_MONOTONIC` reading (from `mono`) it stands for, and the
/// width of the bracket around it: the reading is the middle of one taken just before and
/// one just after the `Instant`, so it is off by at most half the width.
///
/// One reading after the `Instant` is off by however long the thread was preempted between
/// the two, and every time this process records is off by as much: on a loaded machine a
/// millisecond or more, enough to make one holder's end and the next one's grant, recorded
/// by two processes, overlap. A wide bracket shows the preemption, so it is tried again.
fn pair(mut mono: impl FnMut() -> u64) -> (Instant, u64, u64) {
    let mut best: Option<(Instant, u64, u64)> = None;
    for _ in 0..PAIRING_TRIES {
        let before = mono();
        let instant = Instant::now();
        let after = mono();
        let width = after.saturating_sub(before);
        if best.is_none_or(|(_, _, w)| width < w) {
            best = Some((instant, before.saturating_add(width / 2), width));
        }
        if width <= TIGHT_PAIRING_NS {
            break;
        }
    }
    best.unwrap_or_else(|| (Instant::now(), mono(), u64::MAX))
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
        let (base_instant, base_ns, _) = pair(monotonic_ns);
        ScenarioClock {
            base_instant,
            base_ns,
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

    #[test]
    fn a_pairing_preempted_between_its_reads_is_taken_again() {
        // The first try's reading after the `Instant` comes 5 ms late, as if the thread
        // had been preempted right before it; a clock built on that reading would put
        // every time of its process 5 ms (here: 2.5 ms) late.
        const PREEMPTED_NS: u64 = 5_000_000;
        let mut reads = 0;
        let mono = || {
            reads += 1;
            monotonic_ns() + if reads == 2 { PREEMPTED_NS } else { 0 }
        };
        let (instant, base_ns, width) = pair(mono);
        assert!(reads > 2, "the preempted try was not taken again");
        assert!(
            width < PREEMPTED_NS,
            "kept the preempted try ({width} ns wide)"
        );
        // Against the real clock: `elapsed` is read between `before` and `after`, and the
        // pairing is off by at most half its width.
        let before = monotonic_ns();
        let elapsed = instant.elapsed();
        let after = monotonic_ns();
        let now_ns = base_ns + u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        assert!(
            now_ns + width / 2 >= before && now_ns <= after + width / 2,
            "pairing off: {now_ns} ns against a real reading in [{before}, {after}] (width {width} ns)"
        );
    }
}
