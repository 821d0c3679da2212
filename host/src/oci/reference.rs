//! `oci://registry[:port]/repository[:tag][@sha256:<hex>]`: where a plugin is in a registry.
//! Plain parsing with no dependency beyond std, so the configuration (and its fuzz target) can
//! check references without the registry client.

use std::fmt;

/// The scheme that marks a plugin `file` as an artifact in a registry.
pub const SCHEME: &str = "oci://";

/// An artifact in a registry, as a plugin's `file` names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArtifactReference {
    /// `host` or `host:port`.
    pub registry: String,
    /// `path/of/repository`, lower case.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:<64 hex digits>`: the manifest's digest.
    pub digest: Option<String>,
}

/// Whether a plugin `file` names an artifact in a registry rather than a file.
pub fn is_oci(file: &str) -> bool {
    file.starts_with(SCHEME)
}

impl ArtifactReference {
    /// Parses `oci://…`; a tag, a digest or both may follow the repository.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| format!("{text:?} does not start with {SCHEME}"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("{text:?} names no repository (oci://registry/repository@sha256:…)"))?;
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        {
            return Err(format!(
                "{text:?}: {registry:?} is not a registry host (host or host:port)"
            ));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(parse_digest(d).map_err(|e| format!("{text:?}: {e}"))?)),
            None => (path, None),
        };
        // A tag follows the last `:` of the last path segment.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        if let Some(tag) = tag {
            let valid = tag.len() <= 128
                && tag
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !valid {
                return Err(format!("{text:?}: {tag:?} is not a tag"));
            }
        }
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
                && c.chars().next().is_some_and(|ch| ch.is_ascii_alphanumeric())
        };
        if !repository.split('/').all(component_ok) {
            return Err(format!(
                "{text:?}: {repository:?} is not a repository (lower-case letters, digits, '.', '_', '-', separated by '/')"
            ));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// Parses a reference that must be pinned by digest, as a plugin to load must be.
    pub fn parse_pinned(text: &str) -> Result<Self, String> {
        let reference = Self::parse(text)?;
        if reference.digest.is_none() {
            return Err(format!(
                "{text:?} is not pinned by digest: a tag can be moved to other contents, so conductor loads only oci://…@sha256:<digest> (`conductor plugins push` prints the digest)"
            ));
        }
        Ok(reference)
    }

    /// The same repository at `digest`.
    pub fn at_digest(&self, digest: &str) -> Self {
        Self {
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The same repository at `tag` (no digest).
    pub fn at_tag(&self, tag: &str) -> Self {
        Self {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        }
    }

    /// `registry/repository`, as a signature's `docker-reference` names it.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }
}

impl fmt::Display for ArtifactReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `sha256:<64 lower-case hex digits>`.
pub fn parse_digest(text: &str) -> Result<String, String> {
    match text.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) => {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "{text:?} is not a digest (sha256: and 64 lower-case hex digits)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pinned_reference_names_registry_repository_and_digest() {
        let r = ArtifactReference::parse_pinned(&format!("oci://127.0.0.1:5000/conductor/kube@{D}")).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "conductor/kube");
        assert_eq!(r.tag, None);
        assert_eq!(r.digest.as_deref(), Some(D));
        assert_eq!(r.to_string(), format!("oci://127.0.0.1:5000/conductor/kube@{D}"));
        let both = ArtifactReference::parse_pinned(&format!("oci://registry.example/kube:v1@{D}")).unwrap();
        assert_eq!((both.tag.as_deref(), both.digest.as_deref()), (Some("v1"), Some(D)));
    }

    #[test]
    fn a_tag_alone_is_refused_for_loading_but_parses_for_pushing() {
        let text = "oci://registry.example:5000/conductor/kube:v1";
        let e = ArtifactReference::parse_pinned(text).unwrap_err();
        assert!(e.contains("not pinned by digest"), "{e}");
        let r = ArtifactReference::parse(text).unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("registry.example:5000", "conductor/kube", Some("v1"))
        );
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (text, says) in [
            ("registry/kube@sha256:00", "does not start with oci://"),
            ("oci://registry", "names no repository"),
            ("oci://registry/Kube@sha256:00", "is not a digest"),
            (&format!("oci://registry/Kube@{D}"), "is not a repository"),
            (&format!("oci://registry/kube:-v1@{D}"), "is not a tag"),
            (&format!("oci://reg istry/kube@{D}"), "is not a registry host"),
        ] {
            let e = ArtifactReference::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
