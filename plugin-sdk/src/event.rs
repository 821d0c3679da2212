//! The CloudEvent as plugins and the host see it: the CloudEvents 1.0 attributes, the extension
//! values with the type they travel as on the OCM wire, and the payload bytes.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};

/// A point in time, as carried by `ce-time` and `ce-deletiontimestamp`.
pub type Timestamp = DateTime<Utc>;

/// The only CloudEvents spec version OCM speaks.
pub const SPEC_VERSION: &str = "1.0";

/// A CloudEvent. Optional attributes are `None` when absent; extensions keep the type they have on
/// the wire (`resourceversion` is an integer for manifest bundles and a string elsewhere), so an
/// event decoded and re-encoded is the same message.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct CloudEvent {
    pub id: String,
    pub source: String,
    pub spec_version: String,
    pub ty: String,
    pub data_content_type: Option<String>,
    pub data_schema: Option<String>,
    pub subject: Option<String>,
    pub time: Option<Timestamp>,
    /// Extension attributes by name (lowercase ASCII alphanumerics).
    pub extensions: BTreeMap<String, ExtensionValue>,
    /// The payload (JSON for every OCM data type), or `None`.
    #[serde(with = "serde_bytes")]
    pub data: Option<Vec<u8>>,
}

/// The value of an extension attribute, one case per CloudEvents type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ExtensionValue {
    Boolean(bool),
    Integer(i32),
    String(String),
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    Uri(String),
    UriRef(String),
    Timestamp(Timestamp),
}

/// An extension is missing or of a type that cannot be read as the type asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtensionError {
    #[error("extension {0:?} is missing")]
    Missing(String),
    #[error("extension {name:?} cannot be read as {wanted}: it is {found}")]
    WrongType {
        name: String,
        wanted: &'static str,
        found: String,
    },
}

impl ExtensionValue {
    /// The CloudEvents type name of this value, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Boolean(_) => "Boolean",
            Self::Integer(_) => "Integer",
            Self::String(_) => "String",
            Self::Bytes(_) => "Binary",
            Self::Uri(_) => "URI",
            Self::UriRef(_) => "URI-reference",
            Self::Timestamp(_) => "Timestamp",
        }
    }
}

impl From<&str> for ExtensionValue {
    fn from(v: &str) -> Self {
        Self::String(v.to_owned())
    }
}
impl From<String> for ExtensionValue {
    fn from(v: String) -> Self {
        Self::String(v)
    }
}
impl From<i32> for ExtensionValue {
    fn from(v: i32) -> Self {
        Self::Integer(v)
    }
}
impl From<bool> for ExtensionValue {
    fn from(v: bool) -> Self {
        Self::Boolean(v)
    }
}
impl From<Timestamp> for ExtensionValue {
    fn from(v: Timestamp) -> Self {
        Self::Timestamp(v)
    }
}

