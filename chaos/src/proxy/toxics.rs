//! The toxics as seen by one direction of one connection.
//!
//! A proxy publishes its toxic list per stream through a `watch` channel;
//! each direction of each open connection keeps an [`ActiveToxics`] that it
//! refreshes whenever the list changes. That is what makes toxic changes
//! reach connections that are already open, as in Toxiproxy.
//!
//! Toxicity is rolled once per connection and toxic (Toxiproxy's meaning)
//! and kept across attribute updates; it is rolled again only when the
//! toxic's toxicity itself changes. Rolls, jitter and slice sizes come from
//! the direction's own RNG, seeded from the server's [`Dice`], so a server
//! started with a seed draws the same sequence for the same connections.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use tokio::time::Instant;

use super::api::{Toxic, ToxicKind};

/// The toxics of one stream of one proxy, in the order they were added.
pub(crate) type ToxicList = Arc<Vec<Toxic>>;

/// Longest wait before a `bandwidth` toxic lets a piece of a chunk through:
/// Toxiproxy sends large chunks in 100 ms slices, so a slow link trickles
/// instead of stalling and then bursting.
const BANDWIDTH_SLICE: Duration = Duration::from_millis(100);

/// The server's source of randomness (Toxiproxy's `-seed`): every direction
/// of every connection seeds its own RNG from it, in connection order.
#[derive(Debug, Clone)]
pub(crate) struct Dice(Arc<Mutex<StdRng>>);

impl Dice {
    /// Seeded: the same seed gives the same draws for the same connections.
    pub(crate) fn seeded(seed: u64) -> Self {
        Dice(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }

    /// Seeded from the OS.
    pub(crate) fn from_os() -> Self {
        Dice(Arc::new(Mutex::new(StdRng::from_os_rng())))
    }

    /// An RNG for one direction of one connection.
    pub(crate) fn child(&self) -> StdRng {
        // A panic elsewhere cannot leave an RNG in a state worth refusing.
        let seed = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        StdRng::seed_from_u64(seed)
    }
}

impl Default for Dice {
    fn default() -> Self {
        Dice::from_os()
    }
}

/// Per-direction state of the toxics of a proxy.
#[derive(Debug)]
pub(crate) struct ActiveToxics {
    entries: Vec<Active>,
    rng: StdRng,
    /// Earliest time the next byte may leave under `bandwidth` (pacing
    /// carried across chunks, as Toxiproxy carries its sleep debt).
    paced_until: Option<Instant>,
}

#[derive(Debug)]
struct Active {
    toxic: Toxic,
    /// The toxicity roll for this connection.
    applies: bool,
    /// When this toxic last started or, for `timeout`, last swallowed a chunk.
    since: Instant,
    /// Bytes forwarded while this toxic was present (for `limit_data`).
    passed: u64,
}

impl ActiveToxics {
    /// No toxics yet; draws come from `rng`.
    pub(crate) fn new(rng: StdRng) -> Self {
        ActiveToxics {
            entries: Vec::new(),
            rng,
            paced_until: None,
        }
    }

    /// Takes a new toxic list, keeping rolls and counters of unchanged toxics.
    ///
    /// Returns `true` when a `timeout` toxic that was holding this direction
    /// was removed: Toxiproxy closes such connections (its timeout toxic's
    /// cleanup), so the caller must close the connection.
    pub(crate) fn refresh(&mut self, list: &[Toxic], now: Instant) -> bool {
        let mut old = std::mem::take(&mut self.entries);
        for toxic in list {
            let prev = old
                .iter()
                .position(|a| a.toxic.name == toxic.name)
                .map(|i| old.swap_remove(i));
            let entry = match prev {
                Some(prev) if prev.toxic == *toxic => prev,
                Some(prev) if prev.toxic.toxicity == toxic.toxicity => Active {
                    toxic: toxic.clone(),
                    applies: prev.applies,
                    // Changed attributes restart timers, as Toxiproxy restarts the toxic.
                    since: now,
                    passed: prev.passed,
                },
                _ => Active {
                    applies: roll(&mut self.rng, toxic.toxicity),
                    toxic: toxic.clone(),
                    since: now,
                    passed: 0,
                },
            };
            self.entries.push(entry);
        }
        if !self.applying().any(|a| is_bandwidth(&a.toxic.kind)) {
            self.paced_until = None;
        }
        // Whatever is left in `old` was removed from the list.
        old.iter()
            .any(|a| a.applies && matches!(a.toxic.kind, ToxicKind::Timeout { .. }))
    }

