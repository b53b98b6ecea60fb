//! The history, Jepsen-style: every operation a worker ran, with its invoke and complete
//! times on the scenario's one clock (µs since its zero, the clock every record of a run
//! uses) and its outcome — `ok`, `fail` (it certainly did not happen) or `info` (it may or
//! may not have: a PostgreSQL error on a write, say).
//!
//! Operations: `acquire`, `extend`, `release` on the lock, and `renew` for each validity a
//! background renewer announced; `read` (or the claim-first `claim`) and `write` on the
//! resource, with the values read and written; and one `final` per mode, the runner's read
//! of the row and its whole log at the end. A scenario's history is one JSON line per
//! operation (`history/<scenario>.jsonl` in the report directory); the checkers are pure
//! functions of it.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

pub use crate::workload::ledger::Applied;

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// A waiting acquire of the lock.
    Acquire,
    /// An extension of a held lease; `valid_until_us`: the validity the lease claimed after
    /// it, whatever its outcome (absent from histories before issue 49).
    Extend,
    /// A renewal the background renewer (`auto_renew`) announced: `valid_until_us` is the
    /// validity `status()` said, seen by `complete_us` (on the section's watch of the
    /// lease, or at the holder's check before its write) and not yet at `invoke_us` (the
    /// look before). Recorded when the announced validity changed.
    Renew,
    /// A release.
    Release,
    /// A retirement of the fence counter, then a release (`late_retire` scenarios): it
    /// completes once its requests have surely reached every node.
    Retire,
    /// An unfenced read of the resource.
    Read,
    /// A claim-first read: the token stamped on the row, its state returned.
    Claim,
    /// A write of the resource.
    Write,
    /// The runner's read of the row and its log after the workers ended.
    Final,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpOutcome {
    /// It happened.
    Ok,
    /// It certainly did not happen (a refused acquire, claim or fenced write).
    Fail,
    /// Indeterminate: it may or may not have happened.
    Info,
}

/// One operation. Fields that do not apply to its kind are absent from the JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The mode (one resource, one lock) it ran in.
    pub mode: String,
    /// Worker index within the mode (`None`: the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<usize>,
    /// What.
    pub f: OpKind,
    /// Outcome.
    #[serde(rename = "type")]
    pub outcome: OpOutcome,
    /// Invoked at, µs.
    pub invoke_us: u64,
    /// Completed at, µs.
    pub complete_us: u64,
    /// The section (grant) it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<u64>,
    /// Fencing token of the grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// Acquire: the owner token stored in the lease's keys (the leak check tells a grant's
    /// keys from a failed attempt's by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// End of validity the lock reported (acquire, extend) or announced (renew), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until_us: Option<u64>,
    /// Read, claim, final: the value read; write: the value written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Read, claim, final: the section whose write the row held; write: the one it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<u64>,
    /// Final: every write the row accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Vec<Applied>>,
    /// What went wrong (fail, info).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Op {
    /// An operation of `worker` with nothing but its kind, outcome and times.
    pub fn new(
        worker: usize,
        f: OpKind,
        outcome: OpOutcome,
        invoke_us: u64,
        complete_us: u64,
    ) -> Op {
        Op {
            mode: String::new(),
            worker: Some(worker),
            f,
            outcome,
            invoke_us,
            complete_us,
            section: None,
            fence: None,
            owner: None,
            valid_until_us: None,
            value: None,
            prev: None,
            applied: None,
            error: None,
        }
    }

    /// With `section`.
    pub fn section(mut self, section: u64) -> Op {
        self.section = Some(section);
        self
    }

    /// With `value` and `prev`.
    pub fn values(mut self, value: i64, prev: u64) -> Op {
        self.value = Some(value);
        self.prev = Some(prev);
        self
    }

    /// With `error`.
    pub fn error(mut self, error: impl Into<String>) -> Op {
        self.error = Some(error.into());
        self
    }
}

/// Writes `ops` as JSON lines.
///
/// # Errors
/// The writer's.
pub fn write_jsonl(out: &mut impl Write, ops: &[Op]) -> std::io::Result<()> {
    for op in ops {
        serde_json::to_writer(&mut *out, op)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads JSON lines written by [`write_jsonl`] (blank lines are skipped).
///
/// # Errors
/// The reader's, or a line that is not an operation (with its number).
pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        ops.push(serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_as_json_lines_without_empty_fields() {
        let mut acquire = Op::new(1, OpKind::Acquire, OpOutcome::Ok, 10, 12).section(1_000_003);
        acquire.mode = "none".into();
        acquire.fence = Some(7);
        acquire.valid_until_us = Some(200_010);
        let mut write = Op::new(1, OpKind::Write, OpOutcome::Info, 20, 25)
            .section(1_000_003)
            .values(5, 2_000_001)
            .error("connection closed");
        write.mode = "none".into();
        let mut buf = Vec::new();
        write_jsonl(&mut buf, &[acquire.clone(), write.clone()]).expect("write");
        let text = String::from_utf8(buf.clone()).expect("utf-8");
        assert!(!text.contains("null"), "{text}");
        assert!(text.contains("\"type\":\"info\""), "{text}");
        assert_eq!(
            read_jsonl(buf.as_slice()).expect("read"),
            vec![acquire, write]
        );
        assert!(
            read_jsonl("{\"f\":1}\n".as_bytes())
                .unwrap_err()
                .starts_with("line 1")
        );
    }
}
