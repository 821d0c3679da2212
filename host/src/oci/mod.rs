//! Plugins kept in OCI registries: a plugin's `file` may be `oci://registry/repository@sha256:…`.
//!
//! [`pull`] fetches the artifact the digest pins ([`artifact`]: the CNCF layout for WebAssembly),
//! checks every digest, verifies its cosign signature when the operator names a key
//! ([`signature`]), and keeps it in a content-addressed cache on disk ([`cache`]) from which it is
//! loaded like a file; [`push`] publishes a built plugin in the same layout, signed if asked.
//! Both go through one [`RegistryClient`] ([`client`]): registries are reached over HTTPS with
//! their certificates verified, with the credentials of a Docker config file.

pub mod artifact;
pub mod cache;
pub mod client;
mod credentials;
pub mod digest;
pub mod pull;
pub mod push;
pub mod reference;
pub mod signature;

pub use cache::ArtifactCache;
pub use client::{MAX_MANIFEST_SIZE, MAX_REDIRECTS, RegistryClient, RegistryOptions, default_auth_file};
pub use digest::{sha256_digest, sha256_file};
pub use pull::{Fetched, fetch};
pub use reference::{ArtifactReference, SCHEME, is_oci};
pub use signature::{PublicKey, SigningKey};

/// Why an artifact could not be pulled, verified or pushed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{0}")]
    Setup(String),
    #[error("registry {registry}: {reason}")]
    Registry { registry: String, reason: String },
    #[error("{0}")]
    Artifact(String),
    #[error("signature not accepted: {0}")]
    Signature(String),
    #[error("{0}")]
    Cache(String),
}