    fn applying(&self) -> impl Iterator<Item = &Active> {
        self.entries.iter().filter(|a| a.applies)
    }

    /// A `timeout` toxic is active: data is dropped.
    pub(crate) fn black_hole(&self) -> bool {
        self.applying()
            .any(|a| matches!(a.toxic.kind, ToxicKind::Timeout { .. }))
    }

    /// A chunk was swallowed by a `timeout` toxic: its timer starts over, as
    /// Toxiproxy's does on every chunk it drops.
    pub(crate) fn swallowed(&mut self, now: Instant) {
        for a in self.entries.iter_mut().filter(|a| a.applies) {
            if matches!(a.toxic.kind, ToxicKind::Timeout { .. }) {
                a.since = now;
            }
        }
    }

    /// When a `timeout` toxic with a non-zero timeout closes the connection
    /// (that long after it started or last swallowed a chunk).
    pub(crate) fn close_deadline(&self) -> Option<Instant> {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                // Absurdly large timeouts overflow Instant: that is "never".
                ToxicKind::Timeout { timeout } if timeout > 0 => {
                    a.since.checked_add(Duration::from_millis(timeout))
                }
                _ => None,
            })
            .min()
    }

    /// With a `reset_peer` toxic: how long to stall before the reset.
    pub(crate) fn reset_after(&self) -> Option<Duration> {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                ToxicKind::ResetPeer { timeout } => Some(Duration::from_millis(timeout)),
                _ => None,
            })
            .min()
    }

    /// Total latency for one chunk, jitter sampled now.
    pub(crate) fn latency(&mut self) -> Duration {
        let mut total = Duration::ZERO;
        for a in self.entries.iter().filter(|a| a.applies) {
            if let ToxicKind::Latency { latency, jitter } = a.toxic.kind {
                let j = if jitter > 0 {
                    self.rng.random_range(0..=jitter.saturating_mul(2)) as i128 - jitter as i128
                } else {
                    0
                };
                let ms = (latency as i128 + j).clamp(0, u64::MAX as i128) as u64;
                total = total.saturating_add(Duration::from_millis(ms));
            }
        }
        total
    }

    /// Delay before a close is passed on (`slow_close`).
    pub(crate) fn slow_close(&self) -> Duration {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                ToxicKind::SlowClose { delay } => Some(Duration::from_millis(delay)),
                _ => None,
            })
            .sum()
    }

    /// The slowest `bandwidth` rate in KB/s (1000 bytes), if any applies.
    fn bandwidth_rate(&self) -> Option<u64> {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                ToxicKind::Bandwidth { rate } if rate > 0 => Some(rate),
                _ => None,
            })
            .min()
    }

    /// Under `bandwidth`: how many of `len` bytes to send next, and the
    /// instant to send them at. Without it: all of them, now.
    ///
    /// Toxiproxy's bandwidth toxic waits `len / rate` *before* passing a
    /// chunk on, and passes chunks larger than 100 ms worth of bytes in
    /// 100 ms slices; pacing is carried from chunk to chunk, so a burst of
    /// small chunks is held to the rate too, but idle time earns no credit.
    /// Call [`ActiveToxics::sent`] with the instant once the piece is sent.
    pub(crate) fn next_piece(&self, len: usize, now: Instant) -> (usize, Instant) {
        let Some(rate) = self.bandwidth_rate() else {
            return (len, now);
        };
        // rate KB/s is rate bytes per millisecond.
        let slice_ms = u64::try_from(BANDWIDTH_SLICE.as_millis()).unwrap_or(u64::MAX);
        let per_slice = usize::try_from(rate.saturating_mul(slice_ms)).unwrap_or(usize::MAX);
        let piece = len.min(per_slice.max(1));
        let cost = Duration::from_micros((piece as u64).saturating_mul(1000) / rate);
        let start = self.paced_until.map_or(now, |p| p.max(now));
        (piece, start.checked_add(cost).unwrap_or(start))
    }

    /// A piece planned by [`ActiveToxics::next_piece`] for `at` was sent.
    pub(crate) fn sent(&mut self, at: Instant) {
        if self.bandwidth_rate().is_some() {
            self.paced_until = Some(at);
        }
    }

    /// Cuts `len` bytes into piece lengths and the pause between pieces (`slicer`).
    pub(crate) fn slices(&mut self, len: usize) -> (Vec<usize>, Duration) {
        let slicer = self.applying().find_map(|a| match a.toxic.kind {
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } if average_size > 0 => Some((average_size, size_variation, delay)),
            _ => None,
        });
        let Some((avg, var, delay)) = slicer else {
            return (vec![len], Duration::ZERO);
        };
        let var = var.min(avg - 1);
        let mut left = len;
        let mut out = Vec::new();
        while left > 0 {
            let size = self
                .rng
                .random_range(avg - var..=avg.saturating_add(var))
                .max(1);
            let size = usize::try_from(size).unwrap_or(usize::MAX).min(left);
            out.push(size);
            left -= size;
        }
        (out, Duration::from_micros(delay))
    }

    /// Bytes that may still pass before a `limit_data` toxic closes the connection.
    pub(crate) fn limit_remaining(&self) -> Option<u64> {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                ToxicKind::LimitData { bytes } => Some(bytes.saturating_sub(a.passed)),
                _ => None,
            })
            .min()
    }

    /// Counts forwarded bytes for `limit_data`.
    pub(crate) fn record_passed(&mut self, n: usize) {
        for a in &mut self.entries {
            a.passed = a.passed.saturating_add(n as u64);
        }
    }
}

