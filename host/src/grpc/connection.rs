//! Accepting connections: the limit on open connections, the TLS handshake (bounded in time,
//! off the accept loop), keepalive enforcement; each call learns about its connection through
//! [`ConnectionInfo`].

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use super::keepalive::{FrameCursor, PingPolicy, too_many_pings_goaway};
use crate::net::{ConnectionInfo, PeerCertificate};
use crate::telemetry::SecurityMetrics;
use crate::tls::ReloadingTls;

/// How connections are accepted.
pub struct AcceptOptions {
    pub tls: Option<Arc<ReloadingTls>>,
    pub max_connections: usize,
    pub handshake_timeout: Duration,
    pub client_min_ping_interval: Duration,
    pub max_streams_per_connection: Option<u32>,
    /// A connection with no authenticated call by then is closed.
    pub unauthenticated_timeout: Duration,
}

enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// An accepted connection: the transport, watched for keepalive abuse, holding its place among
/// the open connections.
pub struct Connection {
    transport: Transport,
    info: ConnectionInfo,
    reading: FrameCursor,
    writing: FrameCursor,
    pings: PingPolicy,
    /// Until a call on the connection is authenticated: when it is closed for making none.
    unauthenticated_until: Option<Pin<Box<tokio::time::Sleep>>>,
    metrics: SecurityMetrics,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.metrics.connection_closed();
    }
}

impl Connected for Connection {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl Connection {
    fn transport(&mut self) -> Pin<&mut (dyn AsyncReadWrite + Unpin)> {
        match &mut self.transport {
            Transport::Plain(s) => Pin::new(s),
            Transport::Tls(s) => Pin::new(s.as_mut()),
        }
    }

    /// Whether the connection made no authenticated call in its time: the reader's task is woken
    /// when the time is up (hyper always has a read pending), so an idle connection is closed too.
    fn unauthenticated_too_long(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(until) = self.unauthenticated_until.as_mut() else {
            return false;
        };
        if self.info.is_authenticated() {
            self.unauthenticated_until = None;
            return false;
        }
        until.as_mut().poll(cx).is_ready()
    }

    /// Tells a client that pinged too often why it is disconnected, when a frame can be written
    /// without cutting into one hyper is writing.
    fn send_goaway(&mut self, cx: &mut Context<'_>) {
        if !self.writing.at_boundary() {
            return;
        }
        let frame = too_many_pings_goaway();
        if let Poll::Ready(Ok(_)) = self.transport().poll_write(cx, &frame) {
            let _ = self.transport().poll_flush(cx);
        }
    }
}

trait AsyncReadWrite: AsyncRead + AsyncWrite {}
impl<T: AsyncRead + AsyncWrite> AsyncReadWrite for T {}

impl AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        if this.unauthenticated_too_long(cx) {
            this.metrics.connection_closed_for("unauthenticated");
            tracing::info!(remote = %this.info.remote, "connection closed: no authenticated call within server.unauthenticated_timeout");
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no authenticated call within server.unauthenticated_timeout",
            )));
        }
        let result = this.transport().poll_read(cx, buf);
        if !matches!(result, Poll::Ready(Ok(()))) {
            return result;
        }
        let (now, open) = (Instant::now(), this.info.open_streams());
        let mut abusive = false;
        let pings = &mut this.pings;
        this.reading.feed(&buf.filled()[before..], |frame| {
            abusive |= pings.client_frame(frame, now, open)
        });
        if abusive {
            this.metrics.keepalive_violation();
            tracing::info!(remote = %this.info.remote, "client pinged too often: disconnected with GOAWAY too_many_pings");
            this.send_goaway(cx);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "too many pings from the client",
            )));
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = this.transport().poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = result {
            let pings = &mut this.pings;
            this.writing.feed(&buf[..n], |frame| pings.server_frame(frame));
        }
        result
    }

    /// Passed through, so that h2 sends a large payload from where it is (beside the frame header
    /// in its buffer) instead of copying it into its buffer first.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = this.transport().poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = result {
            let pings = &mut this.pings;
            let mut left = written;
            for buf in bufs {
                if left == 0 {
                    break;
                }
                let n = left.min(buf.len());
                this.writing.feed(&buf[..n], |frame| pings.server_frame(frame));
                left -= n;
            }
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        match &self.transport {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.transport().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.transport().poll_shutdown(cx)
    }
}

/// Accepts on `listener` until the returned stream is dropped (when the server stops).
pub fn incoming(
    listener: TcpListener,
    options: AcceptOptions,
    metrics: SecurityMetrics,
) -> ReceiverStream<Result<Connection, io::Error>> {
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(accept_loop(listener, Arc::new(options), metrics, tx));
    ReceiverStream::new(rx)
}

async fn accept_loop(
    listener: TcpListener,
    options: Arc<AcceptOptions>,
    metrics: SecurityMetrics,
    tx: mpsc::Sender<Result<Connection, io::Error>>,
) {
    let slots = Arc::new(Semaphore::new(options.max_connections));
    loop {
        let accepted = tokio::select! {
            _ = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            metrics.connection_refused("limit");
            tracing::debug!(%remote, limit = options.max_connections, "connection refused: server.max_connections reached");
            continue;
        };
        // Small events must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
        let (options, metrics, tx) = (Arc::clone(&options), metrics.clone(), tx.clone());
        tokio::spawn(async move {
            if let Some(connection) = establish(tcp, remote, slot, &options, &metrics).await {
                let _ = tx.send(Ok(connection)).await;
            }
        });
    }
}

/// The TLS handshake (if any), within the handshake timeout.
async fn establish(
    tcp: TcpStream,
    remote: SocketAddr,
    slot: OwnedSemaphorePermit,
    options: &AcceptOptions,
    metrics: &SecurityMetrics,
) -> Option<Connection> {
    let (transport, peer) = match &options.tls {
        None => (Transport::Plain(tcp), None),
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
            match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let peer = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|leaf| PeerCertificate::from_der(leaf))
                        .map(Arc::new);
                    (Transport::Tls(Box::new(stream)), peer)
                }
                Ok(Err(e)) => {
                    metrics.tls_handshake_failed("error");
                    tracing::debug!(%remote, error = %e, "TLS handshake failed");
                    return None;
                }
                Err(_) => {
                    metrics.tls_handshake_failed("timeout");
                    tracing::debug!(%remote, timeout = ?options.handshake_timeout, "TLS handshake timed out");
                    return None;
                }
            }
        }
    };
    metrics.connection_opened();
    Some(Connection {
        transport,
        info: ConnectionInfo::new(remote, peer, options.max_streams_per_connection),
        reading: FrameCursor::client(),
        writing: FrameCursor::server(),
        pings: PingPolicy::new(options.client_min_ping_interval),
        unauthenticated_until: Some(Box::pin(tokio::time::sleep(options.unauthenticated_timeout))),
        metrics: metrics.clone(),
        _slot: slot,
    })
}
