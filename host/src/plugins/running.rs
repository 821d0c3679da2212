//! What runs now: each plugin as the last start or reload left it, and where a plugin pulled
//! from a registry came from.

use std::sync::Arc;

use super::source::PluginSource;
use crate::config::PluginConfig;
use crate::routes::Source;

/// One running plugin, as the last start or reload left it: what it was loaded from, and the
/// source the routing table routes to (the built-in memory source has no plugin behind it).
#[derive(Clone)]
pub struct Running {
    pub config: PluginConfig,
    /// `sha256:…` of what was loaded: the file's bytes, or the manifest digest of an artifact
    /// pulled from a registry (none for the memory source).
    pub digest: Option<String>,
    pub source: Arc<dyn Source>,
    /// The plugin behind `source` (none for the memory source).
    pub plugin: Option<Arc<PluginSource>>,
    /// Where it was pulled from, for a plugin from a registry.
    pub artifact: Option<PulledArtifact>,
    /// When it was loaded: at startup, or by the reload that last replaced it.
    pub loaded_at: std::time::SystemTime,
}

/// A plugin pulled from a registry (`file = "oci://…"`): the reference it was loaded by and what
/// that resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledArtifact {
    /// The `oci://…@sha256:…` reference.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The component's digest: the bytes that run.
    pub component_digest: String,
    /// Whether it was loaded from the cache without contacting the registry.
    pub from_cache: bool,
}
