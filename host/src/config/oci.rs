//! `[oci]`: how plugins named `file = "oci://…"` are pulled — where they are kept, the registry
//! credentials and the CA certificates trusted for registries.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{HumanDuration, Invalid, invalid};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OciConfig {
    /// Where pulled artifacts are kept, by digest; relative to this file. Unset:
    /// `$XDG_CACHE_HOME/conductor/oci`, else `~/.cache/conductor/oci`.
    pub cache: Option<PathBuf>,
    /// A Docker config file (`{"auths": …}`, as a `kubernetes.io/dockerconfigjson` Secret holds
    /// it) with the registries' credentials; relative to this file. Unset: anonymous.
    pub auth_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted for registries besides the machine's; relative to this file.
    pub ca_file: Option<PathBuf>,
    /// How long connecting to a registry and each read may take.
    pub timeout: HumanDuration,
}

impl Default for OciConfig {
    fn default() -> Self {
        Self {
            cache: None,
            auth_file: None,
            ca_file: None,
            timeout: HumanDuration(Duration::from_secs(30)),
        }
    }
}

impl OciConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.timeout.0 < Duration::from_millis(100) {
            return invalid("oci.timeout", "must be at least 100ms");
        }
        if self.cache.as_ref().is_some_and(|c| c.as_os_str().is_empty()) {
            return invalid("oci.cache", "must name a folder (pulled plugins are loaded from it)");
        }
        Ok(())
    }
}
