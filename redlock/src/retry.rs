//! How a waiting [`acquire`](crate::Redlock::acquire) spaces its attempts: a
//! [`RetryPolicy`].
//!
//! An acquire that waits makes an attempt, and when that fails (the lock is held, or
//! nodes are failing) pauses and tries again, until it holds the lock, its `wait` has
//! passed, or the policy says stop. The policy decides two things:
//!
//! - **How long to pause** after the `n`-th failed attempt: a fixed delay jittered ±50 %
//!   (the default), exponential backoff with full jitter, or a function of your own.
//! - **When to stop**: after [`max_attempts`](RetryPolicy::max_attempts) attempts, or when
//!   your function returns `None`. The acquire then fails with
//!   [`LockError::RetriesExhausted`](crate::LockError::RetriesExhausted), distinct from
//!   [`LockError::WaitTimeout`](crate::LockError::WaitTimeout) (the `wait` ran out first).
//!
//! Release notices (see [`Builder::notify_waiters`](crate::Builder::notify_waiters)) work
//! with every policy: a notice that the holder released ends a pause early, whatever its
//! length. The attempt it triggers counts towards the cap like any other.
//!
//! ```
//! use std::time::Duration;
//! use fenced_redlock::{retry::RetryPolicy, Redlock};
//!
//! let redlock = Redlock::builder(["redis://127.0.0.1:7001"])
//!     .retry(
//!         RetryPolicy::exponential(Duration::from_millis(10), Duration::from_secs(1))
//!             .max_attempts(8),
//!     )
//!     .build()
//!     .expect("valid");
//! # drop(redlock);
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use crate::config::DEFAULT_RETRY_DELAY;
use crate::error::ConfigError;

/// A user's pause function: attempts made so far in, the pause before the next out.
type PauseFn = dyn Fn(u32) -> Option<Duration> + Send + Sync;

/// The shape of the pauses.
#[derive(Clone)]
enum Shape {
    /// `delay` × a uniform factor in [0.5, 1.5).
    Fixed(Duration),
    /// Uniform in [0, min(cap, base · 2^(n−1))] after the `n`-th attempt.
    Exponential { base: Duration, cap: Duration },
    /// The user's function.
    Custom(Arc<PauseFn>),
}

/// How a waiting acquire spaces its attempts and when it gives up before its `wait`
/// has passed. Set it with [`Builder::retry`](crate::Builder::retry); it is checked
/// in [`Builder::build`](crate::Builder::build).
///
/// Every pause is also cut short by the acquire's `wait` (no attempt is started after
/// the wait has passed) and by a release notice (see the [module docs](self)).
///
/// The default is [`RetryPolicy::fixed`]`(`[`DEFAULT_RETRY_DELAY`]`)` with no cap on
/// attempts: the client's behaviour before policies existed.
#[derive(Clone)]
#[must_use = "a policy does nothing until passed to Builder::retry"]
pub struct RetryPolicy {
    shape: Shape,
    max_attempts: Option<u32>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::fixed(DEFAULT_RETRY_DELAY)
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RetryPolicy");
        match &self.shape {
            Shape::Fixed(delay) => d.field("fixed", delay),
            Shape::Exponential { base, cap } => d.field("exponential_base", base).field("cap", cap),
            Shape::Custom(_) => d.field("custom", &"Fn(u32) -> Option<Duration>"),
        };
        d.field("max_attempts", &self.max_attempts).finish()
    }
}

impl RetryPolicy {
    /// Pauses of `delay` on average, each drawn uniformly from `[delay/2, 3·delay/2)` so
    /// that waiters that failed together do not retry together. A pause too long for the
    /// clock saturates (the waiter then relies on release notices and its `wait`).
    ///
    /// # Errors (at `build()`)
    /// [`ConfigError::ZeroRetryDelay`] when `delay` is zero.
    pub fn fixed(delay: Duration) -> Self {
        RetryPolicy {
            shape: Shape::Fixed(delay),
            max_attempts: None,
        }
    }

    /// Exponential backoff with full jitter: the pause after the `n`-th failed attempt is
    /// drawn uniformly from `[0, min(cap, base · 2^(n−1))]` — up to `base` after the
    /// first, up to `2·base` after the second, and never more than `cap`. Full jitter
    /// spreads a crowd of waiters best; it also means a pause may be very short.
    /// Doubling saturates at `cap`, however many attempts were made.
    ///
    /// # Errors (at `build()`)
    /// [`ConfigError::InvalidBackoff`] unless `0 < base ≤ cap`.
    pub fn exponential(base: Duration, cap: Duration) -> Self {
        RetryPolicy {
            shape: Shape::Exponential { base, cap },
            max_attempts: None,
        }
    }

