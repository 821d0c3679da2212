//! The host side of each capability a component imports: the WIT interfaces implemented on the
//! store's [`State`], each call handed to its room of the plugin's
//! [`Capabilities`](crate::plugins::capabilities) in the SDK's types. Only granted interfaces are
//! linked (see `runtime`).

mod kube;
mod pg;

use conductor_plugin_sdk::Capability;
use wasmtime::component::{HasSelf, Linker};

use super::bindings::conductor::plugin::{self as wit, blob, emit, kv, log, metrics, requests, timer, types};
use super::bindings::convert;
use super::state::{State, wit_error};

/// Links the `types` interface, which every capability's shares.
pub(super) fn add_types_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
}

/// Links the host side of `capability`'s interface.
pub(super) fn add_to_linker(linker: &mut Linker<State>, capability: Capability) -> wasmtime::Result<()> {
    match capability {
        Capability::Emit => emit::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Log => log::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Timer => timer::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Kv => kv::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Pg => wit::pg::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Kube => wit::kube::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Metrics => metrics::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
        Capability::Blob => blob::add_to_linker::<_, HasSelf<_>>(linker, |s| s),
    }
}

impl types::Host for State {}

/// Links `requests`, which every plugin may use (it grants nothing outside the plugin).
pub(super) fn add_requests_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    requests::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
}

impl requests::Host for State {
    async fn take_waiting(&mut self, max: u32) -> Vec<requests::Waiting> {
        crate::plugins::requests::take_waiting(usize::try_from(max).unwrap_or(usize::MAX))
            .into_iter()
            .map(|r| requests::Waiting {
                identity: convert::to_wit_identity(r.identity),
                event: convert::into_wit_event(r.event),
            })
            .collect()
    }
}

impl emit::Host for State {
    async fn emit(&mut self, event: types::CloudEvent) -> Result<u32, types::Error> {
        self.caps()
            .emit()
            .send(&convert::from_wit_event(event))
            .map_err(wit_error)
    }
}

impl log::Host for State {
    async fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => conductor_plugin_sdk::Level::Trace,
            log::Level::Debug => conductor_plugin_sdk::Level::Debug,
            log::Level::Info => conductor_plugin_sdk::Level::Info,
            log::Level::Warn => conductor_plugin_sdk::Level::Warn,
            log::Level::Error => conductor_plugin_sdk::Level::Error,
        };
        self.caps().log().line(level, &message)
    }
}

impl timer::Host for State {
    async fn set(&mut self, name: String, after_ms: u64, repeat: bool) -> Result<(), types::Error> {
        self.caps().timer().set(&name, after_ms, repeat).map_err(wit_error)
    }
    async fn cancel(&mut self, name: String) {
        self.caps().timer().cancel(&name)
    }
}

impl kv::Host for State {
    async fn get(&mut self, key: String) -> Option<Vec<u8>> {
        self.caps().kv().get(&key)
    }
    async fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), types::Error> {
        self.caps().kv().set(&key, &value).map_err(wit_error)
    }
    async fn delete(&mut self, key: String) -> bool {
        self.caps().kv().delete(&key)
    }
}

impl metrics::Host for State {
    async fn counter_add(&mut self, name: String, labels: Vec<String>, value: f64) -> Result<(), types::Error> {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        self.caps()
            .exported_metrics()
            .record(conductor_plugin_sdk::MetricKind::Counter, &name, &labels, value)
            .map_err(wit_error)
    }
    async fn gauge_set(&mut self, name: String, labels: Vec<String>, value: f64) -> Result<(), types::Error> {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        self.caps()
            .exported_metrics()
            .record(conductor_plugin_sdk::MetricKind::Gauge, &name, &labels, value)
            .map_err(wit_error)
    }
}

impl blob::Host for State {
    async fn read(&mut self, name: String) -> Result<Vec<u8>, types::Error> {
        self.caps().blob().read(&name).await.map_err(wit_error)
    }
}
