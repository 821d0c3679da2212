//! A plugin from the future: as a component it declares SDK 9.0.0; as a native library it
//! answers the handshake with ABI version 99. The host must refuse both with a clear error.

use conductor_plugin_sdk::{Description, Error, Host, NoConfig, Plugin};

pub struct FromTheFuture;

impl Plugin for FromTheFuture {
    type Config = NoConfig;

    fn describe() -> Description {
        let mut d = Description::new("from-the-future", "9.0.0")
            .sources(["future"])
            .data_types([conductor_plugin_sdk::ocm::data_types::MANIFEST_BUNDLES]);
        d.sdk_version = "9.0.0".to_owned();
        d
    }
    fn init(_host: &Host, _config: NoConfig) -> Result<Self, Error> {
        Ok(Self)
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
    unsafe extern "C" fn check_config(_: *const u8, _: usize) -> Buffer {
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
        // SAFETY: the buffers this library hands out are its own `Vec`s.
        drop(unsafe { b.into_vec() });
    }
    static API: PluginApi = PluginApi {
        abi_version: 99,
        sdk_version: c"9.0.0".as_ptr(),
        describe,
        check_config,
        create,
        call,
        destroy,
        free,
    };
    &API
}
