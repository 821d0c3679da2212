//! A plugin file — a WebAssembly component or a native library — read and described without
//! running anything of it but `describe` (and `check-config`, which has no capability), checked
//! against this host and the plugin's grants, and started as a [`Runtime`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conductor_plugin_sdk::ocm::DataType;
use conductor_plugin_sdk::{Capability, Description, SDK_VERSION};

use super::capabilities::Capabilities;
use super::runtime::{LoadError, Runtime};
use super::{native, wasm};
use crate::config::{PluginConfig, PluginKind};

/// What a plugin file declares, read without running anything of it but `describe` (and
/// `check-config`, which has no capability).
#[derive(Clone)]
pub struct PluginFile {
    pub kind: PluginKind,
    pub path: PathBuf,
    /// `sha256:…` of the bytes it was loaded from.
    pub digest: String,
    pub description: Description,
    /// The capabilities the plugin uses: a component's function imports, a native library's
    /// declaration.
    pub capabilities: Vec<Capability>,
    runtime: FileRuntime,
}

impl std::fmt::Debug for PluginFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginFile")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("description", &self.description)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum FileRuntime {
    Component(wasmtime::component::Component),
    Native(&'static conductor_plugin_sdk::native::PluginApi),
}

impl PluginFile {
    /// Reads and describes a plugin file (compiling a component off the async workers). With
    /// `expected`, the bytes read must hash to it (an artifact's verified digest), else the file
    /// is refused: what is loaded is exactly what was verified.
    pub async fn read(kind: PluginKind, path: &Path, expected: Option<&str>) -> Result<Self, LoadError> {
        match kind {
            PluginKind::Component => {
                let (component, description, capabilities, digest) = wasm::describe(path, expected).await?;
                Ok(Self {
                    kind,
                    path: path.to_owned(),
                    digest,
                    description,
                    capabilities,
                    runtime: FileRuntime::Component(component),
                })
            }
            PluginKind::Native => {
                let path_owned = path.to_owned();
                let expected = expected.map(str::to_owned);
                let (api, description, digest) =
                    tokio::task::spawn_blocking(move || native::load_library(&path_owned, expected.as_deref()))
                        .await
                        .map_err(|e| LoadError::Runtime(format!("loading the library: {e}")))??;
                Ok(Self {
                    kind,
                    path: path.to_owned(),
                    digest,
                    capabilities: description.capabilities.clone(),
                    description,
                    runtime: FileRuntime::Native(api),
                })
            }
            PluginKind::Memory => Err(LoadError::NotAPlugin {
                path: path.to_owned(),
                reason: "the memory source is built in; it has no file".into(),
            }),
        }
    }

    /// Checks the description against this host and the plugin's grants; returns its data types.
    pub fn check(&self, grants: &BTreeSet<Capability>) -> Result<Vec<DataType>, LoadError> {
        check(&self.description, &self.capabilities, grants)
    }

    /// Whether the plugin takes the requests that wait for it into a running `handle-batch`
    /// (a component importing `requests`; a native library has no line to take from).
    pub fn takes_waiting(&self) -> bool {
        match &self.runtime {
            FileRuntime::Component(component) => wasm::takes_waiting(component),
            FileRuntime::Native(_) => false,
        }
    }

    /// Asks the plugin whether it takes `config` (JSON), with no capability at hand.
    pub async fn check_config(&self, config: &str) -> Result<(), LoadError> {
        match &self.runtime {
            FileRuntime::Component(component) => wasm::check_config(component, config).await,
            FileRuntime::Native(api) => native::check_config(api, config),
        }
        .map_err(LoadError::Config)
    }

    /// Makes the plugin's first instance (`init` with `config_json`) and the runtime that makes
    /// the others, with `capabilities`.
    pub async fn start(
        &self,
        capabilities: &Arc<Capabilities>,
        config: &PluginConfig,
        config_json: String,
    ) -> Result<Arc<dyn Runtime>, LoadError> {
        let capabilities = Arc::clone(capabilities);
        let (pool_size, limits) = (config.pool_size, &config.limits);
        Ok(match &self.runtime {
            FileRuntime::Native(api) => {
                Arc::new(native::NativeRuntime::load(api, capabilities, pool_size, limits, config_json).await?)
            }
            FileRuntime::Component(component) => {
                Arc::new(wasm::WasmRuntime::load(component, capabilities, pool_size, limits, config_json).await?)
            }
        })
    }
}

/// Checks a description against this host and the plugin's grants.
pub fn check(
    description: &Description,
    capabilities: &[Capability],
    grants: &BTreeSet<Capability>,
) -> Result<Vec<DataType>, LoadError> {
    let ours = version_prefix(SDK_VERSION);
    if version_prefix(&description.sdk_version) != ours {
        return Err(LoadError::Incompatible(format!(
            "built against SDK {}, this host serves SDK {SDK_VERSION} ({ours}.x)",
            description.sdk_version
        )));
    }
    let missing: Vec<String> = capabilities
        .iter()
        .filter(|c| !grants.contains(c))
        .map(|c| c.name().to_owned())
        .collect();
    if !missing.is_empty() {
        return Err(LoadError::Ungranted {
            missing,
            granted: grants.iter().map(|c| c.name().to_owned()).collect(),
        });
    }
    if description.name.is_empty() {
        return Err(LoadError::Description("the plugin has no name".into()));
    }
    crate::telemetry::exported::check(&description.name, &description.metrics).map_err(LoadError::Description)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_whose_bytes_are_not_the_verified_ones_is_refused_before_it_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plugin");
        std::fs::write(&file, b"\0asm not what was verified").unwrap();
        let verified = crate::oci::sha256_digest(b"\0asm what was verified");
        for kind in [PluginKind::Component, PluginKind::Native] {
            let e = PluginFile::read(kind, &file, Some(&verified))
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("not the verified {verified}")), "{kind:?}: {e}");
        }
    }

    fn description(sdk: &str) -> Description {
        let mut d = Description::new("p", "1.0.0")
            .sources(["s"])
            .data_types(["a.v1.things"]);
        d.sdk_version = sdk.into();
        d
    }

    #[test]
    fn sdk_versions_must_share_major_and_minor() {
        let grants = [Capability::Emit].into();
        let minor = SDK_VERSION.rsplit_once('.').map(|(m, _)| m).unwrap_or(SDK_VERSION);
        assert!(check(&description(&format!("{minor}.7")), &[Capability::Emit], &grants).is_ok());
        assert!(matches!(
            check(&description("0.2.0"), &[], &grants),
            Err(LoadError::Incompatible(_))
        ));
        assert!(matches!(
            check(&description("1.0.0"), &[], &grants),
            Err(LoadError::Incompatible(_))
        ));
    }

    #[test]
    fn capabilities_must_be_granted() {
        let grants = [Capability::Emit, Capability::Log].into();
        let err = check(
            &description(SDK_VERSION),
            &[Capability::Emit, Capability::Kv, Capability::Timer],
            &grants,
        )
        .unwrap_err();
        match err {
            LoadError::Ungranted { missing, .. } => assert_eq!(missing, ["kv", "timer"]),
            other => panic!("{other}"),
        }
    }
}
