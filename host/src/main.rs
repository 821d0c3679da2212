//! The `conductor` command.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use conductor::config::{Config, PluginKind};
use conductor::plugins::PluginFile;

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
    /// Run the server until SIGTERM or SIGINT; SIGHUP re-reads the configuration and applies what
    /// changed.
    Serve {
        /// The configuration file (see the README's configuration reference).
        #[arg(long, short, env = "CONDUCTOR_CONFIG", default_value = "conductor.toml")]
        config: PathBuf,
        #[command(flatten)]
        plugins: PluginFolder,
    },
    /// Check a configuration file — reading and describing every plugin it names, their grants,
    /// their own configuration and the routes — and print what it would run; exit 1 naming the
    /// file, key and reason of the first error. Nothing is written, started or connected to.
    CheckConfig {
        /// The configuration file to check.
        file: PathBuf,
        /// Also reach the configured databases and Kubernetes API server, read-only: each plugin
        /// makes one instance (its `init`), with statements in read-only transactions and no
        /// LISTEN, watch, timer or write; embedded databases are not started.
        #[arg(long)]
        connect: bool,
        #[command(flatten)]
        plugins: PluginFolder,
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
        #[command(flatten)]
        plugins: PluginFolder,
    },
}

/// Where plugins named by a bare file name are found.
#[derive(clap::Args)]
struct PluginFolder {
    /// The folder of plugins named by file name (`file = "kube.wasm"`); wins over the
    /// configuration's `plugin_folder`.
    #[arg(long = "plugin-folder", env = "CONDUCTOR_PLUGIN_FOLDER", value_name = "DIR")]
    folder: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FileKind {
    Component,
    Native,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config, plugins } => serve(config, plugins),
        Command::CheckConfig { file, connect, plugins } => check(file, connect, plugins),
        Command::Plugins {
            command: PluginsCommand::List { config, plugins },
        } => list(config, plugins),
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

fn serve(config: PathBuf, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = Config::load(&config, plugins.folder)?;
    conductor::telemetry::logging::init(&loaded.config.log);
    runtime()?.block_on(conductor::app::run(loaded))
}

fn check(file: PathBuf, connect: bool, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = Config::load(&file, plugins.folder)?;
    let summary = runtime()?.block_on(conductor::app::describe(&loaded, connect))?;
    print!("{summary}");
    Ok(())
}

fn list(config: PathBuf, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = Config::load(&config, plugins.folder)?;
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
            let read = PluginFile::read(plugin.kind, &file).await;
            let checked = read.and_then(|f| f.check(&conductor::plugins::grants(plugin).capabilities).map(|_| f));
            match checked {
                Ok(f) => println!(
                    "{name}: would load {} {} from {} (contract {}, sources {:?}, data types {:?}, capabilities {:?}, grants {:?})",
                    f.description.name,
                    f.description.version,
                    file.display(),
                    f.description.sdk_version,
                    f.description.sources,
                    f.description.data_types,
                    names(&f.capabilities),
                    plugin.grants
                ),
                Err(e) => println!("{name}: would NOT load {}: {}", file.display(), conductor::app::plugin_set::error_chain(&e)),
            }
        }
    });
    Ok(())
}

fn names(capabilities: &[conductor_plugin_sdk::Capability]) -> Vec<&'static str> {
    capabilities.iter().map(|c| c.name()).collect()
}

fn inspect(file: PathBuf, kind: Option<FileKind>) -> anyhow::Result<()> {
    let kind = match kind {
        Some(FileKind::Component) => PluginKind::Component,
        Some(FileKind::Native) => PluginKind::Native,
        None if file.extension().is_some_and(|e| e == "wasm") => PluginKind::Component,
        None => PluginKind::Native,
    };
    let f = runtime()?.block_on(PluginFile::read(kind, &file))?;
    let d = &f.description;
    let from = match kind {
        PluginKind::Component => "read from its imports",
        _ => "declared",
    };
    println!("file:          {}", file.display());
    println!("kind:          {kind:?}");
    println!("name:          {}", d.name);
    println!("version:       {}", d.version);
    println!("contract:      conductor:plugin@{}", d.sdk_version);
    println!("sources:       {}", d.sources.join(", "));
    println!("data types:    {}", d.data_types.join(", "));
    println!("capabilities:  {} ({from})", names(&f.capabilities).join(", "));
    Ok(())
}
