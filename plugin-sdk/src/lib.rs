//! The conductor plugin SDK: what a source plugin and the host share.
//!
//! - [`Plugin`]: what a plugin implements; [`export_plugin!`] turns it into a WebAssembly
//!   component (on `wasm32-wasip2`) or a native library (a `cdylib` anywhere else);
//! - [`Host`]: the host capabilities a plugin calls; [`fakes::FakeHost`] for unit tests;
//! - [`CloudEvent`]: the event, with extensions typed as they travel on the OCM wire;
//! - [`ocm`]: data and event types, the OCM extensions, the resync payload, hub encoders;
//! - [`SourceError`] and [`Status`]: errors agents understand (`{"ErrStatus": …}`);
//! - [`Identity`]: the authenticated caller of a request;
//! - [`pg`]: PostgreSQL through the host (`Host::pg`).
//!
//! The contract itself is `wit/plugin.wit` (`conductor:plugin@0.2.0`).

pub mod error;
pub mod event;
pub mod host;
pub mod identity;
pub mod ocm;
pub mod pg;
pub mod plugin;
mod wit_convert;

#[cfg(target_arch = "wasm32")]
pub mod component;
#[cfg(not(target_arch = "wasm32"))]
pub mod fakes;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;

pub use error::{SourceError, Status, StatusDetails};
pub use event::{CloudEvent, ExtensionError, ExtensionValue, SPEC_VERSION, Timestamp};
pub use host::{Host, Level};
pub use identity::Identity;
pub use pg::{PgError, PgRow, PgRows, PgValue, Transaction};
pub use plugin::{ApiResource, Capability, Description, HostEvent, KubeChange, ListOptions, Plugin, SDK_VERSION};

/// Exports a [`Plugin`] implementation: as the component's `source` interface when built for
/// `wasm32-wasip2`, as the native entry symbol (`conductor_plugin_v1`) otherwise.
///
/// ```no_run
/// use conductor_plugin_sdk::{CloudEvent, Description, Host, Identity, ListOptions, Plugin, SourceError};
///
/// struct Empty;
///
/// impl Plugin for Empty {
///     fn describe() -> Description {
///         Description {
///             name: "empty".into(),
///             version: "0.1.0".into(),
///             sdk_version: conductor_plugin_sdk::SDK_VERSION.into(),
///             sources: vec!["empty".into()],
///             data_types: vec!["io.open-cluster-management.works.v1alpha1.manifestbundles".into()],
///             capabilities: vec![],
///         }
///     }
///     fn init(_: &Host, _: serde_json::Value) -> Result<Self, SourceError> {
///         Ok(Empty)
///     }
///     fn list(&mut self, _: &Host, _: ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
///         Ok(vec![])
///     }
///     fn handle(&mut self, _: &Host, _: Identity, _: CloudEvent) -> Result<(), SourceError> {
///         Err(SourceError::Invalid("read-only".into()))
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
            use $crate::component::bindings::conductor::plugin::types as t;
            use $crate::component::Adapter;
            pub struct Guest;
            impl $crate::component::bindings::exports::conductor::plugin::source::Guest for Guest {
                fn describe() -> t::Description {
                    Adapter::describe::<__ConductorPlugin>()
                }
                fn init(config: String) -> Result<(), t::PluginError> {
                    Adapter::init::<__ConductorPlugin>(config)
                }
                fn list(options: t::ListOptions) -> Result<Vec<t::CloudEvent>, t::PluginError> {
                    Adapter::list::<__ConductorPlugin>(options)
                }
                fn handle(identity: t::Identity, event: t::CloudEvent) -> Result<(), t::PluginError> {
                    Adapter::handle::<__ConductorPlugin>(identity, event)
                }
                fn on_event(event: t::HostEvent) -> Result<(), t::PluginError> {
                    Adapter::on_event::<__ConductorPlugin>(event)
                }
            }
            $crate::component::bindings::__export_source_plugin!(Guest with_types_in $crate::component::bindings);
        }

        #[cfg(not(target_arch = "wasm32"))]
        #[unsafe(no_mangle)]
        pub extern "C" fn conductor_plugin_v1() -> *const $crate::native::PluginApi {
            $crate::native::plugin_api::<__ConductorPlugin>()
        }
    };
}
