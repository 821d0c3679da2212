//! An agent's ManifestBundleStatus update as the kube source decodes it. The first byte picks
//! which extensions the event carries; the rest is the payload.
#![no_main]

use conductor_fuzz::status_event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Some((&flags, data)) = bytes.split_first() else { return };
    if let Ok(update) = kube_plugin::works::StatusUpdate::decode(&status_event(flags, data)) {
        assert_eq!(update.cluster, "cluster1");
    }
});
