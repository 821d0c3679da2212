//! The OCM binding: `io.cloudevents.v1.CloudEvent` ⇄ [`CloudEvent`] (`docs/protocol.md` §2).
//!
//! The content type travels under `contenttype`, every other attribute and extension under
//! `ce-<name>`, the payload only in `binary_data`. This is *not* the CloudEvents protobuf format.

mod written;

use std::collections::HashMap;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use conductor_plugin_sdk::event::is_valid_extension_name;
use conductor_plugin_sdk::ocm::HEARTBEAT_TYPE;
use conductor_plugin_sdk::{CloudEvent, ExtensionValue, SPEC_VERSION, Timestamp};

use crate::proto::{self, cloud_event::Data, cloud_event_attribute_value::Attr};

const CONTENT_TYPE_KEY: &str = "contenttype";
const PREFIX: &str = "ce-";

/// Why a proto message is not a decodable OCM CloudEvent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown encoding: spec_version {0:?} is not 1.0 or 0.3")]
    SpecVersion(String),
    #[error("unknown encoding: the event has no attributes")]
    NoAttributes,
    #[error("structured mode (content type {0:?}) is not supported")]
    Structured(String),
    #[error("attribute {key:?} must be {wanted}, not {found}")]
    AttributeType {
        key: String,
        wanted: &'static str,
        found: &'static str,
    },
    #[error("attribute {0:?} has no value")]
    EmptyAttribute(String),
    #[error("attribute {key:?}: invalid timestamp: {reason}")]
    Timestamp { key: String, reason: String },
    #[error("invalid extension name {0:?}: must be ASCII letters and digits")]
    ExtensionName(String),
    #[error("missing required attribute {0}")]
    Missing(&'static str),
}

