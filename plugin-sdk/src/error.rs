//! The contract's one error ([`Error`]) and the Kubernetes `Status` agents understand: the host
//! sends a plugin's error as `{"ErrStatus": <Status>}` in the gRPC message.

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

/// A database's answer to a statement that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}{}", code.as_ref().map(|c| format!(" (SQLSTATE {c})")).unwrap_or_default())]
pub struct DatabaseError {
    /// The SQLSTATE when the server answered; none when the connection failed.
    pub code: Option<String>,
    pub message: String,
}

impl DatabaseError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            code: None,
            message: message.into(),
        }
    }
}

/// Why something could not be done: the one error of the contract, answered by every host
/// capability and returned by plugins. The host turns a plugin's error into what the agent sees:
/// `{"ErrStatus": <Kubernetes Status>}` (see [`Error::to_status`]), with gRPC `Unavailable` for
/// [`Error::Unavailable`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Error {
    /// A Kubernetes status: the API server's own, passed through unchanged.
    #[error("{}", .0.message)]
    Status(Box<Status>),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request is malformed or not supported.
    #[error("invalid: {0}")]
    Invalid(String),
    /// Not granted to the plugin, or not allowed by the backend.
    #[error("denied: {0}")]
    Denied(String),
    /// Busy or unreachable: try again later.
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("database: {0}")]
    Database(DatabaseError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        Self::Status(Box::new(status))
    }
}

impl From<DatabaseError> for Error {
    fn from(e: DatabaseError) -> Self {
        Self::Database(e)
    }
}

impl Error {
    /// The HTTP code of the Kubernetes status this error stands for.
    pub fn code(&self) -> i32 {
        match self {
            Self::Status(s) => s.code,
            Self::NotFound(_) => 404,
            Self::AlreadyExists(_) | Self::Conflict(_) => 409,
            Self::Invalid(_) => 422,
            Self::Denied(_) => 403,
            Self::Unavailable(_) => 503,
            Self::Database(_) | Self::Internal(_) => 500,
        }
    }

    /// Whether the object was not there (a plain `NotFound`, or an API server's 404).
    pub fn is_not_found(&self) -> bool {
        self.code() == 404
    }

    /// Whether a write lost a race (a plain `Conflict`, or an API server's 409 `Conflict`).
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Conflict(_) => true,
            Self::Status(s) => s.code == 409 && s.reason == "Conflict",
            _ => false,
        }
    }

    /// Whether the object already exists (a plain `AlreadyExists`, or an API server's 409
    /// `AlreadyExists`).
    pub fn is_already_exists(&self) -> bool {
        match self {
            Self::AlreadyExists(_) => true,
            Self::Status(s) => s.code == 409 && s.reason == "AlreadyExists",
            _ => false,
        }
    }

    /// The Kubernetes status agents see for this error.
    pub fn to_status(&self) -> Status {
        let code = self.code();
        match self {
            Self::Status(s) => (**s).clone(),
            Self::NotFound(m) => Status::failure(code, "NotFound", m.clone()),
            Self::AlreadyExists(m) => Status::failure(code, "AlreadyExists", m.clone()),
            Self::Conflict(m) => Status::failure(code, "Conflict", m.clone()),
            Self::Invalid(m) => Status::failure(code, "Invalid", m.clone()),
            Self::Denied(m) => Status::failure(code, "Forbidden", m.clone()),
            Self::Unavailable(m) => Status::failure(code, "ServiceUnavailable", m.clone()),
            Self::Database(e) => Status::failure(code, "InternalError", format!("database: {e}")),
            Self::Internal(m) => Status::failure(code, "InternalError", m.clone()),
        }
    }

    /// The gRPC status message agents parse: `{"ErrStatus": <Status>}`.
    pub fn to_err_status_json(&self) -> String {
        serde_json::json!({ "ErrStatus": self.to_status().to_json() }).to_string()
    }

    /// The same error with `context` in front of its message (a status keeps its own message).
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        match self {
            Self::Status(_) => self,
            Self::NotFound(m) => Self::NotFound(format!("{context}: {m}")),
            Self::AlreadyExists(m) => Self::AlreadyExists(format!("{context}: {m}")),
            Self::Conflict(m) => Self::Conflict(format!("{context}: {m}")),
            Self::Invalid(m) => Self::Invalid(format!("{context}: {m}")),
            Self::Denied(m) => Self::Denied(format!("{context}: {m}")),
            Self::Unavailable(m) => Self::Unavailable(format!("{context}: {m}")),
            Self::Database(e) => Self::Database(DatabaseError {
                code: e.code,
                message: format!("{context}: {}", e.message),
            }),
            Self::Internal(m) => Self::Internal(format!("{context}: {m}")),
        }
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
        let json: serde_json::Value = serde_json::from_str(&Error::from(status).to_err_status_json()).unwrap();
        assert_eq!(json["ErrStatus"]["reason"], "AlreadyExists");
        assert_eq!(json["ErrStatus"]["code"], 409);
        assert_eq!(json["ErrStatus"]["details"]["name"], "c1");
        assert_eq!(json["ErrStatus"]["metadata"], serde_json::json!({}));
    }

    #[test]
    fn plain_errors_map_to_their_kube_reasons() {
        for (err, code, reason) in [
            (Error::NotFound("x".into()), 404, "NotFound"),
            (Error::AlreadyExists("x".into()), 409, "AlreadyExists"),
            (Error::Conflict("x".into()), 409, "Conflict"),
            (Error::Invalid("x".into()), 422, "Invalid"),
            (Error::Internal("x".into()), 500, "InternalError"),
            (Error::Denied("x".into()), 403, "Forbidden"),
            (Error::Unavailable("x".into()), 503, "ServiceUnavailable"),
        ] {
            let json: serde_json::Value = serde_json::from_str(&err.to_err_status_json()).unwrap();
            assert_eq!(json["ErrStatus"]["code"], code);
            assert_eq!(json["ErrStatus"]["reason"], reason);
            assert_eq!(json["ErrStatus"]["status"], "Failure");
            assert_eq!(json["ErrStatus"]["message"], "x");
        }
    }
}
