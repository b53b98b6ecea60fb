//! The validity formula and the quorum rule — pure arithmetic, tested with properties.
//!
//! A lease is valid for `ttl − elapsed − drift`, where `elapsed` is measured on the
//! client's monotonic clock from just before the first request of an attempt was sent,
//! and `drift = ttl × factor + 2 ms` allows for the servers' clocks running faster
//! than ours (Redis expires keys on its own clock). Every step is checked: an
//! overflow or a non-positive result is "no validity", never a panic or a wrap.

use std::time::Duration;

/// The fixed part of the drift allowance, covering timer granularity on the servers.
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Number of votes that make a majority of `nodes`: `nodes / 2 + 1`.
///
/// ```
/// assert_eq!(fenced_redlock::quorum(5), 3);
/// assert_eq!(fenced_redlock::quorum(4), 3);
/// assert_eq!(fenced_redlock::quorum(1), 1);
/// ```
pub const fn quorum(nodes: usize) -> usize {
    // `nodes / 2` is at most usize::MAX / 2: adding one cannot overflow.
    (nodes / 2).saturating_add(1)
}

/// The drift allowance for `ttl`: `ttl × factor + 2 ms`, or `None` on overflow.
pub fn drift(ttl: Duration, factor: f64) -> Option<Duration> {
    if !(0.0..1.0).contains(&factor) {
        return None;
    }
    let scaled = Duration::try_from_secs_f64(ttl.as_secs_f64() * factor).ok()?;
    scaled.checked_add(DRIFT_FLOOR)
}

/// Validity left after an attempt that took `elapsed`: `ttl − elapsed − drift`.
/// `None` when nothing positive is left — such a lease must never be handed out.
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    let left = ttl.checked_sub(elapsed)?.checked_sub(drift)?;
    (!left.is_zero()).then_some(left)
}

/// Whether a quorum can still be reached once `failed` of `nodes` said no.
pub const fn quorum_still_possible(nodes: usize, failed: usize) -> bool {
    quorum_still_possible_with(nodes, quorum(nodes), failed)
}

/// Whether `required` yes votes can still come once `failed` of `nodes` said no.
pub(crate) const fn quorum_still_possible_with(
    nodes: usize,
    required: usize,
    failed: usize,
) -> bool {
    match nodes.checked_sub(failed) {
        Some(left) => left >= required,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn drift_of_ten_seconds_is_102ms() {
        assert_eq!(
            drift(Duration::from_secs(10), 0.01),
            Some(Duration::from_millis(102))
        );
    }

    #[test]
    fn bad_factors_have_no_drift() {
        for f in [-0.1, 1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(drift(Duration::from_secs(1), f), None, "factor {f}");
        }
    }

    #[test]
    fn exactly_used_up_is_invalid() {
        let ttl = Duration::from_millis(100);
        assert_eq!(
            validity(ttl, Duration::from_millis(97), Duration::from_millis(3)),
            None
        );
        assert_eq!(
            validity(ttl, Duration::from_millis(96), Duration::from_millis(3)),
            Some(Duration::from_millis(1))
        );
    }

    proptest! {
        #[test]
        fn validity_never_exceeds_ttl_minus_elapsed(
            ttl_ms in 0u64..10_000_000, elapsed_us in 0u64..20_000_000_000, factor in 0.0f64..0.999
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let elapsed = Duration::from_micros(elapsed_us);
            let d = drift(ttl, factor).expect("factor in range");
            prop_assert!(d >= DRIFT_FLOOR);
            match validity(ttl, elapsed, d) {
                Some(v) => {
                    prop_assert!(v > Duration::ZERO);
                    prop_assert!(v + elapsed + d == ttl);
                }
                None => prop_assert!(elapsed + d >= ttl),
            }
        }

        #[test]
        fn validity_shrinks_as_elapsed_grows(ttl_ms in 1u64..100_000, a in 0u64..100_000, b in 0u64..100_000) {
            let ttl = Duration::from_millis(ttl_ms);
            let d = drift(ttl, 0.01).expect("in range");
            let (lo, hi) = (a.min(b), a.max(b));
            let vlo = validity(ttl, Duration::from_millis(lo), d).unwrap_or_default();
            let vhi = validity(ttl, Duration::from_millis(hi), d).unwrap_or_default();
            prop_assert!(vhi <= vlo);
        }

        #[test]
        fn two_quorums_always_intersect(nodes in 1usize..64) {
            prop_assert!(2 * quorum(nodes) > nodes);
            prop_assert!(quorum(nodes) <= nodes);
        }

        #[test]
        fn quorum_possible_iff_enough_left(nodes in 1usize..64, failed in 0usize..70) {
            let possible = quorum_still_possible(nodes, failed);
            prop_assert_eq!(possible, failed <= nodes && nodes - failed >= quorum(nodes));
        }
    }
}
