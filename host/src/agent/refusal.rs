//! A call the server refused, as a person reads it: the gRPC code, and the message — for a
//! source's refusal (`{"ErrStatus": <Kubernetes Status>}`, `docs/protocol.md` §6.2) the Status's
//! message, reason and code.

/// The server refused a call.
#[derive(Debug, thiserror::Error)]
#[error("{what}: the server answered {code:?}: {message}")]
pub struct Refused {
    pub what: String,
    pub code: tonic::Code,
    pub message: String,
}

impl Refused {
    pub fn new(what: impl Into<String>, status: &tonic::Status) -> Self {
        Self {
            what: what.into(),
            code: status.code(),
            message: readable(status.message()),
        }
    }
}

/// The message of an `ErrStatus`, with its reason and code; any other message as it is.
fn readable(message: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(message) else {
        return message.to_owned();
    };
    let Some(status) = value.get("ErrStatus") else {
        return message.to_owned();
    };
    let text = status.get("message").and_then(|m| m.as_str()).unwrap_or("(no message)");
    let reason = status.get("reason").and_then(|r| r.as_str());
    let code = status.get("code").and_then(serde_json::Value::as_i64);
    match (reason, code) {
        (Some(reason), Some(code)) => format!("{text} ({reason}, {code})"),
        (Some(reason), None) => format!("{text} ({reason})"),
        (None, Some(code)) => format!("{text} ({code})"),
        (None, None) => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_err_status_shows_its_message_reason_and_code() {
        let json = r#"{"ErrStatus":{"metadata":{},"status":"Failure","message":"manifestbundles \"hello\" already exists","reason":"AlreadyExists","code":409}}"#;
        let refused = Refused::new("publish", &tonic::Status::failed_precondition(json));
        assert_eq!(
            refused.to_string(),
            r#"publish: the server answered FailedPrecondition: manifestbundles "hello" already exists (AlreadyExists, 409)"#
        );
        let plain = Refused::new(
            "publish",
            &tonic::Status::unknown("failed to get clustername extension"),
        );
        assert_eq!(plain.message, "failed to get clustername extension");
    }
}
