//! The client of one OCI registry ([`RegistryClient`]): it logs in, pushes blobs and manifests,
//! and pulls a manifest and blobs. HTTPS only, the server's certificate verified (against the
//! machine's roots and an optional CA file, `tls.rs`), credentials from a Docker config file.
//!
//! `oci-client` logs in and pushes. Pulls are conductor's own requests (`download.rs`), so that
//! every pull is bounded:
//! - at most [`MAX_REDIRECTS`] redirects, HTTPS only, the registry's credentials sent to its own
//!   origin only;
//! - a manifest of at most [`MAX_MANIFEST_SIZE`] bytes, a blob of at most the size the caller
//!   allows, refused on the size the manifest declares, on `Content-Length` and on the bytes
//!   received, whichever shows it first;
//! - a component streamed to a file while it is hashed, never held whole in memory.

mod download;
mod tls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};
use reqwest::{Response, StatusCode};
use tokio::io::{AsyncWrite, AsyncWriteExt};

pub use self::download::MAX_REDIRECTS;
use self::download::{Bounded, Downloads};
use self::tls::CaFile;
use super::artifact::MANIFEST_MEDIA_TYPE;
use super::digest::sha256_digest;
use super::reference::ArtifactReference;
use super::{OciError, credentials};
use crate::errors::error_chain;

/// The largest manifest (and signature payload) read: the size the distribution specification
/// asks registries to accept.
pub const MAX_MANIFEST_SIZE: u64 = 4 << 20;

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
    /// Where the operator names the CA file, for an error that asks for one: `--ca-file` on
    /// the command line, `[oci] ca_file` in conductor.toml.
    pub ca_file_option: &'static str,
}

/// A client of the registry of one reference: `oci-client` to log in and push, conductor's own
/// bounded requests to pull.
pub struct RegistryClient {
    /// Logs in (to push, and for the token of pulls) and pushes.
    client: Client,
    auth: RegistryAuth,
    /// The registry (`host[:port]`), as errors name it.
    name: String,
    /// The HTTP requests of pulls.
    downloads: Downloads,
    /// The `Authorization` header of pulls, asked for at the first one.
    pull_authorization: tokio::sync::OnceCell<Option<String>>,
    max_blob_size: u64,
    /// The CA file trusted besides the machine's roots, to explain a refused certificate.
    ca_file: CaFile,
}

