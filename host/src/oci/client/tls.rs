//! The CA file a registry's certificate may be signed by besides the machine's roots
//! ([`CaFile`]): its certificates, and why a TLS handshake refused a certificate, told so that
//! the cure shows.

use std::path::PathBuf;

use super::RegistryOptions;
use crate::errors::error_chain;
use crate::oci::OciError;

/// The CA file trusted for registries besides the machine's roots, and the option that names it.
#[derive(Debug, Clone)]
pub(super) struct CaFile {
    path: Option<PathBuf>,
    /// `--ca-file`, `[oci] ca_file`: where the operator names it.
    option: &'static str,
}

/// The certificates of a CA file, as PEM (for `oci-client`) and parsed (for reqwest).
pub(super) struct CaCertificates {
    pub(super) pem: Vec<u8>,
    pub(super) roots: Vec<reqwest::Certificate>,
}

impl CaFile {
    pub(super) fn new(options: &RegistryOptions) -> Self {
        Self {
            path: options.ca_file.clone(),
            option: options.ca_file_option,
        }
    }

    /// The file's certificates; none without a file.
    pub(super) fn read(&self) -> Result<Option<CaCertificates>, OciError> {
        let Some(ca) = &self.path else {
            return Ok(None);
        };
        let pem =
            std::fs::read(ca).map_err(|e| OciError::Setup(format!("cannot read the CA file {}: {e}", ca.display())))?;
        let roots = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| OciError::Setup(format!("the CA file {}: {}", ca.display(), error_chain(&e))))?;
        Ok(Some(CaCertificates { pem, roots }))
    }

    /// When `e` failed because the TLS handshake refused the certificate of the registry (or of
    /// the server `elsewhere` it redirected to): why, naming the CA file option when trusting
    /// another CA is the cure.
    pub(super) fn refusal(&self, e: &(dyn std::error::Error + 'static), elsewhere: Option<&str>) -> Option<String> {
        let refused = refused_certificate(e)?;
        let whose = match elsewhere {
            None => "the registry's certificate".to_owned(),
            Some(server) => format!("the certificate of {server}"),
        };
        Some(match refused {
            rustls::Error::InvalidCertificate(
                why @ (rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature),
            ) => {
                let even = match &self.path {
                    Some(ca) => format!(", not even with the CA file {}", ca.display()),
                    None => String::new(),
                };
                format!(
                    "TLS: {whose} is not trusted ({why:?}){even}; pass the CA that signed it with {}",
                    self.option
                )
            }
            other => format!("TLS: {whose} is refused: {other}"),
        })
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

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use super::*;
    use crate::oci::{ArtifactReference, RegistryClient};

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
        assert!(RegistryClient::connect(&reference, &options).is_ok());
        let ca_file = CaFile::new(&options);
        // As hyper-rustls hands it on: in another io::Error, under the HTTP client's own.
        let untrusted = Connect(io::Error::other(handshake(rustls::CertificateError::UnknownIssuer)));
        assert_eq!(
            ca_file.refusal(&untrusted, None).as_deref(),
            Some(
                "TLS: the registry's certificate is not trusted (UnknownIssuer); pass the CA that signed it with --ca-file"
            )
        );
        let expired = handshake(rustls::CertificateError::Expired);
        let why = ca_file.refusal(&expired, Some("https://store.example")).unwrap();
        assert!(
            why.starts_with("TLS: the certificate of https://store.example is refused: "),
            "{why}"
        );
        assert_eq!(
            ca_file.refusal(&Connect(io::Error::other("connection refused")), None),
            None
        );
    }
}
