//! Plugins: sources loaded from files named in `conductor.toml` — WebAssembly components
//! ([`wasm`]) or native libraries ([`native`]) — checked against their grants, run as pools of
//! instances, and reachable by the broker only as a [`Source`].

pub mod capabilities;
pub mod native;
mod pg;
mod pool;
pub mod wasm;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::ocm::DataType;
use conductor_plugin_sdk::{Capability, CloudEvent, Description, HostEvent, Identity, SDK_VERSION, SourceError};
use tokio::sync::mpsc;

use crate::broker::EventSink;
use crate::config::{PluginConfig, PluginKind};
use crate::registry::{ListOptions, Source};
pub use capabilities::{Backends, KvStore};
use capabilities::{Capabilities, Grants};

/// Why a plugin did not load.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open plugin file: {0}")]
    Open(String),
    #[error("incompatible plugin: {0}")]
    Incompatible(String),
    #[error(
        "the plugin needs capabilities that are not granted: {missing:?} (granted: {granted:?}); add them to `grants` if you trust it"
    )]
    Ungranted { missing: Vec<String>, granted: Vec<String> },
    #[error("invalid description: {0}")]
    Description(String),
    #[error("plugin init failed: {0}")]
    Init(SourceError),
}

/// A loaded plugin's calls, whatever runs it.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    fn description(&self) -> &Description;
    async fn call(&self, request: PluginRequest) -> Result<PluginReply, SourceError>;
}

/// What a plugin file declares, read without starting it.
pub async fn inspect(kind: PluginKind, file: &Path) -> Result<Description, LoadError> {
    match kind {
        PluginKind::Native => native::describe(file),
        PluginKind::Component => wasm::describe(file).await,
        PluginKind::Memory => Err(LoadError::Open("the memory source is built in; it has no file".into())),
    }
}

/// Checks a description against this host and the plugin's grants.
pub fn check(description: &Description, grants: &BTreeSet<Capability>) -> Result<Vec<DataType>, LoadError> {
    let ours = version_prefix(SDK_VERSION);
    if version_prefix(&description.sdk_version) != ours {
        return Err(LoadError::Incompatible(format!(
            "built against SDK {}, this host serves SDK {SDK_VERSION} ({ours}.x)",
            description.sdk_version
        )));
    }
    let mut missing = Vec::new();
    for name in &description.capabilities {
        match Capability::parse(name) {
            Some(c) if grants.contains(&c) => {}
            Some(_) => missing.push(name.clone()),
            None => {
                return Err(LoadError::Incompatible(format!(
                    "needs capability {name:?}, which this host does not have"
                )));
            }
        }
    }
    if !missing.is_empty() {
        return Err(LoadError::Ungranted {
            missing,
            granted: grants.iter().map(|c| c.name().to_owned()).collect(),
        });
    }
    if description.name.is_empty() {
        return Err(LoadError::Description("the plugin has no name".into()));
    }
    description
        .data_types
        .iter()
        .map(|d| DataType::parse(d).map_err(|e| LoadError::Description(e.to_string())))
        .collect()
}

/// `major.minor` of a `major.minor.patch` version: plugins built against the same minor version of
/// a 0.x contract (or the same major of a 1.x+) are compatible.
fn version_prefix(v: &str) -> String {
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_owned(),
        _ => v.to_owned(),
    }
}

/// The grants of a plugin's configuration (validated at load of the configuration).
pub fn grants(config: &PluginConfig) -> BTreeSet<Capability> {
    config.grants.iter().filter_map(|g| Capability::parse(g)).collect()
}

/// A loaded plugin as the registry sees it.
pub struct PluginSource {
    name: String,
    runtime: Arc<dyn Runtime>,
    data_types: Vec<DataType>,
    capabilities: Arc<Capabilities>,
    events: tokio::task::JoinHandle<()>,
}

