//! The throughput case's ceiling: the lock ops/s the servers' CPU allows, measured in the
//! same slices as the client it bounds.
//!
//! # The bound
//! Over one client's throughput slices (wall time `W`, `n` lock operations), the bench
//! reads every server process's user + system time (`S`, from `/proc/<pid>/stat`), the
//! machine's busy and total CPU time (`B`, `T` = cores × `W`, from `/proc/stat`), and its
//! own CPU time (`C`, `getrusage`, as for `cpu/op`). Then:
//!
//! - the servers' CPU per lock op is `s = S / n` (all 5 servers, user + system);
//! - everything else on the machine took `O = B − S − C` (another engineer's build, the
//!   kernel's own threads; never below 0);
//! - the CPU left to the servers is `L = T − C − O`, i.e. `L / W` cores (the lock client
//!   must run on these cores too, and what else ran is not the bench's to take);
//! - the **ceiling** is `(L / W) / s` lock ops/s, and the row's fraction of it
//!   `(n / W) / ceiling = S / L`.
//!
//! Since `L = S + idle`, the fraction is the share of the CPU the client left to the
//! servers that they actually used: 1 means they were busy all the time the client and
//! the rest of the machine did not need, so this client cannot go faster without costing
//! less CPU itself (or costing the servers less per op). Below 1, the gap is idle CPU the
//! client did not turn into lock operations — latency, not work, bounded it.
//!
//! # Assumptions and limits
//! - The servers' CPU per op is taken as fixed at what this client's load cost them: a
//!   client that made the servers batch more (deeper pipelines) would lower it. That is
//!   the point — it is the client's own mix, priced by the servers, not a C load
//!   generator's (`redis_benchmark` pipelines 16 deep, which no lock client can).
//! - Each client's ceiling is its own, since `s` and `C` are: a client that is cheap on
//!   the client side leaves more cores to the servers and gets a higher ceiling.
//! - Ticks are 10 ms ([`super::proc_cpu`]); a slice too short for the servers' time to
//!   advance gives no bound rather than a wrong one.
//! - `/proc/stat` counts the whole machine. In a container with a CPU quota below the
//!   machine's cores the bound is too high (idle cores the container may not use); the
//!   bench runs its own local servers, so their pids are known — a backend whose server
//!   processes are not visible (Docker, attached) would have no bound ([`Servers::Unknown`]).
//! - Rounding (ticks against `getrusage`'s µs) can put the fraction a little above 1.
//! - Others' CPU (`O`) is taken as fixed. Other work at the same priority soaks up idle
//!   time the servers could have had, so on a busy machine every fraction drifts towards
//!   1: still a bound, but a less telling one.

use std::time::Duration;

use super::proc_cpu::{IoCalls, ProcError, Snapshot};

/// The server processes whose CPU the ceiling counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    /// Their pids.
    Pids(Vec<u32>),
    /// Not visible from here; why.
    Unknown(String),
}

impl Servers {
    /// From a backend's pids (`None` for a node without a process of ours).
    pub fn from_pids(pids: &[Option<u32>]) -> Servers {
        if pids.is_empty() {
            return Servers::Unknown("no server processes".into());
        }
        match pids.iter().position(Option::is_none) {
            Some(i) => Servers::Unknown(format!("node {i} has no server process of ours")),
            None => Servers::Pids(pids.iter().flatten().copied().collect()),
        }
    }

    /// Reads the servers' and the machine's CPU time now.
    pub fn snapshot(&self) -> Result<Snapshot, String> {
        match self {
            Servers::Pids(pids) => Snapshot::take(pids).map_err(|e: ProcError| e.to_string()),
            Servers::Unknown(why) => Err(why.clone()),
        }
    }
}

/// The servers' and the machine's CPU time over one client's slices, summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Account {
    /// Every server's user + system time.
    pub servers: Duration,
    /// The machine's busy time.
    pub machine_busy: Duration,
    /// The machine's total time (cores × wall).
    pub machine_total: Duration,
    /// The servers' read and write system calls.
    pub server_io: IoCalls,
    /// Some slice had no system call counts: [`Account::server_io`] is then incomplete.
    pub server_io_missing: bool,
    /// Why a slice could not be read, the first time it happened: the account is then
    /// incomplete and gives no bound.
    pub unavailable: Option<String>,
}

