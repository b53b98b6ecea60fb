//! End to end: `chaos run` self-started on both backends and attached to a stack brought
//! up apart, built as one test binary (`e2e`) to compile the shared code once (issue 25).

mod chaos_attach;
mod chaos_run_docker;
mod chaos_run_local;