impl PluginSource {
    /// Loads the plugin `name` from `file`: reads its description, checks it against the grants,
    /// starts its first instance (`init`) and its event loop (timers). `kv` is the plugin's state,
    /// kept by the caller across reloads.
    pub async fn load(
        name: &str,
        config: &PluginConfig,
        file: &Path,
        sink: Arc<dyn EventSink>,
        kv: KvStore,
        backends: Backends,
    ) -> Result<Arc<Self>, LoadError> {
        let grants = grants(config);
        // Each file is opened (native) or compiled and described (component) once.
        let (description, native_api) = match config.kind {
            PluginKind::Native => {
                let (api, description) = native::load_library(file)?;
                (description, Some(api))
            }
            PluginKind::Component => (wasm::describe(file).await?, None),
            PluginKind::Memory => return Err(LoadError::Open("the memory source is built in".into())),
        };
        let data_types = check(&description, &grants)?;
        let config_json = serde_json::to_string(&config.config).unwrap_or_else(|_| "{}".to_owned());
        let (events_tx, mut events_rx) = mpsc::unbounded_channel::<HostEvent>();
        let grants = Grants {
            capabilities: grants,
            databases: config.databases.iter().cloned().collect(),
        };
        let capabilities = Capabilities::new(name, grants, sink, config_json.clone(), events_tx, kv, backends);
        let runtime: Arc<dyn Runtime> = match native_api {
            Some(api) => Arc::new(
                native::NativeRuntime::load(
                    api,
                    description,
                    Arc::clone(&capabilities),
                    config.pool_size,
                    config_json,
                )
                .await?,
            ),
            None => Arc::new(
                wasm::WasmRuntime::load(
                    file,
                    description,
                    Arc::clone(&capabilities),
                    config.pool_size,
                    &config.limits,
                    config_json,
                )
                .await?,
            ),
        };
        let events = {
            let runtime = Arc::clone(&runtime);
            let plugin = name.to_owned();
            tokio::spawn(async move {
                while let Some(event) = events_rx.recv().await {
                    if let Err(e) = runtime.call(PluginRequest::OnEvent(event)).await {
                        tracing::warn!(plugin, error = %e, "plugin failed to handle a host event");
                    }
                }
            })
        };
        tracing::info!(
            plugin = name,
            file = %file.display(),
            kind = ?config.kind,
            version = %runtime.description().version,
            sources = ?runtime.description().sources,
            data_types = ?runtime.description().data_types,
            "plugin loaded"
        );
        Ok(Arc::new(Self {
            name: name.to_owned(),
            runtime,
            data_types,
            capabilities,
            events,
        }))
    }

    pub fn description(&self) -> &Description {
        self.runtime.description()
    }
}

impl Drop for PluginSource {
    fn drop(&mut self) {
        self.events.abort();
        self.capabilities.stop();
    }
}

#[async_trait]
impl Source for PluginSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn data_types(&self) -> &[DataType] {
        &self.data_types
    }

    fn sources(&self) -> &[String] {
        &self.runtime.description().sources
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
        let request = PluginRequest::List(conductor_plugin_sdk::ListOptions {
            cluster_name: options.cluster_name.clone(),
            data_type: options.data_type.to_string(),
        });
        match self.runtime.call(request).await? {
            PluginReply::Listed(events) => Ok(events),
            PluginReply::Done => Ok(vec![]),
        }
    }

    async fn handle(&self, identity: &Identity, event: CloudEvent) -> Result<(), SourceError> {
        self.runtime
            .call(PluginRequest::Handle(identity.clone(), event))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description(sdk: &str, caps: &[&str]) -> Description {
        Description {
            name: "p".into(),
            version: "1.0.0".into(),
            sdk_version: sdk.into(),
            sources: vec!["s".into()],
            data_types: vec!["a.v1.things".into()],
            capabilities: caps.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn sdk_versions_must_share_major_and_minor() {
        let grants = [Capability::Emit].into();
        assert!(check(&description("0.2.7", &["emit"]), &grants).is_ok());
        assert!(matches!(
            check(&description("0.1.0", &[]), &grants),
            Err(LoadError::Incompatible(_))
        ));
        assert!(matches!(
            check(&description("1.0.0", &[]), &grants),
            Err(LoadError::Incompatible(_))
        ));
    }

    #[test]
    fn capabilities_must_be_granted_and_known() {
        let grants = [Capability::Emit, Capability::Log].into();
        let err = check(&description("0.2.0", &["emit", "kv", "timer"]), &grants).unwrap_err();
        match err {
            LoadError::Ungranted { missing, .. } => assert_eq!(missing, ["kv", "timer"]),
            other => panic!("{other}"),
        }
        assert!(matches!(
            check(&description("0.2.0", &["teleport"]), &grants),
            Err(LoadError::Incompatible(_))
        ));
    }
}