    /// Pauses chosen by `pause(attempts)`, where `attempts` is the number of attempts made
    /// so far (1 after the first). `Some(d)` pauses `d` (no jitter is added; zero tries
    /// again at once), `None` stops: the acquire fails with
    /// [`LockError::RetriesExhausted`](crate::LockError::RetriesExhausted).
    ///
    /// The function runs on the acquiring task between attempts: keep it quick, and do
    /// not panic in it (a panic there unwinds through `acquire`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::retry::RetryPolicy;
    ///
    /// // 20 ms, 40 ms, 60 ms, then give up after the fourth attempt.
    /// let linear = RetryPolicy::custom(|attempts| {
    ///     (attempts < 4).then(|| Duration::from_millis(20).saturating_mul(attempts))
    /// });
    /// # drop(linear);
    /// ```
    pub fn custom<F>(pause: F) -> Self
    where
        F: Fn(u32) -> Option<Duration> + Send + Sync + 'static,
    {
        RetryPolicy {
            shape: Shape::Custom(Arc::new(pause)),
            max_attempts: None,
        }
    }

    /// Stop after `attempts` attempts in all, the first included (default: no cap; the
    /// `wait` alone bounds the acquire). `1` makes a single attempt, as
    /// [`try_acquire`](crate::Redlock::try_acquire) does. Applies to every shape, a
    /// custom function's included.
    ///
    /// # Errors (at `build()`)
    /// [`ConfigError::ZeroMaxAttempts`] when `attempts` is zero.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// The cap on attempts, if any.
    pub fn attempt_cap(&self) -> Option<u32> {
        self.max_attempts
    }

    /// Checks the rules listed on each constructor.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_attempts == Some(0) {
            return Err(ConfigError::ZeroMaxAttempts);
        }
        match &self.shape {
            Shape::Fixed(delay) if delay.is_zero() => Err(ConfigError::ZeroRetryDelay),
            Shape::Exponential { base, cap } if base.is_zero() || base > cap => {
                Err(ConfigError::InvalidBackoff {
                    base: *base,
                    cap: *cap,
                })
            }
            _ => Ok(()),
        }
    }

    /// The pause after `attempts` attempts have failed, or `None` to stop. With
    /// `recheck` (an attempt made on a release notice failed), the pause is at most
    /// about `recheck`: more of the release is on its way.
    pub(crate) fn pause(
        &self,
        attempts: u32,
        recheck: Option<Duration>,
        rng: &mut impl Rng,
    ) -> Option<Duration> {
        if self.max_attempts.is_some_and(|cap| attempts >= cap) {
            return None;
        }
        let pause = match &self.shape {
            // As before policies existed: the recheck shortens the delay, then jitter.
            Shape::Fixed(delay) => {
                return Some(jittered(recheck.map_or(*delay, |r| (*delay).min(r)), rng));
            }
            Shape::Exponential { base, cap } => full_jitter(backoff(*base, *cap, attempts), rng),
            Shape::Custom(pause) => pause(attempts)?,
        };
        Some(recheck.map_or(pause, |r| pause.min(jittered(r, rng))))
    }
}

/// `base` × a uniform factor in [0.5, 1.5); saturates instead of overflowing.
fn jittered(base: Duration, rng: &mut impl Rng) -> Duration {
    Duration::try_from_secs_f64(base.as_secs_f64() * rng.random_range(0.5..1.5)).unwrap_or(base)
}

/// `min(cap, base · 2^(attempts−1))`, saturating at `cap`.
fn backoff(base: Duration, cap: Duration, attempts: u32) -> Duration {
    2u32.checked_pow(attempts.saturating_sub(1))
        .and_then(|factor| base.checked_mul(factor))
        .map_or(cap, |d| d.min(cap))
}

