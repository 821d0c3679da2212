//! A deliberately bad plugin for the isolation tests. It serves manifest bundles under the source
//! `chaos`; what `handle` does depends on the `resourceid` of the event:
//!
//! - `ok`: succeeds; `panic`: panics; `loop`: never returns; `hang`: sleeps forever (a native
//!   call that waits on something that never comes, without spinning a core); `alloc`: allocates
//!   without bound;
//! - `trap`: executes an `unreachable` instruction (components only; native code would abort
//!   the host, which is why native plugins are trusted code);
//! - `whoami`: refuses the event with a message naming the caller's identity (the auth tests
//!   read what reached the plugin from it).
//!
//! `list` answers with one event from `chaos`, so a reload to this plugin is visible.

use conductor_plugin_sdk::ocm::{OcmExtensions, data_types};
use conductor_plugin_sdk::{CloudEvent, Description, Error, Host, Identity, ListOptions, Plugin};
use serde::de::IgnoredAny;

pub struct Misbehaving;

impl Plugin for Misbehaving {
    /// Any configuration: it stands in for other plugins in reload tests.
    type Config = IgnoredAny;

    fn describe() -> Description {
        Description::new("misbehaving", env!("CARGO_PKG_VERSION"))
            .sources(["chaos"])
            .data_types([data_types::MANIFEST_BUNDLES])
    }

    fn init(_host: &Host, _config: IgnoredAny) -> Result<Self, Error> {
        Ok(Self)
    }

    fn list(&mut self, _host: &Host, options: ListOptions) -> Result<Vec<CloudEvent>, Error> {
        let dt = conductor_plugin_sdk::ocm::DataType::parse(&options.data_type)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let mut e = CloudEvent::new("chaos-1", "chaos", format!("{}.spec.create_request", options.data_type));
        e.set_extension("clustername", options.cluster_name.as_str());
        e.set_extension("resourceid", "chaos-work");
        e.set_extension("originalsource", "");
        e.set_resource_version(&dt, 1);
        e.set_json_data(&serde_json::json!({"manifests": []}))
            .map_err(|e| Error::Internal(e.to_string()))?;
        Ok(vec![e])
    }

    fn handle(&mut self, _host: &Host, identity: Identity, event: CloudEvent) -> Result<(), Error> {
        match event.resource_id().unwrap_or_default() {
            "ok" => Ok(()),
            "panic" => panic!("the misbehaving plugin panicked on purpose"),
            "loop" => loop {
                std::hint::black_box(());
            },
            "hang" => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "trap" => trap(),
            "whoami" => Err(Error::Invalid(format!(
                "whoami: user={} groups={}",
                identity.user,
                identity.groups.join(",")
            ))),
            other => Err(Error::Invalid(format!("unknown mode {other:?}"))),
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn trap() -> Result<(), Error> {
    core::arch::wasm32::unreachable()
}

#[cfg(not(target_arch = "wasm32"))]
fn trap() -> Result<(), Error> {
    Err(Error::Invalid("traps are only exercised in components".to_owned()))
}

conductor_plugin_sdk::export_plugin!(Misbehaving);
