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
    /// Where the operator names the CA file, for an error that asks for one: `--ca-file` on
    /// the command line, `[oci] ca_file` in conductor.toml.
    pub ca_file_option: &'static str,
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
    /// The CA file trusted besides the machine's roots, and the option that names it.
    ca_file: Option<PathBuf>,
    ca_file_option: &'static str,
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
            ca_file: options.ca_file.clone(),
            ca_file_option: options.ca_file_option,
        })
    }

    /// `what` failed with `e`: the registry's refusal, or the TLS handshake's (which no `what`
    /// explains: "cannot log in" to a registry whose certificate is not trusted misleads).
    pub(super) fn failed(&self, what: &str, e: &OciDistributionError) -> OciError {
        let reason = self
            .tls_refusal(e, None)
            .unwrap_or_else(|| format!("{what}: {}", error_chain(e)));
        OciError::Registry {
            registry: self.name.clone(),
            reason,
        }
    }

    /// When `e` failed because the TLS handshake refused the certificate of the registry (or of
    /// the server `elsewhere` it redirected to): why, naming the CA file option when trusting
    /// another CA is the cure.
    pub(super) fn tls_refusal(&self, e: &(dyn std::error::Error + 'static), elsewhere: Option<&str>) -> Option<String> {
        let refused = refused_certificate(e)?;
        let whose = match elsewhere {
            None => "the registry's certificate".to_owned(),
            Some(server) => format!("the certificate of {server}"),
        };
        Some(match refused {
            rustls::Error::InvalidCertificate(
                why @ (rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature),
            ) => {
                let even = match &self.ca_file {
                    Some(ca) => format!(", not even with the CA file {}", ca.display()),
                    None => String::new(),
                };
                format!(
                    "TLS: {whose} is not trusted ({why:?}){even}; pass the CA that signed it with {}",
                    self.ca_file_option
                )
            }
            other => format!("TLS: {whose} is refused: {other}"),
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
}

/// The refusal of a certificate by a TLS handshake (`rustls::Error::InvalidCertificate`) anywhere
/// in `e`'s causes. rustls' error travels in an `io::Error` (in another one, through
/// hyper-rustls), whose `source` skips what it wraps: what an `io::Error` wraps is looked at next.
fn refused_certificate<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(refused @ rustls::Error::InvalidCertificate(_)) = e.downcast_ref::<rustls::Error>() {
            return Some(refused);
        }
        next = match e.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
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

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Connect(#[source] io::Error);

    fn handshake(refused: rustls::CertificateError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, rustls::Error::InvalidCertificate(refused))
    }

    #[test]
    fn a_certificate_the_handshake_refused_is_told_as_such_naming_the_ca_option() {
        let reference = ArtifactReference::parse("oci://registry.example:5000/team/widgets:v1").unwrap();
        let options = RegistryOptions {
            auth_file: None,
            ca_file: None,
            timeout: Duration::from_secs(1),
            max_blob_size: 1024,
            ca_file_option: "--ca-file",
        };
        let registry = Registry::connect(&reference, &options).unwrap();
        // As hyper-rustls hands it on: in another io::Error, under the HTTP client's own.
        let untrusted = Connect(io::Error::other(handshake(rustls::CertificateError::UnknownIssuer)));
        assert_eq!(
            registry.tls_refusal(&untrusted, None).as_deref(),
            Some(
                "TLS: the registry's certificate is not trusted (UnknownIssuer); pass the CA that signed it with --ca-file"
            )
        );
        let expired = handshake(rustls::CertificateError::Expired);
        let why = registry.tls_refusal(&expired, Some("https://store.example")).unwrap();
        assert!(
            why.starts_with("TLS: the certificate of https://store.example is refused: "),
            "{why}"
        );
        assert_eq!(
            registry.tls_refusal(&Connect(io::Error::other("connection refused")), None),
            None
        );
    }
}
