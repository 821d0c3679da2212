//! The native plugin ABI: every message that crosses between the host and a library, decoded
//! from arbitrary bytes; what decodes re-encodes and decodes to the same bytes.
#![no_main]

use conductor_plugin_sdk::native::{self, HostRequest, HostResponse, PluginReply, PluginRequest};
use libfuzzer_sys::fuzz_target;

fn check<T: serde::Serialize + serde::de::DeserializeOwned>(bytes: &[u8]) {
    if let Ok(value) = native::decode::<T>(bytes) {
        let encoded = native::encode(&value);
        let again: T = native::decode(&encoded).expect("an encoded message decodes");
        assert_eq!(native::encode(&again), encoded, "stable encoding");
    }
}

fuzz_target!(|bytes: &[u8]| {
    check::<PluginRequest>(bytes);
    check::<PluginReply>(bytes);
    check::<HostRequest>(bytes);
    check::<HostResponse>(bytes);
});
