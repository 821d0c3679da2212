//! The `conductor` command.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use conductor::config::{Config, LoadedConfig, PluginKind};
use conductor::plugins::PluginFile;

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
        plugins: PluginFolder,
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
        plugins: PluginFolder,
    },
    /// Look at plugins, start one, test one.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Look inside a running conductor through its admin endpoint.
    Inspect {
        #[command(subcommand)]
        what: InspectWhat,
        #[command(flatten)]
        admin: Admin,
        /// `table` for people, `json` for scripts.
        #[arg(long, short, value_enum, default_value = "table", global = true)]
        output: Output,
    },
    /// Ask a running conductor to re-read its configuration and apply what changed (as SIGHUP
    /// does); prints what changed, or why the new configuration was refused.
    Reload {
        #[command(flatten)]
        admin: Admin,
    },
    /// Be an OCM agent in a terminal: watch what a managed cluster's agent is sent, report a
    /// work's status, publish a CloudEvent written as JSON. Errors print the gRPC code and the
    /// server's message.
    Agent {
        #[command(subcommand)]
        command: conductor::agent::cli::AgentCommand,
    },
}

/// The admin endpoint of a running conductor.
#[derive(clap::Args)]
struct Admin {
    /// Its URL (`[admin] listen` of the running configuration; `https://` when it serves
    /// `[admin.tls]`).
    #[arg(
        long,
        env = "CONDUCTOR_ADMIN",
        default_value = "http://127.0.0.1:9090",
        global = true
    )]
    admin: String,
    /// A file holding the bearer token to send (`[admin] authorization = "sar"`); default: the
    /// pod's service account token, when there is one.
    #[arg(long, env = "CONDUCTOR_ADMIN_TOKEN_FILE", global = true)]
    token_file: Option<PathBuf>,
    /// The CA (PEM) an `https://` endpoint's certificate is signed by.
    #[arg(long, env = "CONDUCTOR_ADMIN_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
    /// The name an `https://` endpoint's certificate must carry, when not the URL's host: through
    /// `kubectl port-forward`, the Service name the certificate was made for.
    #[arg(long, env = "CONDUCTOR_ADMIN_TLS_SERVER_NAME", global = true)]
    tls_server_name: Option<String>,
}

impl Admin {
    fn endpoint(&self) -> conductor::admin_client::client::Endpoint {
        conductor::admin_client::client::Endpoint::new(&self.admin, self.token_file.clone(), self.ca_file.clone())
            .with_tls_server_name(self.tls_server_name.clone())
    }
}

