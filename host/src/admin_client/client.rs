//! The command line's side of the admin endpoint: one HTTP/1.1 request (over TLS for an
//! `https://` endpoint), with a bearer token when one is given, and the body back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// Where the token of a pod's service account is mounted.
pub const IN_CLUSTER_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// A running conductor's admin endpoint, and how to reach it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `http://host:port` or `https://host:port`.
    pub url: String,
    /// A file holding the bearer token sent with every request.
    pub token_file: Option<PathBuf>,
    /// The CA (PEM) an `https` endpoint's certificate is checked against.
    pub ca_file: Option<PathBuf>,
    /// The name the certificate must carry, when not the URL's host (through a port-forward the
    /// host is `localhost`, the certificate names the Service).
    pub tls_server_name: Option<String>,
}

impl Endpoint {
    /// `url`, with `token_file` or else the in-cluster service account's token when there is one.
    pub fn new(url: &str, token_file: Option<PathBuf>, ca_file: Option<PathBuf>) -> Self {
        let token_file = token_file.or_else(|| {
            let in_cluster = Path::new(IN_CLUSTER_TOKEN);
            in_cluster.exists().then(|| in_cluster.to_owned())
        });
        Self {
            url: url.to_owned(),
            token_file,
            ca_file,
            tls_server_name: None,
        }
    }

    /// Checks an `https` endpoint's certificate for `name` rather than the URL's host.
    pub fn with_tls_server_name(mut self, name: Option<String>) -> Self {
        self.tls_server_name = name;
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid admin URL {url:?}: {reason} (expected http://host:port or https://host:port)")]
    Url { url: String, reason: String },
    #[error("{0}")]
    Credentials(String),
    #[error("cannot reach the admin endpoint at {authority}: {reason}")]
    Connect { authority: String, reason: String },
    #[error("the admin endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
}

/// The answer to `method` `path` at `endpoint`; a status other than 2xx is an error carrying the
/// body.
/// `segment` percent-encoded for a URL path (everything but RFC 3986's unreserved characters).
pub fn path_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub async fn request(endpoint: &Endpoint, method: hyper::Method, path: &str) -> Result<String, ClientError> {
    let admin = endpoint.url.as_str();
    let url_error = |reason: &str| ClientError::Url {
        url: admin.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: hyper::Uri = admin
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| url_error(&e.to_string()))?;
    let https = match uri.scheme_str() {
        None | Some("http") => false,
        Some("https") => true,
        Some(other) => return Err(url_error(&format!("unknown scheme {other:?}"))),
    };
    let authority = uri.authority().ok_or_else(|| url_error("no host:port"))?.clone();
    let token = match &endpoint.token_file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| ClientError::Credentials(format!("cannot read the token file {}: {e}", file.display())))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let tls = match https {
        true => Some(connector(endpoint.ca_file.as_deref())?),
        false => None,
    };
    let authority_text = authority.to_string();
    let unreachable = |reason: String| ClientError::Connect {
        authority: authority_text.clone(),
        reason,
    };
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(authority.as_str())
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, authority.as_str());
        if let Some(token) = &token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| url_error(&e.to_string()))?;
        let response = match tls {
            Some(tls) => {
                let host = endpoint.tls_server_name.as_deref().unwrap_or(authority.host());
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| url_error(&format!("{host:?} is not a TLS server name: {e}")))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| unreachable(format!("TLS: {e}")))?;
                send(TokioIo::new(stream), req).await
            }
            None => send(TokioIo::new(tcp), req).await,
        }
        .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        if status.is_success() {
            Ok(body)
        } else {
            Err(ClientError::Status {
                status: status.as_u16(),
                body: body.trim_end().to_owned(),
            })
        }
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .map_err(|_| ClientError::Connect {
            authority: authority.to_string(),
            reason: "no answer within 60s".into(),
        })?
}

/// One request on a new HTTP/1.1 connection over `io`.
async fn send<I>(
    io: I,
    req: hyper::Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(req).await
}

/// A TLS client that trusts the CA in `ca_file`.
fn connector(ca_file: Option<&Path>) -> Result<tokio_rustls::TlsConnector, ClientError> {
    let ca_file = ca_file.ok_or_else(|| {
        ClientError::Credentials("an https admin endpoint needs --ca-file: the CA its certificate is signed by".into())
    })?;
    let pem = std::fs::read(ca_file)
        .map_err(|e| ClientError::Credentials(format!("cannot read the CA file {}: {e}", ca_file.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert =
            cert.map_err(|e| ClientError::Credentials(format!("{}: not PEM certificates: {e}", ca_file.display())))?;
        roots
            .add(cert)
            .map_err(|e| ClientError::Credentials(format!("{}: not a CA certificate: {e}", ca_file.display())))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Credentials(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