/// Whether `name` is a valid extension attribute name (ASCII alphanumerics, as the Go SDK checks).
pub fn is_valid_extension_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl CloudEvent {
    /// A new event with a random id, spec version 1.0 and the given source and type.
    pub fn new(id: impl Into<String>, source: impl Into<String>, ty: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            source: source.into(),
            spec_version: SPEC_VERSION.to_owned(),
            ty: ty.into(),
            ..Self::default()
        }
    }

    pub fn extension(&self, name: &str) -> Option<&ExtensionValue> {
        self.extensions.get(name)
    }

    pub fn set_extension(&mut self, name: &str, value: impl Into<ExtensionValue>) {
        self.extensions.insert(name.to_owned(), value.into());
    }

    pub fn remove_extension(&mut self, name: &str) -> Option<ExtensionValue> {
        self.extensions.remove(name)
    }

    /// Reads an extension as a string: only String values qualify (the Go SDK's `ToString`).
    pub fn extension_str(&self, name: &str) -> Result<&str, ExtensionError> {
        match self.extension(name) {
            None => Err(ExtensionError::Missing(name.to_owned())),
            Some(ExtensionValue::String(s)) => Ok(s),
            Some(other) => Err(wrong_type(name, "String", other)),
        }
    }

    /// Reads an extension as an integer: an Integer, or a String holding a decimal number
    /// (the Go SDK's `ToInteger`, which parses a float and truncates it).
    pub fn extension_i64(&self, name: &str) -> Result<i64, ExtensionError> {
        match self.extension(name) {
            None => Err(ExtensionError::Missing(name.to_owned())),
            Some(ExtensionValue::Integer(i)) => Ok(i64::from(*i)),
            Some(ExtensionValue::String(s)) => s
                .trim()
                .parse::<i64>()
                .ok()
                .or_else(|| s.trim().parse::<f64>().ok().filter(|f| f.is_finite()).map(|f| f as i64))
                .ok_or_else(|| ExtensionError::WrongType {
                    name: name.to_owned(),
                    wanted: "Integer",
                    found: format!("the string {s:?}"),
                }),
            Some(other) => Err(wrong_type(name, "Integer", other)),
        }
    }

    /// Reads an extension as a time: a Timestamp, or an RFC 3339 String (the Go SDK's `ToTime`).
    pub fn extension_time(&self, name: &str) -> Result<Timestamp, ExtensionError> {
        match self.extension(name) {
            None => Err(ExtensionError::Missing(name.to_owned())),
            Some(ExtensionValue::Timestamp(t)) => Ok(*t),
            Some(ExtensionValue::String(s)) => {
                DateTime::parse_from_rfc3339(s)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| ExtensionError::WrongType {
                        name: name.to_owned(),
                        wanted: "Timestamp",
                        found: format!("the string {s:?}"),
                    })
            }
            Some(other) => Err(wrong_type(name, "Timestamp", other)),
        }
    }

    /// The payload parsed as JSON into `T`.
    pub fn data_json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.data.as_deref().unwrap_or_default())
    }

    /// Sets a JSON payload and the `application/json` content type.
    pub fn set_json_data<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.data = Some(serde_json::to_vec(value)?);
        self.data_content_type = Some("application/json".to_owned());
        Ok(())
    }

    /// Removes the payload and its content type.
    pub fn clear_data(&mut self) {
        self.data = None;
        self.data_content_type = None;
    }
}

fn wrong_type(name: &str, wanted: &'static str, found: &ExtensionValue) -> ExtensionError {
    ExtensionError::WrongType {
        name: name.to_owned(),
        wanted,
        found: found.type_name().to_owned(),
    }
}

/// A timestamp from seconds and nanoseconds since the Unix epoch (the epoch if out of range).
pub fn timestamp_from_parts(seconds: i64, nanos: u32) -> Timestamp {
    DateTime::from_timestamp(seconds, nanos).unwrap_or_default()
}

/// Formats a timestamp as RFC 3339 in UTC with as many fractional digits as needed.
pub fn format_timestamp(t: &Timestamp) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_reads_accept_decimal_strings_like_go() {
        let mut e = CloudEvent::new("1", "s", "t");
        e.set_extension("resourceversion", "42");
        assert_eq!(e.extension_i64("resourceversion"), Ok(42));
        e.set_extension("resourceversion", "4.9");
        assert_eq!(e.extension_i64("resourceversion"), Ok(4));
        e.set_extension("resourceversion", "x");
        assert!(e.extension_i64("resourceversion").is_err());
        e.set_extension("resourceversion", 7);
        assert_eq!(e.extension_i64("resourceversion"), Ok(7));
    }

    #[test]
    fn string_reads_accept_only_strings() {
        let mut e = CloudEvent::new("1", "s", "t");
        e.set_extension("clustername", ExtensionValue::Uri("c1".into()));
        assert!(matches!(
            e.extension_str("clustername"),
            Err(ExtensionError::WrongType { .. })
        ));
        assert_eq!(e.extension_str("other"), Err(ExtensionError::Missing("other".into())));
    }

    #[test]
    fn extension_names_are_ascii_alphanumerics() {
        assert!(is_valid_extension_name("resourceversion"));
        assert!(is_valid_extension_name("abc123"));
        assert!(!is_valid_extension_name("resource-id"));
        assert!(!is_valid_extension_name(""));
    }
}