#[derive(Subcommand, Clone)]
enum InspectWhat {
    /// Live Subscribe streams: cluster, data type, user, remote address, age, events sent, queue.
    Subscribers,
    /// Plugins: form, version, grants, sources, data types, instances, calls, errors, call
    /// latency, last error, when loaded; for one pulled from a registry, its `oci://…@sha256:…`
    /// reference and its component's digest.
    Plugins,
    /// One plugin: its row of `inspect plugins`, then every key it keeps in `kv` with its value.
    Plugin {
        /// The plugin's name in `conductor.toml`.
        name: String,
    },
    /// Source → plugin routes, and the last reload's outcome.
    Routes,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
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
        lang: conductor::authoring::new::Lang,
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

#[derive(Subcommand)]
enum ToolsCommand {
    /// Install the pinned tools of one language through this machine's pip or npm (its own index
    /// configuration): componentize-py for Python (in a virtual environment made with python3),
    /// componentize-js and rolldown for JavaScript (`npm ci` of the pinned lock). An install of
    /// the same pins is kept; the commands are linked in DIR/bin, where the build scripts of
    /// `plugins new` look.
    Install {
        /// The language whose tools to install.
        #[arg(long, value_enum)]
        lang: conductor::authoring::tools::ToolsLang,
        /// The folder to install into (default: $XDG_CACHE_HOME/conductor/tools, else
        /// ~/.cache/conductor/tools).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// How a command reaches a registry.
#[derive(clap::Args)]
struct RegistryArgs {
    /// A Docker config file with the registry's credentials (default:
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, when present).
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted for the registry besides the machine's.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
}

impl RegistryArgs {
    fn options(self) -> conductor::oci::RegistryOptions {
        conductor::app::distribute::command_line_options(self.auth_file, self.ca_file)
    }
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
        Command::Serve { config, plugins } => serve(config, plugins),
        Command::Grpc { args } => grpc(args),
        Command::CheckConfig { file, connect, plugins } => check(file, connect, plugins),
        Command::Plugins {
            command: PluginsCommand::List { config, plugins },
        } => list(config, plugins),
        Command::Plugins {
            command: PluginsCommand::Inspect { file, kind },
        } => inspect(file, kind),
        Command::Plugins {
            command:
                PluginsCommand::Push {
                    file,
                    reference,
                    sign_key,
                    registry,
                },
        } => push(&file, &reference, sign_key.as_deref(), registry),
        Command::Plugins {
            command:
                PluginsCommand::Pull {
                    reference,
                    verify_key,
                    cache,
                    registry,
                },
        } => pull(&reference, verify_key.as_deref(), cache, registry),
        Command::Plugins {
            command:
                PluginsCommand::New {
                    name,
                    lang,
                    dir,
                    sdk_path,
                },
        } => new_plugin(name, lang, dir, sdk_path),
        Command::Plugins {
            command: PluginsCommand::Test { file },
        } => test_plugin(&file),
        Command::Plugins {
            command: PluginsCommand::Tools {
                command: ToolsCommand::Install { lang, dir },
            },
        } => install_tools(lang, dir),
        Command::Inspect { what, admin, output } => inspect_running(what, &admin.endpoint(), output),
        Command::Reload { admin } => reload(&admin.endpoint()),
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Reads the configuration, and keeps compiled components where it says.
fn load(config: &Path, plugins: PluginFolder) -> anyhow::Result<LoadedConfig> {
    let loaded = Config::load(config, plugins.folder)?;
    conductor::plugins::wasm::set_compile_cache(loaded.compile_cache());
    conductor::plugins::wasm::set_compile_cache_max_size(loaded.config.compile_cache_max_size.0);
    Ok(loaded)
}

fn serve(config: PathBuf, plugins: PluginFolder) -> anyhow::Result<()> {
    run(load(&config, plugins)?, None)
}

/// `conductor grpc`: OCM's command line and server configuration made into conductor's.
fn grpc(args: Vec<String>) -> anyhow::Result<()> {
    use std::sync::Arc;
    if args.iter().any(|a| a == "--help" || a == "-h") {
        let mut command = <Cli as clap::CommandFactory>::command();
        if let Some(grpc) = command.find_subcommand_mut("grpc") {
            grpc.print_long_help()?;
        }
        return Ok(());
    }
    let dropin = Arc::new(conductor::dropin::DropIn::new(args)?);
    let made = dropin.make()?;
    if dropin.flags.print_config {
        print!("{}", made.text);
        return Ok(());
    }
    dropin.make_health_cert()?;
    conductor::plugins::wasm::set_compile_cache(made.loaded.compile_cache());
    conductor::plugins::wasm::set_compile_cache_max_size(made.loaded.config.compile_cache_max_size.0);
    run(made.loaded, Some(made.report))
}

/// Serves `loaded` until SIGTERM; `report` (how the configuration was made) is logged first.
fn run(loaded: LoadedConfig, report: Option<conductor::dropin::Report>) -> anyhow::Result<()> {
    let runtime = runtime()?;
    let traces = match &loaded.config.telemetry.otlp {
        Some(otlp) => {
            let _entered = runtime.enter();
            Some(conductor::telemetry::traces::Traces::start(otlp).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    conductor::telemetry::logging::init(&loaded.config.log, traces.as_ref().map(|t| t.tracer()));
    if let Some(report) = report {
        report.log();
    }
    let served = runtime.block_on(conductor::app::run(loaded));
    if let Some(traces) = traces {
        traces.shutdown();
    }
    served
}

fn check(file: PathBuf, connect: bool, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = load(&file, plugins)?;
    let summary = runtime()?.block_on(conductor::app::describe(&loaded, connect))?;
    print!("{summary}");
    Ok(())
}

fn list(config: PathBuf, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = load(&config, plugins)?;
    runtime()?.block_on(async {
        for (name, plugin) in &loaded.config.plugins {
            if plugin.kind == PluginKind::Memory {
                println!(
                    "{name}: built-in {:?} source, routes {:?}",
                    plugin.kind,
                    loaded.config.sources_of(name)
                );
                continue;
            }
            let located = match conductor::app::artifacts::locate(&loaded, name).await {
                Ok(located) => located,
                Err(e) => {
                    println!("{name}: would NOT load: {e}");
                    continue;
                }
            };
            let file = &located.path;
            let read = located.read(plugin.kind).await;
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
    conductor::plugins::wasm::set_compile_cache(conductor::config::default_compile_cache());
    let f = runtime()?.block_on(PluginFile::read(kind, &file, None))?;
    print!("{}", conductor::app::distribute::describe(&f));
    Ok(())
}

fn push(file: &Path, reference: &str, sign_key: Option<&Path>, registry: RegistryArgs) -> anyhow::Result<()> {
    conductor::plugins::wasm::set_compile_cache(conductor::config::default_compile_cache());
    let out = runtime()?.block_on(conductor::app::distribute::push(
        file,
        reference,
        &registry.options(),
        sign_key,
    ))?;
    print!("{out}");
    Ok(())
}

fn pull(
    reference: &str,
    verify_key: Option<&Path>,
    cache: Option<PathBuf>,
    registry: RegistryArgs,
) -> anyhow::Result<()> {
    conductor::plugins::wasm::set_compile_cache(conductor::config::default_compile_cache());
    let cache = cache
        .or_else(conductor::config::default_oci_cache)
        .ok_or_else(|| anyhow::anyhow!("no cache folder: give --cache (neither XDG_CACHE_HOME nor HOME is set)"))?;
    let out = runtime()?.block_on(conductor::app::distribute::pull(
        reference,
        &cache,
        &registry.options(),
        verify_key,
    ))?;
    print!("{out}");
    Ok(())
}

fn new_plugin(
    name: String,
    lang: conductor::authoring::new::Lang,
    dir: Option<PathBuf>,
    sdk_path: Option<PathBuf>,
) -> anyhow::Result<()> {
    use conductor::authoring::new;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let created = new::create(&new::NewProject {
        name,
        lang,
        dir,
        sdk_path,
    })?;
    print!("{}", new::next_steps(&created, lang));
    Ok(())
}

fn install_tools(lang: conductor::authoring::tools::ToolsLang, dir: Option<PathBuf>) -> anyhow::Result<()> {
    use conductor::authoring::tools;
    let installed = tools::install(lang, dir.as_deref())?;
    let default = dir.is_none() || dir == tools::default_dir();
    print!("{}", tools::report(&installed, default));
    Ok(())
}

fn test_plugin(file: &Path) -> anyhow::Result<()> {
    if runtime()?.block_on(conductor::authoring::test_plugin(file))? {
        Ok(())
    } else {
        anyhow::bail!("{}: a call answered otherwise than the script expects", file.display())
    }
}

fn inspect_running(
    what: InspectWhat,
    admin: &conductor::admin_client::client::Endpoint,
    output: Output,
) -> anyhow::Result<()> {
    use conductor::admin::views as inspect;
    use conductor::admin_client::{client, table};
    let path = match &what {
        InspectWhat::Subscribers => "/inspect/subscribers".to_owned(),
        InspectWhat::Plugins => "/inspect/plugins".to_owned(),
        InspectWhat::Plugin { name } => format!("/inspect/plugins/{}", client::path_segment(name)),
        InspectWhat::Routes => "/inspect/routes".to_owned(),
    };
    let path = path.as_str();
    let body = runtime()?.block_on(client::request(admin, hyper::Method::GET, path))?;
    let now = chrono::Utc::now();
    let bad = |e: serde_json::Error| anyhow::anyhow!("{}{path} answered something else than expected: {e}", admin.url);
    let text = match (output, what) {
        (Output::Json, _) => {
            let value: serde_json::Value = serde_json::from_str(&body).map_err(bad)?;
            serde_json::to_string_pretty(&value)? + "\n"
        }
        (Output::Table, InspectWhat::Subscribers) => {
            let subscribers: Vec<inspect::Subscriber> = serde_json::from_str(&body).map_err(bad)?;
            table::subscribers(&subscribers, now)
        }
        (Output::Table, InspectWhat::Plugins) => {
            let plugins: Vec<inspect::Plugin> = serde_json::from_str(&body).map_err(bad)?;
            table::plugins(&plugins, now)
        }
        (Output::Table, InspectWhat::Plugin { .. }) => {
            table::plugin_detail(&serde_json::from_str(&body).map_err(bad)?, now)
        }
        (Output::Table, InspectWhat::Routes) => table::routes(&serde_json::from_str(&body).map_err(bad)?, now),
    };
    print!("{text}");
    Ok(())
}

fn reload(admin: &conductor::admin_client::client::Endpoint) -> anyhow::Result<()> {
    let body = runtime()?.block_on(conductor::admin_client::client::request(
        admin,
        hyper::Method::POST,
        "/reload",
    ))?;
    print!("{body}");
    Ok(())
}
