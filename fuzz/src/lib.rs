//! The host's modules that read outside input, compiled here as they are in the host (from the
//! same files) without the rest of it, so that the fuzz build stays small: the proto ⇄
//! CloudEvent codec (`host/src/wire/`) and the configuration (`host/src/config`, with the
//! plugin references it checks, `host/src/oci/reference.rs`).

#![allow(dead_code, clippy::all)]

pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/io.cloudevents.v1.rs"));
}

#[path = "../../host/src/wire/mod.rs"]
pub mod wire;

#[path = "../../host/src/config/mod.rs"]
pub mod config;

#[path = "../../host/src/oci/reference.rs"]
pub mod oci_reference;

/// What the configuration checks of plugin references (`file = "oci://…"`), where the host has it.
pub mod oci {
    pub use super::oci_reference as reference;
    pub use reference::{ArtifactReference, is_oci};
}

/// Parses and validates `conductor.toml` text as `Config::load` does after reading the file.
pub fn check_config(text: &str) -> Result<config::Config, (String, String)> {
    let config = config::Config::parse(text)?;
    config.validate()?;
    Ok(config)
}

/// A work agent's status update for cluster1 carrying `data`; bits of `flags` choose which of
/// clustername, resourceid, resourceversion (the high nibble) and sequenceid it has.
pub fn status_event(flags: u8, data: &[u8]) -> conductor_plugin_sdk::CloudEvent {
    use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, data_types};
    let mut e = conductor_plugin_sdk::CloudEvent::new(
        "fuzz",
        "cluster1-work-agent",
        format!("{}.status.update_request", data_types::MANIFEST_BUNDLES),
    );
    if flags & 1 != 0 {
        e.set_extension("clustername", "cluster1");
    }
    if flags & 2 != 0 {
        e.set_extension("resourceid", "55c61e54-a3f6-563d-9fec-b1fe297bdfdb");
    }
    if flags & 4 != 0 {
        let dt = DataType::parse(data_types::MANIFEST_BUNDLES).expect("a data type");
        e.set_resource_version(&dt, i64::from(flags >> 4));
    }
    if flags & 8 != 0 {
        e.set_extension("sequenceid", "1834773391719010304");
    }
    e.data = Some(data.to_vec());
    e
}
