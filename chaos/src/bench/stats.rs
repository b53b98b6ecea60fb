//! Latency samples and their summary (p50/p99 by sorting: a few thousand samples per row,
//! so an exact nearest-rank percentile is cheaper to trust than a histogram's buckets).

use std::time::Duration;

/// What one (case, client) pair measured.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// One entry per successful operation.
    pub latencies: Vec<Duration>,
    /// Operations cut off at the per-sample cap.
    pub timeouts: u32,
    /// Operations that returned an error (not held, node failure, ...).
    pub errors: u32,
    /// Wall time the row took, when it is a throughput row (ops/s = len / wall).
    pub wall: Option<Duration>,
}

/// p50/p99/ops of a [`Samples`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Operations per second: completed / wall time for throughput rows, otherwise the
    /// serial rate 1 / mean latency.
    pub ops_per_s: f64,
    /// Number of latency samples.
    pub samples: usize,
}

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, d: Duration) {
        self.latencies.push(d);
    }

    /// `None` when there is no sample at all.
    pub fn summary(&self) -> Option<Summary> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let total: Duration = sorted.iter().sum();
        let ops_per_s = match self.wall {
            Some(w) if !w.is_zero() => sorted.len() as f64 / w.as_secs_f64(),
            _ if !total.is_zero() => sorted.len() as f64 / total.as_secs_f64(),
            _ => 0.0,
        };
        Some(Summary {
            p50: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
            ops_per_s,
            samples: sorted.len(),
        })
    }
}

/// Nearest-rank percentile of an ascending, non-empty slice (`Duration::ZERO` if empty).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&v, 50.0), ms(50));
        assert_eq!(percentile(&v, 99.0), ms(99));
        assert_eq!(percentile(&[ms(7)], 99.0), ms(7));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn ops_from_wall_or_serial_rate() {
        let mut s = Samples::default();
        assert!(s.summary().is_none());
        s.push(ms(10));
        s.push(ms(10));
        let serial = s.summary().expect("samples");
        assert!((serial.ops_per_s - 100.0).abs() < 1e-6);
        s.wall = Some(ms(10));
        assert!((s.summary().expect("samples").ops_per_s - 200.0).abs() < 1e-6);
    }
}
