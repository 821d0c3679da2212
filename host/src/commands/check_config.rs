//! `conductor check-config`: what a configuration would run, read without changing anything.
//! Plugin files are read and described (a component in a sandbox with no capability linked),
//! grants and each plugin's own configuration are checked (`check-config` export), routes are
//! resolved. No database, API server, LISTEN, watch, timer or embedded server is touched.
//!
//! `--connect` adds an explicit, read-only reach: each plugin's first instance is made (`init`,
//! which by contract has no side effects) against the configured databases and API server, with
//! every statement in a read-only transaction and LISTEN, watches, timers, emits and Kubernetes
//! writes refused; then every connection is closed. Embedded databases are not started.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use conductor_plugin_sdk::ocm::DataType;
use conductor_plugin_sdk::{CloudEvent, Error, Identity, ListOptions};

use super::{PluginFolder, load, runtime};
use crate::app::backends;
use crate::broker::Fanout;
use crate::config::{AdminAuthorization, Authorization, ConfigError, LoadedConfig, PluginKind};
use crate::errors::error_chain;
use crate::plugin_set::artifacts;
use crate::plugins::{self, HostContext, Mode, PluginFile, PluginSource};
use crate::routes::{RoutingTable, Source};
use crate::telemetry::Metrics;
use crate::tls::TlsFiles;

/// `conductor check-config FILE [--connect]`: prints what `file` would run, or fails naming the
/// file, key and reason of the first error.
pub fn check_config(file: &Path, connect: bool, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = load(file, plugins)?;
    let summary = runtime()?.block_on(describe(&loaded, connect))?;
    print!("{summary}");
    Ok(())
}

/// What one plugin entry would run.
pub struct Checked {
    pub name: String,
    pub kind: PluginKind,
    /// The file's description and the capabilities it uses (none for the memory source).
    pub file: Option<PluginFile>,
    pub data_types: Vec<DataType>,
    pub sources: Vec<String>,
}

/// A source as the routing table needs it to resolve routes, with nothing behind it.
struct Described(String, Vec<DataType>, Vec<String>);

#[async_trait]
impl Source for Described {
    fn name(&self) -> &str {
        &self.0
    }
    fn data_types(&self) -> &[DataType] {
        &self.1
    }
    fn sources(&self) -> &[String] {
        &self.2
    }
    async fn list(&self, _: &ListOptions) -> Result<Vec<CloudEvent>, Error> {
        Err(Error::Unavailable(
            "a configuration being checked serves nothing".into(),
        ))
    }
    async fn handle(&self, _: &Identity, _: CloudEvent) -> Result<(), Error> {
        Err(Error::Unavailable(
            "a configuration being checked serves nothing".into(),
        ))
    }
}

/// Checks one plugin entry without side effects.
async fn check_plugin(loaded: &LoadedConfig, name: &str) -> Result<Checked, ConfigError> {
    let plugin = &loaded.config.plugins[name];
    let key = format!("plugins.{name}");
    match plugin.kind {
        PluginKind::Memory => {
            let sources = loaded.config.sources_of(name);
            let memory = crate::sources::MemorySource::new(
                name,
                &sources,
                &plugin.config,
                &|p| loaded.resolve(p),
                Fanout::new(Metrics::new(), 1, 0, std::time::Duration::MAX),
            )
            .map_err(|(k, reason)| loaded.error(format!("{key}.config.{k}"), reason))?;
            Ok(Checked {
                name: name.to_owned(),
                kind: plugin.kind,
                file: None,
                data_types: memory.data_types().to_vec(),
                sources,
            })
        }
        PluginKind::Component | PluginKind::Native => {
            let located = artifacts::locate(loaded, name).await?;
            let path = &located.path;
            let failed =
                |e: &dyn std::error::Error| loaded.error(&key, format!("{}: {}", path.display(), error_chain(e)));
            let file = located.read(plugin.kind).await.map_err(|e| failed(&e))?;
            let data_types = file
                .check(&plugins::grants(plugin).capabilities)
                .map_err(|e| failed(&e))?;
            let config_json = serde_json::to_string(&plugin.config).unwrap_or_else(|_| "{}".to_owned());
            file.check_config(&config_json)
                .await
                .map_err(|e| loaded.error(format!("{key}.config"), error_chain(&e)))?;
            Ok(Checked {
                name: name.to_owned(),
                kind: plugin.kind,
                sources: file.description.sources.clone(),
                file: Some(file),
                data_types,
            })
        }
    }
}

/// Every plugin entry checked, and the routing table their routes make.
pub async fn check(loaded: &LoadedConfig) -> Result<(Vec<Checked>, RoutingTable), ConfigError> {
    let mut checked = Vec::new();
    for name in loaded.config.plugins.keys() {
        checked.push(check_plugin(loaded, name).await?);
    }
    let sources: Vec<Arc<dyn Source>> = checked
        .iter()
        .map(|c| Arc::new(Described(c.name.clone(), c.data_types.clone(), c.sources.clone())) as Arc<dyn Source>)
        .collect();
    let table = RoutingTable::new(sources, &loaded.config.routes).map_err(|e| loaded.error("routes", e.to_string()))?;
    Ok((checked, table))
}

