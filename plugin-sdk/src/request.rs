//! One agent → hub request: the event and who sent it.

use serde::{Deserialize, Serialize};

use crate::{CloudEvent, Identity};

/// An agent → hub event and who sent it: one request of a batch
/// ([`crate::Plugin::handle_batch`]), or one a running batch takes in
/// ([`crate::Host::take_waiting`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub identity: Identity,
    pub event: CloudEvent,
}
