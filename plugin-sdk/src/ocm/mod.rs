//! Open Cluster Management conventions on top of CloudEvents: data and event types, the OCM
//! extensions, the resync payload, the conditions agents report and OCM's own resources.

pub mod codec;
pub mod conditions;
pub mod extensions;
pub mod resources;
pub mod resync;
pub mod types;

pub use extensions::OcmExtensions;
pub use resync::{ResourceVersion, ResourceVersionList};
pub use types::{DataType, EventType, HEARTBEAT_TYPE, SubResource, TypeError, actions, data_types};
