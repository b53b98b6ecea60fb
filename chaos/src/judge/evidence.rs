//! The evidence of one played scenario: everything its verdict uses, as the run recorded
//! it, written beside the history (`evidence/NNN-name.json`) so that `chaos judge DIR`
//! computes the same verdict again from the files alone.
//!
//! What is recorded is what the rig *saw*, never what it concluded: the scenario and the
//! lock it ran, the faults as the nemesis applied and healed them, the clock rates it set
//! and the keys it made nodes forget, every stall the key watcher saw (with the node it
//! saw it on, or none for the machine or the lock's own processes), every read of the
//! modes' lock keys, the quorum probe's tally, each mode's workers' events, counter samples
//! and failures in the order they came, the final read of each mode's row, and the
//! problems the runner met while collecting them. The history's operations are in the
//! scenario's `history/*.jsonl` file, not here. [`super::scenario::judge`] turns these two
//! files into the scenario's numbers and verdict, live and offline alike.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::events::WorkerEvent;
use super::verdict::Promises;
use crate::checker::keys::{Exempt, KeySample};
use crate::checker::quorum_probe::QuorumProbe;
use crate::checker::renewal::Forgot;
use crate::checker::truth::ClockRates;
use crate::report::FaultWindow;
use crate::scenario::Scenario;
use crate::workload::ledger::Final;

/// Bumped when a field changes meaning; `chaos judge` refuses other formats.
pub const EVIDENCE_FORMAT: u32 = 1;

/// The evidence directory inside a report directory.
pub const EVIDENCE_DIR: &str = "evidence";

/// Everything one scenario's verdict uses (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// [`EVIDENCE_FORMAT`] when written.
    pub format: u32,
    /// The scenario as played (its expectation, faults, TTL, clients).
    pub scenario: Scenario,
    /// How the run was set up, as far as the judge needs it.
    pub setup: Setup,
    /// Problems the runner met while collecting (a worker that failed to start, a fault
    /// not applied, an interruption): each makes the verdict unknown.
    pub harness: Vec<String>,
    /// Faults as the nemesis (and the amnesia trigger) applied and healed them. Client
    /// pauses and late retirements are derived from the modes' records by the judge.
    pub faults: Vec<FaultWindow>,
    /// The rates the nemesis set nodes' clocks to run at (server truth reads by them).
    pub clock_rates: ClockRates,
    /// When `forget` faults left a quorum of nodes without the lock keys.
    pub forgets: Vec<Forgot>,
    /// Every stall the key watcher saw: a node's, or (`node: None`) the machine's or a
    /// thread of the lock's processes held off the CPU.
    pub stalls: Vec<Exempt>,
    /// The rig's own acquires while exactly `N − quorum` nodes were down (`None`: not run).
    pub quorum_probe: Option<QuorumProbe>,
    /// Each mode that ran, in the run's mode order.
    pub modes: Vec<ModeEvidence>,
}

/// What the judge needs of the run's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Workers per mode.
    pub workers: usize,
    /// The scenario's planned length, µs.
    pub duration_us: u64,
    /// The lease TTL the scenario ran with (its own, or the run's), µs.
    pub ttl_us: u64,
    /// Whether the lock under test hands out fencing tokens.
    pub fences: bool,
    /// What the lock under test promises here beyond the expectation.
    pub promises: Promises,
    /// Whether the workers ran as processes (client faults stop processes).
    pub worker_processes: bool,
    /// Whether the workers of a mode shared one lock client (hand-offs are judged there).
    pub shared_client: bool,
    /// The fault kind a client pause is reported as (`client-pause`, `task-pause`).
    pub pause_kind: String,
    /// How such a pause was taken, for its window's detail.
    pub pause_how: String,
    /// How long a late retirement's requests were held at the proxies, ms.
    pub retire_hold_ms: u64,
}

/// One mode's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeEvidence {
    /// `none`, `checked`, `write_only` or `claim_first`.
    pub name: String,
    /// The lock it ran on (`ours`, `plain`, ...).
    pub lock: String,
    /// Its workers' events (but the history's operations), counter samples, stalls and
    /// failures, in the order they came.
    pub log: ModeLog,
    /// The final read of its row (`None`: it could not be read).
    pub end: Option<FinalRead>,
    /// Every read of its lock key that found it (`None`: the key was not watched).
    /// Written as a token table and one `[node, at_us, token, pttl_ms]` row per read
    /// (`key_reads`): the reads are most of a run's evidence, and each token is read
    /// dozens of times.
    #[serde(with = "key_reads")]
    pub keys: Option<Vec<KeySample>>,
}

/// [`ModeEvidence::keys`] on disk: `{"tokens": [...], "reads": [[node, at_us, token
/// index, pttl_ms], ...]}`, or `null`.
mod key_reads {
    use std::collections::HashMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::checker::keys::KeySample;

