//! An event written straight into the bytes of its `io.cloudevents.v1.CloudEvent` message: the
//! message [`super::encode`] makes, as prost writes it, without the message between. Fan-out
//! encodes every event it delivers (once, however many subscribers take it); building the message
//! first cost an allocation for every attribute's key and value and a copy of the payload, each
//! dropped as soon as it was written.
//!
//! The fields go out in field-number order, as prost writes them; the attributes in the order
//! of [`attributes`] (a map's entries have no order on the wire).

use bytes::Bytes;
use conductor_plugin_sdk::{CloudEvent, ExtensionValue, SPEC_VERSION};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use super::{CONTENT_TYPE_KEY, PREFIX};

/// The message's bytes, as `prost::Message::encode_to_vec(&super::encode(event))` writes them
/// (up to the order of the attributes).
pub fn encode(event: &CloudEvent) -> Bytes {
    let attributes = attributes(event);
    let spec_version = if event.spec_version.is_empty() {
        SPEC_VERSION
    } else {
        &event.spec_version
    };
    let fields = [
        (1, event.id.as_str()),
        (2, &event.source),
        (3, spec_version),
        (4, &event.ty),
    ];
    let len = fields
        .iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(tag, s)| key_len(*tag) + delimited(s.len()))
        .sum::<usize>()
        + attributes
            .iter()
            .map(|a| key_len(5) + delimited(a.len()))
            .sum::<usize>()
        + event.data.as_ref().map_or(0, |d| key_len(6) + delimited(d.len()));
    let mut buf = Vec::with_capacity(len);
    for (tag, s) in fields.iter().filter(|(_, s)| !s.is_empty()) {
        write_delimited(*tag, s.as_bytes(), &mut buf);
    }
    for attribute in &attributes {
        attribute.write(&mut buf);
    }
    if let Some(data) = &event.data {
        write_delimited(6, data, &mut buf);
    }
    debug_assert_eq!(buf.len(), len, "the length computed is the length written");
    Bytes::from(buf)
}

/// The attributes [`super::encode`] puts in the message's map, borrowed from the event.
fn attributes(event: &CloudEvent) -> Vec<Attribute<'_>> {
    let mut attributes = Vec::with_capacity(event.extensions.len() + 2);
    let texts = [
        (false, CONTENT_TYPE_KEY, &event.data_content_type),
        (true, "subject", &event.subject),
        (true, "dataschema", &event.data_schema),
    ];
    for (prefixed, name, text) in texts {
        if let Some(s) = text.as_deref().filter(|s| !s.is_empty()) {
            attributes.push(Attribute {
                prefixed,
                name,
                value: Value::Text(STRING, s),
            });
        }
    }
    if let Some(t) = &event.time {
        attributes.push(Attribute {
            prefixed: true,
            name: "time",
            value: Value::time(t),
        });
    }
    for (name, value) in &event.extensions {
        attributes.push(Attribute {
            prefixed: true,
            name,
            value: Value::of(value),
        });
    }
    attributes
}

/// `ce_string`'s field number in `CloudEventAttributeValue` (`ce_uri` is 5, `ce_uri_ref` 6).
const STRING: u32 = 3;

/// One entry of the `attributes` map: its key (`ce-<name>`, or the name alone) and its value.
struct Attribute<'a> {
    prefixed: bool,
    name: &'a str,
    value: Value<'a>,
}

impl Attribute<'_> {
    fn key_len(&self) -> usize {
        if self.prefixed {
            PREFIX.len() + self.name.len()
        } else {
            self.name.len()
        }
    }

    /// The length of the map entry (key field 1, value field 2).
    fn len(&self) -> usize {
        key_len(1) + delimited(self.key_len()) + key_len(2) + delimited(self.value.len())
    }

    fn write(&self, buf: &mut Vec<u8>) {
        encode_key(5, WireType::LengthDelimited, buf);
        encode_varint(self.len() as u64, buf);
        encode_key(1, WireType::LengthDelimited, buf);
        encode_varint(self.key_len() as u64, buf);
        if self.prefixed {
            buf.extend_from_slice(PREFIX.as_bytes());
        }
        buf.extend_from_slice(self.name.as_bytes());
        encode_key(2, WireType::LengthDelimited, buf);
        encode_varint(self.value.len() as u64, buf);
        self.value.write(buf);
    }
}

