//! The `conductor` command: the command line parsed, and each command handed to its body in
//! [`conductor::commands`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use conductor::commands;

/// CloudEvents conductor for Open Cluster Management hubs: serves OCM's CloudEvents-over-gRPC
/// protocol to managed-cluster agents and routes every request to the source plugin that owns it.
#[derive(Parser)]
#[command(version = conductor::build_info::version_line(), propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server until SIGTERM or SIGINT; SIGHUP re-reads the configuration and applies what
    /// changed.
    Serve {
        /// The configuration file (every key: docs/reference/configuration.md).
        #[arg(long, short, env = "CONDUCTOR_CONFIG", default_value = "conductor.toml")]
        config: PathBuf,
        #[command(flatten)]
        plugins: commands::PluginFolder,
    },
    /// Run as OCM's hub gRPC server runs, for a drop-in replacement of it or of the Go
    /// conductor: `/server grpc --server-config=/var/run/secrets/hub/grpc/config/config.yaml`,
    /// with every flag they take (those that mean nothing to conductor are logged as ignored).
    /// The file is OCM's format (flat) or the Go conductor's (`grpc_config`, `db_config`); a
    /// missing file means OCM's defaults. `--print-config` prints the equivalent conductor.toml.
    #[command(disable_help_flag = true)]
    Grpc {
        /// `--server-config=FILE`, `--kubeconfig=FILE`, `--listen=ADDR` (health and metrics,
        /// `:8443`), `--tls-min-version`, `--tls-cipher-suites`, `--broker-heartbeat-interval`,
        /// `--broker-heartbeat-disabled`, `-v=N`, `--print-config`, and the library flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check a configuration file — reading and describing every plugin it names, their grants,
    /// their own configuration and the routes — and print what it would run; exit 1 naming the
    /// file, key and reason of the first error. Nothing is started or connected to, and nothing
    /// written but the plugins it pulls from registries (`oci://…`) into the artifact cache.
    CheckConfig {
        /// The configuration file to check.
        file: PathBuf,
        /// Also reach the configured databases and Kubernetes API server, read-only: each plugin
        /// makes one instance (its `init`), with statements in read-only transactions and no
        /// LISTEN, watch, timer or write; embedded databases are not started.
        #[arg(long)]
        connect: bool,
        #[command(flatten)]
        plugins: commands::PluginFolder,
    },
    /// Look at plugins, start one, test one.
    Plugins {
        #[command(subcommand)]
        command: commands::plugins::PluginsCommand,
    },
    /// Look inside a running conductor through its admin endpoint.
    Inspect {
        #[command(subcommand)]
        what: commands::inspect::InspectWhat,
        #[command(flatten)]
        admin: commands::Admin,
        /// `table` for people, `json` for scripts.
        #[arg(long, short, value_enum, default_value = "table", global = true)]
        output: commands::inspect::Output,
    },
    /// Ask a running conductor to re-read its configuration and apply what changed (as SIGHUP
    /// does); prints what changed, or why the new configuration was refused.
    Reload {
        #[command(flatten)]
        admin: commands::Admin,
    },
    /// Be an OCM agent in a terminal: watch what a managed cluster's agent is sent, report a
    /// work's status, publish a CloudEvent written as JSON. Errors print the gRPC code and the
    /// server's message.
    Agent {
        #[command(subcommand)]
        command: conductor::agent::cli::AgentCommand,
    },
}

/// The arguments, without a leading `/server`: the image's binary is also `/server`, which OCM's
/// operator names as the container's first argument, so an entrypoint put before it still runs.
fn arguments() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "/server") {
        args.remove(1);
    }
    args
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse_from(arguments());
    let result = match cli.command {
        Command::Serve { config, plugins } => commands::serve::serve(&config, plugins),
        Command::Grpc { args } if args.iter().any(|a| a == "--help" || a == "-h") => grpc_help(),
        Command::Grpc { args } => commands::serve::grpc(args),
        Command::CheckConfig { file, connect, plugins } => {
            commands::check_config::check_config(&file, connect, plugins)
        }
        Command::Plugins { command } => commands::plugins::run(command),
        Command::Inspect { what, admin, output } => commands::inspect::inspect(what, &admin, output),
        Command::Reload { admin } => commands::reload::reload(&admin),
        Command::Agent { command } => conductor::agent::run(command),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `conductor grpc --help`: its flags are OCM's, parsed by the drop-in, so clap's help flag is
/// off for it and the help is printed here.
fn grpc_help() -> anyhow::Result<()> {
    let mut command = <Cli as clap::CommandFactory>::command();
    if let Some(grpc) = command.find_subcommand_mut("grpc") {
        grpc.print_long_help()?;
    }
    Ok(())
}
