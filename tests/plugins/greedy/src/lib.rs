//! A plugin that takes all the host gives it, for the tests of the limits the host sets on what it
//! keeps for a plugin. It serves manifest bundles under the source `greedy`; a status update's
//! `resourceid` says what to grab until the host refuses, and the refusal comes back to the agent:
//!
//! - `kv-keys`: one small `kv` key after another; `kv-bytes`: 64 KiB values;
//! - `timers`: one timer after another (an hour away);
//! - `metrics`: one series of `greedy_things` after another;
//! - `log`: 10,000 log lines at once (never refused: the host drops what is over its rate);
//! - `debug-log`: 10,000 debug lines, then one warning.

use std::time::Duration;

use conductor_plugin_sdk::ocm::{OcmExtensions, data_types};
use conductor_plugin_sdk::{
    Capability, CloudEvent, Description, Error, Host, Identity, ListOptions, MetricKind, NoConfig, Plugin,
};

pub struct Greedy;

/// How many of a thing to take before giving up on a refusal.
const ENOUGH: usize = 1_000_000;

impl Plugin for Greedy {
    type Config = NoConfig;

    fn describe() -> Description {
        Description::new("greedy", env!("CARGO_PKG_VERSION"))
            .sources(["greedy"])
            .data_types([data_types::MANIFEST_BUNDLES])
            .capabilities([Capability::Log, Capability::Timer, Capability::Kv, Capability::Metrics])
            .metric(
                "greedy_things",
                MetricKind::Gauge,
                "Things the greedy plugin holds.",
                &["n"],
            )
    }

    fn init(_host: &Host, _config: NoConfig) -> Result<Self, Error> {
        Ok(Self)
    }

    fn list(&mut self, _host: &Host, _options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        Ok(vec![])
    }

    fn handle(&mut self, host: &Host, _identity: Identity, event: CloudEvent) -> Result<(), Error> {
        let refused = |what: &str, n: usize, e: Error| Error::Invalid(format!("took {n} {what}, then: {e}"));
        match event.resource_id().unwrap_or_default() {
            "kv-keys" => {
                for n in 0..ENOUGH {
                    host.kv_set(&format!("key-{n}"), b"x")
                        .map_err(|e| refused("kv keys", n, e))?;
                }
            }
            "kv-bytes" => {
                let value = vec![7u8; 64 << 10];
                for n in 0..ENOUGH {
                    host.kv_set(&format!("big-{n}"), &value)
                        .map_err(|e| refused("kv values", n, e))?;
                }
            }
            "timers" => {
                for n in 0..ENOUGH {
                    host.set_timer(&format!("timer-{n}"), Duration::from_secs(3600), false)
                        .map_err(|e| refused("timers", n, e))?;
                }
            }
            "metrics" => {
                for n in 0..ENOUGH {
                    host.gauge_set("greedy_things", &[&n.to_string()], 1.0)
                        .map_err(|e| refused("metric series", n, e))?;
                }
            }
            "log" => {
                for n in 0..10_000 {
                    host.info(&format!("greedy log line {n}"));
                }
            }
            "debug-log" => {
                for n in 0..10_000 {
                    host.debug(&format!("greedy debug line {n}"));
                }
                host.warn("greedy warning after the debug lines");
            }
            other => return Err(Error::Invalid(format!("unknown thing to grab: {other:?}"))),
        }
        Ok(())
    }
}

conductor_plugin_sdk::export_plugin!(Greedy);