/// Uniform in `[0, bound]`, to the nanosecond (bounds beyond 584 years are drawn below
/// that: `u64` nanoseconds).
fn full_jitter(bound: Duration, rng: &mut impl Rng) -> Duration {
    let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(0..=nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const MS: Duration = Duration::from_millis(1);

    fn rng() -> StdRng {
        StdRng::seed_from_u64(15)
    }

    #[test]
    fn the_default_is_the_old_fixed_delay_without_a_cap() {
        let p = RetryPolicy::default();
        assert!(matches!(p.shape, Shape::Fixed(d) if d == DEFAULT_RETRY_DELAY));
        assert_eq!(p.attempt_cap(), None);
        let mut rng = rng();
        for attempts in [1, 2, 100, u32::MAX] {
            let d = p.pause(attempts, None, &mut rng).expect("no cap");
            assert!(d >= DEFAULT_RETRY_DELAY / 2 && d < DEFAULT_RETRY_DELAY * 3 / 2);
        }
    }

    #[test]
    fn fixed_jitter_stays_within_half_and_one_and_a_half() {
        let p = RetryPolicy::fixed(100 * MS);
        let mut rng = rng();
        let draws: Vec<Duration> = (0..10_000)
            .map(|_| p.pause(1, None, &mut rng).expect("no cap"))
            .collect();
        assert!(draws.iter().all(|d| *d >= 50 * MS && *d < 150 * MS));
        // Spread out, not a constant.
        assert!(draws.iter().any(|d| *d < 60 * MS) && draws.iter().any(|d| *d > 140 * MS));
        // A recheck after a notice shortens it, then jitters.
        let d = p.pause(1, Some(10 * MS), &mut rng).expect("no cap");
        assert!(d >= 5 * MS && d < 15 * MS, "{d:?}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_saturates() {
        let (base, cap) = (10 * MS, 300 * MS);
        let bounds: Vec<Duration> = (1..=7).map(|n| backoff(base, cap, n)).collect();
        assert_eq!(
            bounds,
            [10, 20, 40, 80, 160, 300, 300].map(|ms| ms * MS).to_vec()
        );
        assert_eq!(backoff(base, cap, 0), base);
        assert_eq!(backoff(base, cap, 33), cap);
        assert_eq!(backoff(base, cap, u32::MAX), cap);
        assert_eq!(
            backoff(Duration::MAX, Duration::MAX, u32::MAX),
            Duration::MAX
        );
        assert_eq!(backoff(Duration::MAX, Duration::MAX, 2), Duration::MAX);
    }

    #[test]
    fn full_jitter_is_within_zero_and_the_bound_and_grows() {
        let p = RetryPolicy::exponential(10 * MS, 300 * MS);
        let mut rng = rng();
        let mut means = Vec::new();
        for n in 1..=7u32 {
            let bound = backoff(10 * MS, 300 * MS, n);
            let draws: Vec<Duration> = (0..4_000)
                .map(|_| p.pause(n, None, &mut rng).expect("no cap"))
                .collect();
            assert!(draws.iter().all(|d| *d <= bound), "attempt {n}");
            // Full jitter reaches down near zero and up near the bound.
            assert!(draws.iter().any(|d| *d < bound / 10), "attempt {n}");
            assert!(draws.iter().any(|d| *d > bound * 9 / 10), "attempt {n}");
            let mean = draws.iter().sum::<Duration>() / 4_000;
            // Uniform on [0, bound]: the mean is bound/2, give or take a few percent.
            assert!(
                mean > bound * 45 / 100 && mean < bound * 55 / 100,
                "attempt {n}: mean {mean:?} of bound {bound:?}"
            );
            means.push(mean);
        }
        // The pauses grow until the cap, then stay.
        assert!(means.windows(2).take(5).all(|w| w[1] > w[0]), "{means:?}");
    }

    #[test]
    fn huge_bounds_do_not_panic() {
        let mut rng = rng();
        let p = RetryPolicy::exponential(Duration::MAX, Duration::MAX);
        for n in [1, 2, 64, u32::MAX] {
            let _ = p.pause(n, None, &mut rng);
            let _ = p.pause(n, Some(Duration::MAX), &mut rng);
        }
        let p = RetryPolicy::fixed(Duration::MAX);
        assert!(p.pause(1, None, &mut rng).is_some());
    }

    #[test]
    fn the_cap_counts_every_attempt() {
        let p = RetryPolicy::fixed(MS).max_attempts(3);
        let mut rng = rng();
        assert!(p.pause(1, None, &mut rng).is_some());
        assert!(p.pause(2, Some(MS), &mut rng).is_some());
        assert_eq!(p.pause(3, None, &mut rng), None);
        assert_eq!(p.pause(4, None, &mut rng), None);
        let single = RetryPolicy::exponential(MS, MS).max_attempts(1);
        assert_eq!(single.pause(1, None, &mut rng), None);
    }

    #[test]
    fn a_custom_function_is_asked_with_the_attempts_made() {
        let p = RetryPolicy::custom(|n| (n < 3).then(|| MS * n));
        let mut rng = rng();
        assert_eq!(p.pause(1, None, &mut rng), Some(MS));
        assert_eq!(p.pause(2, None, &mut rng), Some(2 * MS));
        assert_eq!(p.pause(3, None, &mut rng), None);
        // A notice shortens a long pause to about the recheck.
        let slow = RetryPolicy::custom(|_| Some(Duration::from_secs(60)));
        let d = slow.pause(1, Some(10 * MS), &mut rng).expect("goes on");
        assert!(d < 15 * MS, "{d:?}");
        // The cap applies to custom functions too.
        let capped = RetryPolicy::custom(|_| Some(MS)).max_attempts(2);
        assert_eq!(capped.pause(2, None, &mut rng), None);
    }

    #[test]
    fn validation_names_what_to_change() {
        assert_eq!(RetryPolicy::default().validate(), Ok(()));
        assert_eq!(
            RetryPolicy::fixed(MS).max_attempts(0).validate(),
            Err(ConfigError::ZeroMaxAttempts)
        );
        assert_eq!(
            RetryPolicy::fixed(Duration::ZERO).validate(),
            Err(ConfigError::ZeroRetryDelay)
        );
        for (base, cap) in [(Duration::ZERO, MS), (2 * MS, MS)] {
            assert_eq!(
                RetryPolicy::exponential(base, cap).validate(),
                Err(ConfigError::InvalidBackoff { base, cap })
            );
        }
        assert_eq!(RetryPolicy::exponential(MS, MS).validate(), Ok(()));
        assert_eq!(RetryPolicy::custom(|_| None).validate(), Ok(()));
    }

    #[test]
    fn debug_names_the_shape() {
        let text = format!("{:?}", RetryPolicy::custom(|_| None).max_attempts(2));
        assert!(
            text.contains("custom") && text.contains("Some(2)"),
            "{text}"
        );
    }
}
