//! `conductor.toml`: any text is parsed and validated into a configuration or an error naming
//! why — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err((key, reason)) = conductor_fuzz::check_config(text) {
        assert!(!reason.is_empty(), "an error says why (key {key:?})");
    }
});
