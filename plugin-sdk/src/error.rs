//! What a source answers when it cannot do what an agent asked, in a form agents understand: a
//! Kubernetes `Status`, which the host sends as `{"ErrStatus": <Status>}` in the gRPC message.

use serde::{Deserialize, Serialize};

/// A Kubernetes `metav1.Status` (the fields agents read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

/// `metav1.StatusDetails`: which object the status is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

fn is_zero(code: &i32) -> bool {
    *code == 0
}

impl Status {
    /// A failure status with the given HTTP code, reason and message.
    pub fn failure(code: i32, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: "Failure".to_owned(),
            message: message.into(),
            reason: reason.to_owned(),
            code,
            ..Self::default()
        }
    }

    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(details);
        self
    }
}

/// A source's failure to handle a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The backing API answered with this status (passed to the agent as it is).
    #[error("{}", .0.message)]
    Status(Box<Status>),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<Status> for SourceError {
    fn from(status: Status) -> Self {
        Self::Status(Box::new(status))
    }
}

impl SourceError {
    /// The Kubernetes status agents see for this error.
    pub fn to_status(&self) -> Status {
        match self {
            Self::Status(s) => (**s).clone(),
            Self::NotFound(m) => Status::failure(404, "NotFound", m.clone()),
            Self::AlreadyExists(m) => Status::failure(409, "AlreadyExists", m.clone()),
            Self::Conflict(m) => Status::failure(409, "Conflict", m.clone()),
            Self::Invalid(m) => Status::failure(422, "Invalid", m.clone()),
            Self::Internal(m) => Status::failure(500, "InternalError", m.clone()),
        }
    }

    /// The gRPC status message agents parse: `{"ErrStatus": <Status>}`.
    pub fn to_err_status_json(&self) -> String {
        #[derive(Serialize)]
        struct Wrapper<'a> {
            #[serde(rename = "ErrStatus")]
            err_status: &'a Status,
        }
        let status = self.to_status();
        serde_json::to_string(&Wrapper { err_status: &status })
            .unwrap_or_else(|_| r#"{"ErrStatus":{"status":"Failure","code":500}}"#.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_status_passes_through_under_err_status() {
        let status: Status = serde_json::from_str(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"managedclusters \"c1\" already exists","reason":"AlreadyExists","details":{"name":"c1","group":"cluster.open-cluster-management.io","kind":"managedclusters"},"code":409}"#,
        )
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&SourceError::from(status).to_err_status_json()).unwrap();
        assert_eq!(json["ErrStatus"]["reason"], "AlreadyExists");
        assert_eq!(json["ErrStatus"]["code"], 409);
        assert_eq!(json["ErrStatus"]["details"]["name"], "c1");
        assert_eq!(json["ErrStatus"]["metadata"], serde_json::json!({}));
    }

    #[test]
    fn plain_errors_map_to_their_kube_reasons() {
        for (err, code, reason) in [
            (SourceError::NotFound("x".into()), 404, "NotFound"),
            (SourceError::AlreadyExists("x".into()), 409, "AlreadyExists"),
            (SourceError::Conflict("x".into()), 409, "Conflict"),
            (SourceError::Invalid("x".into()), 422, "Invalid"),
            (SourceError::Internal("x".into()), 500, "InternalError"),
        ] {
            let json: serde_json::Value = serde_json::from_str(&err.to_err_status_json()).unwrap();
            assert_eq!(json["ErrStatus"]["code"], code);
            assert_eq!(json["ErrStatus"]["reason"], reason);
            assert_eq!(json["ErrStatus"]["status"], "Failure");
            assert_eq!(json["ErrStatus"]["message"], "x");
        }
    }
}
