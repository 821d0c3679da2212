//! Fetching a pinned plugin artifact: from the cache when it holds it intact (and verified with
//! the same key), else from the registry, every digest checked and the signature verified before
//! the component is pulled; the component is streamed into the cache while it is hashed. What
//! [`Fetched`] names is loaded by its digest ([`Fetched::layer_digest`]): the loader hashes the
//! bytes it loads and refuses others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    ArtifactCache, ArtifactReference, OciError, PublicKey, RegistryClient, RegistryOptions, artifact, signature,
};

/// A plugin artifact on disk, pulled (or found in the cache).
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component, in the cache.
    pub path: PathBuf,
    pub reference: ArtifactReference,
    /// The manifest's digest (the one the reference pins).
    pub manifest_digest: String,
    /// The component's digest.
    pub layer_digest: String,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The fingerprint of the key its signature verified with, when one was asked for.
    pub verified_with: Option<String>,
    /// Whether it was loaded from the cache without asking the registry.
    pub from_cache: bool,
}

/// Pulls the artifact `reference` pins into the cache at `cache_dir`, or finds it there, and
/// verifies its signature with `key` when given. A cached artifact is used without the registry
/// when its manifest and component are intact and (with a key) its signature verified with the
/// same key before.
pub async fn fetch(
    reference: &ArtifactReference,
    cache_dir: &Path,
    options: &RegistryOptions,
    key: Option<&PublicKey>,
) -> Result<Fetched, OciError> {
    let digest = reference
        .digest
        .clone()
        .ok_or_else(|| OciError::Setup(format!("{reference} is not pinned by digest")))?;
    let cache = ArtifactCache::open(cache_dir).map_err(OciError::Cache)?;
    let fetched = |manifest: &[u8], from_cache: bool| -> Result<Fetched, OciError> {
        let (layer, annotations) = artifact::wasm_layer(manifest)?;
        Ok(Fetched {
            path: cache.blob_path(&layer.digest),
            reference: reference.clone(),
            manifest_digest: digest.clone(),
            layer_digest: layer.digest,
            annotations,
            verified_with: key.map(|k| k.fingerprint.clone()),
            from_cache,
        })
    };
    let cached = tokio::task::spawn_blocking({
        let (cache, digest, key) = (cache.clone(), digest.clone(), key.map(|k| k.fingerprint.clone()));
        move || cache.intact(&digest, key.as_deref())
    })
    .await
    .map_err(|e| OciError::Cache(format!("checking the cache: {e}")))?;
    if let Some(manifest) = cached {
        tracing::debug!(%reference, "plugin artifact found in the cache");
        return fetched(&manifest, true);
    }
    let client = RegistryClient::connect(reference, options)?;
    let (manifest, _) = client
        .manifest(reference)
        .await?
        .ok_or_else(|| OciError::Artifact(format!("{reference}: the registry has no such manifest")))?;
    let (layer, _) = artifact::wasm_layer(&manifest)?;
    if let Some(key) = key {
        verify(&client, reference, &digest, key).await?;
    }
    let partial = cache.partial_blob(&layer.digest);
    let bytes = client.blob_to_file(reference, &layer, &partial).await?;
    cache.commit_blob(&partial, &layer.digest).map_err(OciError::Cache)?;
    cache.store_manifest(&digest, &manifest).map_err(OciError::Cache)?;
    if let Some(key) = key {
        cache
            .mark_verified(&digest, &key.fingerprint)
            .map_err(OciError::Cache)?;
    }
    tracing::info!(%reference, component = %layer.digest, bytes, signed = key.is_some(), "plugin artifact pulled");
    fetched(&manifest, false)
}

/// Checks that one of the cosign signatures beside `manifest_digest` verifies with `key`.
async fn verify(
    client: &RegistryClient,
    reference: &ArtifactReference,
    manifest_digest: &str,
    key: &PublicKey,
) -> Result<(), OciError> {
    let tag = signature::signature_tag(manifest_digest);
    let signatures = reference.at_tag(&tag);
    let Some((manifest, _)) = client.manifest(&signatures).await? else {
        return Err(OciError::Signature(format!(
            "{reference} is not signed: the repository has no {tag} (sign it with `cosign sign --key` or `conductor plugins push --sign-key`)"
        )));
    };
    let mut reasons = Vec::new();
    for (layer, signature) in artifact::signature_layers(&manifest)? {
        let Some(signature) = signature else {
            reasons.push(format!(
                "layer {} has no {} annotation",
                layer.digest,
                signature::SIGNATURE_ANNOTATION
            ));
            continue;
        };
        let payload = client.small_blob(&signatures, &layer).await?;
        match key.check(&payload, &signature, manifest_digest) {
            Ok(()) => return Ok(()),
            Err(e) => reasons.push(e),
        }
    }
    if reasons.is_empty() {
        reasons.push(format!("{tag} holds no {} layer", signature::PAYLOAD_MEDIA_TYPE));
    }
    Err(OciError::Signature(format!(
        "no signature of {reference} verifies with the key: {}",
        reasons.join("; ")
    )))
}
