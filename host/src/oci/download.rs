//! Pulling from a registry with conductor's own HTTP client, so that every pull is bounded:
//! - at most [`MAX_REDIRECTS`] redirects, HTTPS only (a registry sends a blob to its store that
//!   way), followed here rather than by the HTTP client so that the registry's credentials go to
//!   its own origin only — reqwest's redirects strip them on the first hop to another host but
//!   send them again on the next hop within that host; and never to a URL a manifest lists (a
//!   descriptor's `urls`): only where the registry answering for the reference sends it;
//! - a manifest of at most [`MAX_MANIFEST_SIZE`] bytes, a blob of at most the size the caller
//!   allows, refused on the size the manifest declares, on `Content-Length` and on the bytes
//!   received, whichever shows it first;
//! - a component streamed to a file while it is hashed, never held whole in memory.

use std::path::Path;

use oci_client::RegistryOperation;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use reqwest::{Response, StatusCode, header};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::OciError;
use super::digest::sha256_digest;
use super::reference::ArtifactReference;
use super::registry::{MANIFEST_MEDIA_TYPE, Registry, client_reference};
use crate::errors::error_chain;

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 3;
/// The largest manifest (and signature payload) read: the size the distribution specification
/// asks registries to accept.
pub const MAX_MANIFEST_SIZE: u64 = 4 << 20;
/// How much of an error response is read for its message.
const MAX_ERROR_BODY: u64 = 64 << 10;

/// A response body read chunk by chunk, refused past `limit` bytes.
struct Bounded {
    response: Response,
    received: u64,
    limit: u64,
    /// What is read and what bounds it, for the refusal: ("the manifest of …", "the 4194304
    /// bytes a manifest may have").
    what: String,
    bound: String,
}

impl Bounded {
    fn new(response: Response, limit: u64, what: String, bound: String) -> Result<Self, OciError> {
        if let Some(length) = response.content_length()
            && length > limit
        {
            return Err(OciError::Artifact(format!(
                "{what} is {length} bytes (Content-Length), more than {bound}"
            )));
        }
        Ok(Self {
            response,
            received: 0,
            limit,
            what,
            bound,
        })
    }

    async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, OciError> {
        let chunk = self.response.chunk().await.map_err(|e| OciError::Registry {
            registry: self.response.url().host_str().unwrap_or_default().to_owned(),
            reason: format!("reading {}: {}", self.what, error_chain(&e)),
        })?;
        if let Some(c) = &chunk {
            self.received += c.len() as u64;
            if self.received > self.limit {
                return Err(OciError::Artifact(format!(
                    "{} sent more than {}: refused after {} bytes",
                    self.what, self.bound, self.received
                )));
            }
        }
        Ok(chunk)
    }

    async fn all(mut self) -> Result<Vec<u8>, OciError> {
        let mut body = Vec::new();
        while let Some(c) = self.chunk().await? {
            body.extend_from_slice(&c);
        }
        Ok(body)
    }
}

impl Registry {
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

