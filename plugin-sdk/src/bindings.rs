//! (WebAssembly components) The bindings wit-bindgen generates from `wit/plugin.wit`, and the
//! conversions between them and the SDK's types.

wit_bindgen::generate!({
    path: "wit",
    world: "conductor-plugin",
    pub_export_macro: true,
    export_macro_name: "__export_conductor_plugin",
    default_bindings_module: "conductor_plugin_sdk::bindings",
});

/// `to_wit_*` and `from_wit_*` for every type that crosses.
#[doc(hidden)]
pub mod convert {
    crate::__wit_conversions!(
        types = crate::bindings::conductor::plugin::types,
        pg = crate::bindings::conductor::plugin::pg,
        kube = crate::bindings::conductor::plugin::kube,
        plugin = crate::bindings::exports::conductor::plugin::plugin
    );
}
