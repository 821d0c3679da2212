//! Publishing a built plugin: its component and config blobs, its manifest under the tag (or by
//! digest), and with a signing key a cosign signature beside it.

use std::collections::BTreeMap;

use super::artifact::{PluginArtifact, SignatureArtifact};
use super::{ArtifactReference, OciError, RegistryClient, RegistryOptions, SigningKey, signature};

/// What [`push`] published.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The manifest's digest.
    pub digest: String,
    /// The reference to load it by: the repository at that digest.
    pub pinned: ArtifactReference,
    /// Whether a signature was pushed beside it.
    pub signed: bool,
}

/// What goes into a pushed plugin artifact besides the component.
pub struct PushContents {
    pub component: Vec<u8>,
    /// The layer's title (the file name).
    pub title: String,
    /// The contract interfaces the component imports and exports.
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// Publishes a plugin under `reference` (its tag, or by digest without one) and, with `sign`, a
/// cosign signature beside it.
pub async fn push(
    contents: PushContents,
    reference: &ArtifactReference,
    options: &RegistryOptions,
    sign: Option<&SigningKey>,
) -> Result<Pushed, OciError> {
    let artifact = PluginArtifact::new(
        contents.component,
        &contents.title,
        &contents.imports,
        &contents.exports,
        contents.annotations,
    );
    let client = RegistryClient::connect(reference, options)?;
    client.login_for_push(reference).await?;
    client.push_blob(reference, artifact.layer).await?;
    client.push_blob(reference, artifact.config).await?;
    let digest = super::sha256_digest(&artifact.manifest);
    let target = match &reference.tag {
        Some(_) => ArtifactReference {
            digest: None,
            ..reference.clone()
        },
        None => reference.at_digest(&digest),
    };
    let pushed = client.push_manifest(&target, artifact.manifest).await?;
    debug_assert_eq!(pushed, digest);
    if let Some(key) = sign {
        let payload = signature::payload(&reference.repository_path(), &digest);
        let signature = key.sign(&payload).map_err(OciError::Signature)?;
        let s = SignatureArtifact::new(payload, signature);
        client.push_blob(reference, s.payload).await?;
        client.push_blob(reference, s.config).await?;
        client
            .push_manifest(&reference.at_tag(&signature::signature_tag(&digest)), s.manifest)
            .await?;
    }
    Ok(Pushed {
        pinned: ArtifactReference {
            tag: None,
            ..reference.at_digest(&digest)
        },
        digest,
        signed: sign.is_some(),
    })
}
