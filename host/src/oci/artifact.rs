//! The layout of a plugin in a registry, after the CNCF convention for WebAssembly artifacts (as
//! wkg, Spin and wasmCloud write them): an OCI image manifest whose config has media type
//! [`CONFIG_MEDIA_TYPE`] (`architecture` `wasm`, `os` `wasip2`, the layers' digests, the component's
//! imports and exports) and whose one layer is the component, media type [`LAYER_MEDIA_TYPE`].
//! A signature beside it is cosign's ([`super::signature`]).

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde_json::{Value, json};

use super::OciError;
use super::digest::sha256_digest;
use super::signature::{PAYLOAD_MEDIA_TYPE, SIGNATURE_ANNOTATION};

/// The media type of the manifests conductor reads and writes.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
const IMAGE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// Annotation keys conductor writes on the manifests it pushes.
pub const TITLE: &str = "org.opencontainers.image.title";
pub const VERSION: &str = "org.opencontainers.image.version";
pub const CREATED: &str = "org.opencontainers.image.created";

/// The manifest's one `application/wasm` layer; any other layout is refused, naming what it has.
pub fn wasm_layer(manifest: &[u8]) -> Result<(OciDescriptor, BTreeMap<String, String>), OciError> {
    let manifest: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| OciError::Artifact(format!("the manifest is not an OCI image manifest: {e}")))?;
    let mut wasm = manifest.layers.iter().filter(|l| l.media_type == LAYER_MEDIA_TYPE);
    match (wasm.next(), wasm.next()) {
        (Some(layer), None) => Ok((
            layer.clone(),
            manifest.annotations.clone().unwrap_or_default().into_iter().collect(),
        )),
        (None, _) => {
            let types: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
            Err(OciError::Artifact(format!(
                "not a WebAssembly artifact: no layer of media type {LAYER_MEDIA_TYPE} (its layers: {types:?}, config {})",
                manifest.config.media_type
            )))
        }
        (Some(_), Some(_)) => Err(OciError::Artifact(format!(
            "more than one {LAYER_MEDIA_TYPE} layer: a plugin artifact holds one component"
        ))),
    }
}

fn descriptor(media_type: &str, bytes: &[u8], annotations: Option<BTreeMap<String, String>>) -> Value {
    let mut d = json!({ "mediaType": media_type, "digest": sha256_digest(bytes), "size": bytes.len() });
    if let Some(a) = annotations {
        d["annotations"] = json!(a);
    }
    d
}

/// The blobs and manifest of a plugin artifact for `component` (its file name `title`, the
/// contract interfaces it imports and exports).
pub struct PluginArtifact {
    pub config: Vec<u8>,
    pub layer: Vec<u8>,
    pub manifest: Vec<u8>,
}

impl PluginArtifact {
    pub fn new(
        component: Vec<u8>,
        title: &str,
        imports: &[String],
        exports: &[String],
        mut annotations: BTreeMap<String, String>,
    ) -> Self {
        let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let config = json!({
            "created": created,
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [sha256_digest(&component)],
            "component": { "imports": imports, "exports": exports },
        })
        .to_string()
        .into_bytes();
        annotations.insert(CREATED.to_owned(), created);
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": descriptor(CONFIG_MEDIA_TYPE, &config, None),
            "layers": [descriptor(LAYER_MEDIA_TYPE, &component, Some(BTreeMap::from([(TITLE.to_owned(), title.to_owned())])))],
            "annotations": annotations,
        })
        .to_string()
        .into_bytes();
        Self {
            config,
            layer: component,
            manifest,
        }
    }
}

/// The blobs and manifest of a cosign signature: one simple-signing layer carrying `signature`.
pub struct SignatureArtifact {
    pub config: Vec<u8>,
    pub payload: Vec<u8>,
    pub manifest: Vec<u8>,
}

impl SignatureArtifact {
    pub fn new(payload: Vec<u8>, signature: String) -> Self {
        // The image config cosign writes for its signature manifests.
        let config = json!({
            "architecture": "",
            "config": {},
            "created": "0001-01-01T00:00:00Z",
            "history": [{ "created": "0001-01-01T00:00:00Z" }],
            "os": "",
            "rootfs": { "type": "layers", "diff_ids": [sha256_digest(&payload)] },
        })
        .to_string()
        .into_bytes();
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": descriptor(IMAGE_CONFIG_MEDIA_TYPE, &config, None),
            "layers": [descriptor(PAYLOAD_MEDIA_TYPE, &payload, Some(BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), signature)])))],
        })
        .to_string()
        .into_bytes();
        Self {
            config,
            payload,
            manifest,
        }
    }
}

/// The simple-signing layers of a signature manifest: (descriptor, base64 signature).
pub fn signature_layers(manifest: &[u8]) -> Result<Vec<(OciDescriptor, Option<String>)>, OciError> {
    let manifest: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| OciError::Signature(format!("the signature manifest is not an OCI image manifest: {e}")))?;
    Ok(manifest
        .layers
        .into_iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
        .map(|l| {
            let signature = l
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION).cloned());
            (l, signature)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_artifact_reads_back_as_its_component() {
        let a = PluginArtifact::new(
            b"\0asm".to_vec(),
            "kube.wasm",
            &["conductor:plugin/kv@0.6.4".into()],
            &["conductor:plugin/plugin@0.6.4".into()],
            BTreeMap::from([(VERSION.to_owned(), "0.1.0".to_owned())]),
        );
        let (layer, annotations) = wasm_layer(&a.manifest).unwrap();
        assert_eq!(layer.digest, sha256_digest(b"\0asm"));
        assert_eq!(layer.size, 4);
        assert_eq!(annotations[VERSION], "0.1.0");
        assert!(annotations.contains_key(CREATED));
        let config: Value = serde_json::from_slice(&a.config).unwrap();
        assert_eq!(config["os"], "wasip2");
        assert_eq!(config["layerDigests"][0], layer.digest.as_str());
        let manifest: Value = serde_json::from_slice(&a.manifest).unwrap();
        assert_eq!(manifest["config"]["digest"], sha256_digest(&a.config).as_str());
        assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
    }

    #[test]
    fn an_image_is_not_a_plugin() {
        let image = json!({
            "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": { "mediaType": IMAGE_CONFIG_MEDIA_TYPE, "digest": sha256_digest(b"{}"), "size": 2 },
            "layers": [{ "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha256_digest(b"x"), "size": 1 }],
        });
        let e = wasm_layer(image.to_string().as_bytes()).unwrap_err().to_string();
        assert!(e.contains("no layer of media type application/wasm"), "{e}");
        assert!(e.contains("tar+gzip"), "{e}");
    }

    #[test]
    fn a_signature_artifact_carries_its_signature_in_the_layer_annotation() {
        let s = SignatureArtifact::new(b"{\"critical\":{}}".to_vec(), "c2ln".into());
        let layers = signature_layers(&s.manifest).unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0].0.digest, sha256_digest(&s.payload));
        assert_eq!(layers[0].1.as_deref(), Some("c2ln"));
    }
}
