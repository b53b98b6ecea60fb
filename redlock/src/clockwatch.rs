//! The clock-jump guard: a node whose clock leapt forward does not vote until every lease
//! granted before the leap has ended.
//!
//! # Why
//! A server expires keys on its own clock. If that clock jumps forward by more than the
//! drift allowance (an operator setting the date, an NTP step, a VM restored from a
//! snapshot), every key it holds expires early, and a second client can gather a majority
//! while the first holder's lease is still valid: Kleppmann's clock-jump counterexample,
//! which the rig's `clock-jump-majority` shows. Validity arithmetic cannot allow for a
//! jump of unknown size; noticing the jump can.
//!
//! # How
//! With the guard on, every vote (acquire, fence write, extend) carries a `TIME` pipelined
//! behind it on the same connection: no extra round trip, one more reply of two short
//! strings. The server ran `TIME` after our command, somewhere between the moment we sent
//! the pair and the moment its reply was in, so the node's offset from our monotonic
//! clock lies in `[server − received, server − sent]` ([`Sample::offset`]). Between two
//! samples the offset may move by the drift the lock already allows (the drift factor
//! times the time between them) plus a tolerance — the drift allowance of the client's
//! TTL ([`Settings::drift`](crate::config)), the error the validity already absorbs. A
//! sample whose whole interval lies further ahead than that is a forward jump
//! ([`Step::Forward`]): the node is quarantined like a node that restarted (see
//! `quarantine`), from now for the quarantine's length, and its earlier votes are void —
//! including the yes in the very reply that showed the jump, since the `TIME` ran after
//! the command.
//!
//! A backward jump makes keys live longer, which delays the next holder but breaks no
//! lease: it is logged and counted, and not quarantined.
//!
//! # What it cannot see
//! - A jump that happened before this client first sampled the node (a client started
//!   after the jump has nothing to compare with).
//! - A jump smaller than the tolerance plus the drift allowed since the previous sample
//!   plus the two round trips' uncertainty: on a node sampled every few milliseconds that
//!   is little more than the drift allowance; on one sampled once a minute, the drift
//!   factor times a minute.
//! - A clock that runs fast in small steps, each under that bound: that is a clock rate
//!   outside the drift factor, which every Redlock assumes away.

use std::time::Duration;

use tokio::time::Instant;

/// One `TIME` reading: when the pair was sent, what the server said, when its reply was
/// in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) sent: Instant,
    /// The server's clock: microseconds since the Unix epoch.
    pub(crate) server_us: i128,
    pub(crate) received: Instant,
}

impl Sample {
    /// `TIME`'s reply (seconds, microseconds) between `sent` and `received`; `None` for a
    /// reply no clock gives.
    pub(crate) fn new(
        sent: Instant,
        (secs, micros): (u64, u64),
        received: Instant,
    ) -> Option<Self> {
        if micros >= 1_000_000 {
            return None;
        }
        let server_us = i128::from(secs)
            .checked_mul(1_000_000)?
            .checked_add(i128::from(micros))?;
        Some(Sample {
            sent,
            server_us,
            received,
        })
    }

    /// The node's offset from our clock, in microseconds counted from `base`: the lowest
    /// and highest it can be.
    fn offset(&self, base: Instant) -> Option<(i128, i128)> {
        let lo = self
            .server_us
            .checked_sub(micros_since(base, self.received)?)?;
        let hi = self.server_us.checked_sub(micros_since(base, self.sent)?)?;
        Some((lo.min(hi), lo.max(hi)))
    }
}

/// Signed microseconds from `base` to `t`.
fn micros_since(base: Instant, t: Instant) -> Option<i128> {
    if t >= base {
        i128::try_from(t.saturating_duration_since(base).as_micros()).ok()
    } else {
        i128::try_from(base.saturating_duration_since(t).as_micros())
            .ok()?
            .checked_neg()
    }
}

/// What a sample says of the node's clock since the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing to compare with yet.
    First,
    /// Within the allowance.
    Steady,
    /// Ahead by at least this much more than allowed.
    Forward(Duration),
    /// Behind by at least this much more than allowed.
    Backward(Duration),
}