impl Account {
    /// Adds one slice, read before and after it.
    pub fn add(&mut self, before: Result<Snapshot, String>, after: Result<Snapshot, String>) {
        match (before, after) {
            (Ok(b), Ok(a)) => {
                self.servers += a.servers.saturating_sub(b.servers);
                self.machine_busy += a.machine.busy.saturating_sub(b.machine.busy);
                self.machine_total += a.machine.total.saturating_sub(b.machine.total);
                match (b.server_io, a.server_io) {
                    (Some(b), Some(a)) => self.server_io = self.server_io.plus(a.since(b)),
                    _ => self.server_io_missing = true,
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                self.unavailable.get_or_insert(e);
            }
        }
    }
}

/// What one client did and used over its slices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// Completed lock operations.
    pub ops: u64,
    /// Wall time of the slices.
    pub wall: Duration,
    /// This process's CPU time meanwhile.
    pub client: Duration,
    /// The servers' CPU time meanwhile.
    pub servers: Duration,
    /// The machine's busy time meanwhile.
    pub machine_busy: Duration,
    /// The machine's total CPU time meanwhile (cores × wall).
    pub machine_total: Duration,
    /// The servers' read and write system calls meanwhile, when every slice counted them.
    pub server_io: Option<IoCalls>,
}

/// The ceiling for one client (see the module docs for the formulas).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// `s`: the servers' CPU time per lock op, seconds.
    pub server_cpu_per_op_s: f64,
    /// `L / W`: cores left to the servers.
    pub server_cores: f64,
    /// `(L / W) / s`: lock ops/s.
    pub ops_per_s: f64,
    /// The client's ops/s over the ceiling, `S / L`.
    pub fraction: f64,
    /// The servers' `read` and `write` system calls per lock op, all 5 servers together
    /// (`None` without counts): how well this client's requests and their replies were
    /// batched, which is where most of the servers' CPU per op goes.
    pub server_io_per_op: Option<(f64, f64)>,
}

/// Why there is no bound.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NoBound {
    /// Nothing completed, so there is no cost per op.
    #[error("no lock operation completed")]
    NoOps,
    /// The slices took no time (cannot happen in a run; a guard for division).
    #[error("no wall time")]
    NoWall,
    /// The servers' CPU time did not advance (below `/proc`'s 10 ms ticks).
    #[error("the servers' CPU time did not advance (10 ms ticks)")]
    NoServerCpu,
    /// The client and the rest of the machine took every core.
    #[error(
        "no CPU left to the servers: the client took {client_cores:.2} cores and others {other_cores:.2} of {cores:.2}"
    )]
    NoCoresLeft {
        /// `C / W`.
        client_cores: f64,
        /// `O / W`.
        other_cores: f64,
        /// `T / W`.
        cores: f64,
    },
    /// The CPU times could not be read.
    #[error("not measured: {0}")]
    Unmeasured(String),
}

/// The account of one client as a [`Usage`], or why it has none.
pub fn usage(
    account: &Account,
    ops: u64,
    wall: Duration,
    client: Duration,
) -> Result<Usage, NoBound> {
    if let Some(why) = &account.unavailable {
        return Err(NoBound::Unmeasured(why.clone()));
    }
    Ok(Usage {
        ops,
        wall,
        client,
        servers: account.servers,
        machine_busy: account.machine_busy,
        machine_total: account.machine_total,
        server_io: (!account.server_io_missing).then_some(account.server_io),
    })
}