    /// `GET /v2/<repository>/<path>` of `reference`'s registry, following at most
    /// [`MAX_REDIRECTS`] redirects (HTTPS only); the credentials go to the registry's own origin
    /// and nowhere else, however the redirects run. A response of any other status is returned.
    async fn get(&self, reference: &ArtifactReference, path: &str, accept: Option<&str>) -> Result<Response, OciError> {
        let r = client_reference(reference);
        let first = format!("https://{}/v2/{}/{path}", r.resolve_registry(), r.repository());
        let failed = |url: &reqwest::Url, reason: String| OciError::Registry {
            registry: self.name.clone(),
            reason: format!("GET {url}: {reason}"),
        };
        let mut url = reqwest::Url::parse(&first).map_err(|e| OciError::Setup(format!("{first}: {e}")))?;
        let registry = url.origin();
        let authorization = self.authorization(reference).await?;
        let mut hops = 0;
        loop {
            let mut request = self.http.get(url.clone());
            if let Some(accept) = accept {
                request = request.header(header::ACCEPT, accept);
            }
            if let Some(authorization) = authorization.as_ref().filter(|_| url.origin() == registry) {
                request = request.header(header::AUTHORIZATION, authorization);
            }
            let response = request.send().await.map_err(|e| {
                let elsewhere = (url.origin() != registry).then(|| url.origin().ascii_serialization());
                let reason = self.tls_refusal(&e, elsewhere.as_deref());
                failed(&url, reason.unwrap_or_else(|| error_chain(&e)))
            })?;
            let location = response.headers().get(header::LOCATION);
            let (true, Some(location)) = (response.status().is_redirection(), location) else {
                return Ok(response);
            };
            if hops == MAX_REDIRECTS {
                return Err(failed(
                    &url,
                    format!(
                        "redirected {} times: conductor follows at most {MAX_REDIRECTS}",
                        hops + 1
                    ),
                ));
            }
            let next = location
                .to_str()
                .ok()
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| failed(&url, format!("a redirect to {location:?}, which is not a URL")))?;
            if next.scheme() != "https" {
                return Err(failed(&url, format!("a redirect to {next}, which is not HTTPS")));
            }
            tracing::debug!(from = %url, to = %next, "registry redirect");
            url = next;
            hops += 1;
        }
    }

    /// The registry's refusal: its status and the messages of its error envelope.
    async fn refusal(&self, what: &str, response: Response) -> OciError {
        let status = response.status();
        let what = what.to_owned();
        let body = match Bounded::new(response, MAX_ERROR_BODY, what.clone(), "an error message".into()) {
            Ok(b) => b.all().await.unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let messages: Vec<String> = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["errors"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        let detail = if messages.is_empty() {
            String::new()
        } else {
            format!(" ({})", messages.join("; "))
        };
        OciError::Registry {
            registry: self.name.clone(),
            reason: format!("cannot get {what}: HTTP {status}{detail}"),
        }
    }

    /// The manifest `reference` names, as the registry serves it, and its digest; `None` when the
    /// registry has none.
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
            s if !s.is_success() => return Err(self.refusal(&what, response).await),
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
            return Err(self.refusal(&what, response).await);
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
        if body.received != declared || digest != descriptor.digest {
            return Err(OciError::Artifact(format!(
                "{what} arrived as {} bytes with digest {digest}, not the {declared} bytes its manifest declares",
                body.received
            )));
        }
        Ok(body.received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounded(body: reqwest::Body, limit: u64) -> Result<Bounded, OciError> {
        let response = Response::from(axum::http::Response::new(body));
        Bounded::new(
            response,
            limit,
            "the manifest of x".into(),
            format!("the {limit} bytes a manifest may have"),
        )
    }

    // A registry that conforms refuses such a manifest itself (the CNCF distribution server
    // answers "manifest invalid" past 4 MiB), so a black-box test cannot make one: the bound is
    // tried here on both ways a body shows its size.
    #[tokio::test]
    async fn a_body_past_its_bound_is_refused_on_its_length_or_while_it_is_read() {
        let limit = MAX_MANIFEST_SIZE;
        let long = vec![b'x'; limit as usize + 1];
        let e = bounded(reqwest::Body::from(long.clone()), limit)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!(
                "is {} bytes (Content-Length), more than the {limit} bytes",
                limit + 1
            )),
            "{e}"
        );

        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = long.chunks(1 << 20).map(|c| Ok(c.to_vec())).collect();
        let unannounced = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
        let e = bounded(unannounced, limit)
            .unwrap()
            .all()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "sent more than the {limit} bytes a manifest may have: refused after {}",
                limit + 1
            )),
            "{e}"
        );

        let exact = bounded(reqwest::Body::from(vec![b'x'; limit as usize]), limit).unwrap();
        assert_eq!(
            exact.all().await.unwrap().len() as u64,
            limit,
            "the bound itself is allowed"
        );
    }
}
