//! The Kubernetes API server named in `conductor.toml` (`[kubernetes]`), for the plugins granted
//! `kube`: watches as resumable streams (kube-runtime's watcher: list, then watch, re-listing when
//! the server says the position is gone, with backoff on errors), delivered to the plugin.

use std::path::PathBuf;

use conductor_plugin_sdk::{ApiResource, HostEvent, KubeChange};
use futures::TryStreamExt;
use kube::api::{DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{OnceCell, mpsc};
use tokio_util::sync::CancellationToken;

/// The API server: a client made on first use, from the kubeconfig or, without one, inferred
/// (in-cluster service account, `KUBECONFIG`, `~/.kube/config`).
pub struct Kubernetes {
    kubeconfig: Option<PathBuf>,
    client: OnceCell<Client>,
}

impl Kubernetes {
    pub fn new(kubeconfig: Option<PathBuf>) -> Self {
        Self {
            kubeconfig,
            client: OnceCell::new(),
        }
    }

    async fn client(&self) -> Result<Client, String> {
        self.client
            .get_or_try_init(|| async {
                let config = match &self.kubeconfig {
                    Some(path) => {
                        let file = kube::config::Kubeconfig::read_from(path)
                            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
                        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                            .await
                            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
                    }
                    None => kube::Config::infer()
                        .await
                        .map_err(|e| format!("no Kubernetes configuration: {e}"))?,
                };
                Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))
            })
            .await
            .cloned()
    }

    /// Watches `resource` (in `namespace`, or everywhere) for `plugin`, sending every object to
    /// `events` until the returned token is cancelled.
    pub async fn watch(
        &self,
        plugin: &str,
        resource: &ApiResource,
        namespace: Option<&str>,
        events: mpsc::UnboundedSender<HostEvent>,
    ) -> Result<CancellationToken, String> {
        let client = self.client().await?;
        let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
        let api_resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &resource.plural);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, &api_resource),
            None => Api::all_with(client, &api_resource),
        };
        let stop = CancellationToken::new();
        let (name, plugin) = (resource.name(), plugin.to_owned());
        let cancelled = stop.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            loop {
                let next = tokio::select! {
                    _ = cancelled.cancelled() => return,
                    next = stream.try_next() => next,
                };
                let (change, object) = match next {
                    Ok(Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => (KubeChange::Applied, o),
                    Ok(Some(watcher::Event::Delete(o))) => (KubeChange::Deleted, o),
                    Ok(Some(watcher::Event::Init | watcher::Event::InitDone)) => continue,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(%plugin, resource = %name, error = %e, "watch failed; resuming with backoff");
                        continue;
                    }
                };
                let Ok(object) = serde_json::to_string(&object) else {
                    continue;
                };
                let event = HostEvent::Kube {
                    resource: name.clone(),
                    change,
                    object,
                };
                if events.send(event).is_err() {
                    return;
                }
            }
        });
        Ok(stop)
    }
}
