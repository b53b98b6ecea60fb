//! A renewed section's watch of its lease: `status()` read every
//! [`RENEWAL_WATCH_TICK_MS`] beside the section, and by the holder at its check before
//! the write, for what the checks need of the renewer — the validities it announced, each
//! with when it was first seen (recorded as `renew` operations: writes are judged stale,
//! and holding windows end, against them, [`crate::checker::announced`]; none may shrink
//! while held,
//! [`ModeReport::validity_cuts`](crate::report::ModeReport::validity_cuts)), the loss it
//! reported and when ([`crate::checker::renewal`]), and the ticks that came late because
//! the worker itself was held off the CPU (they excuse a late hearing).

use std::time::Duration;

use fenced_redlock::{LeaseStatus, LossReason};
use tokio::time::Instant;

use super::clock::ScenarioClock;
use crate::checker::renewal::Heard;
use crate::judge::events::RenewalSeen;
use crate::report::model::RENEWAL_WATCH_TICK_MS;

/// A gap between two reads this much longer than the tick means the worker stalled.
pub const LATE_TICK: Duration = Duration::from_millis(20);

/// The validities a renewer announced, as a renewed section sees them.
#[derive(Debug)]
struct AnnouncedValidity {
    /// The end when the renewer started.
    start: Instant,
    /// The latest end announced so far.
    latest: Instant,
    /// The end announced last (a cut is announced too).
    last: Instant,
    /// When `status()` was last looked at.
    looked: Instant,
    /// The largest cut seen: how much earlier than `latest` a later announcement ended.
    worst: Option<Duration>,
    /// Each change of the announced end: not yet seen at the first instant, seen at the
    /// second, the end announced.
    changes: Vec<(Instant, Instant, Instant)>,
}

impl AnnouncedValidity {
    /// Starting from the lease's validity when it was handed to the renewer, at `now`.
    fn new(at_start: Instant, now: Instant) -> Self {
        AnnouncedValidity {
            start: at_start,
            latest: at_start,
            last: at_start,
            looked: now,
            worst: None,
            changes: Vec::new(),
        }
    }

    /// What `status()` says at `now` (`None`: lost — the end of announcements, not a
    /// cut). Returns the end announced, when it is a new one.
    fn saw(&mut self, held_until: Option<Instant>, now: Instant) -> Option<Instant> {
        let looked = self.looked;
        self.looked = looked.max(now);
        let end = held_until?;
        if end < self.latest {
            let cut = self.latest - end;
            self.worst = Some(self.worst.map_or(cut, |w| w.max(cut)));
        }
        self.latest = self.latest.max(end);
        if end == self.last {
            return None;
        }
        self.last = end;
        self.changes.push((looked, now, end));
        Some(end)
    }
}

/// The watch of one renewed lease.
#[derive(Debug)]
pub struct LeaseWatch {
    announced: AnnouncedValidity,
    loss: Option<(Heard, Instant)>,
    stalls: Vec<(Instant, Instant)>,
    last: Instant,
}

impl LeaseWatch {
    /// A watch of a lease whose validity is `valid_until` when its renewer starts.
    pub fn new(valid_until: Instant) -> Self {
        let now = Instant::now();
        LeaseWatch {
            announced: AnnouncedValidity::new(valid_until, now),
            loss: None,
            stalls: Vec::new(),
            last: now,
        }
    }

    /// `status()` as read at `now` by the watch's tick (a tick that came late is a stall).
    /// Returns the end of validity announced, when it is a new one.
    pub fn saw(&mut self, status: LeaseStatus, now: Instant) -> Option<Instant> {
        let due = Duration::from_millis(RENEWAL_WATCH_TICK_MS) + LATE_TICK;
        if now.saturating_duration_since(self.last) > due {
            self.stalls.push((self.last, now));
        }
        self.last = self.last.max(now);
        self.look(status, now)
    }

    /// `status()` as read at `now` by the holder (its check before the write): what it
    /// announced, and a loss. Returns the end of validity announced, when it is a new one.
    pub fn look(&mut self, status: LeaseStatus, now: Instant) -> Option<Instant> {
        match status {
            LeaseStatus::Held { valid_until } => self.announced.saw(Some(valid_until), now),
            LeaseStatus::Lost(reason) => {
                self.announced.saw(None, now);
                if self.loss.is_none() {
                    let heard = if reason == LossReason::Expired {
                        Heard::Expired
                    } else {
                        Heard::Told
                    };
                    self.loss = Some((heard, now));
                }
                None
            }
            // A status this rig does not know: neither a validity nor a loss.
            _ => None,
        }
    }

