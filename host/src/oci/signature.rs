//! Signatures in cosign's key-based format, so that an artifact signed with `cosign sign --key`
//! (or by `conductor plugins push --sign-key`) verifies, and one signed by anyone else does not.
//!
//! cosign keeps the signatures of the artifact with manifest digest `sha256:<hex>` in the same
//! repository, as an OCI manifest tagged `sha256-<hex>.sig`. Each of its layers is a *simple
//! signing* payload (media type [`PAYLOAD_MEDIA_TYPE`]) — JSON naming the signed manifest's digest
//! — and carries, in the annotation [`SIGNATURE_ANNOTATION`], the base64 of an ECDSA P-256
//! signature (ASN.1 DER) over the payload's bytes with SHA-256. An artifact verifies when one
//! layer's signature verifies with the operator's public key *and* its payload names the
//! artifact's manifest digest.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::signature::{ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey};
use serde_json::Value;
use x509_parser::prelude::FromDer as _;

use super::digest::sha256_digest;

/// The media type of a simple-signing payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const PAYLOAD_TYPE: &str = "cosign container image signature";

const EC_PUBLIC_KEY_OID: &str = "1.2.840.10045.2.1";
const P256_OID: &str = "1.2.840.10045.3.1.7";

/// The tag under which cosign keeps the signatures of the manifest `digest`.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// The simple-signing payload cosign signs for the manifest `digest` in `repository`
/// (`registry/path`).
pub fn payload(repository: &str, manifest_digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": { "docker-reference": repository },
            "image": { "docker-manifest-digest": manifest_digest },
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// The PEM blocks labelled `label` in `text`, decoded.
fn pem_blocks(text: &str, label: &str) -> Result<Vec<Vec<u8>>, String> {
    let (begin, end) = (format!("-----BEGIN {label}-----"), format!("-----END {label}-----"));
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&begin) {
        let body = &rest[start + begin.len()..];
        let stop = body.find(&end).ok_or_else(|| format!("a {begin} block has no {end}"))?;
        let b64: String = body[..stop].chars().filter(|c| !c.is_whitespace()).collect();
        blocks.push(
            BASE64
                .decode(b64)
                .map_err(|e| format!("a {label} block is not base64: {e}"))?,
        );
        rest = &body[stop + end.len()..];
    }
    Ok(blocks)
}

/// An ECDSA P-256 public key (cosign's default), read from a PEM `PUBLIC KEY` file as
/// `cosign generate-key-pair` and `openssl ec -pubout` write it.
#[derive(Clone)]
pub struct PublicKey {
    point: Vec<u8>,
    /// The SHA-256 of the key's DER form, naming the key in the cache's verified marks.
    pub fingerprint: String,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint)
    }
}

impl PublicKey {
    pub fn from_pem(text: &str) -> Result<Self, String> {
        let der = pem_blocks(text, "PUBLIC KEY")?
            .into_iter()
            .next()
            .ok_or("no -----BEGIN PUBLIC KEY----- block (an ECDSA P-256 key in PEM, as cosign generate-key-pair writes cosign.pub)")?;
        let (_, spki) =
            x509_parser::x509::SubjectPublicKeyInfo::from_der(&der).map_err(|e| format!("not a public key: {e}"))?;
        let algorithm = spki.algorithm.algorithm.to_id_string();
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok())
            .map(|oid| oid.to_id_string());
        if algorithm != EC_PUBLIC_KEY_OID || curve.as_deref() != Some(P256_OID) {
            return Err(format!(
                "not an ECDSA P-256 key (algorithm {algorithm}, parameters {curve:?}): conductor verifies cosign's default key type"
            ));
        }
        Ok(Self {
            point: spki.subject_public_key.data.to_vec(),
            fingerprint: sha256_digest(&der),
        })
    }

    /// Whether `signature` (DER) is this key's signature over `message`.
    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }

    /// Checks one signature layer: `signature_b64` over `payload` with this key, and the payload
    /// naming `manifest_digest`. The error says which part failed.
    pub fn check(&self, payload: &[u8], signature_b64: &str, manifest_digest: &str) -> Result<(), String> {
        let signature = BASE64
            .decode(signature_b64.trim())
            .map_err(|e| format!("the signature is not base64: {e}"))?;
        if !self.verifies(payload, &signature) {
            return Err("the signature does not verify with the public key".into());
        }
        let payload: Value =
            serde_json::from_slice(payload).map_err(|e| format!("the signed payload is not JSON: {e}"))?;
        let critical = &payload["critical"];
        if critical["type"] != PAYLOAD_TYPE {
            return Err(format!(
                "the signed payload's type is {}, not {PAYLOAD_TYPE:?}",
                critical["type"]
            ));
        }
        let signed = critical["image"]["docker-manifest-digest"].as_str().unwrap_or_default();
        if signed != manifest_digest {
            return Err(format!("the signature is for {signed:?}, not for {manifest_digest}"));
        }
        Ok(())
    }
}

