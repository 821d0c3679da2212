//! The conductor plugin SDK: what a source plugin and the host share.
//!
//! - [`CloudEvent`]: the event, with extensions typed as they travel on the OCM wire;
//! - [`ocm`]: data and event types, the OCM extensions, the resync payload;
//! - [`SourceError`] and [`Status`]: errors agents understand (`{"ErrStatus": …}`);
//! - [`Identity`]: the authenticated caller of a request.

pub mod error;
pub mod event;
pub mod identity;
pub mod ocm;

pub use error::{SourceError, Status, StatusDetails};
pub use event::{CloudEvent, ExtensionError, ExtensionValue, SPEC_VERSION, Timestamp};
pub use identity::Identity;
