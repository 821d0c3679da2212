//! OCM data types (`<group>.<version>.<resource>`) and event types
//! (`<group>.<version>.<resource>.<subresource>.<action>`), parsed as sdk-go parses them.

use std::fmt;

/// The type of the heartbeat the broker sends on every subscription.
pub const HEARTBEAT_TYPE: &str = "io.open-cluster-management.cloudevents.heartbeat";

/// The data types OCM agents speak.
pub mod data_types {
    pub const MANIFEST_BUNDLES: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
    /// Single manifests (sdk-go's `ManifestEventDataType`); work agents answer them with status
    /// updates, as they answer manifest bundles.
    pub const MANIFESTS: &str = "io.open-cluster-management.works.v1alpha1.manifests";
    pub const MANAGED_CLUSTERS: &str = "cluster.open-cluster-management.io.v1.managedclusters";
    pub const CSRS: &str = "certificates.k8s.io.v1.certificatesigningrequests";
    pub const LEASES: &str = "coordination.k8s.io.v1.leases";
    pub const EVENTS: &str = "events.k8s.io.v1.events";
    pub const ADDONS_V1ALPHA1: &str = "addon.open-cluster-management.io.v1alpha1.managedclusteraddons";
    pub const ADDONS_V1BETA1: &str = "addon.open-cluster-management.io.v1beta1.managedclusteraddons";
    pub const TOKEN_REQUESTS: &str = "authentication.k8s.io.v1.tokenrequests";
}

/// A malformed data type or event type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("unsupported cloudevents data type format {0:?}: want <group>.<version>.<resource>")]
    DataType(String),
    #[error("unsupported cloudevents type format {0:?}: want <group>.<version>.<resource>.<subresource>.<action>")]
    EventType(String),
    #[error("unsupported subresource {0:?}: want spec or status")]
    SubResource(String),
}

/// `<group>.<version>.<resource>`; the group may contain dots.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataType {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl DataType {
    pub fn parse(s: &str) -> Result<Self, TypeError> {
        let mut parts = s.rsplitn(3, '.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(resource), Some(version), Some(group)) => Ok(Self {
                group: group.to_owned(),
                version: version.to_owned(),
                resource: resource.to_owned(),
            }),
            _ => Err(TypeError::DataType(s.to_owned())),
        }
    }

    /// Whether payloads of this type carry `resourceversion` as an integer (the generation).
    pub fn has_integer_version(&self) -> bool {
        self.to_string() == data_types::MANIFEST_BUNDLES
    }

    /// The event type `<self>.<subresource>.<action>`.
    pub fn event_type(&self, subresource: SubResource, action: &str) -> String {
        format!("{self}.{subresource}.{action}")
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.group, self.version, self.resource)
    }
}

/// `spec` (hub → agent desired state) or `status` (agent → hub observed state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubResource {
    Spec,
    Status,
}

impl fmt::Display for SubResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Spec => "spec",
            Self::Status => "status",
        })
    }
}

/// The actions of OCM event types. The parser does not validate actions (sdk-go does not).
pub mod actions {
    pub const CREATE_REQUEST: &str = "create_request";
    pub const UPDATE_REQUEST: &str = "update_request";
    pub const DELETE_REQUEST: &str = "delete_request";
    pub const RESYNC_REQUEST: &str = "resync_request";
    pub const RESYNC_RESPONSE: &str = "resync_response";
}

/// A parsed event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    pub data_type: DataType,
    pub subresource: SubResource,
    pub action: String,
}

impl EventType {
    pub fn parse(s: &str) -> Result<Self, TypeError> {
        let mut parts = s.rsplitn(5, '.');
        let (Some(action), Some(sub), Some(resource), Some(version), Some(group)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TypeError::EventType(s.to_owned()));
        };
        let subresource = match sub {
            "spec" => SubResource::Spec,
            "status" => SubResource::Status,
            other => return Err(TypeError::SubResource(other.to_owned())),
        };
        Ok(Self {
            data_type: DataType {
                group: group.to_owned(),
                version: version.to_owned(),
                resource: resource.to_owned(),
            },
            subresource,
            action: action.to_owned(),
        })
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.data_type, self.subresource, self.action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_type_group_keeps_its_dots() {
        let dt = DataType::parse(data_types::MANIFEST_BUNDLES).unwrap();
        assert_eq!(dt.group, "io.open-cluster-management.works");
        assert_eq!(dt.version, "v1alpha1");
        assert_eq!(dt.resource, "manifestbundles");
        assert!(dt.has_integer_version());
        assert_eq!(dt.to_string(), data_types::MANIFEST_BUNDLES);
        assert!(!DataType::parse(data_types::LEASES).unwrap().has_integer_version());
    }

    #[test]
    fn short_types_are_rejected() {
        assert!(DataType::parse("v1.leases").is_err());
        assert!(EventType::parse("a.v1.things.spec").is_err());
        assert_eq!(
            EventType::parse("a.v1.things.cloudevents.heartbeat"),
            Err(TypeError::SubResource("cloudevents".into()))
        );
        assert!(EventType::parse(HEARTBEAT_TYPE).is_err());
    }

    #[test]
    fn event_type_action_is_not_validated() {
        let t = EventType::parse("test.v1.tests.spec.").unwrap();
        assert_eq!(t.action, "");
        assert_eq!(t.subresource, SubResource::Spec);
        let t = EventType::parse("coordination.k8s.io.v1.leases.status.update_request").unwrap();
        assert_eq!(t.data_type.to_string(), data_types::LEASES);
        assert_eq!(t.subresource, SubResource::Status);
        assert_eq!(t.action, actions::UPDATE_REQUEST);
        assert_eq!(t.to_string(), "coordination.k8s.io.v1.leases.status.update_request");
    }
}
