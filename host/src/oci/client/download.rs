//! The HTTP requests of pulls ([`Downloads`]): conductor's own client rather than `oci-client`'s,
//! so that every request is bounded:
//! - at most [`MAX_REDIRECTS`] redirects, HTTPS only (a registry sends a blob to its store that
//!   way), followed here rather than by the HTTP client so that the registry's credentials go to
//!   its own origin only — reqwest's redirects strip them on the first hop to another host but
//!   send them again on the next hop within that host; and never to a URL a manifest lists (a
//!   descriptor's `urls`): only where the registry answering for the reference sends it;
//! - a body read chunk by chunk and refused past its bound ([`Bounded`]), on `Content-Length`
//!   and on the bytes received, whichever shows it first.

use reqwest::{Response, header};

use super::RegistryOptions;
use super::tls::CaFile;
use crate::errors::error_chain;
use crate::oci::OciError;

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 3;
/// How much of an error response is read for its message.
const MAX_ERROR_BODY: u64 = 64 << 10;

/// The HTTP client of one registry's pulls: HTTPS only, the machine's roots and the CA file's,
/// the options' timeouts, no redirect followed by itself.
pub(super) struct Downloads {
    http: reqwest::Client,
    /// The registry (`host[:port]`), as errors name it.
    registry: String,
    ca_file: CaFile,
}

impl Downloads {
    pub(super) fn new(
        options: &RegistryOptions,
        extra_roots: Vec<reqwest::Certificate>,
        registry: String,
        ca_file: CaFile,
    ) -> Result<Self, OciError> {
        let http = reqwest::Client::builder()
            .https_only(true)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.timeout)
            .read_timeout(options.timeout)
            .tls_certs_merge(extra_roots)
            .build()
            .map_err(|e| OciError::Setup(format!("registry client: {}", error_chain(&e))))?;
        Ok(Self {
            http,
            registry,
            ca_file,
        })
    }

    /// `GET url` of the registry, following at most [`MAX_REDIRECTS`] redirects (HTTPS only);
    /// `authorization` goes to the registry's own origin and nowhere else, however the redirects
    /// run. A response of any other status is returned.
    pub(super) async fn get(
        &self,
        mut url: reqwest::Url,
        accept: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<Response, OciError> {
        let failed = |url: &reqwest::Url, reason: String| OciError::Registry {
            registry: self.registry.clone(),
            reason: format!("GET {url}: {reason}"),
        };
        let registry = url.origin();
        let mut hops = 0;
        loop {
            let mut request = self.http.get(url.clone());
            if let Some(accept) = accept {
                request = request.header(header::ACCEPT, accept);
            }
            if let Some(authorization) = authorization.filter(|_| url.origin() == registry) {
                request = request.header(header::AUTHORIZATION, authorization);
            }
            let response = request.send().await.map_err(|e| {
                let elsewhere = (url.origin() != registry).then(|| url.origin().ascii_serialization());
                let reason = self.ca_file.refusal(&e, elsewhere.as_deref());
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
    pub(super) async fn refusal(&self, what: &str, response: Response) -> OciError {
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
            registry: self.registry.clone(),
            reason: format!("cannot get {what}: HTTP {status}{detail}"),
        }
    }
}

/// A response body read chunk by chunk, refused past `limit` bytes.
pub(super) struct Bounded {
    response: Response,
    received: u64,
    limit: u64,
    /// What is read and what bounds it, for the refusal: ("the manifest of …", "the 4194304
    /// bytes a manifest may have").
    what: String,
    bound: String,
}

impl Bounded {
    pub(super) fn new(response: Response, limit: u64, what: String, bound: String) -> Result<Self, OciError> {
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

    /// The next chunk of the body (`None` at its end), refused once the bound is passed.
    pub(super) async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, OciError> {
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

    /// The bytes received so far.
    pub(super) fn received(&self) -> u64 {
        self.received
    }

    /// The whole body.
    pub(super) async fn all(mut self) -> Result<Vec<u8>, OciError> {
        let mut body = Vec::new();
        while let Some(c) = self.chunk().await? {
            body.extend_from_slice(&c);
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_MANIFEST_SIZE;
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
