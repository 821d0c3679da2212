//! Where a configured plugin's component or library is on disk: its file, or — for
//! `file = "oci://…"` — the artifact pulled from its registry into the cache (`[oci]`), its digest
//! verified and, with `verify`, its signature. Every error names the plugin's key.

use std::path::PathBuf;

use crate::config::{ConfigError, LoadedConfig, PLUGIN_FOLDER_ENV, PluginKind};
use crate::oci::{self, ArtifactReference, PublicKey};
use crate::plugins::{LoadError, PluginFile, PulledArtifact};

/// A plugin's file and what identifies its contents.
#[derive(Debug, Clone)]
pub struct Located {
    pub path: PathBuf,
    /// For an artifact from a registry: its manifest's digest, and the digest of the component
    /// it names (the bytes loaded must have it).
    pub manifest_digest: Option<String>,
    pub component_digest: Option<String>,
    /// The registry reference it was pulled by.
    pub reference: Option<ArtifactReference>,
    /// Whether the artifact was found in the cache, the registry not contacted.
    pub from_cache: bool,
}

impl Located {
    /// Reads and describes the plugin from exactly the bytes its digest names.
    pub async fn read(&self, kind: PluginKind) -> Result<PluginFile, LoadError> {
        PluginFile::read(kind, &self.path, self.component_digest.as_deref()).await
    }

    /// What identifies the plugin `file` (read from here): the manifest's digest of an artifact,
    /// the digest of a file's bytes.
    pub fn digest(&self, file: &PluginFile) -> String {
        self.manifest_digest.clone().unwrap_or_else(|| file.digest.clone())
    }

    /// Where an artifact from a registry came from (none for a file).
    pub fn artifact(&self) -> Option<PulledArtifact> {
        Some(PulledArtifact {
            reference: self.reference.as_ref()?.to_string(),
            digest: self.manifest_digest.clone()?,
            component_digest: self.component_digest.clone()?,
            from_cache: self.from_cache,
        })
    }
}

/// The file of `plugins.<name>` (not the memory source), pulled first if it is in a registry.
pub async fn locate(loaded: &LoadedConfig, name: &str) -> Result<Located, ConfigError> {
    let plugin = &loaded.config.plugins[name];
    let key = format!("plugins.{name}");
    let Some(text) = plugin.oci_reference() else {
        let path = loaded
            .plugin_file(plugin)
            .ok_or_else(|| loaded.error(format!("{key}.file"), "required for a component or native plugin"))?;
        // A file missing from the plugin folder: most often conductor run outside its image, where
        // the bundled plugins are not at the image's path. Say how to point at them.
        if loaded.in_plugin_folder(plugin)
            && let Err(e) = std::fs::metadata(&path)
        {
            return Err(loaded.error(
                format!("{key}.file"),
                format!(
                    "cannot read {}: {e}; a plugin named by its file name is looked up in the plugin folder, {}, which {PLUGIN_FOLDER_ENV} sets",
                    path.display(),
                    loaded.plugin_folder().display()
                ),
            ));
        }
        return Ok(Located {
            path,
            manifest_digest: None,
            component_digest: None,
            reference: None,
            from_cache: false,
        });
    };
    let reference = ArtifactReference::parse_pinned(&text).map_err(|e| loaded.error(format!("{key}.file"), e))?;
    let public_key = match &plugin.verify {
        Some(verify) => {
            let file = loaded.resolve(&verify.public_key_file);
            let at = format!("{key}.verify.public_key_file");
            let text = std::fs::read_to_string(&file)
                .map_err(|e| loaded.error(&at, format!("cannot read {}: {e}", file.display())))?;
            Some(PublicKey::from_pem(&text).map_err(|e| loaded.error(&at, format!("{}: {e}", file.display())))?)
        }
        None => None,
    };
    let cache = loaded.oci_cache().ok_or_else(|| {
        loaded.error(
            "oci.cache",
            "no folder for pulled plugins: set it (neither XDG_CACHE_HOME nor HOME is set)",
        )
    })?;
    let fetched = oci::fetch(&reference, &cache, &registry_options(loaded), public_key.as_ref())
        .await
        .map_err(|e| loaded.error(format!("{key}.file"), format!("{reference}: {e}")))?;
    Ok(Located {
        path: fetched.path,
        manifest_digest: Some(fetched.manifest_digest),
        component_digest: Some(fetched.layer_digest),
        reference: Some(reference),
        from_cache: fetched.from_cache,
    })
}

/// How registries are reached, as `[oci]` says, with its paths resolved.
pub fn registry_options(loaded: &LoadedConfig) -> oci::RegistryOptions {
    let settings = &loaded.config.oci;
    oci::RegistryOptions {
        auth_file: settings.auth_file.as_deref().map(|f| loaded.resolve(f)),
        ca_file: settings.ca_file.as_deref().map(|f| loaded.resolve(f)),
        timeout: settings.timeout.0,
        max_blob_size: settings.max_plugin_size.0,
        ca_file_option: "[oci] ca_file",
    }
}
