//! A blob store behind the test registry, as a registry with its storage in S3 or a CDN has one:
//! the CNCF distribution server's `redirect` storage middleware answers a blob request with a
//! redirect to `https://<store>/<path in its storage>`, and this HTTPS server (its own CA, see
//! [`BlobStore::ca`]) serves that file from the registry's storage folder. For the tests it can
//! redirect again a chosen number of times ([`BlobStore::set_hops`]), and lie about a blob
//! ([`Serving`]); it records every request with whether it carried credentials.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

#[path = "many_certs.rs"]
mod many_certs;

/// How the store answers for a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// The file, with its `Content-Length`.
    Honestly,
    /// The file and one byte more, announced in `Content-Length`.
    LongerAnnounced,
    /// The file and 64 KiB more, chunked, with no `Content-Length`.
    LongerUnannounced,
}

#[derive(Clone)]
struct Shared {
    storage: Arc<Mutex<Option<PathBuf>>>,
    hops: Arc<AtomicUsize>,
    serving: Arc<Mutex<Serving>>,
    requests: Arc<Mutex<Vec<(String, bool)>>>,
}

pub struct BlobStore {
    pub addr: SocketAddr,
    certs: many_certs::ManyCerts,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BlobStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP listener that hands axum TLS connections (a failed handshake is skipped).
struct TlsListener {
    tcp: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.tls.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

impl BlobStore {
    /// Starts the store on 127.0.0.1 with a certificate of its own CA in `dir`.
    pub async fn start(dir: &Path) -> Self {
        use rustls::pki_types::pem::PemObject as _;
        let certs = many_certs::ManyCerts::new(dir);
        let chain = rustls::pki_types::CertificateDer::pem_file_iter(dir.join("server.crt"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let shared = Shared {
            storage: Arc::default(),
            hops: Arc::default(),
            serving: Arc::new(Mutex::new(Serving::Honestly)),
            requests: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/hop/{n}/{*path}", axum::routing::get(hop))
            .route("/{*path}", axum::routing::get(blob))
            .with_state(shared.clone());
        let listener = TlsListener {
            tcp,
            tls: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        };
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            certs,
            shared,
            task,
        }
    }

    /// The CA of the store's certificate.
    pub fn ca(&self) -> PathBuf {
        self.certs.ca()
    }

    /// `https://127.0.0.1:<port>/`, for the registry's `redirect` middleware.
    pub fn base_url(&self) -> String {
        format!("https://{}/", self.addr)
    }

    /// Serves the blobs of the registry whose storage root is `root`.
    pub fn serve_from(&self, root: &Path) {
        *self.shared.storage.lock().unwrap() = Some(root.to_owned());
    }

    /// Redirects each blob request `n` times more (to itself) before answering it.
    pub fn set_hops(&self, n: usize) {
        self.shared.hops.store(n, Ordering::SeqCst);
    }

    pub fn set_serving(&self, serving: Serving) {
        *self.shared.serving.lock().unwrap() = serving;
    }

    /// The requests so far: (path, whether it carried an `Authorization`).
    pub fn requests(&self) -> Vec<(String, bool)> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn forget_requests(&self) {
        self.shared.requests.lock().unwrap().clear();
    }
}

fn record(shared: &Shared, path: String, headers: &HeaderMap) {
    let authorized = headers.contains_key(header::AUTHORIZATION);
    shared.requests.lock().unwrap().push((path, authorized));
}

fn redirect(to: String) -> Response {
    (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response()
}

/// `/hop/<k>/<path>`: one of the store's own redirects; the last (`k` = 0) serves the blob.
async fn hop(
    State(shared): State<Shared>,
    UrlPath((k, path)): UrlPath<(usize, String)>,
    headers: HeaderMap,
) -> Response {
    record(&shared, format!("/hop/{k}/{path}"), &headers);
    match k {
        0 => serve(&shared, &path),
        k => redirect(format!("/hop/{}/{path}", k - 1)),
    }
}

/// `/<path in the registry's storage>`, where the registry redirects: the blob, or the first of
/// the store's own redirects.
async fn blob(State(shared): State<Shared>, UrlPath(path): UrlPath<String>, headers: HeaderMap) -> Response {
    record(&shared, format!("/{path}"), &headers);
    match shared.hops.load(Ordering::SeqCst) {
        0 => serve(&shared, &path),
        n => redirect(format!("/hop/{}/{path}", n - 1)),
    }
}

fn serve(shared: &Shared, path: &str) -> Response {
    let Some(root) = shared.storage.lock().unwrap().clone() else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let Ok(mut bytes) = std::fs::read(root.join(path)) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let serving = *shared.serving.lock().unwrap();
    match serving {
        Serving::Honestly => bytes.into_response(),
        Serving::LongerAnnounced => {
            bytes.push(0);
            bytes.into_response()
        }
        Serving::LongerUnannounced => {
            bytes.extend(std::iter::repeat_n(0, 64 << 10));
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = bytes.chunks(16 << 10).map(|c| Ok(c.to_vec())).collect();
            axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
        }
    }
}
