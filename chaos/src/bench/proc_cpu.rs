//! CPU time from `/proc`: a process's user + system time (`/proc/<pid>/stat`) and the
//! machine's busy and total time (the `cpu` line of `/proc/stat`), for the throughput
//! case's [ceiling](super::ceiling).
//!
//! Both files count in clock ticks of `USER_HZ`, which Linux fixes at 100 per second in
//! what it exports to user space on every architecture the bench runs on (it is what
//! `sysconf(_SC_CLK_TCK)` and `getconf CLK_TCK` return; the crate does not link `libc`
//! directly to ask). A tick is 10 ms, so one reading of one process is ±10 ms: the
//! throughput case reads per slice and sums over [`super::cases::ROUNDS`] slices and 5
//! servers, seconds of server CPU per client, where that rounding is a few per cent at
//! worst (and the kernel's own accounting samples at tick granularity too).
//!
//! Beside the time, `/proc/<pid>/io` gives a process's read and write system calls
//! (`syscr`, `syscw`: `read`, `readv`, `write`, `writev` and the like — what a Valkey or
//! Redis server uses on its sockets). Per lock op they say how well a client's requests
//! are batched: a server that reads one request per `read` works more per op than one that
//! finds several in each. The file needs the right to trace the process (its owner or
//! root); without it the counts are absent and the CPU times still stand.
//!
//! `/proc/<pid>/stat` covers every thread of the process (Valkey's I/O and background
//! threads too). `/proc/stat` is the whole machine as the kernel sees it: in a container
//! with a CPU quota it counts cores the bench cannot use, which the ceiling's docs say.

use std::time::Duration;

/// Clock ticks per second in `/proc` (see the module docs).
pub const USER_HZ: u64 = 100;

/// Reading or parsing a `/proc` file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// The file could not be read (no such process, no `/proc`).
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file did not have the expected fields.
    #[error("{path}: {what}")]
    Malformed {
        /// The file.
        path: String,
        /// What was missing or not a number.
        what: String,
    },
}

fn ticks(t: u64) -> Duration {
    Duration::from_secs(t / USER_HZ) + Duration::from_millis((t % USER_HZ) * 1000 / USER_HZ)
}

/// User + system time of the process whose `/proc/<pid>/stat` text is `stat` (fields 14
/// and 15; the command name in field 2 may hold spaces and parentheses, so fields are
/// counted after the last `)`). `path` only names the file in errors.
pub fn parse_pid_stat(stat: &str, path: &str) -> Result<Duration, ProcError> {
    let malformed = |what: &str| ProcError::Malformed {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| malformed("no `)` closing the command name"))?;
    // After the name: field 3 (state) is index 0, so utime (14) is 11 and stime (15) 12.
    let mut fields = rest.split_whitespace().skip(11);
    let mut next = |name: &str| {
        fields
            .next()
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| malformed(&format!("{name} is missing or not a number")))
    };
    let utime = next("utime (field 14)")?;
    let stime = next("stime (field 15)")?;
    Ok(ticks(utime.saturating_add(stime)))
}

/// Read and write system calls of a process so far (`syscr`, `syscw` of `/proc/<pid>/io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCalls {
    /// `syscr`.
    pub reads: u64,
    /// `syscw`.
    pub writes: u64,
}

impl IoCalls {
    /// The calls made between `earlier` and `self`.
    pub fn since(self, earlier: IoCalls) -> IoCalls {
        IoCalls {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
        }
    }

    /// Both counts of `self` and `other` added.
    pub fn plus(self, other: IoCalls) -> IoCalls {
        IoCalls {
            reads: self.reads.saturating_add(other.reads),
            writes: self.writes.saturating_add(other.writes),
        }
    }
}

/// The `syscr` and `syscw` lines of `/proc/<pid>/io` text.
pub fn parse_pid_io(io: &str, path: &str) -> Result<IoCalls, ProcError> {
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ProcError::Malformed {
                path: path.to_owned(),
                what: format!("{name} is missing or not a number"),
            })
    };
    Ok(IoCalls {
        reads: field("syscr")?,
        writes: field("syscw")?,
    })
}

/// Read and write system calls of process `pid` so far.
pub fn process_io(pid: u32) -> Result<IoCalls, ProcError> {
    let path = format!("/proc/{pid}/io");
    parse_pid_io(&read(&path)?, &path)
}

/// The machine's CPU time so far, over all CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MachineTimes {
    /// Every state but idle and iowait: user, nice, system, irq, softirq, steal (steal is
    /// time the hypervisor gave to someone else: not available to the bench either).
    pub busy: Duration,
    /// Busy + idle + iowait: the CPU time that passed, cores × wall time.
    pub total: Duration,
}

/// The `cpu` line of `/proc/stat` text (`user nice system idle iowait irq softirq steal
/// guest guest_nice`; guest time is already in user and nice, so it is not added again;
/// kernels older than 2.6.11 without steal are accepted).
pub fn parse_machine_stat(stat: &str, path: &str) -> Result<MachineTimes, ProcError> {
    let malformed = |what: String| ProcError::Malformed {
        path: path.to_owned(),
        what,
    };
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| malformed("no aggregate `cpu` line".into()))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| {
            f.parse::<u64>()
                .map_err(|_| malformed(format!("`{f}` in the cpu line is not a number")))
        })
        .collect::<Result<_, _>>()?;
    if values.len() < 7 {
        return Err(malformed(format!(
            "the cpu line has {} fields, at least 7 expected",
            values.len()
        )));
    }
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    let idle = at(3).saturating_add(at(4));
    let busy = [0, 1, 2, 5, 6, 7]
        .into_iter()
        .fold(0u64, |acc, i| acc.saturating_add(at(i)));
    Ok(MachineTimes {
        busy: ticks(busy),
        total: ticks(busy.saturating_add(idle)),
    })
}

