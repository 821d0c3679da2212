//! The admin endpoint over HTTPS: connections accepted on the bound port are handed over once
//! their TLS handshake is done (within a deadline, each on a task of its own, so that a client
//! that never finishes cannot hold the others up), with the certificate the files hold now.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

use crate::telemetry::SecurityMetrics;
use crate::tls::ReloadingTls;

/// How long a client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepted TLS connections, for `axum::serve`.
pub struct HttpsListener {
    local: SocketAddr,
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl HttpsListener {
    /// Accepts on `listener`, serving the certificate `tls` holds.
    pub fn new(listener: TcpListener, tls: Arc<ReloadingTls>, metrics: SecurityMetrics) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, handshaken) = mpsc::channel(64);
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
                let (tls, tx, metrics) = (Arc::clone(&tls), tx.clone(), metrics.clone());
                tokio::spawn(async move {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
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
            handshaken,
            accepting,
        })
    }
}

impl Drop for HttpsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for HttpsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended (it never does on its own): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