/// How far a node's offset may move between two samples: `rate_ppm` millionths of the
/// time between them (rounded up), plus `tolerance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowance {
    pub(crate) tolerance: Duration,
    pub(crate) rate_ppm: u32,
}

impl Allowance {
    /// The allowance of a lock with drift allowance `drift` and drift factor `factor`.
    pub(crate) fn of(drift: Duration, factor: f64) -> Self {
        // A factor is below 1 (checked when the settings were built): at most a million.
        let ppm = (factor.clamp(0.0, 1.0) * 1e6).ceil();
        Allowance {
            tolerance: drift,
            rate_ppm: if ppm >= 1e6 { 1_000_000 } else { ppm as u32 },
        }
    }

    /// In microseconds.
    fn over(&self, gap: Duration) -> i128 {
        let gap = i128::try_from(gap.as_micros()).unwrap_or(i128::MAX);
        let drifted = gap
            .saturating_mul(i128::from(self.rate_ppm))
            .saturating_add(999_999)
            .checked_div(1_000_000)
            .unwrap_or(i128::MAX);
        i128::try_from(self.tolerance.as_micros())
            .unwrap_or(i128::MAX)
            .saturating_add(drifted)
    }
}

/// A node's clock as this client has seen it: the last sample's offset interval.
#[derive(Debug, Default)]
pub(crate) struct ClockWatch {
    base: Option<Instant>,
    /// Lowest and highest offset of the last sample, and when it was in.
    last: Option<(i128, i128, Instant)>,
}