    #[derive(Serialize, Deserialize)]
    struct KeyReads {
        tokens: Vec<String>,
        reads: Vec<(usize, u64, usize, i64)>,
    }

    pub(super) fn serialize<S: Serializer>(
        keys: &Option<Vec<KeySample>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let Some(keys) = keys else {
            return s.serialize_none();
        };
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut tokens: Vec<String> = Vec::new();
        let reads = keys
            .iter()
            .map(|k| {
                let t = *index.entry(&k.token).or_insert_with(|| {
                    tokens.push(k.token.clone());
                    tokens.len() - 1
                });
                (k.node, k.at_us, t, k.pttl_ms)
            })
            .collect();
        s.serialize_some(&KeyReads { tokens, reads })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<KeySample>>, D::Error> {
        let Some(r) = Option::<KeyReads>::deserialize(d)? else {
            return Ok(None);
        };
        r.reads
            .into_iter()
            .map(|(node, at_us, t, pttl_ms)| {
                let token = r.tokens.get(t).cloned().ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "a key read names token {t} of {}",
                        r.tokens.len()
                    ))
                })?;
                Ok(KeySample {
                    node,
                    at_us,
                    token,
                    pttl_ms,
                })
            })
            .collect::<Result<Vec<_>, D::Error>>()
            .map(Some)
    }
}

/// A mode's entries in the order they came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModeLog {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// One thing the runner learnt of a mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// A worker's event.
    Event(WorkerEvent),
    /// The counter read `value` at `at_us`, after `expected` sections had completed.
    Sample {
        /// When, µs on the scenario clock.
        at_us: u64,
        /// The counter's value.
        value: i64,
        /// Sections completed before the read.
        expected: u64,
    },
    /// A client stall hit one of the mode's workers.
    Stall,
    /// A failure found outside the events (a worker process that died, say).
    Failure(String),
}

/// The runner's read of a row at the end, and when it ran (µs on the scenario clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalRead {
    /// What it read.
    pub state: Final,
    /// Invoked at.
    pub invoke_us: u64,
    /// Completed at.
    pub complete_us: u64,
}

