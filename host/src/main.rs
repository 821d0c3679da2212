//! The `conductor` command.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use conductor::config::{Config, PluginKind};

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
    /// Run the server until SIGTERM or SIGINT; SIGHUP reloads the plugin files.
    Serve {
        /// The configuration file (see the README's configuration reference).
        #[arg(long, short, env = "CONDUCTOR_CONFIG", default_value = "conductor.toml")]
        config: PathBuf,
    },
    /// Check a configuration file — loading every plugin it names — and print what it would run;
    /// exit 1 naming the file, key and reason of the first error.
    CheckConfig {
        /// The configuration file to check.
        file: PathBuf,
    },
    /// Look at plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Print what a plugin file declares: name, version, SDK version, sources, data types and
    /// the capabilities it needs.
    Inspect {
        /// A WebAssembly component (`.wasm`) or a native library (`.so`, `.dylib`).
        file: PathBuf,
        /// The plugin's form; guessed from the file name when left out.
        #[arg(long, value_enum)]
        kind: Option<FileKind>,
    },
    /// Show what a configuration would load: each plugin and its routes, or why not.
    List {
        /// The configuration file.
        #[arg(long, short, default_value = "conductor.toml")]
        config: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum FileKind {
    Component,
    Native,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config } => serve(config),
        Command::CheckConfig { file } => check(file),
        Command::Plugins {
            command: PluginsCommand::List { config },
        } => list(config),
        Command::Plugins {
            command: PluginsCommand::Inspect { file, kind },
        } => inspect(file, kind),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn serve(config: PathBuf) -> anyhow::Result<()> {
    let loaded = Config::load(&config)?;
    conductor::telemetry::logging::init(&loaded.config.log);
    runtime()?.block_on(conductor::app::run(loaded))
}

fn check(file: PathBuf) -> anyhow::Result<()> {
    let loaded = Config::load(&file)?;
    let summary = runtime()?.block_on(conductor::app::describe(&loaded))?;
    print!("{summary}");
    Ok(())
}

fn list(config: PathBuf) -> anyhow::Result<()> {
    let loaded = Config::load(&config)?;
    runtime()?.block_on(async {
        for (name, plugin) in &loaded.config.plugins {
            let Some(file) = loaded.plugin_file(plugin) else {
                println!(
                    "{name}: built-in {:?} source, routes {:?}",
                    plugin.kind,
                    loaded.config.sources_of(name)
                );
                continue;
            };
            let described = conductor::plugins::inspect(plugin.kind, &file).await;
            let checked =
                described.and_then(|d| conductor::plugins::check(&d, &conductor::plugins::grants(plugin)).map(|_| d));
            match checked {
                Ok(d) => println!(
                    "{name}: would load {} {} from {} (sources {:?}, data types {:?}, capabilities {:?}, grants {:?})",
                    d.name,
                    d.version,
                    file.display(),
                    d.sources,
                    d.data_types,
                    d.capabilities,
                    plugin.grants
                ),
                Err(e) => println!("{name}: would NOT load {}: {e}", file.display()),
            }
        }
    });
    Ok(())
}

fn inspect(file: PathBuf, kind: Option<FileKind>) -> anyhow::Result<()> {
    let kind = match kind {
        Some(FileKind::Component) => PluginKind::Component,
        Some(FileKind::Native) => PluginKind::Native,
        None if file.extension().is_some_and(|e| e == "wasm") => PluginKind::Component,
        None => PluginKind::Native,
    };
    let d = runtime()?.block_on(conductor::plugins::inspect(kind, &file))?;
    println!("file:          {}", file.display());
    println!("kind:          {kind:?}");
    println!("name:          {}", d.name);
    println!("version:       {}", d.version);
    println!("sdk version:   {}", d.sdk_version);
    println!("sources:       {}", d.sources.join(", "));
    println!("data types:    {}", d.data_types.join(", "));
    println!("capabilities:  {}", d.capabilities.join(", "));
    Ok(())
}