/// An ECDSA P-256 private key in a PKCS#8 PEM file (`openssl genpkey -algorithm EC -pkeyopt
/// ec_paramgen_curve:P-256`), for `conductor plugins push --sign-key`.
pub struct SigningKey(EcdsaKeyPair);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(…)")
    }
}

impl SigningKey {
    pub fn from_pem(text: &str) -> Result<Self, String> {
        if text.contains("-----BEGIN ENCRYPTED") {
            return Err("the key is encrypted: give an unencrypted PKCS#8 key (`openssl pkcs8 -topk8 -nocrypt`), or sign with cosign itself".into());
        }
        let der = pem_blocks(text, "PRIVATE KEY")?.into_iter().next().ok_or(
            "no -----BEGIN PRIVATE KEY----- block (a PKCS#8 ECDSA P-256 key; convert an EC PRIVATE KEY with `openssl pkcs8 -topk8 -nocrypt`)",
        )?;
        let rng = ring::rand::SystemRandom::new();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &rng)
            .map(Self)
            .map_err(|e| format!("not an ECDSA P-256 PKCS#8 key: {e}"))
    }

    /// The base64 DER signature over `message`, as cosign's annotation holds it.
    pub fn sign(&self, message: &[u8]) -> Result<String, String> {
        let rng = ring::rand::SystemRandom::new();
        let signature = self.0.sign(&rng, message).map_err(|e| format!("signing failed: {e}"))?;
        Ok(BASE64.encode(signature.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::KeyPair as _;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// A fresh key pair as PEM texts (PKCS#8 private key, SPKI public key).
    fn key_pair() -> (String, String) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        // SubjectPublicKeyInfo for id-ecPublicKey / prime256v1, then the 65-byte point.
        let mut spki = hex_bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200");
        spki.extend_from_slice(pair.public_key().as_ref());
        let pem = |label: &str, der: &[u8]| {
            format!(
                "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                BASE64.encode(der)
            )
        };
        (pem("PRIVATE KEY", pkcs8.as_ref()), pem("PUBLIC KEY", &spki))
    }

    fn hex_bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_signature_made_with_the_private_key_verifies_for_its_digest_only() {
        let (private, public) = key_pair();
        let (signer, key) = (
            SigningKey::from_pem(&private).unwrap(),
            PublicKey::from_pem(&public).unwrap(),
        );
        let payload = payload("127.0.0.1:5000/conductor/kube", DIGEST);
        let signature = signer.sign(&payload).unwrap();
        key.check(&payload, &signature, DIGEST).unwrap();

        let other = DIGEST.replace("0123", "4567");
        let e = key.check(&payload, &signature, &other).unwrap_err();
        assert!(e.contains("the signature is for"), "{e}");
        let mut tampered = payload.clone();
        tampered[10] ^= 1;
        let e = key.check(&tampered, &signature, DIGEST).unwrap_err();
        assert!(e.contains("does not verify"), "{e}");
    }

    #[test]
    fn another_key_does_not_verify() {
        let (private, _) = key_pair();
        let (_, other_public) = key_pair();
        let payload = payload("r/p", DIGEST);
        let signature = SigningKey::from_pem(&private).unwrap().sign(&payload).unwrap();
        let e = PublicKey::from_pem(&other_public)
            .unwrap()
            .check(&payload, &signature, DIGEST)
            .unwrap_err();
        assert!(e.contains("does not verify"), "{e}");
    }

    #[test]
    fn keys_that_are_not_p256_public_keys_are_refused_with_the_reason() {
        assert!(
            PublicKey::from_pem("nothing")
                .unwrap_err()
                .contains("no -----BEGIN PUBLIC KEY-----")
        );
        // An Ed25519 SubjectPublicKeyInfo.
        let mut ed = hex_bytes("302a300506032b6570032100");
        ed.extend_from_slice(&[7; 32]);
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            BASE64.encode(&ed)
        );
        assert!(
            PublicKey::from_pem(&pem)
                .unwrap_err()
                .contains("not an ECDSA P-256 key")
        );
        assert!(
            SigningKey::from_pem("-----BEGIN ENCRYPTED PRIVATE KEY-----")
                .unwrap_err()
                .contains("encrypted")
        );
    }

    #[test]
    fn the_signature_tag_is_cosigns() {
        assert_eq!(
            signature_tag(DIGEST),
            "sha256-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.sig"
        );
    }
}
