//! Thinning big runs to what a screen can show, without hiding anything that matters.
//!
//! A 10-minute run has tens of thousands of grants and acquire samples per mode; drawn one
//! element each, a 10-scenario report would be tens of megabytes and slow to open. Spans
//! that touch at pixel resolution merge, points that land on the same pixel cell collapse,
//! and lines keep first/min/max/last per pixel column (so a dip in the counter stays
//! visible). Violation and rejected-write markers are never thinned: callers draw every one.

use std::collections::HashSet;

/// Merges pixel spans `(x0, x1)` that overlap or are closer than `gap` pixels.
pub(crate) fn merge_spans(mut spans: Vec<(f64, f64)>, gap: f64) -> Vec<(f64, f64)> {
    spans.retain(|(a, b)| a.is_finite() && b.is_finite());
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(spans.len().min(4096));
    for (a, b) in spans {
        let b = b.max(a);
        match out.last_mut() {
            Some(last) if a <= last.1 + gap => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Points snapped to a `cell`-pixel grid, one per occupied cell, in input order.
pub(crate) fn dedupe_points(
    points: impl IntoIterator<Item = (f64, f64)>,
    cell: f64,
) -> Vec<(f64, f64)> {
    let cell = if cell > 0.0 { cell } else { 1.0 };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (x, y) in points {
        if !(x.is_finite() && y.is_finite()) {
            continue;
        }
        let key = ((x / cell).round() as i64, (y / cell).round() as i64);
        if seen.insert(key) {
            out.push((key.0 as f64 * cell, key.1 as f64 * cell));
        }
    }
    out
}

/// A line's points (x in pixels, ascending) reduced to first, min, max and last per
/// `col`-pixel column, in x order: the drawn line looks the same, extremes included.
pub(crate) fn m4(points: &[(f64, f64)], col: f64) -> Vec<(f64, f64)> {
    let col_w = if col > 0.0 { col } else { 1.0 };
    let column = |x: f64| (x / col_w).floor();
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let col = column(points[i].0);
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < points.len() && column(points[j].0) == col {
            if points[j].1 < points[lo].1 {
                lo = j;
            }
            if points[j].1 > points[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut keep = vec![i, lo, hi, j - 1];
        keep.sort_unstable();
        keep.dedup();
        out.extend(keep.into_iter().map(|k| points[k]));
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_merge_at_pixel_resolution() {
        let spans = vec![(5.0, 6.0), (0.0, 1.0), (1.4, 2.0), (2.2, 2.3)];
        assert_eq!(merge_spans(spans, 0.5), vec![(0.0, 2.3), (5.0, 6.0)]);
    }

    #[test]
    fn points_collapse_per_cell() {
        let pts = dedupe_points([(0.1, 0.1), (0.2, 0.3), (5.0, 5.0), (f64::NAN, 1.0)], 1.0);
        assert_eq!(pts, vec![(0.0, 0.0), (5.0, 5.0)]);
    }

    #[test]
    fn m4_keeps_extremes_per_column() {
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64 / 50.0, (i % 7) as f64))
            .collect();
        let out = m4(&pts, 1.0);
        assert!(out.len() <= 8);
        assert!(out.iter().any(|p| p.1 == 0.0) && out.iter().any(|p| p.1 == 6.0));
    }
}