/// A `CloudEventAttributeValue`: one case of its `attr`.
enum Value<'a> {
    Bool(bool),
    Int(i32),
    /// `ce_string`, `ce_uri` or `ce_uri_ref`, by field number.
    Text(u32, &'a str),
    Bytes(&'a [u8]),
    /// A `google.protobuf.Timestamp`: seconds and nanoseconds.
    Time(i64, i32),
}

impl<'a> Value<'a> {
    fn of(value: &'a ExtensionValue) -> Self {
        match value {
            ExtensionValue::Boolean(b) => Self::Bool(*b),
            ExtensionValue::Integer(i) => Self::Int(*i),
            ExtensionValue::String(s) => Self::Text(STRING, s),
            ExtensionValue::Bytes(b) => Self::Bytes(b),
            ExtensionValue::Uri(s) => Self::Text(5, s),
            ExtensionValue::UriRef(s) => Self::Text(6, s),
            ExtensionValue::Timestamp(t) => Self::time(t),
        }
    }

    fn time(t: &conductor_plugin_sdk::Timestamp) -> Self {
        let t = super::to_proto_time(t);
        Self::Time(t.seconds, t.nanos)
    }

    /// The length of the message.
    fn len(&self) -> usize {
        match *self {
            Self::Bool(_) => key_len(1) + 1,
            Self::Int(i) => key_len(2) + encoded_len_varint(i64::from(i) as u64),
            Self::Text(tag, s) => key_len(tag) + delimited(s.len()),
            Self::Bytes(b) => key_len(4) + delimited(b.len()),
            Self::Time(seconds, nanos) => key_len(7) + delimited(time_len(seconds, nanos)),
        }
    }

    fn write(&self, buf: &mut Vec<u8>) {
        match *self {
            Self::Bool(b) => {
                encode_key(1, WireType::Varint, buf);
                encode_varint(u64::from(b), buf);
            }
            Self::Int(i) => {
                encode_key(2, WireType::Varint, buf);
                // int32 on the wire: sign-extended to 64 bits, as prost writes it.
                encode_varint(i64::from(i) as u64, buf);
            }
            Self::Text(tag, s) => write_delimited(tag, s.as_bytes(), buf),
            Self::Bytes(b) => write_delimited(4, b, buf),
            Self::Time(seconds, nanos) => {
                encode_key(7, WireType::LengthDelimited, buf);
                encode_varint(time_len(seconds, nanos) as u64, buf);
                // proto3: a field at its default value is not written.
                if seconds != 0 {
                    encode_key(1, WireType::Varint, buf);
                    encode_varint(seconds as u64, buf);
                }
                if nanos != 0 {
                    encode_key(2, WireType::Varint, buf);
                    encode_varint(i64::from(nanos) as u64, buf);
                }
            }
        }
    }
}

/// The length of a `google.protobuf.Timestamp` message.
fn time_len(seconds: i64, nanos: i32) -> usize {
    let seconds = if seconds == 0 {
        0
    } else {
        key_len(1) + encoded_len_varint(seconds as u64)
    };
    let nanos = if nanos == 0 {
        0
    } else {
        key_len(2) + encoded_len_varint(i64::from(nanos) as u64)
    };
    seconds + nanos
}

/// The length of a length-delimited field's value with its length before it.
fn delimited(len: usize) -> usize {
    encoded_len_varint(len as u64) + len
}

fn write_delimited(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use prost::Message;

    use super::*;
    use crate::proto;

    /// Every kind of attribute and payload the message can carry, at and around the values
    /// proto3 leaves out (zero seconds or nanoseconds, an empty payload, a negative integer).
    fn events() -> Vec<CloudEvent> {
        let mut full = CloudEvent::new(
            "id-1",
            "kube",
            "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
        );
        full.time = Some(Utc.timestamp_opt(1_765_000_000, 123_456_789).unwrap());
        full.subject = Some("a subject".into());
        full.data_schema = Some("https://example.com/schema".into());
        full.data_content_type = Some("application/json".into());
        full.data = Some(br#"{"manifests":[{"kind":"ConfigMap"}]}"#.to_vec());
        full.set_extension("clustername", "cluster1");
        full.set_extension("resourceversion", 7);
        full.set_extension("negative", -3);
        full.set_extension("deleting", false);
        full.set_extension("yes", true);
        full.extensions
            .insert("blob".into(), ExtensionValue::Bytes(vec![0, 1, 2, 255]));
        full.extensions
            .insert("uri".into(), ExtensionValue::Uri("https://hub.example".into()));
        full.extensions
            .insert("uriref".into(), ExtensionValue::UriRef("/works/w1".into()));
        full.extensions.insert(
            "deletiontimestamp".into(),
            ExtensionValue::Timestamp(Utc.timestamp_opt(1_765_000_001, 0).unwrap()),
        );
        full.extensions.insert(
            "epoch".into(),
            ExtensionValue::Timestamp(Utc.timestamp_opt(0, 5).unwrap()),
        );
        full.extensions.insert(
            "before".into(),
            ExtensionValue::Timestamp(Utc.timestamp_opt(-86_400, 0).unwrap()),
        );
        full.set_extension("metadata", "x".repeat(300));
        let mut bare = CloudEvent::new("", "", "a.v1.things.spec.resync_request");
        bare.spec_version = String::new();
        bare.data = Some(Vec::new());
        let mut blank = CloudEvent::new("id-2", "maestro", "a.v1.things.spec.update_request");
        blank.subject = Some(String::new());
        blank.data_content_type = Some(String::new());
        vec![full, bare, blank]
    }

    #[test]
    fn the_bytes_are_the_message_the_event_encodes_to() {
        for event in events() {
            let message = super::super::encode(&event);
            let written = encode(&event);
            assert_eq!(written.len(), message.encoded_len(), "{}", event.id);
            assert_eq!(proto::CloudEvent::decode(written).unwrap(), message, "{}", event.id);
        }
    }

    #[test]
    fn the_bytes_decode_back_to_the_event() {
        let event = events().remove(0);
        let decoded = proto::CloudEvent::decode(encode(&event)).unwrap();
        assert_eq!(super::super::decode(&decoded).unwrap(), event);
    }
}
