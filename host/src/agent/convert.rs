//! Events to and from the client's wire messages. The client's generated `CloudEvent` and the
//! host's are the same proto message: an event goes through the host's codec (`crate::wire`, the
//! OCM binding the server speaks) and crosses as the message's bytes.

use conductor_client::proto;
use conductor_plugin_sdk::CloudEvent;
use prost::Message;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("the event is not a CloudEvent message: {0}")]
    Proto(#[from] prost::DecodeError),
    #[error("the event cannot be decoded: {0}")]
    Decode(#[from] crate::wire::DecodeError),
}

/// The wire message of `event`.
pub fn to_wire(event: &CloudEvent) -> Result<proto::CloudEvent, ConvertError> {
    let bytes = crate::wire::encode(event).encode_to_vec();
    Ok(proto::CloudEvent::decode(bytes.as_slice())?)
}

/// The event a wire message carries, read as the server reads an agent's.
pub fn from_wire(message: &proto::CloudEvent) -> Result<CloudEvent, ConvertError> {
    let bytes = message.encode_to_vec();
    let message = crate::proto::CloudEvent::decode(bytes.as_slice())?;
    Ok(crate::wire::decode(&message)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_crosses_unchanged() {
        let mut e = CloudEvent::new("1", "memory", "a.v1.things.spec.create_request");
        e.set_extension("clustername", "c1");
        e.set_extension("resourceversion", 3);
        e.data = Some(b"{}".to_vec());
        let wire = to_wire(&e).unwrap();
        assert!(wire.attributes.contains_key("ce-clustername"));
        assert_eq!(from_wire(&wire).unwrap(), e);
    }
}
