//! The signals conductor answers: SIGTERM and SIGINT stop it, SIGHUP asks for a reload.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admin::{ReloadRequest, ReloadTrigger};

/// SIGHUP asks for a reload.
pub async fn reload_on_signal(reload: mpsc::Sender<ReloadRequest>) {
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP; reload through the admin endpoint");
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP received");
        if reload
            .send(ReloadRequest {
                reply: None,
                trigger: ReloadTrigger::Signal,
            })
            .await
            .is_err()
        {
            return;
        }
    }
}

/// SIGTERM or SIGINT cancels `shutdown`.
pub async fn stop_on_signal(shutdown: CancellationToken) {
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    shutdown.cancel();
}
