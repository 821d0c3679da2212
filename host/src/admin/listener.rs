//! The admin endpoint's connections: at most `admin.max_connections` open at once (past it a new
//! connection is closed at once and counted, `conductor_admin_refused_total{code="limit"}`), and
//! with `[admin.tls]` handed over once their TLS handshake is done — within a deadline, each on a
//! task of its own, so that a client that never finishes cannot hold the others up — with the
//! certificate the files hold now.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::server::TlsStream;

use crate::telemetry::SecurityMetrics;
use crate::tls::ReloadingTls;

/// How long a client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepted connections, for `axum::serve`.
pub struct AdminListener {
    local: SocketAddr,
    accepted: mpsc::Receiver<(AdminStream, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

/// One admin connection, holding its place among `admin.max_connections` until it closes.
pub struct AdminStream {
    io: Io,
    _slot: OwnedSemaphorePermit,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AdminListener {
    /// Accepts on `listener`, at most `max_connections` open at once, over TLS when `tls` is set.
    pub fn new(
        listener: TcpListener,
        tls: Option<Arc<ReloadingTls>>,
        max_connections: usize,
        metrics: SecurityMetrics,
    ) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(64);
        let slots = Arc::new(Semaphore::new(max_connections));
        let accepting = tokio::spawn(async move {
            loop {
                let (tcp, remote) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::debug!(error = %e, "admin endpoint: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    metrics.admin_refused_connection();
                    tracing::debug!(%remote, limit = max_connections, "admin connection refused: admin.max_connections reached");
                    continue;
                };
                let Some(tls) = &tls else {
                    let stream = AdminStream {
                        io: Io::Plain(tcp),
                        _slot: slot,
                    };
                    if tx.send((stream, remote)).await.is_err() {
                        return;
                    }
                    continue;
                };
                let (tls, tx, metrics) = (Arc::clone(tls), tx.clone(), metrics.clone());
                tokio::spawn(async move {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let stream = AdminStream {
                                io: Io::Tls(Box::new(stream)),
                                _slot: slot,
                            };
                            let _ = tx.send((stream, remote)).await;
                        }
                        Ok(Err(e)) => {
                            metrics.tls_handshake_failed("error");
                            tracing::debug!(%remote, error = %e, "admin endpoint: TLS handshake failed");
                        }
                        Err(_) => metrics.tls_handshake_failed("timeout"),
                    }
                });
            }
        });
        Ok(Self {
            local,
            accepted,
            accepting,
        })
    }
}

impl Drop for AdminListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for AdminListener {
    type Io = AdminStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended (it never does on its own): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

impl AsyncRead for AdminStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AdminStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn connections_past_the_cap_are_closed_at_once_and_counted() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let metrics = crate::telemetry::Metrics::new();
        let mut listener = AdminListener::new(tcp, None, 2, metrics.security.clone()).unwrap();
        let mut open = Vec::new();
        for _ in 0..2 {
            let client = TcpStream::connect(addr).await.unwrap();
            let (server, _) = axum::serve::Listener::accept(&mut listener).await;
            open.push((client, server));
        }
        // The third is closed without being handed over.
        let mut third = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf))
            .await
            .unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(
            metrics
                .render()
                .contains("conductor_admin_refused_total{code=\"limit\"} 1")
        );
        // A closed connection gives its place back.
        drop(open.pop());
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = axum::serve::Listener::accept(&mut listener).await;
        server.write_all(b"x").await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"x");
    }
}
