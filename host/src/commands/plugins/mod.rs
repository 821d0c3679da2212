//! `conductor plugins …`: look at plugin files ([`inspect`]), at what a configuration would load
//! ([`list`]), publish and fetch them ([`distribute`]), and what plugin authors run
//! ([`authoring`]: `new`, `test`, `tools install`).

pub mod authoring;
pub mod distribute;
pub mod inspect;
pub mod list;

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

use super::PluginFolder;
use crate::oci::RegistryOptions;

// The subcommands of `conductor plugins`; each variant's doc comment is its help.
#[derive(Subcommand)]
pub enum PluginsCommand {
    /// Print what a plugin file declares: name, version, SDK version, sources, data types and
    /// the capabilities it needs.
    Inspect {
        /// A WebAssembly component (`.wasm`) or a native library (`.so`, `.dylib`).
        file: PathBuf,
        /// The plugin's form; guessed from the file name when left out.
        #[arg(long, value_enum)]
        kind: Option<FileKind>,
    },
    /// Publish a built component to a registry (`oci://registry/repository:tag`) as conductor
    /// loads plugins from one (the CNCF layout for WebAssembly), optionally signed; prints the
    /// digest and the `file = "oci://…@sha256:…"` to load it by.
    Push {
        /// The component (`.wasm`).
        file: PathBuf,
        /// `oci://registry[:port]/repository[:tag]`.
        reference: String,
        /// Sign it with this ECDSA P-256 key (PKCS#8 PEM): a cosign signature beside it.
        #[arg(long, value_name = "KEY")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Fetch a plugin from a registry (`oci://…@sha256:…`) into the cache and describe it, without
    /// loading it.
    Pull {
        /// `oci://registry[:port]/repository@sha256:<digest>`.
        reference: String,
        /// Accept it only if signed with this key (PEM public key, as `cosign.pub`).
        #[arg(long, value_name = "KEY")]
        verify_key: Option<PathBuf>,
        /// The folder pulled artifacts are kept in (default: as `[oci] cache`).
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Write a plugin project to start from: the plugin, a unit test against the SDK's fakes, a
    /// build script, a conductor.toml that loads it and a plugin-test.toml for `plugins test`.
    New {
        /// The plugin's name (lowercase letters, digits and `-`): its package, plugin and source.
        name: String,
        /// The language of the plugin.
        #[arg(long, value_enum)]
        lang: crate::authoring::new::Lang,
        /// Where to write the project (default: ./NAME); it must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The conductor repository's plugin-sdk folder: the project depends on that checkout of
        /// the SDK (Cargo path, `pip install <sdk>/python`, npm `file:<sdk>/js`) instead of the
        /// SDK this conductor carries, which it writes into the project's sdk/.
        #[arg(long, value_name = "PATH")]
        sdk_path: Option<PathBuf>,
    },
    /// The tools that build Python and JavaScript plugins into components.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Load a plugin file in conductor's runtime with fake capabilities and replay the scripted
    /// agent conversation of FILE (resync, status updates, deletes, timers), printing each call's
    /// answer; exit 1 when one differs from what the script expects.
    Test {
        /// The script (a TOML file: the plugin's table, then `[[step]]`s; see the plugin
        /// author's guide).
        file: PathBuf,
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

// The subcommands of `conductor plugins tools`.
#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Install the pinned tools of one language through this machine's pip or npm (its own index
    /// configuration): componentize-py for Python (in a virtual environment made with python3),
    /// componentize-js and rolldown for JavaScript (`npm ci` of the pinned lock). An install of
    /// the same pins is kept; the commands are linked in DIR/bin, where the build scripts of
    /// `plugins new` look.
    Install {
        /// The language whose tools to install.
        #[arg(long, value_enum)]
        lang: crate::authoring::tools::ToolsLang,
        /// The folder to install into (default: $XDG_CACHE_HOME/conductor/tools, else
        /// ~/.cache/conductor/tools).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// How a command reaches a registry.
#[derive(clap::Args)]
pub struct RegistryArgs {
    /// A Docker config file with the registry's credentials (default:
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, when present).
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted for the registry besides the machine's.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
}

impl RegistryArgs {
    fn options(self) -> RegistryOptions {
        distribute::command_line_options(self.auth_file, self.ca_file)
    }
}

// A plugin file's form, as `plugins inspect --kind` names it.
#[derive(Clone, Copy, ValueEnum)]
pub enum FileKind {
    Component,
    Native,
}

/// Runs one `conductor plugins` command.
pub fn run(command: PluginsCommand) -> anyhow::Result<()> {
    match command {
        PluginsCommand::List { config, plugins } => list::list(&config, plugins),
        PluginsCommand::Inspect { file, kind } => inspect::inspect(&file, kind),
        PluginsCommand::Push {
            file,
            reference,
            sign_key,
            registry,
        } => distribute::push(&file, &reference, sign_key.as_deref(), registry),
        PluginsCommand::Pull {
            reference,
            verify_key,
            cache,
            registry,
        } => distribute::pull(&reference, verify_key.as_deref(), cache, registry),
        PluginsCommand::New {
            name,
            lang,
            dir,
            sdk_path,
        } => authoring::new_plugin(name, lang, dir, sdk_path),
        PluginsCommand::Test { file } => authoring::test_plugin(&file),
        PluginsCommand::Tools {
            command: ToolsCommand::Install { lang, dir },
        } => authoring::install_tools(lang, dir),
    }
}
