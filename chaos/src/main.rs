//! `chaos`: command-line entry point.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Chaos rig for fenced-redlock.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Toxiproxy HTTP API (and its proxies) until Ctrl-C or SIGTERM.
    Toxiproxy {
        /// Address of the HTTP API.
        #[arg(long, default_value = "127.0.0.1:8474")]
        listen: SocketAddr,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Toxiproxy { listen } => redlock_chaos::proxy::run(listen).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos: {e}");
            ExitCode::FAILURE
        }
    }
}
