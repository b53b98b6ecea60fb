//! Heap allocations per lock operation (an acquire and its release), ours against rslock,
//! on the same nodes: what the client's allocator costs, counted instead of timed, so a
//! busy machine gives the same answer as a quiet one (issue 28 item 2: the allocator was
//! about an eighth of the client's CPU in the throughput case's profile). Beside them, the
//! process's read and write system calls (`/proc/self/io`: `syscr`, `syscw`, which count
//! socket reads and writes too) and its context switches (`getrusage`: voluntary ones are
//! a thread parking for lack of work, involuntary ones a thread preempted) per operation:
//! where the kernel's share of the client's CPU goes. Those depend on timing (a busy
//! connection batches more requests per write), so take them on a quiet machine.
//!
//! ```text
//! cargo run --profile ci -p redlock-chaos --features peers --example allocs -- \
//!     redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003 \
//!     redis://127.0.0.1:7004 redis://127.0.0.1:7005
//! ```
//!
//! Each client runs the bench's throughput cycle (`try_acquire`-style acquire, then
//! release, each task on a resource of its own) with 1 task and with 64 at once; the
//! counts are the whole process's (the runtime's own work included, alike for every
//! client), divided by the operations done. A warm-up first opens the connections and
//! fills the caches every client keeps.

use std::alloc::System;
use std::sync::Arc;
use std::time::Duration;

use redlock_chaos::bench::clients::{LockClient, Ours, Rslock};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Operations per task in a measured run (and half as many to warm up).
const OPS_PER_TASK: usize = 400;
const TTL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `ALLOCS_ONLY=ours` (a client's name) and `ALLOCS_TASKS=64` run one row alone, so a
    // counter outside the process (`perf stat -e 'syscalls:sys_enter_*'`) sees one client.
    let only = std::env::var("ALLOCS_ONLY").ok();
    let only_tasks: Option<usize> = std::env::var("ALLOCS_TASKS")
        .ok()
        .and_then(|t| t.parse().ok());
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls = (7001..=7005)
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
    }
    let clients: Vec<Arc<dyn LockClient>> = vec![
        Arc::new(Ours::new(&urls, TTL, false)?),
        Arc::new(Ours::new(&urls, TTL, true)?),
        Arc::new(Rslock::new(&urls)?),
    ];
    println!(
        "| client | tasks | ops | allocations / op | reallocations / op | bytes allocated / op | read calls / op | write calls / op | voluntary switches / op | involuntary / op |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for tasks in [1, 64] {
        if only_tasks.is_some_and(|t| t != tasks) {
            continue;
        }
        for client in &clients {
            if only.as_deref().is_some_and(|o| o != client.name()) {
                continue;
            }
            run(client, tasks, OPS_PER_TASK / 2, "warm").await?;
            let kernel = Kernel::now();
            let region = Region::new(GLOBAL);
            let ops = run(client, tasks, OPS_PER_TASK, "measured").await?;
            let stats = region.change();
            let kernel = Kernel::now().since(kernel);
            let per_op = |n: usize| n as f64 / ops as f64;
            let per_op_k = |n: u64| n as f64 / ops as f64;
            println!(
                "| {} | {tasks} | {ops} | {:.1} | {:.1} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                client.name(),
                per_op(stats.allocations),
                per_op(stats.reallocations),
                per_op(stats.bytes_allocated),
                per_op_k(kernel.reads),
                per_op_k(kernel.writes),
                per_op_k(kernel.voluntary),
                per_op_k(kernel.involuntary),
            );
        }
    }
    Ok(())
}

/// The process's system-call and context-switch counters (zeros where unreadable).
#[derive(Clone, Copy, Default)]
struct Kernel {
    reads: u64,
    writes: u64,
    voluntary: u64,
    involuntary: u64,
}

impl Kernel {
    fn now() -> Kernel {
        let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| {
            io.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok();
        let switches = |f: fn(&nix::sys::resource::Usage) -> i64| {
            usage
                .as_ref()
                .map_or(0, |u| u64::try_from(f(u)).unwrap_or(0))
        };
        Kernel {
            reads: field("syscr:"),
            writes: field("syscw:"),
            voluntary: switches(|u| u.voluntary_context_switches()),
            involuntary: switches(|u| u.involuntary_context_switches()),
        }
    }

    fn since(self, before: Kernel) -> Kernel {
        Kernel {
            reads: self.reads.saturating_sub(before.reads),
            writes: self.writes.saturating_sub(before.writes),
            voluntary: self.voluntary.saturating_sub(before.voluntary),
            involuntary: self.involuntary.saturating_sub(before.involuntary),
        }
    }
}

/// `tasks` tasks, each `ops` cycles on its own resource; the number of cycles completed
/// (failed ones are told on stderr: their allocations stay in the count).
async fn run(
    client: &Arc<dyn LockClient>,
    tasks: usize,
    ops: usize,
    phase: &str,
) -> Result<usize, Box<dyn std::error::Error>> {
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let client = Arc::clone(client);
        let resource = format!("allocs:{}:{phase}:{t}", client.name());
        set.spawn(async move {
            let (mut done, mut failed) = (0, 0);
            for _ in 0..ops {
                // A refused or timed-out acquire (a busy machine) is not an operation.
                let Ok(held) = client.acquire(&resource, TTL).await else {
                    failed += 1;
                    continue;
                };
                match client.release(held).await {
                    Ok(()) => done += 1,
                    Err(_) => failed += 1,
                }
            }
            (done, failed)
        });
    }
    let (mut done, mut failed) = (0, 0);
    while let Some(r) = set.join_next().await {
        let (d, f) = r?;
        done += d;
        failed += f;
    }
    if failed > 0 {
        eprintln!(
            "{} ({phase}, {tasks} tasks): {failed} failed cycles, not counted",
            client.name()
        );
    }
    if done == 0 {
        return Err(format!("{}: no cycle completed", client.name()).into());
    }
    Ok(done)
}
