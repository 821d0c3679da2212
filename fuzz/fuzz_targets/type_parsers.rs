//! Event-type and data-type strings: parsing never fails badly, and what parses prints back to
//! something that parses to the same value.
#![no_main]

use conductor_plugin_sdk::ocm::{DataType, EventType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(ty) = EventType::parse(text) {
        let printed = ty.to_string();
        assert_eq!(EventType::parse(&printed).as_ref(), Ok(&ty), "{text:?} -> {printed:?}");
    }
    if let Ok(dt) = DataType::parse(text) {
        let printed = dt.to_string();
        assert_eq!(DataType::parse(&printed).as_ref(), Ok(&dt), "{text:?} -> {printed:?}");
    }
});
