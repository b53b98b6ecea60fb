//! What workers report: one [`WorkerEvent`] per acquire, grant, pause and end, in the order
//! a worker made them (times in µs on the scenario clock). Workers in this process send
//! them on a channel; `chaos worker` processes write one JSON line each on stdout. They are
//! the raw record a mode's numbers are computed from ([`super::record`]), and written as
//! they came into the run's evidence ([`super::evidence`]), so a verdict can be computed
//! again from the files alone.

use serde::{Deserialize, Serialize};

use crate::checker::history::Op;
use crate::checker::renewal::Heard;
use crate::checker::truth::GrantTruth;

/// How a grant's section ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantOutcome {
    /// The increment was written.
    Accepted,
    /// The resource refused the claim or write.
    Rejected,
    /// Validity ran out before the write; nothing written.
    Abandoned,
    /// A statement failed: the write may or may not have landed (the ledger's log says).
    Indeterminate,
}

/// One thing a worker did; times are µs since the scenario start. One JSON line each on a
/// `chaos worker`'s stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkerEvent {
    /// A waiting acquire ended.
    Acquire {
        /// Worker index.
        worker: usize,
        /// When it ended.
        at_us: u64,
        /// Success: the winning round's time; failure: the whole wait.
        latency_us: u64,
        /// Whether it got the lock.
        ok: bool,
        /// Quorum rounds it made.
        rounds: u32,
        /// Failed because nodes failed or were unreachable (not mere contention).
        node_fault: bool,
    },
    /// A grant and its section.
    Grant {
        /// Worker index.
        worker: usize,
        /// Fencing token.
        fence: Option<u64>,
        /// When the acquire returned.
        start_us: u64,
        /// End of holding: release start or end of validity, whichever came first.
        end_us: u64,
        /// End of validity.
        valid_until_us: u64,
        /// When the section's last statement returned.
        done_us: u64,
        /// How the section ended.
        outcome: GrantOutcome,
        /// What the servers said of its keys right after the grant (none: not read).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truth: Option<GrantTruth>,
        /// A renewed grant's largest cut of an announced validity while held, in µs
        /// (none: never cut, or not renewed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        validity_cut_us: Option<u64>,
        /// A renewed grant's watch of its lease: the loss it heard and its late ticks
        /// (none: not renewed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        renewal: Option<RenewalSeen>,
        /// Its section in the history (none: recorded before issue 49). A renewed grant's
        /// window and staleness are judged from its section's announcements there
        /// ([`crate::checker::announced`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        section: Option<u64>,
    },
    /// The worker, holding a lease, is about to stop itself (`SIGSTOP`; the runner resumes
    /// it no sooner than `resume_after_us` later, once a rival wrote: see
    /// `crate::run::pause`) or, a task of a shared client, to sleep that long.
    Pausing {
        /// Worker index.
        worker: usize,
        /// When it decided to pause.
        at_us: u64,
        /// The drawn pause length.
        resume_after_us: u64,
    },
    /// A paused worker goes on: written by the runner when it resumed (`SIGCONT`) a worker
    /// process, by the worker when its task's sleep ended.
    Resumed {
        /// Worker index.
        worker: usize,
        /// When it was resumed.
        at_us: u64,
    },
    /// What the servers said of a held lease's keys after an extend or a renewal, against
    /// the validity the lock claimed right after it (an extend that shortened the keys and
    /// failed must not leave the old validity standing; a renewer must not announce more
    /// than its renewal gave the keys).
    Truth {
        /// The servers' answers.
        truth: GrantTruth,
        /// The validity the lease claimed when the read started.
        valid_until_us: u64,
    },
    /// One operation of the history.
    Op(Op),
    /// The worker reached its end cleanly.
    Done {
        /// Worker index.
        worker: usize,
    },
    /// The worker stopped on a harness failure.
    Failed {
        /// Worker index.
        worker: usize,
        /// What failed.
        message: String,
    },
}

/// What a renewed section's watch saw, on the scenario clock, for its grant's event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewalSeen {
    /// The loss the renewer reported (or the clock, `Expired`), and when it was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<(Heard, u64)>,
    /// `[from, to)` of each late tick: the worker was held off the CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls_us: Vec<(u64, u64)>,
}
