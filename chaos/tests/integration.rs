//! The rig's integration tests, one module per subject, built as one test binary
//! (`integration`): one link and one copy of the shared code instead of one per file
//! (issue 25). Run one subject with `cargo nextest run -p redlock-chaos --test integration
//! -E 'test(/^nemesis::/)'`.

mod common;
mod legacy_recipes;
mod report_fixture;
mod schema;
mod support;
mod toxiproxy_rig;

mod bench;
mod cli_contract;
mod cluster_docker;
mod cluster_local;
mod compose;
mod compose_offline;
mod counter_faults;
// By path: its own `#[path]` modules then resolve from tests/, as when it was a crate root.
#[path = "example_claim_first.rs"]
mod example_claim_first;
mod lock_cli;
mod lock_mutant_catalogue;
mod mutants;
mod nemesis;
mod official_images;
mod peer_rslock;
mod pg_fencing;
mod plain_lock;
mod proxy;
mod quick_table;
mod report;
mod report_browser;
mod scenario_files;
mod schemas;
mod stale_writer;
mod toxiproxy_api;
mod toxiproxy_cli;
mod toxiproxy_python_client;
mod toxiproxy_rust_client;
mod toxiproxy_toxics;
