//! The conductor plugin SDK: what a plugin and the host share.
//!
//! - [`Plugin`]: what a plugin implements; [`export_plugin!`] turns it into a WebAssembly
//!   component (on `wasm32-wasip2`) or a native library (a `cdylib` anywhere else);
//! - [`Host`]: the host capabilities a plugin calls ([`Database`] and [`Transaction`] through
//!   `pg`, [`Kube`] through `kube`, timers, `kv`, emit, log); `fakes::FakeHost` for unit tests
//!   (the `fakes` feature); [`KvKey`] and [`Retry`] for typed state and requeue with backoff;
//! - [`pg`] and [`kube`]: the values, rows, resources and selectors those calls take and return;
//! - [`CloudEvent`]: the event, with extensions typed as they travel on the OCM wire;
//! - [`ocm`]: data and event types, the OCM extensions, the resync payload, hub encoders;
//! - [`Error`] and [`Status`]: the contract's one error, and what agents see of it
//!   (`{"ErrStatus": …}`);
//! - [`Identity`]: the authenticated caller of a request;
//! - [`duration`]: durations as conductor writes them (`"10s"`).
//!
//! Layers, each using only those above it: `error`, `event`, `identity`, [`ocm`], [`metric`];
//! [`pg`], [`kube`]; [`calls`] (what a backend answers); [`host`]; [`plugin`]; [`retry`]; and the
//! backends: `native` (the C ABI), `fakes`, and in a WebAssembly component `bindings`, `imports`
//! and `component`.
//!
//! The contract itself is `wit/plugin.wit` (`conductor:plugin@0.4.0`, [`SDK_VERSION`]).

pub mod calls;
pub mod duration;
pub mod error;
pub mod event;
pub mod host;
pub mod identity;
pub mod kube;
pub mod metric;
pub mod ocm;
pub mod pg;
pub mod plugin;
pub mod request;
pub mod retry;
mod wit_convert;

#[cfg(target_arch = "wasm32")]
#[allow(missing_docs, clippy::all)]
pub mod bindings;
#[cfg(target_arch = "wasm32")]
pub mod component;
#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "fakes")))]
pub mod fakes;
#[cfg(target_arch = "wasm32")]
mod imports;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;

pub use calls::Level;
pub use error::{DatabaseError, Error, Status, StatusDetails};
pub use event::{CloudEvent, ExtensionError, ExtensionValue, SPEC_VERSION, Timestamp};
pub use host::{Database, Host, Kube, KvKey, Transaction};
pub use identity::Identity;
pub use pg::{PgRow, PgRows, PgValue};
pub use plugin::{
    Capability, Description, HostEvent, ListOptions, MetricDescription, MetricKind, NoConfig, Plugin, Request,
    SDK_VERSION,
};
pub use retry::Retry;

/// Exports a [`Plugin`] implementation: as the component's `plugin` interface when built for
/// `wasm32-wasip2`, as the native entry symbol (`conductor_plugin_v1`) otherwise.
///
/// ```no_run
/// use conductor_plugin_sdk::{CloudEvent, Description, Error, Host, ListOptions, NoConfig, Plugin};
///
/// struct Empty;
///
/// impl Plugin for Empty {
///     type Config = NoConfig;
///     fn describe() -> Description {
///         Description::new("empty", "0.1.0")
///             .sources(["empty"])
///             .data_types(["io.open-cluster-management.works.v1alpha1.manifestbundles"])
///     }
///     fn init(_: &Host, _: NoConfig) -> Result<Self, Error> {
///         Ok(Empty)
///     }
///     fn list(&mut self, _: &Host, _: ListOptions) -> Result<Vec<CloudEvent>, Error> {
///         Ok(vec![])
///     }
/// }
///
/// conductor_plugin_sdk::export_plugin!(Empty);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __ConductorPlugin = $plugin;

        #[cfg(target_arch = "wasm32")]
        mod __conductor_plugin_component {
            use super::__ConductorPlugin;
            use $crate::component::Adapter;
            use $crate::bindings::conductor::plugin::types as t;
            use $crate::bindings::exports::conductor::plugin::plugin as p;
            pub struct Guest;
            impl p::Guest for Guest {
                fn describe() -> p::Description {
                    Adapter::describe::<__ConductorPlugin>()
                }
                fn check_config(config: String) -> Result<(), t::Error> {
                    Adapter::check_config::<__ConductorPlugin>(config)
                }
                fn init(config: String) -> Result<(), t::Error> {
                    Adapter::init::<__ConductorPlugin>(config)
                }
                fn start() -> Result<(), t::Error> {
                    Adapter::start::<__ConductorPlugin>()
                }
                fn list(options: p::ListOptions) -> Result<Vec<t::CloudEvent>, t::Error> {
                    Adapter::list::<__ConductorPlugin>(options)
                }
                fn handle(identity: t::Identity, event: t::CloudEvent) -> Result<(), t::Error> {
                    Adapter::handle::<__ConductorPlugin>(identity, event)
                }
                fn handle_batch(requests: Vec<p::Request>) -> Vec<Result<(), t::Error>> {
                    Adapter::handle_batch::<__ConductorPlugin>(requests)
                }
                fn on_events(events: Vec<p::HostEvent>) -> Result<(), t::Error> {
                    Adapter::on_events::<__ConductorPlugin>(events)
                }
            }
            $crate::bindings::__export_conductor_plugin!(Guest with_types_in $crate::bindings);
        }

        #[cfg(not(target_arch = "wasm32"))]
        #[unsafe(no_mangle)]
        pub extern "C" fn conductor_plugin_v1() -> *const $crate::native::PluginApi {
            $crate::native::plugin_api::<__ConductorPlugin>()
        }
    };
}
