//! The consumer controller: every joined `ManagedCluster` gets a Maestro consumer of the same name,
//! written into Maestro's `consumers` table as Maestro's own consumer service writes it
//! (`maestro-db.md` §8.1). It watches ManagedClusters through the host's `kube` capability and
//! writes through `pg`; it serves no agent events.
//!
//! As upstream: a cluster being deleted, or not (yet) joined, is left alone, and consumers are never
//! deleted (Maestro refuses while resources reference them). Unlike upstream, a name Maestro would
//! refuse (not an RFC 1123 label) is reported once instead of retried forever, and concurrent
//! controllers cannot create two rows (`ON CONFLICT (name) DO NOTHING` on Maestro's unique index).

use conductor_plugin_sdk::{
    ApiResource, CloudEvent, Description, Host, HostEvent, Identity, KubeChange, ListOptions, PgError, Plugin,
    SDK_VERSION, SourceError,
};
use serde::Deserialize;
use serde_json::Value;

const RETRY_TIMER: &str = "retry";
const RETRY_KEY: &str = "retry";
const RETRY_AFTER_MS: u64 = 1_000;

/// `[plugins.consumer-controller.config]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The database (`[databases.<name>]`) holding Maestro's schema.
    #[serde(default = "default_database")]
    database: String,
}

fn default_database() -> String {
    "maestro".to_owned()
}

/// OCM's ManagedCluster (cluster-scoped).
pub fn managed_clusters() -> ApiResource {
    ApiResource {
        group: "cluster.open-cluster-management.io".into(),
        version: "v1".into(),
        kind: "ManagedCluster".into(),
        plural: "managedclusters".into(),
    }
}

/// What a ManagedCluster asks of the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// Joined, not being deleted: its consumer must exist.
    Consumer(String),
    /// Not joined, or being deleted: nothing.
    Nothing,
}

/// Reads a ManagedCluster object (JSON).
pub fn wanted(cluster: &Value) -> Wanted {
    let Some(name) = cluster["metadata"]["name"].as_str() else {
        return Wanted::Nothing;
    };
    if !cluster["metadata"]["deletionTimestamp"].is_null() {
        return Wanted::Nothing;
    }
    let joined = cluster["status"]["conditions"].as_array().is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c["type"] == "ManagedClusterJoined" && c["status"] == "True")
    });
    if joined {
        Wanted::Consumer(name.to_owned())
    } else {
        Wanted::Nothing
    }
}

/// Maestro's consumer-name rule (`ValidateNamespaceName`): an RFC 1123 label.
pub fn valid_consumer_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// Whether the consumer was created (false: it was there already).
fn ensure_consumer(host: &Host, database: &str, name: &str) -> Result<bool, PgError> {
    let db = host.pg(database);
    let found = db.query(
        "SELECT id FROM consumers WHERE name = $1 AND deleted_at IS NULL",
        &[name.into()],
    )?;
    if !found.is_empty() {
        return Ok(false);
    }
    let id = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now();
    let created = db.execute(
        "INSERT INTO consumers (id, created_at, updated_at, deleted_at, name, labels) \
         VALUES ($1, $2, $2, NULL, $3, NULL) ON CONFLICT (name) DO NOTHING",
        &[id.into(), now.into(), name.into()],
    )?;
    Ok(created == 1)
}

pub struct ConsumerController {
    database: String,
}

impl ConsumerController {
    fn reconcile(&self, host: &Host, name: &str) -> Result<(), String> {
        if !valid_consumer_name(name) {
            host.warn(&format!(
                "cluster {name:?} cannot have a Maestro consumer: the name is not an RFC 1123 label"
            ));
            return Ok(());
        }
        match ensure_consumer(host, &self.database, name) {
            Ok(true) => host.info(&format!("consumer {name} created")),
            Ok(false) => host.debug(&format!("consumer {name} exists")),
            Err(e) => return Err(format!("consumer {name}: {e}")),
        }
        Ok(())
    }

