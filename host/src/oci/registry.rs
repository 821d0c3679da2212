//! One registry, through `oci-client`: HTTPS only, the server's certificate verified (against the
//! machine's roots and an optional CA file), credentials from a Docker config file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};

use super::digest::sha256_digest;
use super::reference::ArtifactReference;
use super::{OciError, credentials};
use crate::errors::error_chain;

/// The media type of the manifests conductor reads and writes.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// How conductor reaches registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// A Docker config file with credentials (`{"auths": …}`); none: anonymous.
    pub auth_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted for registries besides the machine's.
    pub ca_file: Option<PathBuf>,
    /// How long connecting and each read may take.
    pub timeout: Duration,
    /// The largest plugin component a pull accepts.
    pub max_blob_size: u64,
}

/// A client of the registry of one reference: `oci-client` to log in and push, conductor's own
/// bounded requests to pull ([`super::download`]).
pub struct Registry {
    pub(super) client: Client,
    pub(super) auth: RegistryAuth,
    pub(super) name: String,
    pub(super) http: reqwest::Client,
    pub(super) pull_authorization: tokio::sync::OnceCell<Option<String>>,
    pub(super) max_blob_size: u64,
}

impl Registry {
    /// A client for `reference`'s registry.
    pub fn connect(reference: &ArtifactReference, options: &RegistryOptions) -> Result<Self, OciError> {
        // reqwest is built without a crypto provider of its own: it uses the process's, ring (the
        // one every other TLS client and server of conductor uses).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = ClientConfig {
            protocol: ClientProtocol::Https,
            connect_timeout: Some(options.timeout),
            read_timeout: Some(options.timeout),
            platform_resolver: None,
            ..ClientConfig::default()
        };
        let mut extra_roots = Vec::new();
        if let Some(ca) = &options.ca_file {
            let data = std::fs::read(ca)
                .map_err(|e| OciError::Setup(format!("cannot read the CA file {}: {e}", ca.display())))?;
            extra_roots = reqwest::Certificate::from_pem_bundle(&data)
                .map_err(|e| OciError::Setup(format!("the CA file {}: {}", ca.display(), error_chain(&e))))?;
            config.extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let client =
            Client::try_from(config).map_err(|e| OciError::Setup(format!("registry client: {}", error_chain(&e))))?;
        let auth =
            credentials::for_registry(options.auth_file.as_deref(), &reference.registry).map_err(OciError::Setup)?;
        Ok(Self {
            client,
            auth,
            name: reference.registry.clone(),
            http: http_client(options, extra_roots)?,
            pull_authorization: tokio::sync::OnceCell::new(),
            max_blob_size: options.max_blob_size,
        })
    }

    pub(super) fn failed(&self, what: &str, e: &OciDistributionError) -> OciError {
        OciError::Registry {
            registry: self.name.clone(),
            reason: format!("{what}: {}", error_chain(e)),
        }
    }

    /// Logs in for pushing to `reference`'s repository.
    pub async fn login_for_push(&self, reference: &ArtifactReference) -> Result<(), OciError> {
        self.client
            .auth(&client_reference(reference), &self.auth, RegistryOperation::Push)
            .await
            .map(|_| ())
            .map_err(|e| self.failed("cannot log in", &e))
    }

    /// Uploads `bytes` as a blob of `reference`'s repository (nothing when it is there already).
    pub async fn push_blob(&self, reference: &ArtifactReference, bytes: Vec<u8>) -> Result<String, OciError> {
        let digest = sha256_digest(&bytes);
        let r = client_reference(reference);
        if self.client.blob_exists(&r, &digest).await.unwrap_or(false) {
            return Ok(digest);
        }
        self.client
            .push_blob(&r, bytes, &digest)
            .await
            .map_err(|e| self.failed(&format!("cannot upload the blob {digest}"), &e))?;
        Ok(digest)
    }

    /// Uploads `manifest` under `reference`'s tag (or digest); returns its digest.
    pub async fn push_manifest(&self, reference: &ArtifactReference, manifest: Vec<u8>) -> Result<String, OciError> {
        let digest = sha256_digest(&manifest);
        let content_type = MANIFEST_MEDIA_TYPE
            .parse()
            .map_err(|_| OciError::Setup("media type".into()))?;
        self.client
            .push_manifest_raw(&client_reference(reference), manifest, content_type)
            .await
            .map_err(|e| self.failed(&format!("cannot upload the manifest to {reference}"), &e))?;
        Ok(digest)
    }
}

/// The HTTP client of pulls: HTTPS only, the machine's roots and `extra_roots`, `options`'
/// timeouts, no redirect followed by itself (pulls follow them, [`super::download`]).
fn http_client(options: &RegistryOptions, extra_roots: Vec<reqwest::Certificate>) -> Result<reqwest::Client, OciError> {
    reqwest::Client::builder()
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(options.timeout)
        .read_timeout(options.timeout)
        .tls_certs_merge(extra_roots)
        .build()
        .map_err(|e| OciError::Setup(format!("registry client: {}", error_chain(&e))))
}

/// `reference` in the client's terms.
pub(super) fn client_reference(reference: &ArtifactReference) -> oci_client::Reference {
    let (registry, repository) = (reference.registry.clone(), reference.repository.clone());
    match (&reference.digest, &reference.tag) {
        (Some(digest), _) => oci_client::Reference::with_digest(registry, repository, digest.clone()),
        (None, tag) => {
            oci_client::Reference::with_tag(registry, repository, tag.clone().unwrap_or_else(|| "latest".to_owned()))
        }
    }
}

/// The default Docker config file of the user running a command: `$DOCKER_CONFIG/config.json`,
/// else `~/.docker/config.json`, if it exists.
pub fn default_auth_file() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")))?;
    Some(dir.join("config.json")).filter(|f| f.exists())
}