fn is_bandwidth(kind: &ToxicKind) -> bool {
    matches!(kind, ToxicKind::Bandwidth { rate } if *rate > 0)
}

fn roll(rng: &mut StdRng, toxicity: f32) -> bool {
    // random() is in [0, 1): toxicity 1 always applies, 0 never does.
    rng.random::<f32>() < toxicity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::api::Stream;

    #[test]
    fn toxicity_zero_never_applies_and_one_always_does() {
        let never = Toxic::new(ToxicKind::Timeout { timeout: 0 }, Stream::Downstream)
            .named("never")
            .with_toxicity(0.0);
        let always = Toxic::new(ToxicKind::SlowClose { delay: 3 }, Stream::Downstream);
        let mut a = ActiveToxics::new(StdRng::seed_from_u64(7));
        for _ in 0..100 {
            a.refresh(&[], Instant::now());
            a.refresh(&[never.clone(), always.clone()], Instant::now());
            assert!(!a.black_hole());
            assert_eq!(a.slow_close(), Duration::from_millis(3));
        }
    }

    #[test]
    fn slices_cover_the_chunk() {
        let mut a = ActiveToxics::new(StdRng::seed_from_u64(7));
        let slicer = ToxicKind::Slicer {
            average_size: 3,
            size_variation: 10,
            delay: 5,
        };
        a.refresh(&[Toxic::new(slicer, Stream::Upstream)], Instant::now());
        let (pieces, delay) = a.slices(100);
        assert_eq!(pieces.iter().sum::<usize>(), 100);
        assert!(pieces.iter().all(|p| (1..=5).contains(p)));
        assert_eq!(delay, Duration::from_micros(5));
    }

    #[test]
    fn extreme_attributes_do_not_panic() {
        let mut a = ActiveToxics::new(StdRng::seed_from_u64(7));
        let list: Vec<Toxic> = [
            ToxicKind::Latency {
                latency: u64::MAX,
                jitter: u64::MAX,
            },
            ToxicKind::Timeout { timeout: u64::MAX },
            ToxicKind::Slicer {
                average_size: u64::MAX,
                size_variation: u64::MAX,
                delay: u64::MAX,
            },
            ToxicKind::Bandwidth { rate: 1 },
        ]
        .into_iter()
        .map(|k| Toxic::new(k, Stream::Upstream))
        .collect();
        a.refresh(&list, Instant::now());
        let _ = a.latency();
        let _ = a.close_deadline();
        assert_eq!(a.slices(10).0, vec![10]);
        let _ = a.next_piece(usize::MAX, Instant::now());
    }

    #[test]
    fn limit_counts_down() {
        let mut a = ActiveToxics::new(StdRng::seed_from_u64(7));
        let t = Toxic::new(ToxicKind::LimitData { bytes: 10 }, Stream::Upstream);
        a.refresh(std::slice::from_ref(&t), Instant::now());
        a.record_passed(4);
        a.refresh(&[t], Instant::now());
        assert_eq!(a.limit_remaining(), Some(6));
    }
}