impl RegistryClient {
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
        let ca_file = CaFile::new(options);
        let mut extra_roots = Vec::new();
        if let Some(ca) = ca_file.read()? {
            extra_roots = ca.roots;
            config.extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data: ca.pem,
            });
        }
        let client =
            Client::try_from(config).map_err(|e| OciError::Setup(format!("registry client: {}", error_chain(&e))))?;
        let auth =
            credentials::for_registry(options.auth_file.as_deref(), &reference.registry).map_err(OciError::Setup)?;
        let name = reference.registry.clone();
        Ok(Self {
            client,
            auth,
            downloads: Downloads::new(options, extra_roots, name.clone(), ca_file.clone())?,
            name,
            pull_authorization: tokio::sync::OnceCell::new(),
            max_blob_size: options.max_blob_size,
            ca_file,
        })
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

    /// The manifest `reference` names, as the registry serves it, and its digest; `None` when the
    /// registry has none. A reference pinned by digest must get a manifest of that digest.
    pub async fn manifest(&self, reference: &ArtifactReference) -> Result<Option<(Vec<u8>, String)>, OciError> {
        let tag_or_digest = reference
            .digest
            .clone()
            .or_else(|| reference.tag.clone())
            .unwrap_or_else(|| "latest".to_owned());
        let what = format!("the manifest of {reference}");
        let response = self
            .get(
                reference,
                &format!("manifests/{tag_or_digest}"),
                Some(MANIFEST_MEDIA_TYPE),
            )
            .await?;
        match response.status() {
            StatusCode::NOT_FOUND => return Ok(None),
            s if !s.is_success() => return Err(self.downloads.refusal(&what, response).await),
            _ => {}
        }
        let bound = format!("the {MAX_MANIFEST_SIZE} bytes a manifest may have");
        let bytes = Bounded::new(response, MAX_MANIFEST_SIZE, what, bound)?.all().await?;
        let digest = sha256_digest(&bytes);
        if let Some(expected) = &reference.digest
            && *expected != digest
        {
            return Err(OciError::Artifact(format!(
                "the registry served a manifest with digest {digest} for {reference}"
            )));
        }
        Ok(Some((bytes, digest)))
    }

    /// The small blob `descriptor` names (a signature's payload), in memory, its digest checked.
    pub async fn small_blob(
        &self,
        reference: &ArtifactReference,
        descriptor: &OciDescriptor,
    ) -> Result<Vec<u8>, OciError> {
        let mut bytes = Vec::new();
        let bound = format!("the {MAX_MANIFEST_SIZE} bytes a signature may have");
        self.read_blob(reference, descriptor, MAX_MANIFEST_SIZE, bound, &mut bytes)
            .await?;
        Ok(bytes)
    }

    /// Streams the blob `descriptor` names into a new `file`, hashing it as it goes; it must be
    /// at most `limit` bytes ([`RegistryOptions::max_blob_size`]). The file is removed unless its
    /// bytes are exactly the descriptor's.
    pub async fn blob_to_file(
        &self,
        reference: &ArtifactReference,
        descriptor: &OciDescriptor,
        file: &Path,
    ) -> Result<u64, OciError> {
        let cannot = |e: std::io::Error| OciError::Cache(format!("cannot write {}: {e}", file.display()));
        let mut out = tokio::io::BufWriter::new(tokio::fs::File::create(file).await.map_err(cannot)?);
        let limit = self.max_blob_size;
        let bound = format!("the {limit} bytes a plugin may have ([oci] max_plugin_size)");
        let written = async {
            let n = self.read_blob(reference, descriptor, limit, bound, &mut out).await?;
            out.flush().await.map_err(cannot)?;
            out.get_ref().sync_all().await.map_err(cannot)?;
            Ok(n)
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(file).await;
        }
        written
    }

    /// Reads the blob `descriptor` names into `out`: at most `limit` bytes, exactly the size the
    /// descriptor declares, hashing to its digest.
    async fn read_blob<W: AsyncWrite + Unpin>(
        &self,
        reference: &ArtifactReference,
        descriptor: &OciDescriptor,
        limit: u64,
        bound: String,
        out: &mut W,
    ) -> Result<u64, OciError> {
        let what = format!("the blob {} of {reference}", descriptor.digest);
        let declared = u64::try_from(descriptor.size)
            .map_err(|_| OciError::Artifact(format!("{what} declares a negative size")))?;
        if declared > limit {
            return Err(OciError::Artifact(format!(
                "{what} is {declared} bytes (its manifest says), more than {bound}"
            )));
        }
        let response = self
            .get(reference, &format!("blobs/{}", descriptor.digest), None)
            .await?;
        if !response.status().is_success() {
            return Err(self.downloads.refusal(&what, response).await);
        }
        let declares = format!("the {declared} bytes its manifest declares");
        let mut body = Bounded::new(response, declared, what.clone(), declares)?;
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        while let Some(chunk) = body.chunk().await? {
            hash.update(&chunk);
            out.write_all(&chunk)
                .await
                .map_err(|e| OciError::Cache(format!("keeping {what}: {e}")))?;
        }
        let digest = super::digest::format(hash.finish());
        if body.received() != declared || digest != descriptor.digest {
            return Err(OciError::Artifact(format!(
                "{what} arrived as {} bytes with digest {digest}, not the {declared} bytes its manifest declares",
                body.received()
            )));
        }
        Ok(body.received())
    }

    /// `GET /v2/<repository>/<path>` of `reference`'s registry with the credentials of pulls
    /// ([`Downloads::get`]: redirects followed by hand). A response of any status is returned.
    async fn get(&self, reference: &ArtifactReference, path: &str, accept: Option<&str>) -> Result<Response, OciError> {
        let r = client_reference(reference);
        let first = format!("https://{}/v2/{}/{path}", r.resolve_registry(), r.repository());
        let url = reqwest::Url::parse(&first).map_err(|e| OciError::Setup(format!("{first}: {e}")))?;
        let authorization = self.authorization(reference).await?;
        self.downloads.get(url, accept, authorization.as_deref()).await
    }

    /// The `Authorization` of pulls from `reference`'s repository: a bearer token from the
    /// registry's token service, else the basic credentials it asks for, else none (anonymous).
    async fn authorization(&self, reference: &ArtifactReference) -> Result<Option<String>, OciError> {
        self.pull_authorization
            .get_or_try_init(|| async {
                let token = self
                    .client
                    .auth(&client_reference(reference), &self.auth, RegistryOperation::Pull)
                    .await
                    .map_err(|e| self.failed("cannot log in", &e))?;
                Ok(match (token, &self.auth) {
                    (Some(token), _) => Some(format!("Bearer {token}")),
                    (None, RegistryAuth::Basic(user, password)) => {
                        use base64::Engine as _;
                        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                        Some(format!("Basic {pair}"))
                    }
                    _ => None,
                })
            })
            .await
            .cloned()
    }

    /// `what` failed with `e`: the registry's refusal, or the TLS handshake's (which no `what`
    /// explains: "cannot log in" to a registry whose certificate is not trusted misleads).
    fn failed(&self, what: &str, e: &OciDistributionError) -> OciError {
        let reason = self
            .ca_file
            .refusal(e, None)
            .unwrap_or_else(|| format!("{what}: {}", error_chain(e)));
        OciError::Registry {
            registry: self.name.clone(),
            reason,
        }
    }
}

/// `reference` in `oci-client`'s terms.
fn client_reference(reference: &ArtifactReference) -> oci_client::Reference {
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
