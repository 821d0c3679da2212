//! What a source answers when it cannot do what an agent asked, in a form agents understand: a
//! Kubernetes `Status`, which the host sends as `{"ErrStatus": <Status>}` in the gRPC message.

use serde::{Deserialize, Serialize};

/// A Kubernetes `metav1.Status` (the fields agents read). Unknown fields of an apiserver's Status
/// are ignored when it is parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub details: Option<StatusDetails>,
    #[serde(default)]
    pub code: i32,
}

/// `metav1.StatusDetails`: which object the status is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub uid: String,
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

    /// The Status as the apiserver writes it: empty fields left out, `metadata` always `{}`.
    pub fn to_json(&self) -> serde_json::Value {
        fn put(map: &mut serde_json::Map<String, serde_json::Value>, key: &str, value: &str) {
            if !value.is_empty() {
                map.insert(key.to_owned(), value.into());
            }
        }
        let mut out = serde_json::Map::new();
        out.insert("metadata".to_owned(), serde_json::json!({}));
        put(&mut out, "status", &self.status);
        put(&mut out, "message", &self.message);
        put(&mut out, "reason", &self.reason);
        if let Some(d) = &self.details {
            let mut details = serde_json::Map::new();
            put(&mut details, "name", &d.name);
            put(&mut details, "group", &d.group);
            put(&mut details, "kind", &d.kind);
            put(&mut details, "uid", &d.uid);
            out.insert("details".to_owned(), details.into());
        }
        if self.code != 0 {
            out.insert("code".to_owned(), self.code.into());
        }
        out.into()
    }
}

/// A source's failure to handle a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
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
        serde_json::json!({ "ErrStatus": self.to_status().to_json() }).to_string()
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
