//! What a critical section does: its write mode and its timings.

use std::time::Duration;

use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a critical section writes the counter.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Mode {
    /// Naive: read, work, write `value + 1`; no validity check, the token is ignored (the
    /// lock alone protects the row). What most users write.
    None,
    /// Like [`Mode::None`], but the section is abandoned unwritten when the lease's validity
    /// ran out before the write (the lock crate's advice); the token is still ignored.
    Checked,
    /// Read, work, write `value + 1` only if no newer token has written.
    WriteOnly,
    /// Stamp the token on the row and get its value, work, write only if still stamped.
    ClaimFirst,
}

impl Mode {
    /// All modes, in table order.
    pub const ALL: [Mode; 4] = [Mode::None, Mode::Checked, Mode::WriteOnly, Mode::ClaimFirst];

    /// `none`, `checked`, `write_only` or `claim_first`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Checked => "checked",
            Mode::WriteOnly => "write_only",
            Mode::ClaimFirst => "claim_first",
        }
    }

    /// Whether the resource fences the write with the lease's token.
    pub fn is_fenced(self) -> bool {
        matches!(self, Mode::WriteOnly | Mode::ClaimFirst)
    }
}

/// How long a stall lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallLength {
    /// Always this long.
    Fixed(Duration),
    /// Uniformly between the two (inclusive).
    Uniform(Duration, Duration),
}

impl StallLength {
    /// One stall's length.
    pub fn sample(self, rng: &mut impl Rng) -> Duration {
        match self {
            StallLength::Fixed(d) => d,
            StallLength::Uniform(lo, hi) if hi > lo => {
                let (lo_us, hi_us) = (micros(lo), micros(hi));
                Duration::from_micros(rng.random_range(lo_us..=hi_us))
            }
            StallLength::Uniform(lo, _) => lo,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Timings of a critical section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Lease TTL.
    pub ttl: Duration,
    /// Work between read (or claim) and write.
    pub work: Duration,
    /// Length of a stall, when one happens.
    pub stall: StallLength,
}

/// Named timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Preset {
    /// TTL 200 ms, 5 ms of work, stalls of 1.5 × TTL: a stalled holder always outlives its
    /// lease, and its stale write lands long after the next holders have written.
    #[default]
    Default,
    /// TTL 200 ms, 100 ms of work, stalls of 100–300 ms: a stale write can land while the
    /// next holder is still working on the value it read, which write-only fencing misses.
    Overlap,
}

/// The TTL of both presets.
pub const PRESET_TTL: Duration = Duration::from_millis(200);

impl Preset {
    /// The preset's timings.
    pub fn timing(self) -> Timing {
        match self {
            Preset::Default => Timing {
                ttl: PRESET_TTL,
                work: Duration::from_millis(5),
                stall: StallLength::Fixed(PRESET_TTL.mul_f64(1.5)),
            },
            Preset::Overlap => Timing {
                ttl: PRESET_TTL,
                work: Duration::from_millis(100),
                stall: StallLength::Uniform(Duration::from_millis(100), Duration::from_millis(300)),
            },
        }
    }

    /// `default` or `overlap`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Default => "default",
            Preset::Overlap => "overlap",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn uniform_stalls_stay_in_range() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let len = Preset::Overlap.timing().stall;
        for _ in 0..1000 {
            let d = len.sample(&mut rng);
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(300));
        }
        assert_eq!(
            Preset::Default.timing().stall.sample(&mut rng),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn mode_names_match_json() {
        for m in Mode::ALL {
            let json = serde_json::to_string(&m).expect("serialize");
            assert_eq!(json, format!("\"{}\"", m.name()));
        }
    }
}