    /// The largest cut of an announced validity while held.
    pub fn worst_cut(&self) -> Option<Duration> {
        self.announced.worst
    }

    /// The validity announced last before the earlier of `done` (the section's end) and
    /// the loss, if one was heard: where a renewed grant stops holding, unless its section
    /// ended first — what the judge finds from the `renew` operations
    /// ([`crate::checker::announced::Announced::holding_end`]).
    pub fn last_announced(&self, done: Instant) -> Instant {
        let until = self.loss.map_or(done, |(_, at)| at.min(done));
        self.announced
            .changes
            .iter()
            .rev()
            .find(|(_, seen, _)| *seen <= until)
            .map_or(self.announced.start, |c| c.2)
    }

    /// The `renew` operations of the section: one per change of the announced validity,
    /// invoked at the look before it was seen, complete when it was.
    pub fn renewals(&self, clock: ScenarioClock) -> impl Iterator<Item = (u64, u64, u64)> {
        self.announced
            .changes
            .iter()
            .map(move |&(before, seen, end)| (clock.us(before), clock.us(seen), clock.us(end)))
    }

    /// What the grant's event carries.
    pub fn seen(&self, clock: ScenarioClock) -> RenewalSeen {
        RenewalSeen {
            loss: self.loss.map(|(h, at)| (h, clock.us(at))),
            stalls_us: self
                .stalls
                .iter()
                .map(|&(a, b)| (clock.us(a), clock.us(b)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shorter_announcement_while_held_is_a_cut_and_a_loss_is_not() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut a = AnnouncedValidity::new(at(400), t0);
        for seen in [Some(at(400)), Some(at(450)), None, Some(at(500))] {
            a.saw(seen, t0);
        }
        assert_eq!(a.worst, None);
        // Renewed with the short TTL at once: 400 announced, then 260, then 300.
        let mut a = AnnouncedValidity::new(at(400), t0);
        for seen in [Some(at(260)), Some(at(300)), Some(at(520))] {
            a.saw(seen, t0);
        }
        assert_eq!(a.worst, Some(Duration::from_millis(140)));
    }

    #[test]
    fn the_first_loss_is_kept_with_its_kind_and_late_ticks_are_stalls() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = LeaseWatch::new(at(200));
        w.last = t0;
        w.saw(
            LeaseStatus::Held {
                valid_until: at(250),
            },
            at(5),
        );
        w.saw(
            LeaseStatus::Held {
                valid_until: at(250),
            },
            at(60),
        );
        w.saw(LeaseStatus::Lost(LossReason::Gone), at(65));
        w.saw(LeaseStatus::Lost(LossReason::Expired), at(70));
        assert_eq!(w.loss, Some((Heard::Told, at(65))));
        assert_eq!(w.stalls, vec![(at(5), at(60))]);
        assert_eq!(w.worst_cut(), None);
        let mut w = LeaseWatch::new(at(200));
        w.saw(LeaseStatus::Lost(LossReason::Expired), at(1));
        assert_eq!(w.loss, Some((Heard::Expired, at(1))));
    }

    #[test]
    fn each_new_announcement_is_a_renewal_and_the_window_ends_at_the_last_before_the_loss() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let held = |ms: u64| LeaseStatus::Held {
            valid_until: at(ms),
        };
        let mut w = LeaseWatch::new(at(200));
        w.last = t0;
        w.announced.looked = t0;
        // Seen at 5 (no change), renewed between 60 and 65 (to 265), the holder looked at
        // 100 (no change), lost (Gone) at 150, later the clock's Expired.
        assert_eq!(w.saw(held(200), at(5)), None);
        assert_eq!(w.saw(held(200), at(60)), None);
        assert_eq!(w.saw(held(265), at(65)), Some(at(265)));
        assert_eq!(w.look(held(265), at(100)), None);
        w.saw(LeaseStatus::Lost(LossReason::Gone), at(150));
        w.saw(LeaseStatus::Lost(LossReason::Expired), at(270));
        let clock = ScenarioClock::starting_now();
        let renewals: Vec<_> = w.renewals(clock).collect();
        assert_eq!(
            renewals,
            [(clock.us(at(60)), clock.us(at(65)), clock.us(at(265)))]
        );
        // Not the validity from auto_renew's start: the one announced before the loss.
        assert_eq!(w.last_announced(at(400)), at(265));
        assert_eq!(w.last_announced(at(64)), at(200));
        // Lost before any renewal: the first validity.
        let mut w = LeaseWatch::new(at(200));
        w.saw(LeaseStatus::Lost(LossReason::Gone), at(50));
        assert_eq!(w.last_announced(at(400)), at(200));
    }
}
