//! A plugin that fails on purpose, for the tests of what the host does about a plugin's failures.
//! It serves manifest bundles under the source `flaky`. It watches ManifestWorks and sends each
//! change on as a spec event (`resourceid` = the work's name, `resourceversion` = its generation;
//! a delete request once the work is gone), failing on purpose: its first `fail_first_events`
//! `on-events` calls, and every call that carries the work named `poison`.

use conductor_plugin_sdk::kube::{Change, Selector};
use conductor_plugin_sdk::ocm::resources::manifest_works;
use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, data_types};
use conductor_plugin_sdk::{Capability, CloudEvent, Description, Error, Host, HostEvent, KvKey, Plugin};
use serde::Deserialize;

pub struct Flaky {
    config: Config,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    watch_works: bool,
    fail_first_events: u32,
    poison: Option<String>,
}

/// `on-events` calls so far, across instances.
const EVENT_CALLS: KvKey<u32> = KvKey::new("event-calls");

impl Plugin for Flaky {
    type Config = Config;

    fn describe() -> Description {
        Description::new("flaky", env!("CARGO_PKG_VERSION"))
            .sources(["flaky"])
            .data_types([data_types::MANIFEST_BUNDLES])
            .capabilities([Capability::Emit, Capability::Kv, Capability::Kube])
    }

    fn init(_host: &Host, config: Config) -> Result<Self, Error> {
        Ok(Self { config })
    }

    fn list(&mut self, _host: &Host, _options: conductor_plugin_sdk::ListOptions) -> Result<Vec<CloudEvent>, Error> {
        Ok(vec![])
    }

    fn start(&mut self, host: &Host) -> Result<(), Error> {
        if self.config.watch_works {
            host.kube().watch(&manifest_works(), None, &Selector::default())?;
        }
        Ok(())
    }

    fn on_events(&mut self, host: &Host, events: Vec<HostEvent>) -> Result<(), Error> {
        let calls = EVENT_CALLS.get(host).unwrap_or(0) + 1;
        EVENT_CALLS.set(host, &calls)?;
        if calls <= self.config.fail_first_events {
            return Err(Error::Unavailable(format!("on-events call {calls} fails on purpose")));
        }
        let mut changes = Vec::new();
        for event in events {
            let HostEvent::Watch(watch) = event else { continue };
            let work = watch.object()?;
            let name = work["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            if self.config.poison.as_deref() == Some(name.as_str()) {
                return Err(Error::Internal(format!("the work {name:?} is poison")));
            }
            changes.push((watch.change, work, name));
        }
        let dt = DataType::parse(data_types::MANIFEST_BUNDLES).map_err(|e| Error::Internal(e.to_string()))?;
        for (change, work, name) in changes {
            let action = match change {
                Change::Applied => "create_request",
                Change::Deleted => "delete_request",
            };
            let mut e = CloudEvent::new(
                format!(
                    "{name}-{}",
                    work["metadata"]["resourceVersion"].as_str().unwrap_or_default()
                ),
                "flaky",
                format!("{}.spec.{action}", data_types::MANIFEST_BUNDLES),
            );
            e.set_extension(
                "clustername",
                work["metadata"]["namespace"].as_str().unwrap_or_default(),
            );
            e.set_extension("resourceid", name.as_str());
            e.set_extension("originalsource", "");
            e.set_resource_version(&dt, work["metadata"]["generation"].as_i64().unwrap_or_default());
            e.set_json_data(&serde_json::json!({"manifests": []}))
                .map_err(|e| Error::Internal(e.to_string()))?;
            host.emit(&e)?;
        }
        Ok(())
    }
}

conductor_plugin_sdk::export_plugin!(Flaky);
