//! The controller of `[dynamic] source_plugins`: the `SourcePlugin` watch feeding the reload loop,
//! and the task that keeps this replica's entry in each resource's status. Off, it is inert: its
//! changes never come.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::SourcePlugin;
use super::reconfigure::Reconfigurer;
use super::status::{self, Outcome};
use super::watch::{self as resources, Snapshot};
use crate::config::{DynamicConfig, LoadedConfig};
use crate::plugins::HostContext;
use crate::telemetry::Readiness;

/// Each resource's outcome on this replica, with the generation it was applied at.
pub type Outcomes = BTreeMap<String, (i64, Outcome)>;

/// How long readiness waits for the first list of resources before giving up on it.
const FIRST_LIST: Duration = Duration::from_secs(10);
/// Changes arriving this close together are applied as one.
const SETTLE: Duration = Duration::from_millis(200);
const READINESS_KEY: &str = "source-plugins";

/// The watch and the status task while they run; dropping it stops both (`stop` also takes this
/// replica out of the statuses).
pub struct Controller {
    running: Option<Running>,
}

struct Running {
    snapshots: watch::Receiver<Snapshot>,
    /// The specs last handed to the reload loop (statuses aside).
    delivered: Option<Vec<(String, i64, String, serde_json::Value)>>,
    outcomes: watch::Sender<Arc<Outcomes>>,
    readiness: Arc<Readiness>,
    client: kube::Client,
    replica: String,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Stops the tasks when the controller is dropped without `stop`.
    _stop_on_drop: DropGuard,
}

/// This replica's name: `[dynamic] replica`, else `$POD_NAME`, else the host name.
fn replica_name(dynamic: &DynamicConfig) -> String {
    if let Some(r) = &dynamic.replica {
        return r.clone();
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    env("POD_NAME")
        .or_else(|| env("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("conductor-{}", std::process::id()))
}

impl Controller {
    /// Starts watching the resources when `[dynamic] source_plugins` is on.
    pub async fn start(
        loaded: &LoadedConfig,
        host: &HostContext,
        readiness: &Arc<Readiness>,
        shutdown: CancellationToken,
    ) -> Self {
        let dynamic = &loaded.config.dynamic;
        if !dynamic.source_plugins {
            return Self { running: None };
        }
        let client = match host.backends.kubernetes.client().await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "[dynamic] source_plugins: no Kubernetes API server; SourcePlugin resources are not served");
                return Self { running: None };
            }
        };
        let replica = replica_name(dynamic);
        tracing::info!(%replica, "watching SourcePlugin resources ([dynamic] source_plugins)");
        if dynamic.require_signature && dynamic.verify.is_none() {
            tracing::warn!(
                "[dynamic] require_signature is on and [dynamic] verify names no key: every SourcePlugin naming an artifact is refused (SignatureRequired) until a key is configured"
            );
        }
        readiness.set_down(
            READINESS_KEY,
            Some("waiting for the first list of SourcePlugin resources".into()),
        );
        {
            let readiness = Arc::clone(readiness);
            tokio::spawn(async move {
                tokio::time::sleep(FIRST_LIST).await;
                readiness.set_down(READINESS_KEY, None);
            });
        }
        let stop = shutdown.child_token();
        let (snapshot_tx, snapshots) = watch::channel(None);
        let (outcomes, outcomes_rx) = watch::channel(Arc::new(Outcomes::new()));
        let tasks = vec![
            tokio::spawn(resources::run(
                client.clone(),
                replica.clone(),
                snapshot_tx,
                {
                    // Nothing to wait for: the resources are served once the watch works.
                    let readiness = Arc::clone(readiness);
                    move || readiness.set_down(READINESS_KEY, None)
                },
                stop.clone(),
            )),
            tokio::spawn(keep_statuses(
                client.clone(),
                replica.clone(),
                dynamic.replica_timeout.0,
                snapshots.clone(),
                outcomes_rx,
                stop.clone(),
            )),
        ];
        Self {
            running: Some(Running {
                snapshots,
                delivered: None,
                outcomes,
                readiness: Arc::clone(readiness),
                client,
                replica,
                _stop_on_drop: stop.clone().drop_guard(),
                stop,
                tasks,
            }),
        }
    }

    /// The next state of the resources whose specs differ from the last one handed out; never, when
    /// off.
    pub async fn changed(&mut self) -> Option<Arc<Vec<SourcePlugin>>> {
        let Some(running) = self.running.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            if running.snapshots.changed().await.is_err() {
                return std::future::pending().await;
            }
            tokio::time::sleep(SETTLE).await;
            let Some(snapshot) = running.snapshots.borrow_and_update().clone() else {
                continue;
            };
            let now = specs(&snapshot);
            if running.delivered.as_ref() != Some(&now) {
                running.delivered = Some(now);
                return Some(snapshot);
            }
        }
    }

    /// Hands what the last reload made of the resources to the status task.
    pub fn report(&self, config: &Reconfigurer) {
        let Some(running) = &self.running else { return };
        if running.delivered.is_none() {
            return;
        }
        let resources = config.resources();
        let generations: BTreeMap<&str, i64> = resources.iter().map(|r| (r.name.as_str(), r.generation)).collect();
        let outcomes: Outcomes = config
            .outcomes()
            .iter()
            .map(|(name, o)| {
                (
                    name.clone(),
                    (generations.get(name.as_str()).copied().unwrap_or(0), o.clone()),
                )
            })
            .collect();
        running.outcomes.send_replace(Arc::new(outcomes));
        running.readiness.set_down(READINESS_KEY, None);
    }

    /// Stops watching and takes this replica's entries out of the statuses (within a few seconds).
    pub async fn stop(self) {
        let Some(running) = self.running else { return };
        running.stop.cancel();
        for task in running.tasks {
            let _ = task.await;
        }
        let Some(resources) = running.snapshots.borrow().clone() else {
            return;
        };
        let removals = resources.iter().filter(|r| r.reported.is_some()).map(|r| {
        let (client, replica) = (&running.client, &running.replica);
        async move {
            if let Err(e) = status::apply(client, &r.name, replica, None).await {
                tracing::warn!(resource = %r.name, error = %e, "cannot take this replica out of the SourcePlugin's status");
            }
        }
    });
        if tokio::time::timeout(Duration::from_secs(3), futures::future::join_all(removals))
            .await
            .is_err()
        {
            tracing::warn!("this replica's SourcePlugin status entries not all removed within 3s");
        }
    }
}