/// Why evidence could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// The file system said no.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not evidence this version can read.
    #[error("{path} is not evidence this chaos can judge: {why}")]
    Format {
        /// Where.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl Evidence {
    /// The file of scenario number `index` called `name`, relative to the report directory.
    pub fn file_name(index: usize, name: &str) -> String {
        format!("{EVIDENCE_DIR}/{index:03}-{name}.json")
    }

    /// Reads the evidence at `path`.
    ///
    /// # Errors
    /// [`EvidenceError`]: unreadable, not JSON of this shape, or another format.
    pub fn load(path: &Path) -> Result<Evidence, EvidenceError> {
        let bytes = std::fs::read(path).map_err(|source| EvidenceError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        })?;
        let e: Evidence = serde_json::from_slice(&bytes).map_err(|e| EvidenceError::Format {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        if e.format != EVIDENCE_FORMAT {
            return Err(EvidenceError::Format {
                path: path.to_path_buf(),
                why: format!(
                    "format {}, this chaos reads format {EVIDENCE_FORMAT}; judge it with the chaos that wrote it",
                    e.format
                ),
            });
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::history::{Op, OpKind, OpOutcome};
    use crate::checker::renewal::Heard;
    use crate::checker::truth::{GrantTruth, RateWindow};
    use crate::judge::events::{GrantOutcome, RenewalSeen};
    use crate::judge::scenario::judge;
    use crate::workload::ledger::{Applied, State};

    /// Evidence with one of everything, the worst values included (an open stall, a
    /// fault never healed, a failure, an unread row).
    fn sample(scenario: &Scenario) -> Evidence {
        let grant = WorkerEvent::Grant {
            worker: 1,
            fence: Some(7),
            start_us: 1_000,
            end_us: 2_000,
            valid_until_us: 150_000,
            done_us: 2_500,
            outcome: GrantOutcome::Accepted,
            truth: Some(GrantTruth {
                end_bound_us: Some(180_000),
                holders: 3,
                unknown: 2,
                reads: Vec::new(),
            }),
            validity_cut_us: Some(12),
            renewal: Some(RenewalSeen {
                loss: Some((Heard::Told, 90_000)),
                stalls_us: vec![(5, 6)],
            }),
            section: Some(42),
        };
        let entries = vec![
            Entry::Event(WorkerEvent::Acquire {
                worker: 1,
                at_us: 1_000,
                latency_us: 900,
                ok: true,
                rounds: 1,
                node_fault: false,
            }),
            Entry::Event(grant),
            Entry::Event(WorkerEvent::Pausing {
                worker: 0,
                at_us: 3_000,
                resume_after_us: 400_000,
            }),
            Entry::Event(WorkerEvent::Resumed {
                worker: 0,
                at_us: 403_000,
            }),
            Entry::Sample {
                at_us: 250_000,
                value: 1,
                expected: 1,
            },
            Entry::Stall,
            Entry::Failure("worker process 3 exited with signal 9".into()),
            Entry::Event(WorkerEvent::Done { worker: 1 }),
        ];
        let end = FinalRead {
            state: Final {
                state: Some(State { value: 1, last: 42 }),
                applied: vec![Applied {
                    section: 42,
                    prev: 0,
                    value: 1,
                }],
            },
            invoke_us: 20_000_000,
            complete_us: 20_001_000,
        };
        let stall = Exempt {
            node: None,
            from_us: 9,
            to_us: u64::MAX,
        };
        Evidence {
            format: EVIDENCE_FORMAT,
            scenario: scenario.clone(),
            setup: Setup {
                nodes: 5,
                workers: 2,
                duration_us: 20_000_000,
                ttl_us: 200_000,
                fences: true,
                promises: Promises::default(),
                worker_processes: true,
                shared_client: false,
                pause_kind: "client-pause".into(),
                pause_how: "stopped itself".into(),
                retire_hold_ms: 300,
            },
            harness: vec!["fault 2 (kill): refused".into()],
            faults: vec![FaultWindow {
                kind: "kill".into(),
                detail: String::new(),
                targets: vec!["n1".into(), "n3".into()],
                start_ms: 1_000,
                end_ms: None,
            }],
            clock_rates: ClockRates::new(vec![RateWindow {
                node: 2,
                rate_ppm: -40_000,
                from_us: 0,
                until_us: u64::MAX,
            }]),
            forgets: vec![Forgot {
                from_us: 1,
                gone_us: 2,
            }],
            stalls: vec![stall],
            quorum_probe: Some(QuorumProbe::default()),
            modes: vec![
                ModeEvidence {
                    name: "none".into(),
                    lock: "plain".into(),
                    log: ModeLog { entries },
                    end: Some(end),
                    keys: Some(vec![KeySample {
                        node: 4,
                        at_us: 77,
                        token: "ab".into(),
                        pttl_ms: -1,
                    }]),
                },
                ModeEvidence {
                    name: "claim_first".into(),
                    lock: "ours".into(),
                    log: ModeLog::default(),
                    end: None,
                    keys: None,
                },
            ],
        }
    }

    #[test]
    fn evidence_reads_back_as_written_and_judges_the_same_for_every_builtin_scenario() {
        let mut op = Op::new(1, OpKind::Acquire, OpOutcome::Ok, 100, 1_000);
        op.mode = "none".into();
        op.owner = Some("ab".into());
        op.fence = Some(7);
        let ops = vec![op];
        for scenario in crate::scenario::SCENARIOS.iter() {
            let e = sample(scenario);
            let json = serde_json::to_string(&e).expect("serializes");
            let back: Evidence = serde_json::from_str(&json).expect("reads back");
            assert_eq!(back, e, "{}", scenario.name);
            assert_eq!(judge(&back, &ops), judge(&e, &ops), "{}", scenario.name);
        }
    }

    #[test]
    fn another_format_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e.json");
        let mut e = sample(&crate::scenario::SCENARIOS[0]);
        e.format = EVIDENCE_FORMAT + 1;
        std::fs::write(&path, serde_json::to_vec(&e).expect("json")).expect("write");
        let err = Evidence::load(&path).expect_err("refused").to_string();
        assert!(
            err.contains("judge it with the chaos that wrote it"),
            "{err}"
        );
        e.format = EVIDENCE_FORMAT;
        std::fs::write(&path, serde_json::to_vec(&e).expect("json")).expect("write");
        assert_eq!(Evidence::load(&path).expect("reads"), e);
    }

    #[test]
    fn key_reads_are_written_once_per_token_and_a_read_of_a_missing_token_is_refused() {
        let e = sample(&crate::scenario::SCENARIOS[0]);
        let json = serde_json::to_value(&e.modes[0]).expect("json");
        assert_eq!(json["keys"]["tokens"], serde_json::json!(["ab"]));
        assert_eq!(json["keys"]["reads"], serde_json::json!([[4, 77, 0, -1]]));
        assert_eq!(json["keys"].get("token"), None);
        let mut bad = json.clone();
        bad["keys"]["reads"] = serde_json::json!([[4, 77, 1, -1]]);
        let err = serde_json::from_value::<ModeEvidence>(bad).expect_err("refused");
        assert!(err.to_string().contains("names token 1 of 1"), "{err}");
        assert_eq!(
            serde_json::from_value::<ModeEvidence>(json).expect("reads"),
            e.modes[0]
        );
    }
}