impl ClockWatch {
    /// Takes `sample` in and says how the clock moved since the previous one.
    pub(crate) fn observe(&mut self, sample: &Sample, allowance: Allowance) -> Step {
        let base = *self.base.get_or_insert(sample.sent);
        let Some((lo, hi)) = sample.offset(base) else {
            return Step::Steady;
        };
        let previous = self.last.replace((lo, hi, sample.received));
        let Some((lo0, hi0, at0)) = previous else {
            return Step::First;
        };
        let gap = if sample.received >= at0 {
            sample.received.saturating_duration_since(at0)
        } else {
            at0.saturating_duration_since(sample.received)
        };
        let allowed = allowance.over(gap);
        // The least the clock can have moved each way, whatever the round trips hid.
        let ahead = lo.saturating_sub(hi0).saturating_sub(allowed);
        let behind = lo0.saturating_sub(hi).saturating_sub(allowed);
        let micros = |m: i128| Duration::from_micros(u64::try_from(m).unwrap_or(u64::MAX));
        if ahead > 0 {
            Step::Forward(micros(ahead))
        } else if behind > 0 {
            Step::Backward(micros(behind))
        } else {
            Step::Steady
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;

    /// A sample whose round trip took `rtt_us`, sent `at_us` after `t0`, read by a server
    /// whose clock says `server_us` when it runs `TIME`.
    fn sample(t0: Instant, at_us: u64, rtt_us: u64, server_us: u64) -> Sample {
        let sent = t0 + Duration::from_micros(at_us);
        Sample::new(
            sent,
            (server_us / SECOND, server_us % SECOND),
            sent + Duration::from_micros(rtt_us),
        )
        .unwrap()
    }

    fn allowance() -> Allowance {
        Allowance {
            tolerance: Duration::from_millis(4),
            rate_ppm: 10_000,
        }
    }

    #[test]
    fn a_clock_at_our_pace_is_steady_whatever_the_round_trips() {
        let t0 = Instant::now();
        let mut w = ClockWatch::default();
        let epoch = 1_800_000_000 * SECOND;
        assert_eq!(
            w.observe(&sample(t0, 0, 200, epoch + 100), allowance()),
            Step::First
        );
        // 10 s later, the server ran TIME at some point of a 30 ms round trip.
        for (at, rtt, run) in [(10 * SECOND, 30_000, 29_000), (20 * SECOND, 100, 0)] {
            let s = sample(t0, at, rtt, epoch + at + run);
            assert_eq!(w.observe(&s, allowance()), Step::Steady, "at {at}");
        }
    }

    #[test]
    fn a_forward_leap_beyond_the_allowance_is_seen_with_its_least_size() {
        let t0 = Instant::now();
        let mut w = ClockWatch::default();
        let epoch = 1_800_000_000 * SECOND;
        w.observe(&sample(t0, 0, 100, epoch + 50), allowance());
        // 100 ms later the server's clock reads 1 s further than ours.
        let leap = sample(t0, 100_000, 100, epoch + 100_050 + SECOND);
        // Least move: 1 s − what the round trips hide (the server ran TIME mid-way through
        // each: 50 µs + 50 µs); allowed: 4 ms + 1 % of the 100 ms between the replies.
        assert_eq!(
            w.observe(&leap, allowance()),
            Step::Forward(Duration::from_micros(1_000_000 - 100 - 5_000))
        );
        // The next sample compares with the leapt clock: steady again.
        let after = sample(t0, 200_000, 100, epoch + 200_050 + SECOND);
        assert_eq!(w.observe(&after, allowance()), Step::Steady);
    }

    #[test]
    fn a_leap_within_the_allowance_or_hidden_by_a_slow_reply_is_not_a_jump() {
        let t0 = Instant::now();
        let epoch = 1_800_000_000 * SECOND;
        let mut w = ClockWatch::default();
        w.observe(&sample(t0, 0, 100, epoch), allowance());
        // +3 ms after 100 ms: under 4 ms + 1 ms.
        let s = sample(t0, 100_000, 100, epoch + 103_000);
        assert_eq!(w.observe(&s, allowance()), Step::Steady);
        // 20 ms past the send, but the reply took 50 ms: a steady server may have run TIME
        // 20 ms in.
        let mut w = ClockWatch::default();
        w.observe(&sample(t0, 0, 100, epoch), allowance());
        let s = sample(t0, 100_000, 50_000, epoch + 100_000 + 20_000);
        assert_eq!(w.observe(&s, allowance()), Step::Steady);
    }

    #[test]
    fn the_drift_rate_allows_more_after_a_long_silence() {
        let t0 = Instant::now();
        let epoch = 1_800_000_000 * SECOND;
        let mut w = ClockWatch::default();
        w.observe(&sample(t0, 0, 100, epoch), allowance());
        // 60 s later, 500 ms ahead: under 1 % of 60 s + 4 ms.
        let s = sample(t0, 60 * SECOND, 100, epoch + 60 * SECOND + 500_000);
        assert_eq!(w.observe(&s, allowance()), Step::Steady);
    }

    #[test]
    fn a_backward_leap_is_told_apart() {
        let t0 = Instant::now();
        let epoch = 1_800_000_000 * SECOND;
        let mut w = ClockWatch::default();
        w.observe(&sample(t0, 0, 100, epoch + 2 * SECOND), allowance());
        let s = sample(t0, 100_000, 100, epoch + 100_000);
        assert!(
            matches!(w.observe(&s, allowance()), Step::Backward(d) if d > Duration::from_millis(1_900))
        );
    }

    #[test]
    fn samples_out_of_order_or_before_the_base_do_not_panic() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let epoch = 1_800_000_000 * SECOND;
        let mut w = ClockWatch::default();
        w.observe(
            &sample(t0, 5 * SECOND, 100, epoch + 5 * SECOND),
            allowance(),
        );
        let early = sample(t0, 0, 100, epoch);
        assert_eq!(w.observe(&early, allowance()), Step::Steady);
        assert_eq!(Sample::new(t0, (1, 1_000_000), t0), None);
        assert!(Sample::new(t0, (u64::MAX, 0), t0).is_some());
    }

    #[test]
    fn the_allowance_follows_the_drift_factor() {
        let a = Allowance::of(Duration::from_millis(4), 0.01);
        assert_eq!(a.rate_ppm, 10_000);
        assert_eq!(a.over(Duration::from_millis(100)), 5_000);
        assert_eq!(Allowance::of(Duration::ZERO, 0.0).over(Duration::MAX), 0);
        assert_eq!(
            Allowance::of(Duration::MAX, 0.999_999_9).rate_ppm,
            1_000_000
        );
    }
}
