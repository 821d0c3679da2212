//! The OCM extension attributes and typed accessors for them.

use crate::event::{CloudEvent, ExtensionError, ExtensionValue, Timestamp};

use super::types::DataType;

pub const CLUSTER_NAME: &str = "clustername";
pub const ORIGINAL_SOURCE: &str = "originalsource";
pub const RESOURCE_ID: &str = "resourceid";
pub const RESOURCE_VERSION: &str = "resourceversion";
pub const DELETION_TIMESTAMP: &str = "deletiontimestamp";
pub const SEQUENCE_ID: &str = "sequenceid";
pub const STATUS_HASH: &str = "statushash";
pub const METADATA: &str = "metadata";
pub const LOG_TRACING: &str = "logtracing";

/// Typed access to the OCM extensions of a [`CloudEvent`].
pub trait OcmExtensions {
    /// `clustername`: the managed cluster the event is for or from.
    fn cluster_name(&self) -> Result<&str, ExtensionError>;
    /// `originalsource`: for agent events, the source of the spec event the resource came from.
    fn original_source(&self) -> Option<&str>;
    /// `resourceid`: the resource's UID (kube) or UUID (maestro).
    fn resource_id(&self) -> Result<&str, ExtensionError>;
    /// `resourceversion` as a number: an integer for manifest bundles (the generation), a decimal
    /// string for other types (the kube resourceVersion).
    fn resource_version(&self) -> Result<i64, ExtensionError>;
    /// `deletiontimestamp`: present while the resource is being deleted.
    fn deletion_timestamp(&self) -> Option<Timestamp>;
    /// `metadata`: the JSON of the resource's ObjectMeta.
    fn metadata_json(&self) -> Option<&str>;
    /// Sets `resourceversion` with the wire type `data_type` uses: `ce_integer` for manifest
    /// bundles (saturated to the int32 range), `ce_string` for the others.
    fn set_resource_version(&mut self, data_type: &DataType, version: i64);
}

impl OcmExtensions for CloudEvent {
    fn cluster_name(&self) -> Result<&str, ExtensionError> {
        self.extension_str(CLUSTER_NAME)
    }

    fn original_source(&self) -> Option<&str> {
        self.extension_str(ORIGINAL_SOURCE).ok()
    }

    fn resource_id(&self) -> Result<&str, ExtensionError> {
        self.extension_str(RESOURCE_ID)
    }

    fn resource_version(&self) -> Result<i64, ExtensionError> {
        self.extension_i64(RESOURCE_VERSION)
    }

    fn deletion_timestamp(&self) -> Option<Timestamp> {
        self.extension_time(DELETION_TIMESTAMP).ok()
    }

    fn metadata_json(&self) -> Option<&str> {
        self.extension_str(METADATA).ok()
    }

    fn set_resource_version(&mut self, data_type: &DataType, version: i64) {
        let value = if data_type.has_integer_version() {
            ExtensionValue::Integer(version.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
        } else {
            ExtensionValue::String(version.to_string())
        };
        self.set_extension(RESOURCE_VERSION, value);
    }
}

#[cfg(test)]
mod tests {
    use super::super::types::data_types;
    use super::*;

    #[test]
    fn resource_version_wire_type_follows_the_data_type() {
        let mut e = CloudEvent::new("1", "kube", "t");
        e.set_resource_version(&DataType::parse(data_types::MANIFEST_BUNDLES).unwrap(), 3);
        assert_eq!(e.extension(RESOURCE_VERSION), Some(&ExtensionValue::Integer(3)));
        e.set_resource_version(&DataType::parse(data_types::LEASES).unwrap(), 3101);
        assert_eq!(
            e.extension(RESOURCE_VERSION),
            Some(&ExtensionValue::String("3101".into()))
        );
        assert_eq!(e.resource_version(), Ok(3101));
    }
}