    /// Reconciles `names`; the failures are kept and tried again after a while.
    fn reconcile_all(&self, host: &Host, names: Vec<String>) -> Result<(), SourceError> {
        let mut failed: Vec<String> = Vec::new();
        for name in names {
            if let Err(e) = self.reconcile(host, &name) {
                host.warn(&format!("{e}; retrying"));
                failed.push(name);
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        let mut pending: Vec<String> = host
            .kv_get(RETRY_KEY)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        pending.extend(failed.into_iter().filter(|f| !pending.contains(f)).collect::<Vec<_>>());
        host.kv_set(RETRY_KEY, &serde_json::to_vec(&pending).unwrap_or_default());
        host.set_timer(RETRY_TIMER, RETRY_AFTER_MS, false);
        Ok(())
    }
}

impl Plugin for ConsumerController {
    fn describe() -> Description {
        Description {
            name: "consumer-controller".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            sdk_version: SDK_VERSION.into(),
            sources: vec![],
            data_types: vec![],
            capabilities: ["log", "timer", "kv", "config", "pg", "kube"]
                .map(String::from)
                .to_vec(),
        }
    }

    fn init(host: &Host, config: Value) -> Result<Self, SourceError> {
        let config: Config = serde_json::from_value(config)
            .map_err(|e| SourceError::Invalid(format!("consumer-controller config: {e}")))?;
        host.kube_watch(&managed_clusters(), None)
            .map_err(|e| SourceError::Internal(format!("cannot watch ManagedClusters: {e}")))?;
        Ok(Self {
            database: config.database,
        })
    }

    fn list(&mut self, _: &Host, _: ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
        Ok(vec![])
    }

    fn handle(&mut self, _: &Host, _: Identity, event: CloudEvent) -> Result<(), SourceError> {
        Err(SourceError::Invalid(format!(
            "the consumer controller takes no agent events (got {})",
            event.ty
        )))
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), SourceError> {
        match event {
            HostEvent::Kube {
                change: KubeChange::Applied,
                object,
                ..
            } => {
                let cluster: Value = serde_json::from_str(&object)
                    .map_err(|e| SourceError::Invalid(format!("ManagedCluster is not JSON: {e}")))?;
                match wanted(&cluster) {
                    Wanted::Consumer(name) => self.reconcile_all(host, vec![name]),
                    Wanted::Nothing => Ok(()),
                }
            }
            HostEvent::Timer(name) if name == RETRY_TIMER => {
                let pending: Vec<String> = host
                    .kv_get(RETRY_KEY)
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                host.kv_delete(RETRY_KEY);
                self.reconcile_all(host, pending)
            }
            _ => Ok(()),
        }
    }
}

conductor_plugin_sdk::export_plugin!(ConsumerController);

#[cfg(test)]
mod tests {
    use super::*;
    use conductor_plugin_sdk::fakes::FakeHost;
    use serde_json::json;

    fn cluster(name: &str, joined: &str, deleting: bool) -> Value {
        let mut c = json!({
            "metadata": {"name": name},
            "status": {"conditions": [
                {"type": "HubAcceptedManagedCluster", "status": "True"},
                {"type": "ManagedClusterJoined", "status": joined},
            ]},
        });
        if deleting {
            c["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z".into();
        }
        c
    }

    #[test]
    fn only_joined_clusters_not_being_deleted_want_a_consumer() {
        assert_eq!(wanted(&cluster("c1", "True", false)), Wanted::Consumer("c1".into()));
        assert_eq!(wanted(&cluster("c1", "False", false)), Wanted::Nothing);
        assert_eq!(wanted(&cluster("c1", "True", true)), Wanted::Nothing);
        assert_eq!(wanted(&json!({"metadata": {"name": "c1"}})), Wanted::Nothing);
        assert_eq!(wanted(&json!({})), Wanted::Nothing);
    }

    #[test]
    fn consumer_names_are_rfc_1123_labels() {
        for ok in ["cluster1", "a", "local-cluster", &"a".repeat(63)] {
            assert!(valid_consumer_name(ok), "{ok}");
        }
        for bad in ["", "Cluster1", "cluster.one", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(!valid_consumer_name(bad), "{bad}");
        }
    }

    #[test]
    fn init_watches_managed_clusters() {
        let fake = FakeHost::new(json!({}));
        ConsumerController::init(&fake.host(), json!({"database": "m"})).unwrap();
        assert_eq!(fake.recorded().watches, [(managed_clusters(), None)]);
        let err = ConsumerController::init(&fake.host(), json!({"databse": "m"}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("databse"), "{err}");
    }
}
