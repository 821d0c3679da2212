//! The Kubernetes API server named in `conductor.toml` (`[kubernetes]`), for the plugins granted
//! `kube`: dynamic objects read and written as JSON ([`api`]), watches as resumable streams with a
//! cache that lists are answered from ([`watch`], [`cache`]) of objects kept as the API server
//! sent them ([`object`]), and label selectors evaluated as the API server evaluates them
//! ([`selector`]).

pub mod api;
pub mod cache;
pub mod object;
pub mod selector;
pub mod status_only;
pub mod watch;

use std::path::PathBuf;

use conductor_plugin_sdk::Error;
use kube::Client;
use tokio::sync::OnceCell;

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

    /// The client (made on first use).
    pub async fn client(&self) -> Result<Client, Error> {
        self.client
            .get_or_try_init(|| async {
                let config = match &self.kubeconfig {
                    Some(path) => {
                        let file = kube::config::Kubeconfig::read_from(path)
                            .map_err(|e| Error::Invalid(format!("kubeconfig {}: {e}", path.display())))?;
                        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                            .await
                            .map_err(|e| Error::Invalid(format!("kubeconfig {}: {e}", path.display())))?
                    }
                    None => kube::Config::infer()
                        .await
                        .map_err(|e| Error::Unavailable(format!("no Kubernetes configuration: {e}")))?,
                };
                Client::try_from(config).map_err(|e| Error::Unavailable(format!("Kubernetes client: {e}")))
            })
            .await
            .cloned()
    }
}
