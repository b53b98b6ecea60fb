//! How many lost increments stale writes can explain.
//!
//! A stale write (accepted, but completed after its lease ended) writes `read + 1` over
//! whatever landed since its read: it can erase every accepted write that completed between
//! its read and its own write, and it can itself be erased by a holder that read before it
//! landed. So the most increments `k` stale writes can account for is, summed over them, one
//! (itself) plus the accepted writes that completed while it was in flight. A loss larger
//! than that was not the stale writes' doing — a lock bug, or a resource that lost writes.
//!
//! The read is not recorded here, so the grant stands in for it: it is earlier, which can
//! only widen the bound (never fail a correct lock).

/// One accepted write, on the run's clock (any unit, as long as it is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// No later than the section's read: its grant.
    pub read_at: u64,
    /// When the write completed.
    pub done_at: u64,
    /// Completed after the lease's `valid_until` (for a renewed lease, the validity it
    /// announced last before the write began: [`super::announced`]).
    pub stale: bool,
}

/// The most lost increments `writes` (every accepted write of one resource) can explain:
/// per stale write, 1 + the other writes completed strictly inside `(read_at, done_at)`.
pub fn stale_reach(writes: &[Written]) -> u64 {
    let mut done: Vec<u64> = writes.iter().map(|w| w.done_at).collect();
    done.sort_unstable();
    writes
        .iter()
        .filter(|w| w.stale)
        .map(|s| {
            let from = done.partition_point(|d| *d <= s.read_at);
            let to = done.partition_point(|d| *d < s.done_at);
            // Itself, and the ones in flight with it (itself is not strictly inside).
            1 + to.saturating_sub(from) as u64
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(read_at: u64, done_at: u64, stale: bool) -> Written {
        Written {
            read_at,
            done_at,
            stale,
        }
    }

    #[test]
    fn a_stale_write_explains_itself_and_what_landed_while_it_was_away() {
        assert_eq!(stale_reach(&[]), 0);
        assert_eq!(stale_reach(&[w(0, 10, false), w(10, 20, false)]), 0);
        // Granted at 0, wrote at 100; two writes landed in between, one after.
        let writes = [
            w(0, 100, true),
            w(10, 20, false),
            w(30, 40, false),
            w(110, 120, false),
        ];
        assert_eq!(stale_reach(&writes), 3);
        // Two stale writes, each with its own reach.
        let writes = [w(0, 100, true), w(10, 20, false), w(50, 60, true)];
        assert_eq!(stale_reach(&writes), 2 + 1 + 1);
    }

    proptest! {
        #[test]
        fn the_reach_matches_the_definition(
            raw in proptest::collection::vec((0u64..300, 0u64..100, any::<bool>()), 0..60)
        ) {
            let writes: Vec<Written> = raw.iter().map(|(r, len, s)| w(*r, r + len, *s)).collect();
            let reference: u64 = writes
                .iter()
                .filter(|s| s.stale)
                .map(|s| {
                    1 + writes
                        .iter()
                        .filter(|o| o.done_at > s.read_at && o.done_at < s.done_at)
                        .count() as u64
                })
                .sum();
            prop_assert_eq!(stale_reach(&writes), reference);
        }
    }
}
