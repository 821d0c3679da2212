//! `[oci]`: how plugins named `file = "oci://…"` are pulled — where they are kept, the registry
//! credentials and the CA certificates trusted for registries.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ByteSize, HumanDuration, Invalid, invalid};

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
    /// The registries plugins may come from: `host[:port]`, or `host[:port]/repository/prefix/`
    /// for the repositories under a prefix. A reference elsewhere is refused before any
    /// connection, in conductor.toml and in a SourcePlugin. Unset: any registry.
    pub registries: Option<Vec<String>>,
    /// The largest plugin component a pull accepts (its layer): refused on the size its manifest
    /// declares, on the registry's `Content-Length` and on the bytes received, whichever shows it
    /// first. A manifest is read up to 4 MiB.
    pub max_plugin_size: ByteSize,
}

/// The default `max_plugin_size`: three times the largest example component (a Python plugin,
/// ~19 MiB).
pub const DEFAULT_MAX_PLUGIN_SIZE: u64 = 64 << 20;

impl Default for OciConfig {
    fn default() -> Self {
        Self {
            cache: None,
            auth_file: None,
            ca_file: None,
            timeout: HumanDuration(Duration::from_secs(30)),
            registries: None,
            max_plugin_size: ByteSize(DEFAULT_MAX_PLUGIN_SIZE),
        }
    }
}

impl OciConfig {
    /// Whether a plugin may be pulled from `reference`: its registry is listed (with the port it
    /// names, if any) and its repository is under the entry's prefix, whole path segments only.
    pub fn allows(&self, reference: &crate::oci::ArtifactReference) -> bool {
        let Some(registries) = &self.registries else {
            return true;
        };
        registries.iter().any(|entry| {
            let (host, prefix) = entry.split_once('/').unwrap_or((entry, ""));
            let prefix = prefix.trim_end_matches('/');
            host.eq_ignore_ascii_case(&reference.registry)
                && (prefix.is_empty()
                    || reference.repository == prefix
                    || reference.repository.starts_with(&format!("{prefix}/")))
        })
    }

    /// Why `reference` may not be pulled (`None`: it may).
    pub fn refusal(&self, reference: &crate::oci::ArtifactReference) -> Option<String> {
        (!self.allows(reference)).then(|| {
            format!(
                "{}/{} is not in a registry conductor.toml allows ([oci] registries = {:?})",
                reference.registry,
                reference.repository,
                self.registries.as_deref().unwrap_or_default()
            )
        })
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.timeout.0 < Duration::from_millis(100) {
            return invalid("oci.timeout", "must be at least 100ms");
        }
        for (i, entry) in self.registries.iter().flatten().enumerate() {
            let host = entry.split('/').next().unwrap_or_default();
            if host.is_empty() || entry.contains("://") || entry.contains(char::is_whitespace) || entry.contains('@') {
                return invalid(
                    format!("oci.registries[{i}]"),
                    format!("{entry:?} is not a registry: host[:port], optionally /repository/prefix/"),
                );
            }
        }
        if self.max_plugin_size.0 < 1024 {
            return invalid("oci.max_plugin_size", "must be at least 1KiB");
        }
        if self.cache.as_ref().is_some_and(|c| c.as_os_str().is_empty()) {
            return invalid("oci.cache", "must name a folder (pulled plugins are loaded from it)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::ArtifactReference;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn reference(text: &str) -> ArtifactReference {
        ArtifactReference::parse(&format!("oci://{text}@{DIGEST}")).unwrap()
    }

    #[test]
    fn registries_are_an_allow_list_of_hosts_and_repository_prefixes() {
        let any = OciConfig::default();
        assert!(any.allows(&reference("anywhere.example/x")), "unset: any registry");
        let listed = OciConfig {
            registries: Some(vec![
                "registry.example:5000".into(),
                "registry.example.com/platform/".into(),
            ]),
            ..OciConfig::default()
        };
        assert!(listed.allows(&reference("registry.example:5000/any/thing")));
        assert!(
            !listed.allows(&reference("registry.example/any/thing")),
            "the port is part of it"
        );
        assert!(listed.allows(&reference("registry.example.com/platform/widgets")));
        assert!(listed.allows(&reference("registry.example.com/platform/team/widgets")));
        assert!(
            !listed.allows(&reference("registry.example.com/platformer/widgets")),
            "whole segments"
        );
        assert!(!listed.allows(&reference("registry.example.com/other/widgets")));
        assert!(!listed.allows(&reference("evil.example/platform/widgets")));
        let why = listed.refusal(&reference("evil.example/platform/widgets")).unwrap();
        assert!(
            why.contains("evil.example/platform/widgets is not in a registry"),
            "{why}"
        );
        let none = OciConfig {
            registries: Some(vec![]),
            ..OciConfig::default()
        };
        assert!(
            !none.allows(&reference("registry.example/x")),
            "an empty list allows none"
        );
        for bad in [
            "",
            "https://registry.example",
            "registry.example/x@sha256:00",
            "two words",
        ] {
            let c = OciConfig {
                registries: Some(vec![bad.into()]),
                ..OciConfig::default()
            };
            assert_eq!(c.validate().unwrap_err().0, "oci.registries[0]", "{bad:?}");
        }
    }
}