fn read(path: &str) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_owned(),
        source,
    })
}

/// User + system time of process `pid` so far.
pub fn process_time(pid: u32) -> Result<Duration, ProcError> {
    let path = format!("/proc/{pid}/stat");
    parse_pid_stat(&read(&path)?, &path)
}

/// The machine's CPU time so far.
pub fn machine_times() -> Result<MachineTimes, ProcError> {
    let path = "/proc/stat";
    parse_machine_stat(&read(path)?, path)
}

/// The servers' and the machine's CPU time at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// User + system time of every server process, summed.
    pub servers: Duration,
    /// The servers' read and write system calls, summed; `None` when any server's
    /// `/proc/<pid>/io` could not be read.
    pub server_io: Option<IoCalls>,
    /// The machine's.
    pub machine: MachineTimes,
}

impl Snapshot {
    /// Reads every server's `/proc/<pid>/stat` and `/proc/stat`.
    pub fn take(pids: &[u32]) -> Result<Snapshot, ProcError> {
        let mut servers = Duration::ZERO;
        let mut server_io = Some(IoCalls::default());
        for pid in pids {
            servers = servers.saturating_add(process_time(*pid)?);
            server_io = server_io.and_then(|sum| Some(sum.plus(process_io(*pid).ok()?)));
        }
        Ok(Snapshot {
            servers,
            server_io,
            machine: machine_times()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of `bad` fails `parse` as malformed, without a panic.
    fn all_malformed<T: std::fmt::Debug>(
        parse: impl Fn(&str, &str) -> Result<T, ProcError>,
        bad: &[&str],
    ) {
        for bad in bad {
            let e = parse(bad, "fixture").expect_err(bad);
            assert!(matches!(e, ProcError::Malformed { .. }), "{e}");
        }
    }

    // A valkey-server's stat, with a command name holding a space and a `)`.
    const PID_STAT: &str = "4242 (valkey-server) *:7001) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                            250 75 0 0 20 0 5 0 123456 300000000 2500 18446744073709551615 1 1 0 0 0 \
                            0 0 4097 17642 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn pid_stat_is_utime_plus_stime() {
        assert_eq!(
            parse_pid_stat(PID_STAT, "fixture").expect("parses"),
            Duration::from_millis(3250)
        );
    }

    #[test]
    fn bad_pid_stat_is_an_error_not_a_panic() {
        all_malformed(
            parse_pid_stat,
            &[
                "",
                "4242 valkey-server S 1",
                "4242 (valkey) S 1 2 3",
                "4242 (valkey) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 75",
            ],
        );
    }

    #[test]
    fn machine_stat_busy_and_total() {
        let stat = "cpu  20787 3 4142 92070 468 5 114 99 7 0\n\
                    cpu0 10000 1 2000 46000 200 2 50 40 3 0\n\
                    intr 1 2 3\n";
        let t = parse_machine_stat(stat, "fixture").expect("parses");
        // user + nice + system + irq + softirq + steal; guest is inside user already.
        assert_eq!(t.busy, ticks(20787 + 3 + 4142 + 5 + 114 + 99));
        assert_eq!(
            t.total,
            ticks(20787 + 3 + 4142 + 5 + 114 + 99 + 92070 + 468)
        );
        // No steal column (old kernels): still parsed.
        let old = parse_machine_stat("cpu 100 0 50 800 10 0 0\n", "fixture").expect("parses");
        assert_eq!(old.busy, Duration::from_millis(1500));
        assert_eq!(old.total, Duration::from_millis(9600));
    }

    #[test]
    fn bad_machine_stat_is_an_error_not_a_panic() {
        all_malformed(
            parse_machine_stat,
            &[
                "",
                "cpu0 1 2 3 4 5 6 7\n",
                "cpu 1 2 3\n",
                "cpu 1 2 x 4 5 6 7 8\n",
            ],
        );
    }

    #[test]
    fn pid_io_is_its_read_and_write_calls() {
        let io = "rchar: 2012\nwchar: 1001\nsyscr: 17\nsyscw: 9\nread_bytes: 0\n\
                  write_bytes: 4096\ncancelled_write_bytes: 0\n";
        let calls = parse_pid_io(io, "fixture").expect("parses");
        assert_eq!(
            calls,
            IoCalls {
                reads: 17,
                writes: 9
            }
        );
        let later = IoCalls {
            reads: 20,
            writes: 8,
        };
        // A counter that went back (another process under the pid) saturates at 0.
        assert_eq!(
            later.since(calls),
            IoCalls {
                reads: 3,
                writes: 0
            }
        );
        all_malformed(
            parse_pid_io,
            &[
                "",
                "syscr: 17\n",
                "syscr: x\nsyscw: 1\n",
                "syscrx: 1\nsyscw: 1\n",
            ],
        );
    }

    #[test]
    fn ticks_are_hundredths() {
        assert_eq!(ticks(0), Duration::ZERO);
        assert_eq!(ticks(1), Duration::from_millis(10));
        assert_eq!(ticks(12_345), Duration::from_millis(123_450));
        // Absurd counts saturate instead of overflowing.
        let _ = ticks(u64::MAX);
    }
}
