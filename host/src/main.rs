//! The `conductor` command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use conductor::config::Config;

/// CloudEvents conductor for Open Cluster Management hubs: serves OCM's CloudEvents-over-gRPC
/// protocol to managed-cluster agents and routes every request to the source plugin that owns it.
#[derive(Parser)]
#[command(version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server until SIGTERM or SIGINT.
    Serve {
        /// The configuration file (see the README's configuration reference).
        #[arg(long, short, env = "CONDUCTOR_CONFIG", default_value = "conductor.toml")]
        config: PathBuf,
    },
    /// Check a configuration file and print what it would run; exit 1 naming the file, key and
    /// reason of the first error.
    CheckConfig {
        /// The configuration file to check.
        file: PathBuf,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config } => serve(config),
        Command::CheckConfig { file } => Config::load(&file)
            .and_then(|loaded| conductor::app::describe(&loaded))
            .map(|summary| print!("{summary}"))
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn serve(config: PathBuf) -> anyhow::Result<()> {
    let loaded = Config::load(&config)?;
    conductor::telemetry::logging::init(&loaded.config.log);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(conductor::app::run(loaded))
}