/// The ceiling for `u`.
pub fn bound(u: &Usage) -> Result<Bound, NoBound> {
    if u.ops == 0 {
        return Err(NoBound::NoOps);
    }
    let wall = u.wall.as_secs_f64();
    if wall <= 0.0 {
        return Err(NoBound::NoWall);
    }
    let servers = u.servers.as_secs_f64();
    if servers <= 0.0 {
        return Err(NoBound::NoServerCpu);
    }
    let client = u.client.as_secs_f64();
    let total = u.machine_total.as_secs_f64();
    let others = (u.machine_busy.as_secs_f64() - servers - client).max(0.0);
    let left = total - client - others;
    if left <= 0.0 {
        return Err(NoBound::NoCoresLeft {
            client_cores: client / wall,
            other_cores: others / wall,
            cores: total / wall,
        });
    }
    let ops = u.ops as f64;
    let server_cpu_per_op_s = servers / ops;
    let server_cores = left / wall;
    let ceiling = server_cores / server_cpu_per_op_s;
    Ok(Bound {
        server_cpu_per_op_s,
        server_cores,
        ops_per_s: ceiling,
        fraction: (ops / wall) / ceiling,
        server_io_per_op: u
            .server_io
            .map(|io| (io.reads as f64 / ops, io.writes as f64 / ops)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::proc_cpu::MachineTimes;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn usage(ops: u64, wall: f64, client: f64, servers: f64, busy: f64, total: f64) -> Usage {
        Usage {
            ops,
            wall: secs(wall),
            client: secs(client),
            servers: secs(servers),
            machine_busy: secs(busy),
            machine_total: secs(total),
            server_io: Some(IoCalls {
                reads: ops * 3,
                writes: ops * 2,
            }),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn two_cores_half_each_for_client_and_servers() {
        // 10 s on 2 cores: the client took 5 s, the servers 10 s for 100,000 ops, others
        // 2 s, 3 s idle. Left to the servers: 20 − 5 − 2 = 13 s, 1.3 cores; 100 µs per op.
        let b = bound(&usage(100_000, 10.0, 5.0, 10.0, 17.0, 20.0)).expect("bound");
        assert!(close(b.server_cpu_per_op_s, 100e-6), "{b:?}");
        assert!(close(b.server_cores, 1.3), "{b:?}");
        assert!(close(b.ops_per_s, 13_000.0), "{b:?}");
        // 10,000 ops/s of 13,000: the servers used 10 of the 13 s left to them.
        assert!(close(b.fraction, 10.0 / 13.0), "{b:?}");
        assert_eq!(b.server_io_per_op, Some((3.0, 2.0)));
    }

    #[test]
    fn servers_busy_all_the_time_left_is_the_ceiling() {
        let b = bound(&usage(50_000, 5.0, 4.0, 6.0, 10.0, 10.0)).expect("bound");
        assert!(close(b.fraction, 1.0), "{b:?}");
        assert!(close(b.ops_per_s, 10_000.0), "{b:?}");
    }

    #[test]
    fn rounding_never_makes_others_negative() {
        // Busy below servers + client (ticks against µs): others count as 0.
        let b = bound(&usage(1_000, 1.0, 0.5, 1.0, 1.4, 2.0)).expect("bound");
        assert!(close(b.server_cores, 1.5), "{b:?}");
    }

    #[test]
    fn no_bound_without_ops_time_server_cpu_or_cores() {
        assert_eq!(
            bound(&usage(0, 1.0, 0.5, 1.0, 2.0, 2.0)),
            Err(NoBound::NoOps)
        );
        assert_eq!(
            bound(&usage(10, 0.0, 0.5, 1.0, 2.0, 2.0)),
            Err(NoBound::NoWall)
        );
        assert_eq!(
            bound(&usage(10, 1.0, 0.5, 0.0, 2.0, 2.0)),
            Err(NoBound::NoServerCpu)
        );
        assert!(matches!(
            bound(&usage(10, 1.0, 1.0, 0.5, 2.5, 2.0)),
            Err(NoBound::NoCoresLeft { .. })
        ));
    }

    fn snap(servers: u64, busy: u64, total: u64) -> Result<Snapshot, String> {
        Ok(Snapshot {
            servers: Duration::from_millis(servers),
            server_io: Some(IoCalls {
                reads: servers * 2,
                writes: servers,
            }),
            machine: MachineTimes {
                busy: Duration::from_millis(busy),
                total: Duration::from_millis(total),
            },
        })
    }

    #[test]
    fn account_sums_slices_and_keeps_the_first_failure() {
        let mut a = Account::default();
        a.add(snap(100, 1_000, 2_000), snap(300, 1_500, 4_000));
        a.add(snap(400, 2_000, 5_000), snap(500, 2_100, 5_400));
        assert_eq!(a.servers, Duration::from_millis(300));
        assert_eq!(a.machine_busy, Duration::from_millis(600));
        assert_eq!(a.machine_total, Duration::from_millis(2_400));
        assert_eq!(
            a.server_io,
            IoCalls {
                reads: 600,
                writes: 300
            }
        );
        let u = super::usage(&a, 10, secs(1.0), secs(0.1)).expect("complete");
        assert!(u.server_io.is_some());
        // A slice without counts leaves the CPU times, not the calls.
        let mut b = a.clone();
        b.add(
            Ok(Snapshot {
                server_io: None,
                ..snap(0, 0, 0).expect("a snapshot")
            }),
            snap(1, 1, 1),
        );
        let u = super::usage(&b, 10, secs(1.0), secs(0.1)).expect("CPU still complete");
        assert_eq!(u.server_io, None);
        a.add(Err("gone".into()), snap(0, 0, 0));
        a.add(snap(0, 0, 0), Err("later".into()));
        assert_eq!(a.unavailable.as_deref(), Some("gone"));
        assert_eq!(
            super::usage(&a, 10, secs(1.0), secs(0.1)),
            Err(NoBound::Unmeasured("gone".into()))
        );
    }

    #[test]
    fn servers_from_pids() {
        assert_eq!(
            Servers::from_pids(&[Some(1), Some(2)]),
            Servers::Pids(vec![1, 2])
        );
        assert!(matches!(
            Servers::from_pids(&[Some(1), None]),
            Servers::Unknown(_)
        ));
        assert!(matches!(Servers::from_pids(&[]), Servers::Unknown(_)));
        assert!(Servers::Unknown("docker".into()).snapshot().is_err());
    }
}
