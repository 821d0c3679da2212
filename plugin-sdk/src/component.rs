//! The WebAssembly component side of the contract (`wasm32-wasip2`): the bindings generated from
//! `wit/plugin.wit`, conversions between them and the SDK types, and the export adapter
//! `export_plugin!` uses. Each component instance holds one plugin instance.

use std::cell::RefCell;

use crate::host::{Host, Level};
use crate::pg::{PgError, PgReply, PgRequest};
use crate::plugin::{ListOptions, Plugin};
use crate::{CloudEvent, Identity, SourceError};

#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "source-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_source_plugin",
        default_bindings_module: "conductor_plugin_sdk::component::bindings",
    });
}

use bindings::conductor::plugin as wit;
use wit::types as t;

crate::__wit_conversions!(crate::component::bindings::conductor::plugin::types);
crate::__wit_pg_conversions!(crate::component::bindings::conductor::plugin::pg);

/// The imports, in the SDK's types. Each is referenced only when a plugin calls the matching
/// `Host` method, so a component imports only what it uses.
pub mod imports {
    use super::*;

    pub fn emit(event: &CloudEvent) -> Result<u32, String> {
        wit::emit::emit(&to_wit_event(event))
    }
    pub fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => wit::log::Level::Trace,
            Level::Debug => wit::log::Level::Debug,
            Level::Info => wit::log::Level::Info,
            Level::Warn => wit::log::Level::Warn,
            Level::Error => wit::log::Level::Error,
        };
        wit::log::log(level, message)
    }
    pub fn set_timer(name: &str, after_ms: u64, repeat: bool) {
        wit::timer::set(name, after_ms, repeat)
    }
    pub fn cancel_timer(name: &str) {
        wit::timer::cancel(name)
    }
    pub fn kv_get(key: &str) -> Option<Vec<u8>> {
        wit::kv::get(key)
    }
    pub fn kv_set(key: &str, value: &[u8]) {
        wit::kv::set(key, value)
    }
    pub fn kv_delete(key: &str) -> bool {
        wit::kv::delete(key)
    }
    pub fn config() -> String {
        wit::config::get()
    }
    pub fn kube_watch(resource: &crate::ApiResource, namespace: Option<&str>) -> Result<(), String> {
        let resource = wit::kube::ApiResource {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
        };
        wit::kube::watch(&resource, namespace)
    }
    pub fn pg(request: PgRequest) -> Result<PgReply, PgError> {
        use wit::pg as p;
        let values = |params: Vec<crate::PgValue>| params.iter().map(to_wit_value).collect::<Vec<_>>();
        let reply = match request {
            PgRequest::Query {
                database,
                transaction,
                sql,
                params,
            } => p::query(&database, transaction, &sql, &values(params)).map(|r| PgReply::Rows(from_wit_rows(r))),
            PgRequest::Execute {
                database,
                transaction,
                sql,
                params,
            } => p::execute(&database, transaction, &sql, &values(params)).map(PgReply::Affected),
            PgRequest::Begin { database } => p::begin(&database).map(PgReply::Begun),
            PgRequest::Commit { transaction } => p::commit(transaction).map(|()| PgReply::Done),
            PgRequest::Rollback { transaction } => {
                p::rollback(transaction);
                Ok(PgReply::Done)
            }
            PgRequest::AdvisoryLock {
                transaction,
                key,
                lock_type,
                wait,
            } => p::advisory_lock(transaction, &key, &lock_type, wait).map(PgReply::Locked),
            PgRequest::Listen { database, channel } => p::listen(&database, &channel).map(|()| PgReply::Done),
        };
        reply.map_err(from_wit_pg_error)
    }
}

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn std::any::Any>>> = const { RefCell::new(None) };
}

fn with_instance<P: Plugin, R>(f: impl FnOnce(&mut P, &Host) -> Result<R, SourceError>) -> Result<R, t::PluginError> {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let plugin = slot
            .as_mut()
            .and_then(|b| b.downcast_mut::<P>())
            .ok_or_else(|| t::PluginError::Internal("the plugin was not initialised".to_owned()))?;
        f(plugin, &Host::component()).map_err(to_wit_error)
    })
}

/// The export adapter for `P`, called by the code `export_plugin!` generates.
pub struct Adapter;

impl Adapter {
    pub fn describe<P: Plugin>() -> t::Description {
        to_wit_description(P::describe())
    }

    pub fn init<P: Plugin>(config: String) -> Result<(), t::PluginError> {
        let config: serde_json::Value = serde_json::from_str(&config)
            .map_err(|e| t::PluginError::Invalid(format!("plugin config is not JSON: {e}")))?;
        let plugin = P::init(&Host::component(), config).map_err(to_wit_error)?;
        INSTANCE.with(|cell| *cell.borrow_mut() = Some(Box::new(plugin)));
        Ok(())
    }

    pub fn list<P: Plugin>(options: t::ListOptions) -> Result<Vec<t::CloudEvent>, t::PluginError> {
        let options = ListOptions {
            cluster_name: options.cluster_name,
            data_type: options.data_type,
        };
        with_instance::<P, _>(|p, host| p.list(host, options)).map(|events| events.iter().map(to_wit_event).collect())
    }

    pub fn handle<P: Plugin>(identity: t::Identity, event: t::CloudEvent) -> Result<(), t::PluginError> {
        let identity = Identity {
            user: identity.user,
            groups: identity.groups,
        };
        with_instance::<P, _>(|p, host| p.handle(host, identity, from_wit_event(event)))
    }

    pub fn on_event<P: Plugin>(event: t::HostEvent) -> Result<(), t::PluginError> {
        let event = from_wit_host_event(event);
        with_instance::<P, _>(|p, host| p.on_event(host, event))
    }
}