/// Reaches the databases and the API server read-only: each plugin's first instance is made
/// (`init`) and dropped; nothing else runs. Returns a line per plugin.
pub async fn connect(loaded: &LoadedConfig) -> Result<Vec<String>, ConfigError> {
    let skipped: Vec<&String> = loaded
        .config
        .databases
        .iter()
        .filter(|(_, db)| db.embedded.is_some())
        .map(|(name, _)| name)
        .collect();
    let databases = backends::open_databases(loaded, &BTreeMap::new(), Metrics::new(), Arc::default(), true)?;
    let host = HostContext {
        sink: Fanout::new(Metrics::new(), 1, 0, std::time::Duration::MAX),
        backends: plugins::Backends {
            databases: Arc::clone(&databases),
            kubernetes: backends::kubernetes(loaded),
        },
        metrics: Metrics::new(),
        mode: Mode::ReadOnly,
    };
    let mut lines = Vec::new();
    let mut result = Ok(());
    for (name, plugin) in &loaded.config.plugins {
        if plugin.kind == PluginKind::Memory {
            continue;
        }
        if let Some(db) = plugin.databases.iter().find(|d| skipped.contains(d)) {
            lines.push(format!(
                "plugin {name}: not reached (database {db} is embedded; check-config does not start it)"
            ));
            continue;
        }
        let located = match artifacts::locate(loaded, name).await {
            Ok(located) => located,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let path = &located.path;
        let reached = async {
            let file = located.read(plugin.kind).await?;
            let source = PluginSource::load(name, plugin, file, Default::default(), &host).await?;
            source.stop().await;
            Ok::<_, plugins::LoadError>(())
        }
        .await;
        match reached {
            Ok(()) => lines.push(format!(
                "plugin {name}: reached its databases and API server (read-only)"
            )),
            Err(e) => {
                result = Err(loaded.error(
                    format!("plugins.{name}"),
                    format!("{}: {}", path.display(), error_chain(&e)),
                ));
                break;
            }
        }
    }
    databases.close().await;
    result.map(|()| lines)
}

/// A summary of what a configuration would run, for `check-config`.
pub async fn describe(loaded: &LoadedConfig, reach: bool) -> Result<String, ConfigError> {
    let (checked, table) = check(loaded).await?;
    let c = &loaded.config;
    let transport = match &c.server.tls {
        Some(tls) => format!(
            "TLS {}+{}",
            tls.min_version,
            if tls.client_ca_file.is_some() {
                ", client certificates verified"
            } else {
                ""
            }
        ),
        None => "plaintext, development only".to_owned(),
    };
    let authenticators: Vec<String> = c
        .auth
        .authenticators(&c.server)
        .iter()
        .map(|a| format!("{a:?}").to_lowercase())
        .collect();
    let authorization = match c.auth.authorization {
        Authorization::Sar => "SubjectAccessReview",
        Authorization::AllowAll => "allow-all, development only",
    };
    let admin = match (c.admin.enabled, &c.admin.tls, c.admin.authorization) {
        (false, ..) => "disabled".to_owned(),
        (true, tls, who) => format!(
            "{} ({}, {})",
            c.admin.listen,
            if tls.is_some() { "HTTPS" } else { "HTTP" },
            match who {
                AdminAuthorization::None => "open to anyone who reaches it",
                AdminAuthorization::Sar => "token and SubjectAccessReview",
            }
        ),
    };
    let mut out = format!(
        "{}: ok\n  gRPC: {} ({transport}), receive limit {} bytes\n  auth: authenticators {authenticators:?}, authorization {authorization}\n  admin: {admin}\n  heartbeat: {}\n",
        loaded.path.display(),
        c.server.listen,
        c.server.max_receive_message_size.0,
        c.broker
            .heartbeat()
            .map_or("disabled".to_owned(), |d| format!("every {d:?}")),
    );
    for warning in c.exposure_warnings() {
        out += &format!("  warning: {warning}\n");
    }
    // The limit conductor would raise itself to here (a pod's may differ).
    match crate::fd_limit::raise() {
        Ok(limit) => {
            out += &format!(
                "  open files: {} (hard {}): room for about {} connections (server.max_connections {})\n",
                limit.soft,
                limit.hard,
                limit.connections(),
                c.server.max_connections
            );
            if let Some(warning) = limit.warning(c.server.max_connections) {
                out += &format!("  warning: {warning}\n");
            }
        }
        Err(e) => out += &format!("  open files: cannot read the limit: {e}\n"),
    }
    let server_tls = c.server.tls.as_ref().map(|tls| ("gRPC", TlsFiles::new(loaded, tls)));
    let admin_tls = c.admin.tls.as_ref().map(|tls| ("admin", TlsFiles::admin(loaded, tls)));
    for (listener, files) in server_tls.into_iter().chain(admin_tls) {
        match files.missing() {
            // Secrets are often mounted only where conductor runs, not where it is checked.
            Some(path) => {
                out += &format!(
                    "  {listener} TLS files: {} is not here, not checked (read at startup)\n",
                    path.display()
                )
            }
            None => {
                files.check(loaded)?;
                out += &format!("  {listener} TLS files: certificate, key and client CA load\n");
            }
        }
    }
    for p in &checked {
        let types: Vec<String> = p.data_types.iter().map(ToString::to_string).collect();
        match &p.file {
            Some(f) => {
                let caps: Vec<&str> = f.capabilities.iter().map(|c| c.name()).collect();
                out += &format!(
                    "  plugin {}: {} {} ({:?}, contract {}), data types {types:?}, capabilities {caps:?}\n",
                    p.name, f.description.name, f.description.version, p.kind, f.description.sdk_version
                );
            }
            None => out += &format!("  plugin {}: built-in memory source, data types {types:?}\n", p.name),
        }
    }
    for (source, plugin) in table.routes() {
        out += &format!("  route {source} -> {plugin}\n");
    }
    for f in table.foreign_declared() {
        out += &format!(
            "  warning: plugin {} declares source {:?}, which routes to plugin {}: the status updates agents send about its events with that source go to {}\n",
            f.plugin, f.source, f.routed_to, f.routed_to
        );
    }
    if reach {
        for line in connect(loaded).await? {
            out += &format!("  {line}\n");
        }
    }
    Ok(out)
}
