//! A plugin from the future: as a component it declares SDK 9.0.0; as a native library it
//! answers the handshake with ABI version 99. The host must refuse both with a clear error.

use conductor_plugin_sdk::{CloudEvent, Description, Host, Identity, ListOptions, Plugin, SourceError};

pub struct FromTheFuture;

impl Plugin for FromTheFuture {
    fn describe() -> Description {
        Description {
            name: "from-the-future".to_owned(),
            version: "9.0.0".to_owned(),
            sdk_version: "9.0.0".to_owned(),
            sources: vec!["future".to_owned()],
            data_types: vec![conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES.to_owned()],
            capabilities: vec![],
        }
    }
    fn init(_host: &Host, _config: serde_json::Value) -> Result<Self, SourceError> {
        Ok(Self)
    }
    fn list(&mut self, _host: &Host, _options: ListOptions) -> Result<Vec<CloudEvent>, SourceError> {
        Ok(vec![])
    }
    fn handle(&mut self, _host: &Host, _identity: Identity, _event: CloudEvent) -> Result<(), SourceError> {
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
conductor_plugin_sdk::export_plugin!(FromTheFuture);

/// The native handshake of a future ABI: the same entry symbol, another version.
#[cfg(not(target_arch = "wasm32"))]
#[unsafe(no_mangle)]
pub extern "C" fn conductor_plugin_v1() -> *const conductor_plugin_sdk::native::PluginApi {
    use conductor_plugin_sdk::native::{Buffer, HostApi, PluginApi};
    use std::ffi::c_void;
    unsafe extern "C" fn describe() -> Buffer {
        Buffer::from_vec(Vec::new())
    }
    unsafe extern "C" fn create(_: *const HostApi, _: *const u8, _: usize, _: *mut *mut c_void) -> Buffer {
        Buffer::from_vec(Vec::new())
    }
    unsafe extern "C" fn call(_: *mut c_void, _: *const u8, _: usize) -> Buffer {
        Buffer::from_vec(Vec::new())
    }
    unsafe extern "C" fn destroy(_: *mut c_void) {}
    unsafe extern "C" fn free(b: Buffer) {
        drop(unsafe { b.into_vec() });
    }
    static API: PluginApi = PluginApi {
        abi_version: 99,
        sdk_version: c"9.0.0".as_ptr(),
        describe,
        create,
        call,
        destroy,
        free,
    };
    &API
}