/// Decodes a proto CloudEvent received from an agent.
pub fn decode(msg: &proto::CloudEvent) -> Result<CloudEvent, DecodeError> {
    if msg.spec_version != SPEC_VERSION && msg.spec_version != "0.3" {
        return Err(DecodeError::SpecVersion(msg.spec_version.clone()));
    }
    if msg.attributes.is_empty() && msg.r#type != HEARTBEAT_TYPE {
        return Err(DecodeError::NoAttributes);
    }
    let heartbeat = msg.r#type == HEARTBEAT_TYPE;
    for (field, value) in [("id", &msg.id), ("source", &msg.source), ("type", &msg.r#type)] {
        if value.is_empty() && !(heartbeat && field == "source") {
            return Err(DecodeError::Missing(field));
        }
    }
    let mut event = CloudEvent::new(msg.id.clone(), msg.source.clone(), msg.r#type.clone());
    event.spec_version = msg.spec_version.clone();
    for (key, value) in &msg.attributes {
        let attr = value
            .attr
            .as_ref()
            .ok_or_else(|| DecodeError::EmptyAttribute(key.clone()))?;
        if key == CONTENT_TYPE_KEY {
            event.data_content_type = non_blank(expect_string(key, attr)?);
            continue;
        }
        let Some(name) = key.strip_prefix(PREFIX) else {
            continue; // the Go reader silently ignores any other key
        };
        match name {
            "time" => event.time = Some(expect_time(key, attr)?),
            "subject" => event.subject = non_blank(expect_string(key, attr)?),
            "dataschema" => event.data_schema = non_blank(expect_string(key, attr)?),
            "datacontenttype" => event.data_content_type = non_blank(expect_string(key, attr)?),
            // Envelope attributes are carried by the proto fields; never taken from the map.
            "id" | "source" | "specversion" | "type" => {}
            _ if !is_valid_extension_name(name) => return Err(DecodeError::ExtensionName(name.to_owned())),
            _ => {
                event.extensions.insert(name.to_owned(), extension_value(key, attr)?);
            }
        }
    }
    if let Some(ct) = &event.data_content_type
        && ct.starts_with("application/cloudevents")
    {
        return Err(DecodeError::Structured(ct.clone()));
    }
    if let Some(Data::BinaryData(bytes)) = &msg.data {
        event.data = Some(bytes.to_vec());
    }
    Ok(event)
}

/// Encodes an event for an agent.
pub fn encode(event: &CloudEvent) -> proto::CloudEvent {
    let mut attributes = HashMap::with_capacity(event.extensions.len() + 2);
    let mut put = |key: String, attr: Attr| {
        attributes.insert(key, proto::CloudEventAttributeValue { attr: Some(attr) });
    };
    if let Some(ct) = event.data_content_type.as_deref().filter(|s| !s.is_empty()) {
        put(CONTENT_TYPE_KEY.to_owned(), Attr::CeString(ct.to_owned()));
    }
    if let Some(t) = &event.time {
        put(format!("{PREFIX}time"), Attr::CeTimestamp(to_proto_time(t)));
    }
    if let Some(s) = event.subject.as_deref().filter(|s| !s.is_empty()) {
        put(format!("{PREFIX}subject"), Attr::CeString(s.to_owned()));
    }
    if let Some(s) = event.data_schema.as_deref().filter(|s| !s.is_empty()) {
        put(format!("{PREFIX}dataschema"), Attr::CeString(s.to_owned()));
    }
    for (name, value) in &event.extensions {
        put(format!("{PREFIX}{name}"), extension_attr(value));
    }
    proto::CloudEvent {
        id: event.id.clone(),
        source: event.source.clone(),
        spec_version: if event.spec_version.is_empty() {
            SPEC_VERSION.to_owned()
        } else {
            event.spec_version.clone()
        },
        r#type: event.ty.clone(),
        attributes,
        data: event.data.as_ref().map(|d| Data::BinaryData(Bytes::copy_from_slice(d))),
    }
}

/// A `CloudEvent` on the gRPC service: a message, or one already encoded. Fan-out encodes an
/// event once and hands every subscriber the same bytes; on the wire both are the same message.
#[derive(Debug, Clone, PartialEq)]
pub enum WireEvent {
    Message(Box<proto::CloudEvent>),
    Encoded(Bytes),
}

impl Default for WireEvent {
    fn default() -> Self {
        Self::Message(Box::default())
    }
}

impl WireEvent {
    /// Encodes an event once, for delivery to many subscribers: its message's bytes, written
    /// straight from the event.
    pub fn encode(event: &CloudEvent) -> Bytes {
        written::encode(event)
    }

    /// The decoded message (decoding it if it was sent pre-encoded, as tests do).
    pub fn into_message(self) -> Result<proto::CloudEvent, prost::DecodeError> {
        match self {
            Self::Message(m) => Ok(*m),
            Self::Encoded(b) => prost::Message::decode(b),
        }
    }
}

impl prost::Message for WireEvent {
    fn encode_raw(&self, buf: &mut impl bytes::BufMut) {
        match self {
            Self::Message(m) => m.encode_raw(buf),
            Self::Encoded(b) => buf.put_slice(b),
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        if let Self::Encoded(b) = self {
            *self = Self::Message(Box::new(prost::Message::decode(b.clone())?));
        }
        match self {
            Self::Message(m) => m.merge_field(tag, wire_type, buf, ctx),
            Self::Encoded(_) => unreachable!("converted to a message above"),
        }
    }

    fn encoded_len(&self) -> usize {
        match self {
            Self::Message(m) => m.encoded_len(),
            Self::Encoded(b) => b.len(),
        }
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// A heartbeat: spec version 1.0, a fresh UUID, the heartbeat type and nothing else.
pub fn heartbeat() -> proto::CloudEvent {
    proto::CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        spec_version: SPEC_VERSION.to_owned(),
        r#type: HEARTBEAT_TYPE.to_owned(),
        ..Default::default()
    }
}

fn non_blank(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn case_name(attr: &Attr) -> &'static str {
    match attr {
        Attr::CeBoolean(_) => "ce_boolean",
        Attr::CeInteger(_) => "ce_integer",
        Attr::CeString(_) => "ce_string",
        Attr::CeBytes(_) => "ce_bytes",
        Attr::CeUri(_) => "ce_uri",
        Attr::CeUriRef(_) => "ce_uri_ref",
        Attr::CeTimestamp(_) => "ce_timestamp",
    }
}

fn expect_string<'a>(key: &str, attr: &'a Attr) -> Result<&'a str, DecodeError> {
    match attr {
        Attr::CeString(s) => Ok(s),
        other => Err(DecodeError::AttributeType {
            key: key.to_owned(),
            wanted: "ce_string",
            found: case_name(other),
        }),
    }
}

fn expect_time(key: &str, attr: &Attr) -> Result<Timestamp, DecodeError> {
    match attr {
        Attr::CeTimestamp(ts) => from_proto_time(key, ts),
        Attr::CeString(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| DecodeError::Timestamp {
                key: key.to_owned(),
                reason: e.to_string(),
            }),
        other => Err(DecodeError::AttributeType {
            key: key.to_owned(),
            wanted: "ce_timestamp",
            found: case_name(other),
        }),
    }
}

fn extension_value(key: &str, attr: &Attr) -> Result<ExtensionValue, DecodeError> {
    Ok(match attr {
        Attr::CeBoolean(b) => ExtensionValue::Boolean(*b),
        Attr::CeInteger(i) => ExtensionValue::Integer(*i),
        Attr::CeString(s) => ExtensionValue::String(s.clone()),
        Attr::CeBytes(b) => ExtensionValue::Bytes(b.clone()),
        Attr::CeUri(s) => ExtensionValue::Uri(s.clone()),
        Attr::CeUriRef(s) => ExtensionValue::UriRef(s.clone()),
        Attr::CeTimestamp(ts) => ExtensionValue::Timestamp(from_proto_time(key, ts)?),
    })
}

fn extension_attr(value: &ExtensionValue) -> Attr {
    match value {
        ExtensionValue::Boolean(b) => Attr::CeBoolean(*b),
        ExtensionValue::Integer(i) => Attr::CeInteger(*i),
        ExtensionValue::String(s) => Attr::CeString(s.clone()),
        ExtensionValue::Bytes(b) => Attr::CeBytes(b.clone()),
        ExtensionValue::Uri(s) => Attr::CeUri(s.clone()),
        ExtensionValue::UriRef(s) => Attr::CeUriRef(s.clone()),
        ExtensionValue::Timestamp(t) => Attr::CeTimestamp(to_proto_time(t)),
    }
}

fn from_proto_time(key: &str, ts: &prost_types::Timestamp) -> Result<Timestamp, DecodeError> {
    u32::try_from(ts.nanos)
        .ok()
        .and_then(|nanos| Utc.timestamp_opt(ts.seconds, nanos).single())
        .ok_or_else(|| DecodeError::Timestamp {
            key: key.to_owned(),
            reason: format!("seconds {} nanos {} out of range", ts.seconds, ts.nanos),
        })
}

fn to_proto_time(t: &Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_attr(s: &str) -> proto::CloudEventAttributeValue {
        proto::CloudEventAttributeValue {
            attr: Some(Attr::CeString(s.to_owned())),
        }
    }

    fn minimal() -> proto::CloudEvent {
        proto::CloudEvent {
            id: "1".into(),
            source: "agent".into(),
            spec_version: "1.0".into(),
            r#type: "a.v1.things.status.update_request".into(),
            attributes: [("ce-clustername".to_owned(), string_attr("c1"))].into(),
            data: None,
        }
    }

    #[test]
    fn empty_attributes_are_rejected_except_for_heartbeats() {
        let mut msg = minimal();
        msg.attributes.clear();
        assert_eq!(decode(&msg), Err(DecodeError::NoAttributes));
        assert!(decode(&heartbeat()).is_ok());
    }

    #[test]
    fn spec_version_is_required() {
        let mut msg = minimal();
        msg.spec_version.clear();
        assert!(matches!(decode(&msg), Err(DecodeError::SpecVersion(_))));
    }

    #[test]
    fn content_type_must_be_a_string_and_unknown_keys_are_ignored() {
        let mut msg = minimal();
        msg.attributes.insert("foo".into(), string_attr("bar"));
        let ev = decode(&msg).unwrap();
        assert_eq!(ev.extensions.len(), 1);
        msg.attributes.insert(
            "contenttype".into(),
            proto::CloudEventAttributeValue {
                attr: Some(Attr::CeUri("application/json".into())),
            },
        );
        assert!(matches!(decode(&msg), Err(DecodeError::AttributeType { .. })));
    }

    #[test]
    fn only_binary_data_is_read() {
        let mut msg = minimal();
        msg.data = Some(Data::TextData("{}".into()));
        assert_eq!(decode(&msg).unwrap().data, None);
        msg.data = Some(Data::BinaryData(Bytes::from_static(b"{}")));
        assert_eq!(decode(&msg).unwrap().data.as_deref(), Some(&b"{}"[..]));
    }

    #[test]
    fn bad_extension_names_and_valueless_attributes_fail() {
        let mut msg = minimal();
        msg.attributes.insert("ce-bad-name".into(), string_attr("x"));
        assert!(matches!(decode(&msg), Err(DecodeError::ExtensionName(_))));
        let mut msg = minimal();
        msg.attributes
            .insert("ce-x".into(), proto::CloudEventAttributeValue { attr: None });
        assert!(matches!(decode(&msg), Err(DecodeError::EmptyAttribute(_))));
    }

    #[test]
    fn a_pre_encoded_event_is_the_same_message_on_the_wire() {
        use prost::Message as _;
        let mut msg = minimal();
        msg.data = Some(Data::BinaryData(Bytes::from_static(b"{\"a\":1}")));
        let event = decode(&msg).unwrap();
        let as_message = WireEvent::Message(Box::new(encode(&event)));
        let as_bytes = WireEvent::Encoded(WireEvent::encode(&event));
        assert_eq!(as_message.encoded_len(), as_bytes.encoded_len());
        let (a, b) = (as_message.encode_to_vec(), as_bytes.encode_to_vec());
        assert_eq!(
            proto::CloudEvent::decode(&a[..]).unwrap(),
            proto::CloudEvent::decode(&b[..]).unwrap()
        );
        assert_eq!(WireEvent::decode(&b[..]).unwrap().into_message().unwrap(), msg);
    }

    #[test]
    fn heartbeat_has_only_envelope_fields() {
        let hb = heartbeat();
        assert_eq!(hb.spec_version, "1.0");
        assert_eq!(hb.r#type, HEARTBEAT_TYPE);
        assert!(uuid::Uuid::parse_str(&hb.id).is_ok());
        assert!(hb.source.is_empty() && hb.attributes.is_empty() && hb.data.is_none());
    }
}
