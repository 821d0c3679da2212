//! A Publish request's bytes, as an agent sends them: decoded into a CloudEvent with OCM's
//! attribute rules, then its cluster name and event type read as the service reads them. What
//! decodes must encode back to the same event, and the bytes fan-out writes for it
//! (`WireEvent::encode`) must be that message.
//!
//! Found: an event whose only attributes are ones the reader ignores decodes, but encodes to no
//! attributes at all (kept in `fuzz/regressions/wire_decode`; the property now states it).
#![no_main]

use conductor_fuzz::{proto, wire};
use conductor_plugin_sdk::ocm::{EventType, OcmExtensions};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|bytes: &[u8]| {
    // The server decodes the event lazily, through WireEvent.
    if let Ok(event) = wire::WireEvent::decode(bytes) {
        let _ = event.into_message();
    }
    let Ok(request) = proto::PublishRequest::decode(bytes) else { return };
    let Some(message) = request.event else { return };
    let Ok(event) = wire::decode(&message) else { return };
    let _ = event.cluster_name();
    let _ = event.resource_id();
    let _ = event.resource_version();
    let _ = EventType::parse(&event.ty);
    let encoded = wire::encode(&event);
    let written = wire::WireEvent::encode(&event);
    assert_eq!(written.len(), encoded.encoded_len(), "the bytes written are the message's length");
    let written = proto::CloudEvent::decode(written).expect("the bytes written decode");
    assert_eq!(written, encoded, "the bytes written are the message");
    // Attributes the reader ignores (keys without `ce-`) are not re-encoded: an event left with
    // none is not a valid encoding, which conductor never sends (emitted events carry at least
    // their cluster name).
    if encoded.attributes.is_empty() && encoded.r#type != conductor_plugin_sdk::ocm::HEARTBEAT_TYPE {
        assert_eq!(wire::decode(&encoded), Err(wire::DecodeError::NoAttributes));
        return;
    }
    let again = wire::decode(&encoded).expect("an encoded event decodes");
    assert_eq!(again, event, "decode(encode(e)) == e");
});
