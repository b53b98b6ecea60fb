//! `chaos`: command-line entry point.

fn main() {}
