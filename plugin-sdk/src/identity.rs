//! Who made a request: the authenticated user and groups of the agent's credentials.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    /// The identity of a request that no authenticator vouched for.
    pub fn anonymous() -> Self {
        Self {
            user: "system:anonymous".to_owned(),
            groups: vec!["system:unauthenticated".to_owned()],
        }
    }
}
