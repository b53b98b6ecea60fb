//! The toxics as seen by one direction of one connection.
//!
//! A proxy publishes its toxic list per stream through a `watch` channel;
//! each direction of each open connection keeps an [`ActiveToxics`] that it
//! refreshes whenever the list changes. That is what makes toxic changes
//! reach connections that are already open, as in Toxiproxy.
//!
//! Toxicity is rolled once per connection and toxic (Toxiproxy's meaning)
//! and kept across attribute updates; it is rolled again only when the
//! toxic's toxicity itself changes.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::api::{Toxic, ToxicKind};

/// The toxics of one stream of one proxy, in the order they were added.
pub(crate) type ToxicList = Arc<Vec<Toxic>>;

/// Per-direction state of the toxics of a proxy.
#[derive(Debug, Default)]
pub(crate) struct ActiveToxics {
    entries: Vec<Active>,
}

#[derive(Debug)]
struct Active {
    toxic: Toxic,
    /// The toxicity roll for this connection.
    applies: bool,
    /// When this toxic (in its current form) started acting on the connection.
    since: Instant,
    /// Bytes forwarded while this toxic was present (for `limit_data`).
    passed: u64,
}

impl ActiveToxics {
    /// Takes a new toxic list, keeping rolls and counters of unchanged toxics.
    pub(crate) fn refresh(&mut self, list: &[Toxic], now: Instant) {
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
                    toxic: toxic.clone(),
                    applies: roll(toxic.toxicity),
                    since: now,
                    passed: 0,
                },
            };
            self.entries.push(entry);
        }
    }

    fn applying(&self) -> impl Iterator<Item = &Active> {
        self.entries.iter().filter(|a| a.applies)
    }

    /// A `timeout` toxic is active: data is dropped.
    pub(crate) fn black_hole(&self) -> bool {
        self.applying()
            .any(|a| matches!(a.toxic.kind, ToxicKind::Timeout { .. }))
    }

    /// When a `timeout` toxic with a non-zero timeout closes the connection.
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
    pub(crate) fn latency(&self) -> Duration {
        let mut rng = rand::rng();
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                ToxicKind::Latency { latency, jitter } => {
                    let j = if jitter > 0 {
                        rng.random_range(0..=jitter.saturating_mul(2)) as i128 - jitter as i128
                    } else {
                        0
                    };
                    Some(Duration::from_millis(
                        (latency as i128 + j).clamp(0, u64::MAX as i128) as u64,
                    ))
                }
                _ => None,
            })
            .sum()
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

    /// Time the `bandwidth` toxics charge for `n` bytes (the slowest wins).
    pub(crate) fn bandwidth_delay(&self, n: usize) -> Duration {
        self.applying()
            .filter_map(|a| match a.toxic.kind {
                // rate is KB/s (1000 bytes): n bytes take n * 1000 / rate µs.
                ToxicKind::Bandwidth { rate } if rate > 0 => Some(Duration::from_micros(
                    (n as u64).saturating_mul(1000) / rate,
                )),
                _ => None,
            })
            .max()
            .unwrap_or_default()
    }

    /// Cuts `len` bytes into piece lengths and the pause between pieces (`slicer`).
    pub(crate) fn slices(&self, len: usize) -> (Vec<usize>, Duration) {
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
        let mut rng = rand::rng();
        let mut left = len;
        let mut out = Vec::new();
        while left > 0 {
            let size = rng.random_range(avg - var..=avg.saturating_add(var)).max(1);
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

fn roll(toxicity: f32) -> bool {
    // random() is in [0, 1): toxicity 1 always applies, 0 never does.
    rand::random::<f32>() < toxicity
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
        let mut a = ActiveToxics::default();
        for _ in 0..100 {
            a.refresh(&[], Instant::now());
            a.refresh(&[never.clone(), always.clone()], Instant::now());
            assert!(!a.black_hole());
            assert_eq!(a.slow_close(), Duration::from_millis(3));
        }
    }

    #[test]
    fn slices_cover_the_chunk() {
        let mut a = ActiveToxics::default();
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
        let mut a = ActiveToxics::default();
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
        let _ = a.bandwidth_delay(usize::MAX);
    }

    #[test]
    fn limit_counts_down() {
        let mut a = ActiveToxics::default();
        let t = Toxic::new(ToxicKind::LimitData { bytes: 10 }, Stream::Upstream);
        a.refresh(std::slice::from_ref(&t), Instant::now());
        a.record_passed(4);
        a.refresh(&[t], Instant::now());
        assert_eq!(a.limit_remaining(), Some(6));
    }
}