fn specs(resources: &[SourcePlugin]) -> Vec<(String, i64, String, serde_json::Value)> {
    resources
        .iter()
        .map(|r| (r.name.clone(), r.generation, r.created.clone(), r.spec.clone()))
        .collect()
}

/// Keeps this replica's entry of every resource's status what the outcomes say, renews it a
/// third of `replica_timeout` apart, and removes the entries of replicas that stopped renewing
/// theirs (killed, so they could not take them out).
async fn keep_statuses(
    client: kube::Client,
    replica: String,
    replica_timeout: Duration,
    mut snapshots: watch::Receiver<Snapshot>,
    mut outcomes: watch::Receiver<Arc<Outcomes>>,
    stop: CancellationToken,
) {
    let mut renew = tokio::time::interval(replica_timeout / 3);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let renewing = tokio::select! {
            _ = stop.cancelled() => return,
            r = snapshots.changed() => if r.is_err() { return } else { false },
            r = outcomes.changed() => if r.is_err() { return } else { false },
            _ = renew.tick() => true,
        };
        let snapshot = snapshots.borrow_and_update().clone();
        let outcomes = Arc::clone(&outcomes.borrow_and_update());
        let Some(resources) = snapshot else { continue };
        let now = chrono::Utc::now();
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for r in resources.iter() {
            if renewing {
                for (other, heartbeat) in &r.others {
                    if status::stale(heartbeat.as_deref(), now, replica_timeout) {
                        tracing::info!(resource = %r.name, replica = %other, last = ?heartbeat, "removing the status entry of a replica that stopped renewing it");
                        if let Err(e) = status::apply(&client, &r.name, other, None).await {
                            tracing::warn!(resource = %r.name, replica = %other, error = %e, "cannot remove a stale status entry");
                        }
                    }
                }
            }
            let Some((generation, outcome)) = outcomes.get(&r.name) else {
                continue;
            };
            let entry = status::entry(&replica, *generation, outcome, r.reported.as_ref(), &stamp);
            let unchanged = r
                .reported
                .as_ref()
                .is_some_and(|reported| status::same(reported, &entry));
            if unchanged && !renewing {
                continue;
            }
            if let Err(e) = status::apply(&client, &r.name, &replica, Some(entry)).await {
                tracing::warn!(resource = %r.name, error = %e, "cannot write the SourcePlugin's status");
            }
        }
    }
}
