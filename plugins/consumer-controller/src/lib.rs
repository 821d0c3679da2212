//! The consumer controller: every joined `ManagedCluster` gets a Maestro consumer of the same name,
//! written into Maestro's `consumers` table as Maestro's own consumer service writes it
//! (`docs/maestro-database.md` §8.1). It watches ManagedClusters through the host's `kube` capability and
//! writes through `pg`; it serves no agent events.
//!
//! As upstream: a cluster being deleted, or not (yet) joined, is left alone, and consumers are never
//! deleted (Maestro refuses while resources reference them). Unlike upstream, a name Maestro would
//! refuse (not an RFC 1123 label) is reported once instead of retried forever, and concurrent
//! controllers cannot create two rows (`ON CONFLICT (name) DO NOTHING` on Maestro's unique index).

use std::time::Duration;

use conductor_plugin_sdk::kube::{Change, Selector};
use conductor_plugin_sdk::ocm::resources::managed_clusters;
use conductor_plugin_sdk::{Capability, Description, Error, Host, HostEvent, Plugin, Retry};
use serde::Deserialize;
use serde_json::Value;

/// Clusters whose consumer could not be written, tried again with backoff.
const RETRY: Retry<String> = Retry::new("retry", Duration::from_secs(1), Duration::from_secs(60));

/// `[plugins.consumer-controller.config]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The database (`[databases.<name>]`) holding Maestro's schema.
    #[serde(default = "default_database")]
    database: String,
}

fn default_database() -> String {
    "maestro".to_owned()
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
fn ensure_consumer(host: &Host, database: &str, name: &str) -> Result<bool, Error> {
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
    fn reconcile(&self, host: &Host, name: &str) -> Result<(), Error> {
        if !valid_consumer_name(name) {
            host.warn(&format!(
                "cluster {name:?} cannot have a Maestro consumer: the name is not an RFC 1123 label"
            ));
            return Ok(());
        }
        match ensure_consumer(host, &self.database, name) {
            Ok(true) => host.info(&format!("consumer {name} created")),
            Ok(false) => host.debug(&format!("consumer {name} exists")),
            Err(e) => {
                host.warn(&format!("consumer {name}: {e}; retrying"));
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Plugin for ConsumerController {
    type Config = Config;

    fn describe() -> Description {
        Description::new("consumer-controller", env!("CARGO_PKG_VERSION")).capabilities([
            Capability::Log,
            Capability::Timer,
            Capability::Kv,
            Capability::Pg,
            Capability::Kube,
        ])
    }

    fn init(_host: &Host, config: Config) -> Result<Self, Error> {
        Ok(Self {
            database: config.database,
        })
    }

    /// Once per plugin: the watch on ManagedClusters.
    fn start(&mut self, host: &Host) -> Result<(), Error> {
        host.kube()
            .watch(&managed_clusters(), None, &Selector::default())
            .map_err(|e| e.context("cannot watch ManagedClusters"))
    }

    fn on_event(&mut self, host: &Host, event: HostEvent) -> Result<(), Error> {
        match event {
            HostEvent::Watch(w) if w.change == Change::Applied => match wanted(&w.object()?) {
                Wanted::Consumer(name) => match self.reconcile(host, &name) {
                    Ok(()) => Ok(()),
                    Err(_) => RETRY.schedule(host, [name]),
                },
                Wanted::Nothing => Ok(()),
            },
            e if RETRY.is_due(&e) => RETRY.run(host, |name| self.reconcile(host, name)).map(drop),
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
    fn start_watches_managed_clusters_once_and_config_keys_are_checked() {
        let fake = FakeHost::new();
        let host = fake.host();
        let config = conductor_plugin_sdk::plugin::parse_config(r#"{"database": "m"}"#).unwrap();
        let mut c = ConsumerController::init(&host, config).unwrap();
        assert!(fake.recorded().watches.is_empty(), "init starts nothing");
        c.start(&host).unwrap();
        assert_eq!(
            fake.recorded().watches,
            [(managed_clusters(), None, Selector::default())]
        );
        let err = conductor_plugin_sdk::plugin::parse_config::<Config>(r#"{"databse": "m"}"#).unwrap_err();
        assert!(err.to_string().contains("databse"), "{err}");
    }

    #[test]
    fn a_failed_write_is_retried_with_backoff() {
        let fake = FakeHost::new();
        let host = fake.host();
        let mut c = ConsumerController { database: "m".into() };
        let event = HostEvent::Watch(conductor_plugin_sdk::kube::WatchEvent {
            resource: managed_clusters().name(),
            change: Change::Applied,
            object: cluster("c1", "True", false).to_string(),
        });
        // The fake has no database: the write fails and is queued for a retry.
        c.on_event(&host, event).unwrap();
        assert_eq!(RETRY.pending(&host), ["c1"]);
        assert_eq!(fake.recorded().timers.get("retry"), Some(&(1000, false)));
        c.on_event(&host, HostEvent::Timer("retry".into())).unwrap();
        assert_eq!(RETRY.pending(&host), ["c1"]);
        assert_eq!(fake.recorded().timers.get("retry"), Some(&(2000, false)));
    }
}
