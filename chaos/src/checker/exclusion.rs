//! Exclusion violations: how many pairs of grants held the lock at the same time.
//!
//! Each grant is a half-open window `[start, end)` on the run's monotonic clock. Two windows
//! overlap when `max(starts) < min(ends)`; touching windows do not. Empty windows
//! (`end <= start`) overlap nothing. Counting is a sweep: sort by start and keep the ends of
//! windows still open in a min-heap, so it is O(n log n) instead of comparing all pairs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// When one grant held the lock, as offsets from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First moment of holding.
    pub start: Duration,
    /// First moment of not holding any more.
    pub end: Duration,
}

impl Window {
    /// `[start, end)`.
    pub fn new(start: Duration, end: Duration) -> Self {
        Window { start, end }
    }

    fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Number of unordered pairs of windows that overlap.
pub fn exclusion_violations(windows: &[Window]) -> u64 {
    let mut sorted: Vec<Window> = windows.iter().copied().filter(|w| !w.is_empty()).collect();
    sorted.sort_by_key(|w| w.start);
    let mut open: BinaryHeap<Reverse<Duration>> = BinaryHeap::new();
    let mut pairs = 0u64;
    for w in sorted {
        // Windows that ended at or before this start cannot overlap it, nor any later one.
        while open.peek().is_some_and(|Reverse(end)| *end <= w.start) {
            open.pop();
        }
        pairs += open.len() as u64;
        open.push(Reverse(w.end));
    }
    pairs
}

/// The overlapping pairs themselves, as `(earlier index, later index, overlap)` into
/// `windows`, at most `limit` of them (the count is [`exclusion_violations`]). Same sweep,
/// keeping indices; for drawing the violations on a timeline.
pub fn overlapping_pairs(windows: &[Window], limit: usize) -> Vec<(usize, usize, Window)> {
    let mut order: Vec<usize> = (0..windows.len())
        .filter(|&i| !windows[i].is_empty())
        .collect();
    order.sort_by_key(|&i| windows[i].start);
    let mut open: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    for i in order {
        let w = windows[i];
        open.retain(|&j| windows[j].end > w.start);
        for &j in &open {
            if out.len() >= limit {
                return out;
            }
            out.push((j, i, Window::new(w.start, windows[j].end.min(w.end))));
        }
        open.push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(s: u64, e: u64) -> Window {
        Window::new(Duration::from_millis(s), Duration::from_millis(e))
    }

    /// The definition, pair by pair.
    fn reference(windows: &[Window]) -> u64 {
        let mut n = 0;
        for (i, a) in windows.iter().enumerate() {
            for b in &windows[i + 1..] {
                if a.start.max(b.start) < a.end.min(b.end) {
                    n += 1;
                }
            }
        }
        n
    }

    #[test]
    fn examples() {
        assert_eq!(exclusion_violations(&[]), 0);
        assert_eq!(exclusion_violations(&[w(0, 10), w(10, 20), w(20, 30)]), 0);
        assert_eq!(exclusion_violations(&[w(0, 10), w(9, 20)]), 1);
        assert_eq!(exclusion_violations(&[w(0, 100), w(10, 20), w(30, 40)]), 2);
        assert_eq!(exclusion_violations(&[w(0, 10), w(0, 10), w(0, 10)]), 3);
        // Empty and inverted windows hold nothing.
        assert_eq!(exclusion_violations(&[w(0, 10), w(5, 5), w(8, 3)]), 0);
    }

    #[test]
    fn pairs_name_the_overlap() {
        let p = overlapping_pairs(&[w(0, 10), w(20, 30), w(5, 25)], 10);
        assert_eq!(p, vec![(0, 2, w(5, 10)), (2, 1, w(20, 25))]);
        assert_eq!(
            overlapping_pairs(&[w(0, 10), w(0, 10), w(0, 10)], 2).len(),
            2
        );
    }

    proptest! {
        #[test]
        fn sweep_matches_all_pairs(
            raw in proptest::collection::vec((0u64..200, 0u64..60), 0..80)
        ) {
            let windows: Vec<Window> = raw.iter().map(|(s, len)| w(*s, s + len)).collect();
            prop_assert_eq!(exclusion_violations(&windows), reference(&windows));
            prop_assert_eq!(overlapping_pairs(&windows, usize::MAX).len() as u64, reference(&windows));
        }

        #[test]
        fn order_does_not_matter(
            raw in proptest::collection::vec((0u64..200, 0u64..60), 0..40)
        ) {
            let windows: Vec<Window> = raw.iter().map(|(s, len)| w(*s, s + len)).collect();
            let mut reversed = windows.clone();
            reversed.reverse();
            prop_assert_eq!(exclusion_violations(&windows), exclusion_violations(&reversed));
        }
    }
}
