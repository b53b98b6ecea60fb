//! Latency samples and their summary, in an HDR histogram: constant memory however long a
//! lane or a throughput slice runs (the throughput case alone records ~10⁵ samples per
//! client per round), 3 significant digits — 0.1 % of a value, far below the run-to-run
//! noise `--repeat` reports.
//!
//! [`percentile`] is the one percentile definition of the crate (nearest rank); `chaos run`
//! uses it too.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency kept exactly (longer ones are clamped to it): far above any per-sample cap.
const MAX_NS: u64 = 600_000_000_000;

/// What one (case, client) pair measured.
#[derive(Debug, Clone)]
pub struct Samples {
    hist: Histogram<u64>,
    /// Operations cut off at the per-sample cap.
    pub timeouts: u32,
    /// Operations that returned an error (not held, node failure, ...).
    pub errors: u32,
    /// Wall time the row took, when it is a throughput row (ops/s = len / wall).
    pub wall: Option<Duration>,
    /// CPU time this process spent meanwhile (user + system, every thread), when measured:
    /// the client's cost per operation is `cpu / len`.
    pub cpu: Option<Duration>,
    /// The first error's message, for the row's note.
    pub first_error: Option<String>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            hist: new_histogram(),
            timeouts: 0,
            errors: 0,
            wall: None,
            cpu: None,
            first_error: None,
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // Constant, valid bounds (low ≥ 1, high ≥ 2 × low, precision ≤ 5): this cannot fail.
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("constant histogram bounds are valid")
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
    /// This process's CPU time per operation, when measured.
    pub cpu_per_op: Option<Duration>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos())
        .unwrap_or(u64::MAX)
        .clamp(1, MAX_NS)
}

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, d: Duration) {
        self.hist.saturating_record(nanos(d));
    }

    /// Number of samples recorded.
    pub fn len(&self) -> usize {
        usize::try_from(self.hist.len()).unwrap_or(usize::MAX)
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Adds every sample, timeout and error of `other` (the wall times are not added).
    pub fn merge(&mut self, other: &Samples) {
        // Same bounds on both sides: `add` cannot fail; if it did, count the loss.
        if self.hist.add(&other.hist).is_err() {
            self.errors = self.errors.saturating_add(1);
        }
        self.timeouts = self.timeouts.saturating_add(other.timeouts);
        self.errors = self.errors.saturating_add(other.errors);
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    /// `None` when there is no sample at all.
    pub fn summary(&self) -> Option<Summary> {
        if self.hist.is_empty() {
            return None;
        }
        let n = self.hist.len() as f64;
        let mean_s = self.hist.mean() / 1e9;
        let ops_per_s = match self.wall {
            Some(w) if !w.is_zero() => n / w.as_secs_f64(),
            _ if mean_s > 0.0 => 1.0 / mean_s,
            _ => 0.0,
        };
        let at = |q: f64| Duration::from_nanos(self.hist.value_at_quantile(q));
        Some(Summary {
            p50: at(0.50),
            p99: at(0.99),
            ops_per_s,
            samples: self.len(),
            cpu_per_op: self.cpu.map(|c| c.div_f64(n)),
        })
    }
}

/// CPU time this process has used so far (user + system, all threads); `None` where the
/// system will not say.
pub fn process_cpu() -> Option<Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let d = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).ok()?)
            .checked_add(Duration::from_micros(u64::try_from(t.tv_usec()).ok()?))
    };
    d(u.user_time())?.checked_add(d(u.system_time())?)
}

/// Nearest-rank percentile (`p` in 0..=100) of ascending, non-empty values; `T::default()`
/// (zero) if empty.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted.get(idx).copied().unwrap_or_default()
}

/// Median of unsorted values (nearest rank), `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile(&v, 50.0))
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
        assert_eq!(percentile::<Duration>(&[], 50.0), Duration::ZERO);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn histogram_quantiles_within_its_precision() {
        let mut s = Samples::default();
        for v in 1..=1000 {
            s.push(Duration::from_micros(v));
        }
        let sum = s.summary().expect("samples");
        assert_eq!(sum.samples, 1000);
        let close =
            |d: Duration, want_us: f64| (d.as_secs_f64() * 1e6 - want_us).abs() <= want_us * 0.002;
        assert!(close(sum.p50, 500.0), "{:?}", sum.p50);
        assert!(close(sum.p99, 990.0), "{:?}", sum.p99);
        // Absurd values are clamped, never a panic.
        s.push(Duration::MAX);
        s.push(Duration::ZERO);
        assert_eq!(s.len(), 1002);
    }

    #[test]
    fn ops_from_wall_or_serial_rate_and_merge() {
        let mut s = Samples::default();
        assert!(s.summary().is_none());
        s.push(ms(10));
        s.push(ms(10));
        let serial = s.summary().expect("samples");
        assert!(
            (serial.ops_per_s - 100.0).abs() < 0.5,
            "{}",
            serial.ops_per_s
        );
        s.wall = Some(ms(10));
        assert!((s.summary().expect("samples").ops_per_s - 200.0).abs() < 1e-6);
        let mut other = Samples::default();
        other.push(ms(20));
        other.errors = 2;
        s.merge(&other);
        assert_eq!(s.len(), 3);
        assert_eq!(s.errors, 2);
    }
}