#[cfg(test)]
mod pacing {
    use super::*;
    use crate::proxy::api::Stream;

    fn with(kind: ToxicKind) -> ActiveToxics {
        let mut a = ActiveToxics::new(StdRng::seed_from_u64(1));
        a.refresh(&[Toxic::new(kind, Stream::Downstream)], Instant::now());
        a
    }

    #[test]
    fn bandwidth_waits_before_each_piece_in_100ms_slices() {
        let mut a = with(ToxicKind::Bandwidth { rate: 10 });
        let t0 = Instant::now();
        // 10 KB/s: 1000 bytes per 100 ms slice; 2500 bytes = 1000 + 1000 + 500.
        let mut left = 2500;
        let mut ats = Vec::new();
        while left > 0 {
            let (n, at) = a.next_piece(left, t0);
            a.sent(at);
            ats.push((n, at - t0));
            left -= n;
        }
        let ms = |m| Duration::from_millis(m);
        assert_eq!(ats, vec![(1000, ms(100)), (1000, ms(200)), (500, ms(250))]);
        // The next chunk queues behind the previous one.
        assert_eq!(a.next_piece(10, t0).1 - t0, ms(251));
    }

    #[test]
    fn idle_time_earns_no_bandwidth_credit() {
        let mut a = with(ToxicKind::Bandwidth { rate: 1 });
        let t0 = Instant::now();
        let (_, at) = a.next_piece(10, t0);
        a.sent(at);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(a.next_piece(10, later).1 - later, Duration::from_millis(10));
    }

    #[test]
    fn swallowing_restarts_the_timeout() {
        let mut a = with(ToxicKind::Timeout { timeout: 500 });
        let t0 = a.close_deadline().expect("deadline") - Duration::from_millis(500);
        let t1 = t0 + Duration::from_millis(200);
        a.swallowed(t1);
        assert_eq!(a.close_deadline(), Some(t1 + Duration::from_millis(500)));
    }

    #[test]
    fn removing_an_applied_timeout_asks_for_a_close() {
        let mut a = with(ToxicKind::Timeout { timeout: 0 });
        assert!(a.refresh(&[], Instant::now()));
        let mut b = with(ToxicKind::Latency {
            latency: 1,
            jitter: 0,
        });
        assert!(!b.refresh(&[], Instant::now()));
    }

    #[test]
    fn same_seed_same_draws() {
        let draws = |seed| {
            let dice = Dice::seeded(seed);
            let mut a = ActiveToxics::new(dice.child());
            let t = Toxic::new(
                ToxicKind::Latency {
                    latency: 100,
                    jitter: 100,
                },
                Stream::Upstream,
            );
            a.refresh(&[t], Instant::now());
            (0..20).map(|_| a.latency()).collect::<Vec<_>>()
        };
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
    }
}
