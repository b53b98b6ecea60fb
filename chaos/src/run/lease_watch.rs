//! A renewed section's watch of its lease: `status()` read every
//! [`RENEWAL_WATCH_TICK_MS`] beside the section, for what the checks need of the renewer —
//! the validities it announced (none may shrink while held,
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
    /// The latest end announced so far.
    latest: Instant,
    /// The largest cut seen: how much earlier than `latest` a later announcement ended.
    worst: Option<Duration>,
}

impl AnnouncedValidity {
    /// Starting from the lease's validity when it was handed to the renewer.
    fn new(at_start: Instant) -> Self {
        AnnouncedValidity {
            latest: at_start,
            worst: None,
        }
    }

    /// What `status()` says now (`None`: lost — the end of announcements, not a cut).
    fn saw(&mut self, held_until: Option<Instant>) {
        let Some(end) = held_until else { return };
        if end < self.latest {
            let cut = self.latest - end;
            self.worst = Some(self.worst.map_or(cut, |w| w.max(cut)));
        }
        self.latest = self.latest.max(end);
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
        LeaseWatch {
            announced: AnnouncedValidity::new(valid_until),
            loss: None,
            stalls: Vec::new(),
            last: Instant::now(),
        }
    }

    /// `status()` as read at `now`.
    pub fn saw(&mut self, status: LeaseStatus, now: Instant) {
        let due = Duration::from_millis(RENEWAL_WATCH_TICK_MS) + LATE_TICK;
        if now.saturating_duration_since(self.last) > due {
            self.stalls.push((self.last, now));
        }
        self.last = self.last.max(now);
        match status {
            LeaseStatus::Held { valid_until } => self.announced.saw(Some(valid_until)),
            LeaseStatus::Lost(reason) => {
                self.announced.saw(None);
                if self.loss.is_none() {
                    let heard = if reason == LossReason::Expired {
                        Heard::Expired
                    } else {
                        Heard::Told
                    };
                    self.loss = Some((heard, now));
                }
            }
            // A status this rig does not know: neither a validity nor a loss.
            _ => {}
        }
    }

    /// The largest cut of an announced validity while held.
    pub fn worst_cut(&self) -> Option<Duration> {
        self.announced.worst
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
        let mut a = AnnouncedValidity::new(at(400));
        for seen in [Some(at(400)), Some(at(450)), None, Some(at(500))] {
            a.saw(seen);
        }
        assert_eq!(a.worst, None);
        // Renewed with the short TTL at once: 400 announced, then 260, then 300.
        let mut a = AnnouncedValidity::new(at(400));
        for seen in [Some(at(260)), Some(at(300)), Some(at(520))] {
            a.saw(seen);
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
}
