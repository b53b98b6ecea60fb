//! What a scenario should show: [`Expectation`], and the [`Anomaly`] a breaking scenario
//! must make visible.
//!
//! In scenario files an expectation is one kebab-case word: `safe-and-available`,
//! `unavailable-but-safe`, `lock-holds`, `tokens-grow`, `may-violate-fencing-holds`,
//! `must-show-lost-update` or `must-show-exclusion-violation`.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a correct lock + fenced resource must show under a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Expectation {
    /// Faults on a minority only: no exclusion violation and nothing lost in any mode, and
    /// the lock stays available (acquire successes > 0 during the run).
    SafeAndAvailable,
    /// A majority is lost for a while: acquires fail cleanly (quorum not reached) while it
    /// lasts, no violation, nothing lost.
    UnavailableButSafe,
    /// Clients outlive their leases (stalls, pauses) or one node misbehaves (a clock
    /// jump): the lock itself still holds — holding windows end at `valid_until`, so 0
    /// exclusion violations and 0 token regressions; every lost update must be a stale
    /// write's doing; claim-first loses 0. Availability is not judged.
    LockHolds,
    /// A node's clock misbehaves (a jump, a rate past the drift allowance): a lease that
    /// counted that node's vote among a bare quorum can end before its validity, so holders
    /// may overlap (reported, with the servers' truth), but fencing tokens are minted by a
    /// quorum of counters that no clock moves: 0 token regressions in every mode;
    /// claim-first loses 0; grants resume after each heal.
    TokensGrow,
    /// Outside the lock's model (amnesia of a bare majority): exclusion
    /// violations and unfenced lost updates may happen and are reported, not failed;
    /// the claim-first fenced mode still loses 0.
    MayViolateFencingHolds,
    /// Built to show a known failure: the naive mode `none`, the canary, runs on the rig's
    /// plain Redlock and must show the anomaly (else the rig did not observe what it exists
    /// to observe: unknown, never a failure of the lock under test). The other modes run the
    /// lock under test: claim-first still loses 0; where the anomaly is the clients' (a lost
    /// update of a paused holder) the lock must hold as under [`Expectation::LockHolds`];
    /// where it is the servers' clocks, its fencing tokens must still grow.
    MustShow(Anomaly),
}

/// What a [`Expectation::MustShow`] scenario must make visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Anomaly {
    /// `none` loses at least one acknowledged increment.
    LostUpdate,
    /// `none` sees at least one pair of overlapping holding windows.
    ExclusionViolation,
}

impl Anomaly {
    /// As a noun phrase: "a lost update".
    pub fn describe(self) -> &'static str {
        match self {
            Anomaly::LostUpdate => "a lost update",
            Anomaly::ExclusionViolation => "an exclusion violation",
        }
    }
}

impl Expectation {
    /// Every expectation, in the order of their file names.
    pub const ALL: [Expectation; 7] = [
        Expectation::SafeAndAvailable,
        Expectation::UnavailableButSafe,
        Expectation::LockHolds,
        Expectation::TokensGrow,
        Expectation::MayViolateFencingHolds,
        Expectation::MustShow(Anomaly::LostUpdate),
        Expectation::MustShow(Anomaly::ExclusionViolation),
    ];

    /// Its name in scenario files, e.g. `"must-show-lost-update"`.
    pub fn name(self) -> &'static str {
        match self {
            Expectation::SafeAndAvailable => "safe-and-available",
            Expectation::UnavailableButSafe => "unavailable-but-safe",
            Expectation::LockHolds => "lock-holds",
            Expectation::TokensGrow => "tokens-grow",
            Expectation::MayViolateFencingHolds => "may-violate-fencing-holds",
            Expectation::MustShow(Anomaly::LostUpdate) => "must-show-lost-update",
            Expectation::MustShow(Anomaly::ExclusionViolation) => "must-show-exclusion-violation",
        }
    }

    /// One line, for listings.
    pub fn describe(self) -> &'static str {
        match self {
            Expectation::SafeAndAvailable => "safe and available",
            Expectation::UnavailableButSafe => "unavailable while it lasts, safe",
            Expectation::LockHolds => {
                "the lock holds (0 violations, 0 token regressions, every loss a stale write's), claim-first loses 0"
            }
            Expectation::TokensGrow => {
                "holders may overlap (reported), fencing tokens still grow (0 regressions), claim-first loses 0"
            }
            Expectation::MayViolateFencingHolds => {
                "violations possible (reported), claim-first loses 0"
            }
            Expectation::MustShow(Anomaly::LostUpdate) => {
                "the canary none (the rig's plain lock) must show a lost update (else the rig is blind: unknown); the lock under test holds, claim-first loses 0"
            }
            Expectation::MustShow(Anomaly::ExclusionViolation) => {
                "the canary none (the rig's plain lock) must show an exclusion violation (else the rig is blind: unknown); the lock under test's tokens grow (unless amnesia), claim-first loses 0"
            }
        }
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Expectation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Expectation::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Expectation::ALL.iter().map(|e| e.name()).collect();
                format!("unknown expectation {s:?}; use one of {}", names.join(", "))
            })
    }
}

impl Serialize for Expectation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Its names, each with what it demands.
impl JsonSchema for Expectation {
    fn schema_name() -> Cow<'static, str> {
        "Expectation".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<serde_json::Value> = Expectation::ALL
            .iter()
            .map(|e| serde_json::json!({ "const": e.name(), "description": e.describe() }))
            .collect();
        json_schema!({ "type": "string", "oneOf": names })
    }
}

impl<'de> Deserialize<'de> for Expectation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Expectation::ALL {
            assert_eq!(e.name().parse::<Expectation>(), Ok(e));
        }
        let err = "safe".parse::<Expectation>().expect_err("unknown");
        assert!(err.contains("safe-and-available"), "{err}");
    }
}
