//! What is known about one client connection, shared by the gRPC server that accepts it and the
//! authentication that reads who is on it: the peer's address, the client certificate its TLS
//! handshake verified, and the calls open on it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What a call knows about the connection it came on.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    pub remote: SocketAddr,
    /// The client certificate the TLS handshake verified, if the client presented one.
    pub peer: Option<Arc<PeerCertificate>>,
    shared: Arc<Shared>,
}

/// What the connection's calls share.
#[derive(Debug)]
struct Shared {
    open: AtomicUsize,
    limit: Option<u32>,
    /// A call on the connection passed authentication.
    authenticated: AtomicBool,
}

impl ConnectionInfo {
    /// A connection from `remote`, with the client certificate its handshake verified, on which
    /// at most `stream_limit` calls may be open at once.
    pub fn new(remote: SocketAddr, peer: Option<Arc<PeerCertificate>>, stream_limit: Option<u32>) -> Self {
        Self {
            remote,
            peer,
            shared: Arc::new(Shared {
                open: AtomicUsize::new(0),
                limit: stream_limit,
                authenticated: AtomicBool::new(false),
            }),
        }
    }

    /// Counts a call open on this connection until the guard is dropped; `true` in the guard
    /// when this call reaches the connection's stream limit (further calls wait or are refused
    /// by HTTP/2).
    pub fn open_stream(&self) -> (StreamGuard, bool) {
        let open = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
        let at_limit = self
            .shared
            .limit
            .is_some_and(|l| open >= usize::try_from(l).unwrap_or(usize::MAX));
        (StreamGuard(Arc::clone(&self.shared)), at_limit)
    }

    /// Records that a call on this connection passed authentication: the connection is no longer
    /// closed for making none.
    pub fn mark_authenticated(&self) {
        self.shared.authenticated.store(true, Ordering::Relaxed);
    }

    /// Whether a call on this connection has passed authentication.
    pub fn is_authenticated(&self) -> bool {
        self.shared.authenticated.load(Ordering::Relaxed)
    }

    /// Calls open on this connection now.
    pub fn open_streams(&self) -> usize {
        self.shared.open.load(Ordering::Relaxed)
    }
}

/// One open call on a connection.
#[derive(Debug)]
pub struct StreamGuard(Arc<Shared>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a verified client certificate says about its holder: user = subject CN, groups =
/// subject O (`docs/protocol.md` §9.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCertificate {
    pub common_name: Option<String>,
    pub organizations: Vec<String>,
}

impl PeerCertificate {
    /// Reads the subject of a DER certificate that the handshake verified.
    pub fn from_der(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        fn text(a: &x509_parser::x509::AttributeTypeAndValue<'_>) -> Option<String> {
            a.as_str().ok().map(str::to_owned)
        }
        Some(Self {
            common_name: subject.iter_common_name().find_map(text),
            organizations: subject.iter_organization().filter_map(text).collect(),
        })
    }
}
